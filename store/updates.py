"""SPARQL Update of the background, computed where it can be stopped and applied where it must.

An update's WHERE can cost anything (a cross product of VALUES whose filter no row passes runs
for minutes), and Oxigraph cannot be interrupted inside one call. So an update is computed in
two steps (`Background.update` is the one-step form the Python API keeps):

1. **Computed** over a copy of the background, outside every lock of the engine: in a worker
   process (`UpdateWorker`, which reads the background through a read-only view of the on-disk
   store) that is killed at the time limit or past its memory, or, over an in-memory store, on
   a thread from a copy taken under the store's lock. What it gives is the quads to remove and
   to add (at most `max_changes` of them together, else nothing) and the background graphs
   there are afterwards.
2. **Applied** in the engine's process, as one change of the background
   (`Background.apply_changes`): only if the background is still the version the update read
   (else it is computed again), and never to a stream element or a graph the engine reserves.

An update with an unknown function, a syntax error or a failure SPARQL names (DROP of a graph
that is not there) is refused by what the first step gives, and nothing changes.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyoxigraph as ox

from rspstar.translator.uncertainty import FunctionLibrary
from rspstar.translator.validate import unknown_function

from .isolation import ReadOnlyViews


@dataclass(frozen=True)
class UpdateCall:
    """One update for the first step: its text and base, the background graphs it may read and
    write (IRIs; the default graph too), and the most quads it may change."""
    text: str
    base_iri: str | None
    graphs: tuple[str, ...]
    max_changes: int


def changes_of(quads, call: UpdateCall) -> tuple:
    """The first step over the background's `quads`: ("changes", removed, added, graphs) with the
    removed and added quads as N-Quads (blank nodes as they are) and the background's named
    graphs after the update; ("too_many", count); ("syntax", message); ("unknown", message,
    line, column) for a function nobody provides; ("failed", message) for an update Oxigraph
    refused otherwise (a graph named that is not there, or is)."""
    scratch = ox.Store()
    scratch.extend(quads)
    before = set(scratch)
    try:
        scratch.update(call.text, base_iri=call.base_iri, custom_functions=FunctionLibrary().table)
    except SyntaxError as e:
        return ("syntax", str(e))
    except RuntimeError as e:
        refused = unknown_function(str(e), call.text)
        if refused is not None:
            return ("unknown",) + refused
        return ("failed", str(e))
    after = set(scratch)
    removed, added = before - after, after - before
    count = len(removed) + len(added)
    if count > call.max_changes:
        return ("too_many", count)
    graphs = tuple(sorted({q.graph_name.value for q in after if isinstance(q.graph_name, ox.NamedNode)}))
    return ("changes", ox.serialize(removed, format=ox.RdfFormat.N_QUADS),
            ox.serialize(added, format=ox.RdfFormat.N_QUADS), graphs)


def read_quads(nquads: bytes) -> list[ox.Quad]:
    """Quads the first step gave, with their blank nodes as they were."""
    return list(ox.parse(nquads, format=ox.RdfFormat.N_QUADS)) if nquads else []


class UpdateWorker:
    """A worker's handler: the first step over a read-only view of the store at `path` as of
    its `writes`th write (kept between updates while the store is not written)."""

    def __init__(self):
        self.views = ReadOnlyViews()

    def __call__(self, path: str, writes: int | None, call: UpdateCall) -> tuple:
        try:
            store = self.views.view(path, writes)
            graphs = [ox.DefaultGraph()] + [ox.NamedNode(g) for g in call.graphs]
            quads = [q for g in graphs for q in store.quads_for_pattern(None, None, None, g)]
        except (OSError, RuntimeError) as e:
            self.views.forget()
            return ("unreadable", "%s: %s" % (type(e).__name__, e))
        finally:
            store = None
        return changes_of(quads, call)
