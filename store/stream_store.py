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

import itertools
import json
import logging
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple
from urllib.parse import unquote

import pyoxigraph as ox

from rspstar.translator.model import CountContent
from rspstar.translator.errors import TemporalValueError
from rspstar.translator.temporal import parse_instants
from rspstar.translator.vocabulary import (
    PROV_GENERATED_AT_TIME, RESERVED_PREFIX, TIMESTAMPS_PREFIX, is_internal_graph, timestamps_graph,
)

from .document_parts import iter_document_parts
from .element_index import ElementIndex, StreamStats
from .errors import DuplicateElementError, RdfInputError, ReservedGraphError, StoreError
from .generations import Generations
from .landing import replace_text
from .rdf_input import (
    DocumentScan, Element, instant_of, parse_rdf, read_elements, scan_document,
)

log = logging.getLogger(__name__)
STATS_FILE = "streams.json"
FLUSH_AFTER_EVICTIONS = 1000
# Memory of the store grows with the evictions since its last rebuild (~0.6 KB each, store alone
# at 55 elements a batch; more in the running engine): at 50,000 the main job's memory rose for
# 15 minutes at its default rate before each drop, at 10,000 it stays within a few MiB. A
# rebuild copies what is held, so it also waits for twice that many evictions.
COMPACT_AFTER_EVICTIONS = 10_000
# A replay writes a stream file in parts of about this size (stage_document_optimistically;
# bench/out/NOTES.md#part-bytes).
PART_BYTES = 1 << 20


class OptimisticLoadFailed(StoreError):
    """An optimistic document load met something that needs the careful path; the store may
    hold part of the document and must be rebuilt by its owner."""


class StagedElement(NamedTuple):
    """An element written to the store and not yet published to its stream's index."""

    graph: str
    timestamp: int
    # The predicate and literal of its timestamp triple as stored, to remove it with the element.
    # The triple itself is built again then: building one per element on the way in cost more
    # than the rest of reading a document's timestamps (bench/replay_throughput.py).
    stamp: tuple[ox.NamedNode, ox.Literal]
    # The part of a document still being written that holds it (the last one, when the
    # element is in several), or None when it is written already.
    written: "PartWrite | None" = None


class PartWrite:
    """One part of a document written in the background: publishing an element it holds
    waits for it."""

    def __init__(self):
        self._done = threading.Event()
        self._error: StoreError | None = None

    def finish(self, error: StoreError | None = None) -> None:
        self._error = error
        self._done.set()

    def wait(self) -> None:
        self._done.wait()
        if self._error is not None:
            raise StoreError(str(self._error))


@dataclass(frozen=True)
class WatermarkAdvanced:
    """A stream is now complete up to `watermark` (published to the store's subscribers)."""
    stream: str
    watermark: int


@dataclass
class DocumentResult:
    staged: list[StagedElement]
    untimed_graphs: list[str]
    ignored_default_triples: int


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
        self._background: set[str] = set()
        # Subscribers get a WatermarkAdvanced event after a watermark moves, outside the
        # store's lock: a scheduler can evaluate a closed window at once instead of at its
        # next poll. The store knows nothing of who listens.
        self._subscribers: list[Callable[[WatermarkAdvanced], None]] = []
        if path:
            self._rebuild_index()
            self._restore_stats()

    # -- counters on disk ---------------------------------------------------------------------
    # Ingested, evicted and late counts and watermarks are not in the elements themselves: an
    # on-disk store keeps them in `path/STATS_FILE`, written by `save_stats` (at each close and
    # whenever the engine asks) and read back at open.
    def save_stats(self) -> None:
        if self.path is None:
            return
        with self._lock:
            saved = self._index.saved_counters()
        replace_text(Path(self.path) / STATS_FILE, json.dumps(saved, sort_keys=True))

    def _restore_stats(self) -> None:
        path = Path(self.path) / STATS_FILE
        try:
            saved = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        except ValueError:
            log.warning("ignoring unreadable stream counters in %s", path)
            return
        self._index.restore_counters(saved)

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
                stamps = list(self.oxigraph.quads_for_pattern(None, None, None, graph))
                instants = parse_instants([quad.object.value for quad in stamps])
                self._index.add_all(stream, [(quad.subject.value, instant, (quad.predicate, quad.object))
                                             for quad, instant in zip(stamps, instants)])
        for graph in self.oxigraph.named_graphs():
            if isinstance(graph, ox.NamedNode) and graph.value not in self._index \
                    and not is_internal_graph(graph.value):
                self._background.add(graph.value)

    # -- writing elements ---------------------------------------------------------------------
    def _is_element(self, graph: str) -> bool:
        """A stream element's graph, published or staged."""
        return graph in self._index or graph in self._staged

    def _taken(self, graph: str) -> bool:
        return self._is_element(graph) or graph in self._background

    def _check_new(self, graphs: Iterable[str]) -> None:
        graphs = list(graphs)
        distinct = set(graphs)
        # The usual case checked a set at a time, in a few calls that run in C (staging runs
        # beside the write of its file: bench/out/NOTES.md#new-graphs-as-a-set).
        if (len(distinct) == len(graphs) and not self._index.holds_any(distinct) and self._staged.isdisjoint(distinct)
                and self._background.isdisjoint(distinct) and not any(map(is_internal_graph, graphs))):
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
            for stream, elements in elements_by_stream.items():
                ts_graph = ox.NamedNode(timestamps_graph(stream))
                staged[stream] = []
                for element in elements:
                    stamp = ox.Quad(ox.NamedNode(element.graph), ts_predicate, element.timestamp_literal, ts_graph)
                    quads.extend(element.quads)
                    quads.append(stamp)
                    staged[stream].append(StagedElement(element.graph, element.timestamp,
                                                        (ts_predicate, element.timestamp_literal)))
            self._write("extend", quads)
            for elements in elements_by_stream.values():
                self._staged.update(e.graph for e in elements)
        return staged

    def is_taken(self, graph: str) -> bool:
        """Whether a graph name is already a stream element (staged or published) or background."""
        with self._lock:
            return self._taken(graph)

    def stage_document(self, stream: str, data: bytes | str, fmt: ox.RdfFormat, source: str,
                       timestamp_predicate: str = PROV_GENERATED_AT_TIME,
                       processing_time: int | None = None) -> DocumentResult:
        """Write every element of a TriG / N-Quads document; nothing is written if the
        document has a syntax error (RdfInputError with line and column) or reuses a graph
        name. Graphs without a timestamp get `processing_time`, or are reported untimed."""
        scan = scan_document(data, fmt, source, timestamp_predicate)
        if scan.needs_rewriting:
            result = read_elements(data, source, fmt, timestamp_predicate, processing_time)
            staged = self.stage_elements(stream, result.elements, timestamp_predicate)
            return DocumentResult(staged, result.untimed_graphs, result.ignored_default_triples)
        staged = _staged_from(scan, source, timestamp_predicate)
        with self._lock:
            self._check_new(s.graph for s in staged)
            try:
                self._load_document(stream, data, fmt)
            except SyntaxError as e:  # pragma: no cover - the scan parsed the same bytes
                raise RdfInputError(str(e), source) from None
            self._staged.update(s.graph for s in staged)
        return DocumentResult(staged, [], 0)

    def _load_document(self, stream: str, data: bytes | str, fmt: ox.RdfFormat) -> None:
        """One Rust call parses and writes a whole document; its default graph (the timestamp
        triples, nothing else: checked by the scan) goes to the stream's timestamps graph."""
        self._write("load", data, fmt, ox.NamedNode(timestamps_graph(stream)))

    def stage_document_optimistically(self, stream: str, data: bytes | str, fmt: ox.RdfFormat, source: str,
                                      timestamp_predicate: str = PROV_GENERATED_AT_TIME,
                                      part_bytes: int | None = None) -> DocumentResult:
        """`stage_document` with the validating scan and Oxigraph's write running at once
        (Oxigraph releases the GIL, so they share the two cores: the scan costs nothing).

        A document of at least two `part_bytes` (PART_BYTES when not given) that can be cut
        (iter_document_parts) is written part by part in the background, each part as soon as
        it is cut: its elements come back once every part is scanned, each naming the part
        that holds it, and publishing one waits for that part. Windows over the first parts
        are evaluated while later ones are written (one Oxigraph load cannot be spread over
        cores, but reads go on beside it).

        Only for a store its owner can throw away (a replay's): if the document turns out to
        need rewriting or reuses a graph name, part of it may already be written, and
        OptimisticLoadFailed tells the owner to rebuild the store with `stage_document`."""
        if isinstance(data, str):
            data = data.encode()
        parts = iter_document_parts(data, fmt, part_bytes or PART_BYTES)
        first, second = next(parts), next(parts, None)
        if second is not None:
            return self._stage_parts(stream, itertools.chain((first, second), parts), fmt, source,
                                     timestamp_predicate)
        failure: list[BaseException] = []

        def write() -> None:
            try:
                self._load_document(stream, data, fmt)
            except BaseException as e:  # reported below, after the scan
                failure.append(e)

        with self._lock:
            writer = threading.Thread(target=write, name="oxigraph-load")
            writer.start()
            try:
                scan = scan_document(data, fmt, source, timestamp_predicate)
                # Reading the timestamps also runs beside the write
                # (bench/out/NOTES.md#timestamps-beside-the-write).
                staged = None if scan.needs_rewriting else _staged_from(scan, source, timestamp_predicate)
            finally:
                writer.join()
            if failure:
                raise OptimisticLoadFailed("write of %s failed: %s" % (source, failure[0]))
            if staged is None:
                raise OptimisticLoadFailed("%s needs rewriting before it can be stored" % source)
            try:
                self._check_new(s.graph for s in staged)
            except DuplicateElementError as e:
                raise OptimisticLoadFailed(str(e)) from e
            self._staged.update(s.graph for s in staged)
        return DocumentResult(staged, [], 0)

    def _stage_parts(self, stream: str, parts: Iterator[bytes], fmt: ox.RdfFormat, source: str,
                     timestamp_predicate: str) -> DocumentResult:
        to_write: queue.SimpleQueue = queue.SimpleQueue()
        abandoned = threading.Event()

        def write_parts() -> None:
            # Without the store's lock, which the runner takes to publish, move watermarks and
            # select windows: it goes on beside the write (Generations keeps writes and
            # rebuilds apart). A part that fails fails every part after it (they may
            # continue its elements).
            error: StoreError | None = None
            for k, (part, write) in enumerate(iter(to_write.get, None)):
                if error is None and abandoned.is_set():
                    error = OptimisticLoadFailed("the staging of %s was abandoned" % source)
                if error is None:
                    try:
                        self._load_document(stream, part, fmt)
                    except BaseException as e:  # reported to whoever publishes from this part
                        error = StoreError("writing part %d of %s failed: %s" % (k + 1, source, e))
                write.finish(error)

        with self._lock:
            threading.Thread(target=write_parts, name="oxigraph-load-parts", daemon=True).start()
            read = _PartsScan(fmt, source, timestamp_predicate)
            try:
                for part in parts:
                    # Written as soon as it is cut, read meanwhile, then let go of here: a part
                    # is held until both are done, not the whole document twice.
                    write = PartWrite()
                    to_write.put((part, write))
                    read.add(part, write)
                staged = read.staged()
                self._check_new(s.graph for s in staged)
            except (RdfInputError, DuplicateElementError) as e:
                # The careful path reads the whole document again and reports the error
                # where it is in it, not in a part.
                abandoned.set()
                raise OptimisticLoadFailed(str(e)) from e
            except BaseException:
                abandoned.set()
                raise
            finally:
                to_write.put(None)
            self._staged.update(s.graph for s in staged)
        return DocumentResult(staged, [], 0)

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

    # -- background data ----------------------------------------------------------------------
    def load_background(self, data: bytes | str, fmt: ox.RdfFormat, source: str) -> int:
        """Load background (static) data; a syntax error names the source, line and column and
        leaves the store unchanged."""
        quads = parse_rdf(data, fmt, source)
        with self._lock:
            graphs = set()
            for quad in quads:
                if isinstance(quad.graph_name, ox.NamedNode):
                    graph = quad.graph_name.value
                    if self._is_element(graph) or is_internal_graph(graph):
                        raise RdfInputError("graph <%s> is a stream element or reserved, not background"
                                            % graph, source)
                    graphs.add(graph)
            self._write("extend", quads)
            self._background |= graphs
        return len(quads)

    def update_background(self, sparql: str) -> int:
        """Run a SPARQL Update over the background data alone (SyntaxError from Oxigraph
        propagates). The update runs on a copy of the background graphs, so stream elements,
        timestamps and batch markers are out of its reach (`CLEAR NAMED` clears background
        graphs only); a result that names one of those graphs, or one under the engine's
        reserved prefix, is refused with ReservedGraphError and nothing changes. Returns the
        number of quads added and removed."""
        with self._lock:
            before = set(self.oxigraph.quads_for_pattern(None, None, None, ox.DefaultGraph()))
            for graph in self._background:
                before.update(self.oxigraph.quads_for_pattern(None, None, None, ox.NamedNode(graph)))
            scratch = ox.Store()
            scratch.extend(before)
            scratch.update(sparql)
            after = set(scratch)
            for graph in {q.graph_name for q in after - before} - {ox.DefaultGraph()}:
                name = graph.value
                what = "a stream element" if self._is_element(name) else \
                    "reserved by the engine" if name.startswith(RESERVED_PREFIX) else None
                if what:
                    raise ReservedGraphError("the update writes graph <%s>, which is %s; updates change "
                                             "background data only" % (name, what))
            try:
                for quad in before - after:
                    self._write("remove", quad)
                for quad in after - before:
                    self._write("add", quad)
            except OSError as e:
                raise StoreError("store write failed: %s" % e) from e
            self._background = {q.graph_name.value for q in after if isinstance(q.graph_name, ox.NamedNode)}
            return len(before ^ after)

    def background_graphs(self) -> list[str]:
        with self._lock:
            return sorted(self._background)

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
        rewritten = template.instantiate(elements, self.background_graphs())
        for fused in rewritten.fused_functions:
            functions.add_fused(fused)
        functions.begin_evaluation()
        return convert(self.query(rewritten.text, rewritten.default_graph, functions.table))

    def background_nquads(self) -> bytes:
        """The background data (the default graph and the background graphs) as N-Quads, what
        a partition's store loads to have it whole."""
        with self._lock:
            graphs = [ox.DefaultGraph()] + [ox.NamedNode(g) for g in sorted(self._background)]
            quads = [q for g in graphs for q in self.oxigraph.quads_for_pattern(None, None, None, g)]
        return ox.serialize(quads, format=ox.RdfFormat.N_QUADS)

    def close(self) -> None:
        """Flush and release the Oxigraph store (an on-disk store's lock goes with it), even
        while something still holds this object."""
        with self._lock:
            if isinstance(self.oxigraph, ox.Store) and self.path:
                self.save_stats()
            self.generations.close()


class _PartsScan:
    """The elements of a document cut into parts, read part by part, each with the last part
    it is in (its timestamp and its content may be in different parts)."""

    def __init__(self, fmt: ox.RdfFormat, source: str, timestamp_predicate: str):
        self.fmt, self.source, self.timestamp_predicate = fmt, source, timestamp_predicate
        self.stamps: dict = {}
        self.graphs: dict = {}
        self.other = 0
        self.holder: dict = {}

    def add(self, part: bytes, write: PartWrite) -> None:
        scan = scan_document(part, self.fmt, self.source, self.timestamp_predicate)
        stamps = self.stamps
        if any(stamps[graph] != scan.stamps[graph] for graph in stamps.keys() & scan.stamps.keys()):
            raise RdfInputError("a graph has two timestamps", self.source)
        stamps.update(scan.stamps)
        self.graphs.update(scan.graphs)
        self.other += scan.other_default_triples
        self.holder.update(dict.fromkeys(scan.stamps, write))
        self.holder.update(dict.fromkeys(scan.graphs, write))

    def staged(self) -> list[StagedElement]:
        scan = DocumentScan(self.stamps, self.graphs, self.other)
        if scan.needs_rewriting:
            raise OptimisticLoadFailed("%s needs rewriting before it can be stored" % self.source)
        return _staged_from(scan, self.source, self.timestamp_predicate, self.holder)


def _staged_from(scan, source: str, timestamp_predicate: str, holder: dict | None = None) -> list[StagedElement]:
    """The elements a scanned document holds, in time order; `holder` gives the part being
    written that holds each (by graph term)."""
    ts_predicate = ox.NamedNode(timestamp_predicate)
    stamps = scan.stamps
    try:
        instants = parse_instants([literal.value for literal in stamps.values()])
    except (AttributeError, TemporalValueError):
        # Name the element whose timestamp is wrong.
        instants = [instant_of(literal, graph, source) for graph, literal in stamps.items()]
    holder = holder or {}
    staged = [StagedElement(g.value, instant, (ts_predicate, lit), holder.get(g))
              for (g, lit), instant in zip(stamps.items(), instants)]
    staged.sort(key=lambda s: s.timestamp)
    return staged
