"""The stream store: stream elements as named graphs in Oxigraph, with a time index.

Layout in the Oxigraph store:
- each element's content in its own named graph `n`;
- its timestamp triple `n <ts> τ` in its stream's timestamps graph (`timestamps_graph`), which
  is what a window's default graph shows and what the index is rebuilt from on reopening;
- background data in the default graph and in any other named graph.

Window membership comes from a sorted (timestamp, sequence, graph) index per stream kept in
Python: selecting a window is two bisections, whatever the size of the store (a FILTER over
timestamp triples would scan them all). An element is part of its stream once it is in the
index ("published"); data written but not yet published is invisible to every query, because
the rewrite only ever names published graphs. A store reopened from disk publishes every
element it holds.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable
from urllib.parse import unquote

import pyoxigraph as ox

from rspstar.translator.model import CountContent
from rspstar.translator.temporal import parse_instants
from rspstar.translator.vocabulary import (
    PROV_GENERATED_AT_TIME, TIMESTAMPS_PREFIX, is_internal_graph, timestamps_graph,
)

from .background import Background
from .documents import Documents
from .element_index import CountersFile, ElementIndex, StreamStats
from .staged import StagedElement, Stamps
from .errors import DuplicateElementError, StoreError
from .generations import Generations
from .rdf_input import (
    Element,
)

log = logging.getLogger(__name__)
STATS_FILE = "streams.json"
FLUSH_AFTER_EVICTIONS = 1000
# The store's memory grows with the evictions since its last rebuild; a rebuild copies what is
# held, so it also waits for twice that many evictions (bench/out/NOTES.md#compact-after).
COMPACT_AFTER_EVICTIONS = 10_000


@dataclass(frozen=True)
class WatermarkAdvanced:
    """A stream is now complete up to `watermark` (published to the store's subscribers)."""
    stream: str
    watermark: int


class StreamStore:
    """Stream elements and background data in one Oxigraph store (in memory, or on disk when
    `path` is given)."""

    def __init__(self, path: str | None = None, compact_after: int = COMPACT_AFTER_EVICTIONS,
                 remove_evicted: bool = True):
        self.path = path
        # Whether eviction also removes an element's quads from Oxigraph, or only from the
        # index (then no query sees them again: windows select elements through the index).
        self.remove_evicted = remove_evicted
        self._lock = threading.RLock()
        self.generations = Generations(path)
        self.compact_after = compact_after
        self._evicted_since_compaction = 0
        self._evicted_since_flush = 0
        self._index = ElementIndex()
        self._staged: set[str] = set()
        self.background = Background(self)
        self.documents = Documents(self)
        # Subscribers get a WatermarkAdvanced event after a watermark moves, outside the
        # store's lock: a scheduler can evaluate a closed window at once instead of at its
        # next poll. The store knows nothing of who listens.
        self._subscribers: list[Callable[[WatermarkAdvanced], None]] = []
        # Arrival listeners hear each publication's timestamps, per stream: the engine counts the
        # elements that come after a query evaluated the instants they belong to (spec section 5).
        self._arrival_listeners: list[Callable[[str, list[int]], None]] = []
        self._counters = CountersFile(Path(path) / STATS_FILE) if path else None
        if path:
            self._rebuild_index()
            self._index.restore_counters(self._counters.read())

    def save_stats(self) -> None:
        """Write the streams' counters and watermarks beside an on-disk store (at each close and
        whenever the engine asks): they are not in the elements themselves."""
        if self._counters is not None:
            with self._lock:
                saved = self._index.saved_counters()
            self._counters.save(saved)

    # -- the Oxigraph store ---------------------------------------------------------------------
    @property
    def oxigraph(self) -> ox.Store:
        """The live Oxigraph store (it changes when a rebuild switches generations)."""
        return self.generations.current

    @property
    def compactions(self) -> list[float]:
        return self.generations.compactions

    def _write(self, operation: str, *args) -> None:
        """Every write to Oxigraph goes through here, with the lock held (see Generations)
        but for the background write of a document's parts (`_stage_parts`)."""
        self.generations.write(operation, *args)

    def add_marker(self, quad: ox.Quad) -> None:
        """Record a bookkeeping quad (batch or background-load marker)."""
        with self._lock:
            self._write("add", quad)

    def compact(self) -> float:
        """Rebuild the Oxigraph store from its live content (Generations.rebuild); returns
        the seconds the store was held."""
        held = self.generations.rebuild(self._lock)
        if held is None:
            return 0.0
        with self._lock:
            self._evicted_since_compaction = 0
        return held

    def maybe_compact(self) -> float | None:
        """Compact once evictions since the last rebuild outnumber `compact_after` and twice
        the elements held (so the copy is small next to what it frees). On disk, flush every
        FLUSH_AFTER_EVICTIONS evictions in between: the write-ahead log is only cut when its
        writes are flushed, and grew with every element until the next rebuild
        (bench/out/NOTES.md#flush-after-evictions)."""
        with self._lock:
            due = self._evicted_since_compaction >= max(self.compact_after, 2 * self._index.held())
            if due:
                self._evicted_since_flush = 0
            elif self.path is not None and self._evicted_since_flush >= FLUSH_AFTER_EVICTIONS:
                self._evicted_since_flush = 0
                self.oxigraph.flush()
        # Outside the lock: the copy lets writers and readers in (holding it here kept ingestion
        # and evaluations out for the whole copy).
        return self.compact() if due else None

    def generation_path(self) -> str | None:
        """Where the live Oxigraph store is on disk (None in memory): another process may open
        it read-only there."""
        with self._lock:
            return self.generations.location()

    def disk_bytes(self) -> int:
        return self.generations.disk_bytes()

    def _rebuild_index(self) -> None:
        for graph in list(self.oxigraph.named_graphs()):
            if isinstance(graph, ox.NamedNode) and graph.value.startswith(TIMESTAMPS_PREFIX):
                stream = unquote(graph.value[len(TIMESTAMPS_PREFIX):])
                quads = list(self.oxigraph.quads_for_pattern(None, None, None, graph))
                instants = parse_instants([quad.object.value for quad in quads])
                stamps = Stamps()
                self._index.add_all(stream, [(quad.subject.value, instant, stamps(quad.predicate, quad.object))
                                             for quad, instant in zip(quads, instants)])
        for graph in self.oxigraph.named_graphs():
            if isinstance(graph, ox.NamedNode) and graph.value not in self._index \
                    and not is_internal_graph(graph.value):
                self.background.names.add(graph.value)

    # -- writing elements ---------------------------------------------------------------------
    def _is_element(self, graph: str) -> bool:
        """A stream element's graph, published or staged."""
        return graph in self._index or graph in self._staged

    def _taken(self, graph: str) -> bool:
        return self._is_element(graph) or graph in self.background.names

    def _all_new(self, graphs: list[str]) -> bool:
        """No graph taken, reserved or repeated: checked a set at a time, in a few calls that
        run in C (staging runs beside the write of its file: bench/out/NOTES.md#new-graphs-as-a-set)."""
        distinct = set(graphs)
        return (len(distinct) == len(graphs) and not self._index.holds_any(distinct) and self._staged.isdisjoint(distinct)
                and self.background.names.isdisjoint(distinct) and not any(map(is_internal_graph, graphs)))

    def all_new(self, graphs: Iterable[str]) -> bool:
        """Whether elements of these graph names may all be written (none taken, reserved or repeated)."""
        with self._lock:
            return self._all_new(list(graphs))

    def _check_new(self, graphs: Iterable[str]) -> None:
        graphs = list(graphs)
        if self._all_new(graphs):
            return
        seen = set()
        for graph in graphs:
            if self._taken(graph) or graph in seen:
                raise DuplicateElementError("graph <%s> is already a stream element or background graph" % graph)
            if is_internal_graph(graph):
                raise DuplicateElementError("graph <%s> is reserved by the engine" % graph)
            seen.add(graph)

    def stage_elements(self, stream: str, elements: Iterable[Element],
                       timestamp_predicate: str = PROV_GENERATED_AT_TIME,
                       extra_quads: Iterable[ox.Quad] = ()) -> list[StagedElement]:
        """Write elements (and `extra_quads`, e.g. a batch marker) in one transaction; a graph
        name already in use is refused with nothing written."""
        return self.stage_batch({stream: list(elements)}, extra_quads, timestamp_predicate)[stream]

    def stage_batch(self, elements_by_stream: dict[str, list[Element]], extra_quads: Iterable[ox.Quad] = (),
                    timestamp_predicate: str = PROV_GENERATED_AT_TIME) -> dict[str, list[StagedElement]]:
        """`stage_elements` for several streams in one transaction."""
        ts_predicate = ox.NamedNode(timestamp_predicate)
        quads: list[ox.Quad] = list(extra_quads)
        with self._lock:
            self._check_new(e.graph for elements in elements_by_stream.values() for e in elements)
            staged: dict[str, list[StagedElement]] = {}
            stamps = Stamps()
            for stream, elements in elements_by_stream.items():
                ts_graph = ox.NamedNode(timestamps_graph(stream))
                staged[stream] = []
                for element in elements:
                    stamp = ox.Quad(ox.NamedNode(element.graph), ts_predicate, element.timestamp_literal, ts_graph)
                    quads.extend(element.quads)
                    quads.append(stamp)
                    staged[stream].append(StagedElement(element.graph, element.timestamp,
                                                        stamps(ts_predicate, element.timestamp_literal)))
            self._write("extend", quads)
            for elements in elements_by_stream.values():
                self._staged.update(e.graph for e in elements)
        return staged

    def stage_stored_form(self, by_stream: dict[str, tuple[bytes, list[StagedElement]]],
                          extra_quads: Iterable[ox.Quad] = ()) -> dict[str, list[StagedElement]]:
        """`stage_batch` of elements already in the form the store holds them (codec.stored_form,
        N-Quads with each timestamp quad in its stream's timestamps graph), with `extra_quads`:
        one transaction, parsed in Rust; a graph name already in use is refused with nothing
        written."""
        tail = ox.serialize(list(extra_quads), format=ox.RdfFormat.N_QUADS)
        with self._lock:
            self._check_new(element.graph for _, staged in by_stream.values() for element in staged)
            self._write("load", b"".join([text for text, _ in by_stream.values()] + [tail]), ox.RdfFormat.N_QUADS, None)
            for _, staged in by_stream.values():
                self._staged.update(element.graph for element in staged)
        return {stream: staged for stream, (_, staged) in by_stream.items()}

    def is_taken(self, graph: str) -> bool:
        """Whether a graph name is already a stream element (staged or published) or background."""
        with self._lock:
            return self._taken(graph)

    def publish(self, stream: str, staged: Iterable[StagedElement]) -> int:
        """Make staged elements part of `stream`: windows see them from now on. Publishing an
        element twice is a no-op (a store reopened from disk has published everything)."""
        staged = list(staged)
        for write in {element.written for element in staged}:
            if write is not None:
                write.wait()
        with self._lock:
            graphs = [element.graph for element in staged]
            if len(set(graphs)) == len(graphs) and not self._index.holds_any(graphs):
                fresh = staged          # the usual case, checked in two calls that run in C
            else:
                first: dict[str, StagedElement] = {}
                for element in staged:
                    if element.graph not in self._index:
                        first.setdefault(element.graph, element)
                fresh = list(first.values())
            self._staged.difference_update(graphs)
            self._index.add_all(stream, fresh)
            if fresh:
                self._index.stats_of(stream).ingested += len(fresh)
        if fresh and self._arrival_listeners:
            timestamps = [element.timestamp for element in fresh]
            for listener in list(self._arrival_listeners):
                listener(stream, timestamps)
        return len(fresh)

    def add_elements(self, stream: str, elements: Iterable[Element],
                     timestamp_predicate: str = PROV_GENERATED_AT_TIME,
                     extra_quads: Iterable[ox.Quad] = ()) -> int:
        """Write and publish elements in one step."""
        with self._lock:
            return self.publish(stream, self.stage_elements(stream, elements, timestamp_predicate, extra_quads))

    def advance_watermark(self, stream: str, instant: int) -> None:
        """Declare `stream` complete up to `instant`: elements published later with a smaller
        timestamp are counted late (they still join the windows that are open)."""
        with self._lock:
            if not self._index.advance_watermark(stream, instant):
                return
        event = WatermarkAdvanced(stream, instant)
        for subscriber in list(self._subscribers):
            subscriber(event)

    def listen_to_arrivals(self, listener: Callable[[str, list[int]], None]) -> None:
        """Have `listener(stream, timestamps)` called with the timestamps of the elements each
        publication adds to a stream, once they are visible to windows (under the store's lock
        when the publication holds it: a listener only counts, and takes no other lock than its
        own)."""
        self._arrival_listeners.append(listener)

    def stop_listening_to_arrivals(self, listener: Callable[[str, list[int]], None]) -> None:
        if listener in self._arrival_listeners:      # (a runner closed twice)
            self._arrival_listeners.remove(listener)

    def subscribe(self, subscriber: Callable[[WatermarkAdvanced], None]) -> None:
        """Have `subscriber` called with every WatermarkAdvanced event from now on."""
        self._subscribers.append(subscriber)

    def unsubscribe(self, subscriber: Callable[[WatermarkAdvanced], None]) -> None:
        self._subscribers.remove(subscriber)

    def subscribed(self, subscriber) -> bool:
        return subscriber in self._subscribers

    def late_count(self, stream: str) -> int:
        """Elements of `stream` published below its watermark so far."""
        with self._lock:
            stats = self._index.known(stream)
            return 0 if stats is None else stats.late

    def watermark(self, stream: str) -> int | None:
        with self._lock:
            stats = self._index.known(stream)
            return None if stats is None else stats.watermark

    # -- reading and retention -------------------------------------------------------------------
    def elements_in(self, stream: str, opens: int, closes: int) -> list[str]:
        """Graph names of the elements of `stream` with opens <= τ < closes, in time order."""
        with self._lock:
            return self._index.between(stream, opens, closes)

    def count_window(self, stream: str, through: int, size: int, step: int) -> CountContent | None:
        with self._lock:
            return self._index.count_window(stream, through, size, step)

    def next_count_close(self, stream: str, after: int, step: int) -> int | None:
        with self._lock:
            return self._index.next_count_close(stream, after, step)

    def count_reach(self, stream: str, instant: int, size: int, step: int) -> int:
        with self._lock:
            return self._index.count_reach(stream, instant, size, step)

    def next_arrival(self, stream: str, after: int) -> int | None:
        with self._lock:
            return self._index.next_arrival(stream, after)

    def evict_before(self, stream: str, instant: int) -> int:
        """Drop the elements of `stream` with τ < instant (no window can reach them any more)."""
        with self._lock:
            doomed = self._index.cut_before(stream, instant)
            if not doomed:
                return 0
            # The index keeps each element's timestamp triple as stored, so it is removed
            # directly: no SPARQL update is parsed and matched per close (bench/eviction.py;
            # removing the element graphs costs the most either way).
            if self.remove_evicted:
                ts_graph = ox.NamedNode(timestamps_graph(stream))
                for graph, (predicate, literal) in doomed:
                    name = ox.NamedNode(graph)
                    self._write("remove_graph", name)
                    self._write("remove", ox.Quad(name, predicate, literal, ts_graph))
            self._evicted_since_compaction += len(doomed)
            self._evicted_since_flush += len(doomed)
            return len(doomed)

    def streams(self) -> dict[str, StreamStats]:
        with self._lock:
            return self._index.snapshot()

    # -- queries ---------------------------------------------------------------------------------
    def query(self, sparql: str, default_graph: list[str] | None = None, custom_functions=None,
              named_graphs: list[str] | None = None):
        """Run SPARQL-star against the store. SyntaxError from Oxigraph propagates (the
        translator maps its position back to the user's text)."""
        kwargs = {}
        if default_graph is not None:
            kwargs["default_graph"] = [ox.NamedNode(g) for g in default_graph]
        if named_graphs is not None:
            kwargs["named_graphs"] = [ox.NamedNode(g) for g in named_graphs]
        if custom_functions:
            kwargs["custom_functions"] = custom_functions
        try:
            return self.oxigraph.query(sparql, **kwargs)
        except OSError as e:
            raise StoreError("store read failed: %s" % e) from e

    def evaluate(self, template, elements: dict[str, list[str]], functions, convert):
        """A compiled query (a translator Template) over these window contents (graph names per
        window) and the background, with the `rspu:` functions of `functions`, its result read
        by `convert` (the functions are called as the solutions are read)."""
        rewritten = template.instantiate(elements, self.background.graphs())
        if not template.calls_rspu:
            return convert(self.query(rewritten.text, rewritten.default_graph))
        table = functions.table_for(rewritten.fused_functions)
        functions.begin_evaluation()
        return convert(self.query(rewritten.text, rewritten.default_graph, table))

    def close(self) -> None:
        """Flush and release the Oxigraph store (an on-disk store's lock goes with it), even
        while something still holds this object."""
        with self._lock:
            if isinstance(self.oxigraph, ox.Store) and self.path:
                self.save_stats()
            self.generations.close()
