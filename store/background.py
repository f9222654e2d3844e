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
from typing import TYPE_CHECKING

import pyoxigraph as ox

from rspstar.translator.nesting import check_nesting
from rspstar.translator.vocabulary import RESERVED_PREFIX, is_internal_graph, is_reserved

from .disk import is_disk_full
from .errors import (
    DiskFull, GraphExists, GraphMissing, GraphNotWritable, RdfInputError, ReservedGraphError, StoreError,
)
from .rdf_input import parse_rdf

if TYPE_CHECKING:
    from .writers import StoreWriting


class ReadersWriter:
    """Many readers or one writer. A writer waiting holds new readers back (evaluations come
    one after another and would keep it waiting for ever); a thread already reading may read
    again (an evaluation runs several queries)."""

    def __init__(self):
        self._condition = threading.Condition(threading.Lock())
        self._readers = 0
        self._writing = False
        self._waiting_writers = 0
        self._local = threading.local()

    @contextlib.contextmanager
    def reading(self):
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            with self._condition:
                while self._writing or self._waiting_writers:
                    self._condition.wait()
                self._readers += 1
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth
            if depth == 0:
                with self._condition:
                    self._readers -= 1
                    if not self._readers:
                        self._condition.notify_all()

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

    def update(self, sparql: str, base_iri: str | None = None) -> int:
        """Run a SPARQL Update over the background data alone (SyntaxError from Oxigraph
        propagates). The update runs on a copy of the background graphs, so stream elements,
        timestamps and batch markers are out of its reach (`CLEAR NAMED` clears background
        graphs only); a result that names one of those graphs, or one under the engine's
        reserved prefix, is refused with ReservedGraphError and nothing changes. Returns the
        number of quads added and removed; QuerySyntaxError, before anything runs, for an update
        nested or chained deeper than Oxigraph's parser may follow (translator/nesting.py)."""
        check_nesting(sparql, language="sparql")
        with self.changing(), self.store.lock:
            before = set(self.store.oxigraph.quads_for_pattern(None, None, None, ox.DefaultGraph()))
            for graph in self.names:
                before.update(self.store.oxigraph.quads_for_pattern(None, None, None, ox.NamedNode(graph)))
            scratch = ox.Store()
            scratch.extend(before)
            try:
                scratch.update(sparql, base_iri=base_iri)
            except RuntimeError as e:
                raise _update_failure(e) from None
            after = set(scratch)
            for graph in {q.graph_name for q in after - before} - {ox.DefaultGraph()}:
                name = graph.value
                what = "a stream element" if self.store.is_element(name) else \
                    "reserved by the engine" if is_reserved(name) else None
                if what:
                    raise ReservedGraphError("the update writes graph <%s>, which is %s; updates change "
                                             "background data only" % (name, what))
            try:
                for quad in before - after:
                    self.store.write("remove", quad)
                for quad in after - before:
                    self.store.write("add", quad)
            except OSError as e:
                raise _write_failed(e) from e
            self.names = {q.graph_name.value for q in after if isinstance(q.graph_name, ox.NamedNode)}
            return len(before ^ after)

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

    def replace(self, graph: str, data: bytes, fmt: ox.RdfFormat, source: str) -> int:
        """Replace a background graph with the triples of `data` at once, between evaluations
        (a refresh, spec §6.14); the number of triples. A document that does not parse, or that
        names graphs of its own, changes nothing."""
        self._writable(graph)
        quads = parse_rdf(data, fmt, source)
        if any(not isinstance(q.graph_name, ox.DefaultGraph) for q in quads):
            raise RdfInputError("the document names graphs of its own: a background graph's source holds that "
                                "graph's triples (Turtle, N-Triples, RDF/XML, JSON-LD)", source)
        name = ox.NamedNode(graph)
        with self.changing(), self.store.lock:
            before = list(self.store.oxigraph.quads_for_pattern(None, None, None, name))
            try:
                if graph in self.names:
                    self.store.write("remove_graph", name)
                self.store.write("extend", [ox.Quad(q.subject, q.predicate, q.object, name) for q in quads])
                self.store.write("add_graph", name)
            except OSError as e:
                try:        # what the graph held, back (a write that failed half-way wrote nothing it kept)
                    self.store.write("remove_graph", name)
                    self.store.write("extend", before)
                except OSError:
                    pass
                raise _write_failed(e) from e
            self.names.add(graph)
        return len(quads)

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
