"""Background (static) data in the stream store: loaded from files, changed by SPARQL Update
on a copy (so stream elements, timestamps and the engine's graphs are out of its reach), read by
every evaluation and copied whole into a partition's store."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyoxigraph as ox

from rspstar.translator.vocabulary import RESERVED_PREFIX, is_internal_graph

from .errors import RdfInputError, ReservedGraphError, StoreError
from .rdf_input import parse_rdf

if TYPE_CHECKING:
    from .stream_store import StreamStore


class Background:
    """The background graphs of one stream store: the default graph and every named graph that
    is neither a stream element nor the engine's."""

    def __init__(self, store: "StreamStore"):
        self.store = store
        self.names: set[str] = set()

    def load(self, data: bytes | str, fmt: ox.RdfFormat, source: str) -> int:
        """Load background (static) data; a syntax error names the source, line and column and
        leaves the store unchanged."""
        quads = parse_rdf(data, fmt, source)
        with self.store._lock:
            graphs = set()
            for quad in quads:
                if isinstance(quad.graph_name, ox.NamedNode):
                    graph = quad.graph_name.value
                    if self.store._is_element(graph) or is_internal_graph(graph):
                        raise RdfInputError("graph <%s> is a stream element or reserved, not background"
                                            % graph, source)
                    graphs.add(graph)
            self.store._write("extend", quads)
            self.names |= graphs
        return len(quads)

    def update(self, sparql: str, base_iri: str | None = None) -> int:
        """Run a SPARQL Update over the background data alone (SyntaxError from Oxigraph
        propagates). The update runs on a copy of the background graphs, so stream elements,
        timestamps and batch markers are out of its reach (`CLEAR NAMED` clears background
        graphs only); a result that names one of those graphs, or one under the engine's
        reserved prefix, is refused with ReservedGraphError and nothing changes. Returns the
        number of quads added and removed."""
        with self.store._lock:
            before = set(self.store.oxigraph.quads_for_pattern(None, None, None, ox.DefaultGraph()))
            for graph in self.names:
                before.update(self.store.oxigraph.quads_for_pattern(None, None, None, ox.NamedNode(graph)))
            scratch = ox.Store()
            scratch.extend(before)
            scratch.update(sparql, base_iri=base_iri)
            after = set(scratch)
            for graph in {q.graph_name for q in after - before} - {ox.DefaultGraph()}:
                name = graph.value
                what = "a stream element" if self.store._is_element(name) else \
                    "reserved by the engine" if name.startswith(RESERVED_PREFIX) else None
                if what:
                    raise ReservedGraphError("the update writes graph <%s>, which is %s; updates change "
                                             "background data only" % (name, what))
            try:
                for quad in before - after:
                    self.store._write("remove", quad)
                for quad in after - before:
                    self.store._write("add", quad)
            except OSError as e:
                raise StoreError("store write failed: %s" % e) from e
            self.names = {q.graph_name.value for q in after if isinstance(q.graph_name, ox.NamedNode)}
            return len(before ^ after)

    def graphs(self) -> list[str]:
        with self.store._lock:
            return sorted(self.names)

    def nquads(self) -> bytes:
        """The background data (the default graph and the background graphs) as N-Quads, what
        a partition's store loads to have it whole."""
        with self.store._lock:
            graphs = [ox.DefaultGraph()] + [ox.NamedNode(g) for g in sorted(self.names)]
            quads = [q for g in graphs for q in self.store.oxigraph.quads_for_pattern(None, None, None, g)]
        return ox.serialize(quads, format=ox.RdfFormat.N_QUADS)
