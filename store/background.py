"""Background (static) data in the stream store: loaded from files, changed by SPARQL Update
on a copy (so stream elements, timestamps and the engine's graphs are out of its reach), read by
every evaluation and copied whole into a partition's store."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pyoxigraph as ox

from rspstar.translator.nesting import check_nesting
from rspstar.translator.vocabulary import RESERVED_PREFIX, is_internal_graph, is_reserved

from .errors import GraphExists, GraphMissing, GraphNotWritable, RdfInputError, ReservedGraphError, StoreError
from .rdf_input import parse_rdf

if TYPE_CHECKING:
    from .stream_store import StreamStore


_FAILURES = ((re.compile(r"The graph (<[^>]*>) does not exist"), GraphMissing, "graph %s does not exist (SILENT "
                                                                                "makes the operation succeed anyway)"),
             (re.compile(r"The graph (<[^>]*>) already exists"), GraphExists, "graph %s already exists (SILENT makes "
                                                                              "CREATE succeed anyway)"))


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
        number of quads added and removed; QuerySyntaxError, before anything runs, for an update
        nested or chained deeper than Oxigraph's parser may follow (translator/nesting.py)."""
        check_nesting(sparql, language="sparql")
        with self.store._lock:
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
                what = "a stream element" if self.store._is_element(name) else \
                    "reserved by the engine" if is_reserved(name) else None
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

    # -- one graph at a time (the SPARQL 1.1 Graph Store HTTP Protocol) ------------------------
    def _writable(self, graph: str | None) -> None:
        """Only the default graph and background graphs are the protocol's to change."""
        if graph is None:
            return
        if self.store._is_element(graph):
            raise GraphNotWritable("graph <%s> is a stream element: streams are written through POST /streams, "
                                   "not the graph store" % graph)
        if is_reserved(graph):
            raise GraphNotWritable("graph <%s> is reserved by the engine (%s...)" % (graph, RESERVED_PREFIX))

    def triples(self, graph: str | None) -> list[ox.Triple] | None:
        """The triples of a background graph (None: the default graph); None when it does not exist."""
        self._writable(graph)
        with self.store._lock:
            if graph is not None and graph not in self.names:
                return None
            name = ox.DefaultGraph() if graph is None else ox.NamedNode(graph)
            return [q.triple for q in self.store.oxigraph.quads_for_pattern(None, None, None, name)]

    def write(self, graph: str | None, data: bytes | str, fmt: ox.RdfFormat, source: str, replace: bool) -> bool:
        """Replace (PUT) or add to (POST) a background graph with the triples of `data`; whether the
        graph is new. A document holding named graphs, or that does not parse, changes nothing."""
        self._writable(graph)
        quads = parse_rdf(data, fmt, source)
        if not quads:
            raise RdfInputError("the body holds no triple (to remove a graph, DELETE it)", source)
        if any(not isinstance(q.graph_name, ox.DefaultGraph) for q in quads):
            raise RdfInputError("the body names graphs of its own: the graph store takes one graph's triples "
                                "(Turtle, N-Triples, RDF/XML, JSON-LD), the graph named by ?graph", source)
        name = ox.DefaultGraph() if graph is None else ox.NamedNode(graph)
        with self.store._lock:
            created = graph is not None and graph not in self.names
            try:
                if replace:
                    for quad in list(self.store.oxigraph.quads_for_pattern(None, None, None, name)):
                        self.store._write("remove", quad)
                self.store._write("extend", [ox.Quad(q.subject, q.predicate, q.object, name) for q in quads])
            except OSError as e:
                raise StoreError("store write failed: %s" % e) from e
            if graph is not None:
                self.names.add(graph)
        return created

    def drop(self, graph: str | None) -> bool:
        """Remove a background graph (the default graph: empty it); whether it existed."""
        self._writable(graph)
        with self.store._lock:
            if graph is not None and graph not in self.names:
                return False
            name = ox.DefaultGraph() if graph is None else ox.NamedNode(graph)
            try:
                for quad in list(self.store.oxigraph.quads_for_pattern(None, None, None, name)):
                    self.store._write("remove", quad)
            except OSError as e:
                raise StoreError("store write failed: %s" % e) from e
            self.names.discard(graph)
        return True
