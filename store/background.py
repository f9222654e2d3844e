"""Background (static) data in the stream store: loaded from files, changed by SPARQL Update
on a copy (so stream elements, timestamps and the engine's graphs are out of its reach), read by
every evaluation and copied whole into a partition's store.

Evaluations read the background under `reading()` and every change is made under `changing()`,
so a change lands between evaluations: none sees half of it (a graph replaced by a refresh,
spec §6.14, is removed and written again in two steps). `version` counts the changes: what is
derived from the background (entailment's closures) is made again when it moves."""
from __future__ import annotations

import contextlib
import threading
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import pyoxigraph as ox

from rspstar.translator.nesting import check_nesting
from rspstar.translator.vocabulary import RESERVED_PREFIX, is_internal_graph, is_reserved

from rspstar.translator.errors import QuerySyntaxError

from .disk import is_disk_full
from .errors import (
    BackgroundChanged, DiskFull, GraphExists, GraphMissing, GraphNotWritable, RdfInputError, ReservedGraphError,
    StoreError, UpdateTooLarge,
)
from .rdf_input import _syntax_error, check_rdf_nesting, parse_rdf
from .updates import UpdateCall, changes_of, read_quads

if TYPE_CHECKING:
    from .writers import StoreWriting


# A replacement is written this many triples at a time, the store's lock taken for each part,
# so that a part holds the lock a fraction of a second and evaluations waiting for it are not
# held up by a whole reload (bench/out/NOTES.md#figures-from-comments).
PART = 5_000


def _parts(lines: list[bytes]) -> list[list[bytes]]:
    return [lines[k:k + PART] for k in range(0, len(lines), PART)]


@dataclass(frozen=True)
class GraphDocument:
    """A background graph's document as read: its distinct triples as canonical N-Triples (the
    text Oxigraph writes them as), what `Background.replace` compares with the graph."""

    ntriples: bytes
    triples: int

    def lines(self) -> list[bytes]:
        return self.ntriples.splitlines()


@dataclass(frozen=True)
class Replaced:
    """What a replacement did: the graph's triples now, those it added and removed, and the
    background's version after it."""

    triples: int
    added: int
    removed: int
    version: int


def read_graph(data: bytes, fmt: ox.RdfFormat, source: str, max_triples: int,
               deadline: float | None = None, monotonic: Callable[[], float] = time.monotonic) -> GraphDocument:
    """The triples of a background graph's document, bounded: RdfInputError for a document that
    does not parse (with its line and column), names graphs of its own, holds more than
    `max_triples` (counted as they are read, so that nothing more is read), or is still being
    read when `monotonic()` passes `deadline`. Read without any lock: a reload reads its source before it
    holds anything the engine's readers need."""
    check_rdf_nesting(data, source, fmt)
    scratch = ox.Store()
    batch: list = []
    count = 0
    try:
        for quad in ox.parse(data, format=fmt, rename_blank_nodes=True):
            if not isinstance(quad.graph_name, ox.DefaultGraph):
                raise RdfInputError("the document names graphs of its own: a background graph's source holds that "
                                    "graph's triples (Turtle, N-Triples, RDF/XML, JSON-LD)", source)
            count += 1
            if count > max_triples:
                raise RdfInputError("the document holds more than [background] max_triples (%d) triples"
                                     % max_triples, source)
            batch.append(quad)
            if len(batch) >= PART:
                scratch.extend(batch)
                batch.clear()
                if deadline is not None and monotonic() > deadline:
                    raise RdfInputError("reading it took longer than [background] reload_seconds", source)
    except SyntaxError as e:
        raise _syntax_error(e, source) from None
    scratch.extend(batch)
    return GraphDocument(scratch.dump(format=ox.RdfFormat.N_TRIPLES, from_graph=ox.DefaultGraph()), len(scratch))


class ReadersWriter:
    """Many readers or one writer. A writer waiting holds new readers back (evaluations come
    one after another and would keep it waiting for ever); a thread already reading may read
    again (an evaluation runs several queries)."""

    def __init__(self):
        # The condition's own lock, taken directly where nothing waits on it (a Condition's
        # `with` is a Python call on top of the lock's). Reentrant: a wait on a plain lock takes
        # it back in Python, where a signal (Ctrl-C on an evaluation in the main thread) leaves
        # the waiter without it, and its `with` then releases the writer's.
        self._mutex = threading.RLock()
        self._condition = threading.Condition(self._mutex)
        self._readers = 0
        self._writing = False
        self._waiting_writers = 0
        self._local = threading.local()

    def reading(self) -> "_Reading":
        return _Reading(self)

    @contextlib.contextmanager
    def writing(self):
        if getattr(self._local, "depth", 0):
            raise RuntimeError("a background change from inside an evaluation")
        with self._condition:
            self._waiting_writers += 1
            while self._writing or self._readers:
                self._condition.wait()
            self._waiting_writers -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._condition:
                self._writing = False
                self._condition.notify_all()


class _Reading:
    """One hold of a ReadersWriter for reading (a class rather than a generator: every
    evaluation takes one, and a generator's context manager costs several times as much)."""

    __slots__ = ("_access", "_depth")

    def __init__(self, access: ReadersWriter):
        self._access = access

    def __enter__(self) -> None:
        access = self._access
        depth = self._depth = getattr(access._local, "depth", 0)
        if depth == 0:
            with access._mutex:
                while access._writing or access._waiting_writers:
                    access._condition.wait()
                access._readers += 1
        access._local.depth = depth + 1

    def __exit__(self, *exc) -> None:
        access, depth = self._access, self._depth
        access._local.depth = depth
        if depth == 0:
            with access._mutex:
                access._readers -= 1
                if not access._readers:
                    access._condition.notify_all()


_FAILURES = ((re.compile(r"The graph (<[^>]*>) does not exist"), GraphMissing, "graph %s does not exist (SILENT "
                                                                                "makes the operation succeed anyway)"),
             (re.compile(r"The graph (<[^>]*>) already exists"), GraphExists, "graph %s already exists (SILENT makes "
                                                                              "CREATE succeed anyway)"))


def _write_failed(error: OSError) -> StoreError:
    """A store write that failed: DiskFull for want of space (a client's 507), else a failure."""
    if is_disk_full(error):
        return DiskFull("the store's write failed: no space left on the data directory's disk (%s)"
                        % str(error).split("\n")[0][:200])
    return StoreError("store write failed: %s" % error)


def _update_failure(error: RuntimeError) -> Exception:
    """An update Oxigraph failed, as the client's error where its text caused it (a graph named
    that is not there, or is); any other failure as it came."""
    for pattern, kind, message in _FAILURES:
        m = pattern.search(str(error))
        if m:
            return kind(message % m.group(1))
    return error


class Background:
    """The background graphs of one stream store: the default graph and every named graph that
    is neither a stream element nor the engine's."""

    def __init__(self, store: "StoreWriting"):
        self.store = store
        self.names: set[str] = set()
        self.version = 0
        self._access = ReadersWriter()

    def reading(self):
        """Held by an evaluation: no background change lands while it reads."""
        return self._access.reading()

    @contextlib.contextmanager
    def changing(self):
        """Held by a change of the background: it waits for the evaluations reading it."""
        with self._access.writing():
            try:
                yield
            finally:
                with self.store.lock:
                    self.version += 1
        self.store.flush_soon()     # a large change is flushed: views then open without replaying it

    def load(self, data: bytes | str, fmt: ox.RdfFormat, source: str) -> int:
        """Load background (static) data; a syntax error names the source, line and column and
        leaves the store unchanged."""
        quads = parse_rdf(data, fmt, source)
        with self.changing(), self.store.lock:
            graphs = set()
            for quad in quads:
                if isinstance(quad.graph_name, ox.NamedNode):
                    graph = quad.graph_name.value
                    if self.store.is_element(graph) or is_internal_graph(graph):
                        raise RdfInputError("graph <%s> is a stream element or reserved, not background"
                                            % graph, source)
                    graphs.add(graph)
            self.store.write("extend", quads)
            self.names |= graphs
        return len(quads)

    def update(self, sparql: str, base_iri: str | None = None, max_changes: int | None = None) -> int:
        """Run a SPARQL Update over the background data alone (SyntaxError from Oxigraph
        propagates), computed on a copy of the background graphs and applied as one change
        (store/updates.py; the HTTP endpoint computes it in a worker process instead), so stream
        elements, timestamps and batch markers are out of its reach (`CLEAR NAMED` clears
        background graphs only); a result that names one of those graphs, or one under the
        engine's reserved prefix, is refused with ReservedGraphError and nothing changes.
        Returns the number of quads added and removed; QuerySyntaxError, before anything runs,
        for an update nested or chained deeper than Oxigraph's parser may follow
        (translator/nesting.py), or calling a function nobody provides; UpdateTooLarge past
        `max_changes` quads changed."""
        check_nesting(sparql, language="sparql")
        while True:
            version, quads, graphs = self.copy()
            outcome = changes_of(quads, UpdateCall(sparql, base_iri, graphs, max_changes or 2**62))
            try:
                return self.apply_outcome(version, outcome, sparql)
            except BackgroundChanged:
                continue

    def copy(self) -> tuple[int, list[ox.Quad], tuple[str, ...]]:
        """(version, quads, named graphs) of the background now."""
        with self.store.lock:
            graphs = tuple(sorted(self.names))
            quads = list(self.store.oxigraph.quads_for_pattern(None, None, None, ox.DefaultGraph()))
            for graph in graphs:
                quads.extend(self.store.oxigraph.quads_for_pattern(None, None, None, ox.NamedNode(graph)))
            return self.version, quads, graphs

    def current(self) -> tuple[int, tuple[str, ...]]:
        """(version, named graphs) of the background now: what an update computed elsewhere reads."""
        with self.store.lock:
            return self.version, tuple(sorted(self.names))

    def apply_outcome(self, version: int, outcome: tuple, sparql: str) -> int:
        """What store.updates.changes_of gave for the background at `version`, applied (or the
        error it stands for raised); BackgroundChanged when the background is not at `version`
        any more."""
        kind = outcome[0]
        if kind == "syntax":
            raise SyntaxError(outcome[1])
        if kind == "unknown":
            raise QuerySyntaxError(*outcome[1:])
        if kind == "failed":
            raise _update_failure(RuntimeError(outcome[1]))
        if kind == "too_many":
            raise UpdateTooLarge("the update would add and remove %d quads, more than one update may ([http] "
                                 "update_max_changes); nothing was changed: split it" % outcome[1])
        if kind != "changes":
            raise StoreError("the update could not be computed: %s" % (outcome[1:],))
        return self.apply_changes(version, read_quads(outcome[1]), read_quads(outcome[2]), set(outcome[3]))

    def apply_changes(self, version: int, removed: list[ox.Quad], added: list[ox.Quad], graphs: set[str]) -> int:
        """Remove and add these quads, the background's named graphs becoming `graphs`, as one
        change; BackgroundChanged when the background is not at `version` any more, and
        ReservedGraphError, with nothing changed, when a quad added is in a stream element's
        graph or one the engine reserves. Returns the number of quads changed."""
        with self.changing(), self.store.lock:
            if self.version != version:
                raise BackgroundChanged("the background changed while the update was computed")
            for graph in {q.graph_name for q in added} - {ox.DefaultGraph()}:
                name = graph.value
                what = "a stream element" if self.store.is_element(name) else \
                    "reserved by the engine" if is_reserved(name) else None
                if what:
                    raise ReservedGraphError("the update writes graph <%s>, which is %s; updates change "
                                             "background data only" % (name, what))
            try:
                for quad in removed:
                    self.store.write("remove", quad)
                if added:
                    self.store.write("extend", added)
            except OSError as e:
                raise _write_failed(e) from e
            self.names = set(graphs)
            return len(removed) + len(added)

    def graphs(self) -> list[str]:
        with self.store.lock:
            return sorted(self.names)

    def nquads(self) -> bytes:
        """The background data (the default graph and the background graphs) as N-Quads, what
        a partition's store loads to have it whole."""
        with self.store.lock:
            graphs = [ox.DefaultGraph()] + [ox.NamedNode(g) for g in sorted(self.names)]
            quads = [q for g in graphs for q in self.store.oxigraph.quads_for_pattern(None, None, None, g)]
        return ox.serialize(quads, format=ox.RdfFormat.N_QUADS)

    # -- one graph at a time (the SPARQL 1.1 Graph Store HTTP Protocol) ------------------------
    def _writable(self, graph: str | None) -> None:
        """Only the default graph and background graphs are the protocol's to change."""
        if graph is None:
            return
        if self.store.is_element(graph):
            raise GraphNotWritable("graph <%s> is a stream element: streams are written through POST /streams, "
                                   "not the graph store" % graph)
        if is_reserved(graph):
            raise GraphNotWritable("graph <%s> is reserved by the engine (%s...)" % (graph, RESERVED_PREFIX))

    def triples(self, graph: str | None) -> list[ox.Triple] | None:
        """The triples of a background graph (None: the default graph); None when it does not exist."""
        self._writable(graph)
        with self.store.lock:
            if graph is not None and graph not in self.names:
                return None
            name = ox.DefaultGraph() if graph is None else ox.NamedNode(graph)
            return [q.triple for q in self.store.oxigraph.quads_for_pattern(None, None, None, name)]

    def write(self, graph: str | None, data: bytes | str, fmt: ox.RdfFormat, source: str, replace: bool,
              admit=None) -> bool:
        """Replace (PUT) or add to (POST) a background graph with the triples of `data`; whether the
        graph is new. A document holding named graphs, or that does not parse, changes nothing;
        nor does one `admit(quads)` refuses (by raising) once it is read."""
        self._writable(graph)
        quads = parse_rdf(data, fmt, source)
        if not quads:
            raise RdfInputError("the body holds no triple (to remove a graph, DELETE it)", source)
        if any(not isinstance(q.graph_name, ox.DefaultGraph) for q in quads):
            raise RdfInputError("the body names graphs of its own: the graph store takes one graph's triples "
                                "(Turtle, N-Triples, RDF/XML, JSON-LD), the graph named by ?graph", source)
        name = ox.DefaultGraph() if graph is None else ox.NamedNode(graph)
        if admit is not None:
            admit(quads)
        with self.changing(), self.store.lock:
            created = graph is not None and graph not in self.names
            try:
                if replace:
                    for quad in list(self.store.oxigraph.quads_for_pattern(None, None, None, name)):
                        self.store.write("remove", quad)
                self.store.write("extend", [ox.Quad(q.subject, q.predicate, q.object, name) for q in quads])
            except OSError as e:
                raise _write_failed(e) from e
            if graph is not None:
                self.names.add(graph)
        return created

    def replace(self, graph: str, document: "GraphDocument") -> "Replaced":
        """Replace a background graph with `document`'s triples (a refresh, spec §6.14) at once
        for evaluations: they wait while it is written and none sees half of it. Only what
        changed is written (the graph's triples are compared with the document's as N-Triples
        lines), in parts, the store's lock taken for each part alone, so that /health, ingestion
        and the store's other writers go on meanwhile; a write that fails puts back what was
        written of it. A document as the graph already holds it writes nothing."""
        self._writable(graph)
        name = ox.NamedNode(graph)
        new = set(document.lines())
        with self.reading():
            version = self.version
            old = self._lines_of(name, graph)
        if old == new and graph in self.names:
            return Replaced(len(new), 0, 0, version)
        with self.changing():
            if self.version != version:        # changed meanwhile: compared again
                old = self._lines_of(name, graph)
            removed, added = list(old - new), list(new - old)
            done: list[tuple[str, list[bytes]]] = []
            try:
                for part in _parts(removed):
                    self._write_lines("remove", name, part)
                    done.append(("remove", part))
                for part in _parts(added):
                    self._write_lines("add", name, part)
                    done.append(("add", part))
                with self.store.lock:
                    if graph not in self.names:
                        self.store.write("add_graph", name)
                    self.names.add(graph)
            except OSError as e:
                try:        # what the graph held, back
                    for operation, part in reversed(done):
                        self._write_lines("add" if operation == "remove" else "remove", name, part)
                except OSError:
                    pass
                raise _write_failed(e) from e
        self._flush()
        return Replaced(len(new), len(added), len(removed), self.version)

    def _lines_of(self, name: ox.NamedNode, graph: str) -> set[bytes]:
        """A background graph's triples as N-Triples lines, read by Oxigraph (not through Python
        objects) and without the store's lock (Oxigraph reads a snapshot): a rebuild that
        switches generations meanwhile has it read again under the lock."""
        if graph not in self.names:
            return set()
        try:
            data = self.store.oxigraph.dump(format=ox.RdfFormat.N_TRIPLES, from_graph=name)
        except OSError:
            with self.store.lock:
                data = self.store.oxigraph.dump(format=ox.RdfFormat.N_TRIPLES, from_graph=name)
        return set(data.splitlines())

    def _write_lines(self, operation: str, name: ox.NamedNode, lines: list[bytes]) -> None:
        """Add or remove N-Triples lines in graph `name`, their blank nodes as they are labelled
        (the graph's own, or a document's, named afresh when it was read)."""
        quads = [ox.Quad(t.subject, t.predicate, t.object, name)
                 for t in ox.parse(b"\n".join(lines) + b"\n", format=ox.RdfFormat.N_TRIPLES)]
        with self.store.lock:
            if operation == "add":
                self.store.write("extend", quads)
            else:
                for quad in quads:
                    self.store.write("remove", quad)

    def _flush(self) -> None:
        """On disk, what a replacement wrote is flushed: Oxigraph's write-ahead log is cut only
        then, and grew by the size of every reload until the next rebuild."""
        if getattr(self.store, "path", None) is None:
            return
        try:
            self.store.oxigraph.flush()
        except OSError:
            pass        # a generation switched meanwhile: the next flush or rebuild does it

    def drop(self, graph: str | None) -> bool:
        """Remove a background graph (the default graph: empty it); whether it existed."""
        self._writable(graph)
        with self.changing(), self.store.lock:
            if graph is not None and graph not in self.names:
                return False
            name = ox.DefaultGraph() if graph is None else ox.NamedNode(graph)
            try:
                for quad in list(self.store.oxigraph.quads_for_pattern(None, None, None, name)):
                    self.store.write("remove", quad)
            except OSError as e:
                raise _write_failed(e) from e
            self.names.discard(graph)
        return True
