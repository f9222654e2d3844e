"""The stream store: stream elements as named graphs in Oxigraph, with a time index.

Layout in the Oxigraph store:
- each element's content in its own named graph `n`;
- its timestamp triple `n <ts> τ` in `TIMESTAMPS_GRAPH` (what a window's default graph holds);
- `n rspstar:stream <s>` in `ELEMENTS_GRAPH`, so the index can be rebuilt when a store on
  disk is reopened;
- background data in the default graph and in any other named graph.

Window membership comes from a sorted (timestamp, sequence, graph) index per stream kept in
Python: selecting a window is two bisections, whatever the size of the store (a FILTER over
timestamp triples would scan them all).
"""
from __future__ import annotations

import bisect
import itertools
import threading
from dataclasses import dataclass
from typing import Iterable

import pyoxigraph as ox

from translator.temporal import parse_instant

from .errors import DuplicateElementError, RdfInputError, StoreError
from .rdf_input import Element, parse_rdf
from .vocabulary import INTERNAL_GRAPHS, PROV_GENERATED_AT_TIME, TIMESTAMPS_GRAPH

ELEMENTS_GRAPH = "urn:rspstar:elements"
STREAM_PREDICATE = "urn:rspstar:stream"
_ALL_INTERNAL = INTERNAL_GRAPHS | {ELEMENTS_GRAPH}


@dataclass
class StreamStats:
    elements: int = 0           # elements currently held
    ingested: int = 0           # elements ever added
    evicted: int = 0
    latest: int | None = None   # greatest timestamp seen


class StreamStore:
    """Stream elements and background data in one Oxigraph store (in memory, or on disk when
    `path` is given)."""

    def __init__(self, path: str | None = None):
        self.path = path
        self.oxigraph = ox.Store(path) if path else ox.Store()
        self._lock = threading.RLock()
        self._index: dict[str, list[tuple[int, int, str]]] = {}
        self._stream_of: dict[str, str] = {}
        self._stats: dict[str, StreamStats] = {}
        self._background: set[str] = set()
        self._sequence = itertools.count()
        self._ts_node = ox.NamedNode(TIMESTAMPS_GRAPH)
        self._elements_node = ox.NamedNode(ELEMENTS_GRAPH)
        self._stream_predicate = ox.NamedNode(STREAM_PREDICATE)
        if path:
            self._rebuild_index()

    def _rebuild_index(self) -> None:
        stream_of = {}
        for quad in self.oxigraph.quads_for_pattern(None, self._stream_predicate, None, self._elements_node):
            stream_of[quad.subject.value] = quad.object.value
        for quad in self.oxigraph.quads_for_pattern(None, None, None, self._ts_node):
            graph = quad.subject.value
            stream = stream_of.get(graph)
            if stream is not None:
                self._insert_index(stream, parse_instant(quad.object.value), graph)
        for graph in self.oxigraph.named_graphs():
            if isinstance(graph, ox.NamedNode) and graph.value not in self._stream_of \
                    and graph.value not in _ALL_INTERNAL:
                self._background.add(graph.value)

    # -- stream elements --------------------------------------------------------------------
    def _insert_index(self, stream: str, timestamp: int, graph: str) -> None:
        entries = self._index.setdefault(stream, [])
        entry = (timestamp, next(self._sequence), graph)
        if not entries or entries[-1] <= entry:
            entries.append(entry)
        else:
            bisect.insort(entries, entry)
        self._stream_of[graph] = stream
        stats = self._stats.setdefault(stream, StreamStats())
        stats.elements += 1
        if stats.latest is None or timestamp > stats.latest:
            stats.latest = timestamp

    def add_elements(self, stream: str, elements: Iterable[Element],
                     timestamp_predicate: str = PROV_GENERATED_AT_TIME,
                     extra_quads: Iterable[ox.Quad] = ()) -> int:
        """Add elements of `stream` in one transaction (with `extra_quads`, e.g. a batch marker);
        returns how many were added. A graph name already in use is refused, with nothing
        written."""
        elements = list(elements)
        if not elements:
            return 0
        ts_predicate = ox.NamedNode(timestamp_predicate)
        stream_node = ox.NamedNode(stream)
        quads: list[ox.Quad] = list(extra_quads)
        with self._lock:
            seen = set()
            for element in elements:
                if element.graph in self._stream_of or element.graph in self._background or element.graph in seen:
                    raise DuplicateElementError("graph <%s> is already a stream element or background graph"
                                                % element.graph)
                if element.graph in _ALL_INTERNAL:
                    raise DuplicateElementError("graph <%s> is reserved by the engine" % element.graph)
                seen.add(element.graph)
                name = ox.NamedNode(element.graph)
                quads.extend(element.quads)
                quads.append(ox.Quad(name, ts_predicate, element.timestamp_literal, self._ts_node))
                quads.append(ox.Quad(name, self._stream_predicate, stream_node, self._elements_node))
            self.oxigraph.extend(quads)
            for element in elements:
                self._insert_index(stream, element.timestamp, element.graph)
            self._stats[stream].ingested += len(elements)
        return len(elements)

    def elements_in(self, stream: str, opens: int, closes: int) -> list[str]:
        """Graph names of the elements of `stream` with opens <= τ < closes, in time order."""
        with self._lock:
            entries = self._index.get(stream)
            if not entries:
                return []
            lo = bisect.bisect_left(entries, (opens,))
            hi = bisect.bisect_left(entries, (closes,))
            return [entry[2] for entry in entries[lo:hi]]

    def evict_before(self, stream: str, instant: int) -> int:
        """Drop the elements of `stream` with τ < instant (no window can reach them any more)."""
        with self._lock:
            entries = self._index.get(stream)
            if not entries:
                return 0
            cut = bisect.bisect_left(entries, (instant,))
            if cut == 0:
                return 0
            doomed = entries[:cut]
            del entries[:cut]
            for _, _, graph in doomed:
                del self._stream_of[graph]
                name = ox.NamedNode(graph)
                self.oxigraph.remove_graph(name)
                for quad in list(self.oxigraph.quads_for_pattern(name, None, None, self._ts_node)):
                    self.oxigraph.remove(quad)
                for quad in list(self.oxigraph.quads_for_pattern(name, None, None, self._elements_node)):
                    self.oxigraph.remove(quad)
            stats = self._stats[stream]
            stats.elements -= cut
            stats.evicted += cut
            return cut

    def streams(self) -> dict[str, StreamStats]:
        with self._lock:
            return {s: StreamStats(**vars(st)) for s, st in self._stats.items()}

    # -- background data ----------------------------------------------------------------------
    def load_background(self, data: bytes | str, fmt: ox.RdfFormat, source: str) -> int:
        """Load background (static) data; a syntax error names the source, line and column and
        leaves the store unchanged."""
        quads = parse_rdf(data, fmt, source, rename_blank_nodes=True)
        with self._lock:
            graphs = set()
            for quad in quads:
                if isinstance(quad.graph_name, ox.NamedNode):
                    graph = quad.graph_name.value
                    if graph in self._stream_of or graph in _ALL_INTERNAL:
                        raise RdfInputError("graph <%s> is a stream element or reserved, not background"
                                            % graph, source)
                    graphs.add(graph)
            self.oxigraph.extend(quads)
            self._background |= graphs
        return len(quads)

    def background_graphs(self) -> list[str]:
        with self._lock:
            return sorted(self._background)

    # -- queries ---------------------------------------------------------------------------------
    def query(self, sparql: str, default_graph: list[str] | None = None, custom_functions=None):
        """Run SPARQL-star against the store. SyntaxError from Oxigraph propagates (the
        translator maps its position back to the user's text)."""
        kwargs = {}
        if default_graph is not None:
            kwargs["default_graph"] = [ox.NamedNode(g) for g in default_graph]
        if custom_functions:
            kwargs["custom_functions"] = custom_functions
        try:
            return self.oxigraph.query(sparql, **kwargs)
        except OSError as e:
            raise StoreError("store read failed: %s" % e) from e

    def close(self) -> None:
        if self.path:
            self.oxigraph.flush()
