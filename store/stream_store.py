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
from rspstar.translator.errors import TemporalValueError
from rspstar.translator.temporal import parse_instant, parse_instants
from rspstar.translator.vocabulary import (
    CLOSURE_PREFIX, PROV_GENERATED_AT_TIME, TIMESTAMPS_PREFIX, any_internal_graph, is_internal_graph, timestamps_graph,
)

from .background import Background
from .documents import Documents
from .entailment import Entailment
from .element_index import CountersFile, ElementIndex, StreamStats
from .keyed import KeyedElements, element_keys
from .staged import StagedElement, Stamps
from .errors import DuplicateElementError, StoreError
from .generations import Generations
from .isolation import READ_ONLY_ATTEMPTS, IsolatedCall, IsolatedResult
from .limits import CHECK_EVERY, EvaluationScope
from .terms import Guarded
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
        self.lock = self._lock = threading.RLock()   # `lock`: what the writers hold (writers.py)
        self.generations = Generations(path)
        self.write_error: str | None = None      # why the last write failed (on disk: see _write)
        self.compact_after = compact_after
        self._evicted_since_compaction = 0
        self._evicted_since_flush = 0
        self._index = ElementIndex()
        # Per (stream, key predicates): the stream's elements by key, for partitioned windows
        # (store/keyed.py), fed at every publish once a window asked for it.
        self._keyed: dict[tuple[str, tuple[str, ...]], KeyedElements] = {}
        self._staged: set[str] = set()
        self.background = Background(self)
        self.documents = Documents(self)
        self.entailment = Entailment(self)
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

    def flush_soon(self) -> None:
        """See Generations.flush_soon."""
        self.generations.flush_soon()

    def write(self, operation: str, *args) -> None:
        """Every write to Oxigraph goes through here, with the lock held (see Generations)
        but for the background write of a document's parts (`_stage_parts`). On disk, once a
        write has failed (a full disk), Oxigraph refuses every later one with the same error,
        space or not, until the store is opened again: the next write first opens it again
        (Generations.recover: in place once the disk has room, else a rebuild into a new
        generation; what it held is all there: a failed write is one transaction that left
        nothing), and fails as before while it cannot."""
        if self.write_error is not None:
            self._recover()
        try:
            self.generations.write(operation, *args)
        except OSError as e:
            if self.path is not None:
                self.write_error = str(e)
            raise

    def _recover(self) -> None:
        if self.generations.recover(self._lock):
            self.write_error = None

    def add_marker(self, quad: ox.Quad) -> None:
        """Record a bookkeeping quad (batch or background-load marker)."""
        with self._lock:
            self.write("add", quad)

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

    def view_key(self) -> tuple[str, int] | None:
        """Where the live Oxigraph store is on disk and how many writes it has taken (None in
        memory): a read-only view opened after this was read holds every one of them."""
        with self._lock:
            location = self.generations.location()
            return None if location is None else (location, self.generations.writes)

    def disk_bytes(self) -> int:
        return self.generations.disk_bytes()

    def _rebuild_index(self) -> None:
        for graph in list(self.oxigraph.named_graphs()):
            if isinstance(graph, ox.NamedNode) and graph.value.startswith(CLOSURE_PREFIX):
                self.write("remove_graph", graph)      # derived data, made again when read
                continue
            if isinstance(graph, ox.NamedNode) and graph.value.startswith(TIMESTAMPS_PREFIX):
                stream = unquote(graph.value[len(TIMESTAMPS_PREFIX):])
                quads = list(self.oxigraph.quads_for_pattern(None, None, None, graph))
                try:
                    instants = parse_instants([quad.object.value for quad in quads])
                except TemporalValueError:
                    quads, instants = self._drop_unreadable_stamps(stream, quads)
                stamps = Stamps()
                self._index.add_all(stream, [(quad.subject.value, instant, stamps(quad.predicate, quad.object))
                                             for quad, instant in zip(quads, instants)])
        for graph in self.oxigraph.named_graphs():
            if isinstance(graph, ox.NamedNode) and graph.value not in self._index \
                    and not is_internal_graph(graph.value):
                self.background.names.add(graph.value)

    def _drop_unreadable_stamps(self, stream: str, quads: list[ox.Quad]) -> tuple[list[ox.Quad], list[int]]:
        """The timestamp quads of a stream whose instants are read, and those instants; the
        elements whose timestamps are not (a store written before instants outside the years
        0001-9999 were refused: one stamped 10000-01-01 moved its stream's watermark past every
        reading to come) are removed, named in the log, rather than stop the engine's start."""
        kept, instants, dropped = [], [], []
        for quad in quads:
            try:
                instants.append(parse_instant(quad.object.value))
                kept.append(quad)
            except TemporalValueError as e:
                dropped.append((quad, e))
        for quad, _ in dropped:
            self.write("remove_graph", quad.subject)
            self.write("remove", quad)
        log.error("%d element(s) of <%s> removed from the store at its opening, their timestamps unreadable: %s",
                  len(dropped), stream, "; ".join("<%s>: %s" % (quad.subject.value, e) for quad, e in dropped[:5]))
        return kept, instants

    # -- writing elements ---------------------------------------------------------------------
    def is_element(self, graph: str) -> bool:
        """A stream element's graph, published or staged."""
        return graph in self._index or graph in self._staged

    def _taken(self, graph: str) -> bool:
        return self.is_element(graph) or graph in self.background.names

    def _all_new(self, graphs: list[str]) -> bool:
        """No graph taken, reserved or repeated: checked a set at a time, in a few calls that
        run in C (staging runs beside the write of its file: bench/out/NOTES.md#new-graphs-as-a-set)."""
        distinct = set(graphs)
        return (len(distinct) == len(graphs) and not self._index.holds_any(distinct) and self._staged.isdisjoint(distinct)
                and self.background.names.isdisjoint(distinct) and not any_internal_graph(graphs))

    def all_new(self, graphs: Iterable[str]) -> bool:
        """Whether elements of these graph names may all be written (none taken, reserved or repeated)."""
        with self._lock:
            return self._all_new(list(graphs))

    def mark_staged(self, graphs: Iterable[str]) -> None:
        """These graphs are written elements, not yet published (held under the lock)."""
        self._staged.update(graphs)

    def check_new(self, graphs: Iterable[str]) -> None:
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
            self.check_new(e.graph for elements in elements_by_stream.values() for e in elements)
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
            self.write("extend", quads)
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
            self.check_new(element.graph for _, staged in by_stream.values() for element in staged)
            self.write("load", b"".join([text for text, _ in by_stream.values()] + [tail]), ox.RdfFormat.N_QUADS, None)
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
            for (keyed_stream, _), keyed in self._keyed.items():
                if keyed_stream == stream:
                    self._key_elements(keyed, [(element.timestamp, element.graph) for element in fresh])
            if fresh:
                self._index.stats_of(stream).ingested += len(fresh)
                self.entailment.published([element.graph for element in fresh])
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

    def waiting(self, held):
        """Hold the context manager `held` (a lock, another's work), its wait not counted as an
        evaluation's time: the store itself runs under no query's scope (ScopedStore's does)."""
        return held

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

    def timed_elements_in(self, stream: str, opens: int, closes: int) -> list[tuple[int, str]]:
        """(τ, graph name) of the elements of `stream` with opens <= τ < closes, in stream order."""
        with self._lock:
            return self._index.timed_between(stream, opens, closes)

    def count_between(self, stream: str, opens: int, closes: int) -> int:
        with self._lock:
            return self._index.count_between(stream, opens, closes)

    def evicted_before(self, stream: str) -> int | None:
        """Every element of `stream` with τ below this has been evicted (None: none was)."""
        with self._lock:
            stats = self._index.known(stream)
            return None if stats is None else stats.evicted_before

    # -- graphs the engine keeps for its queries (a fact window's facts, spec §6.13) ---------------
    def holds(self, quad: ox.Quad) -> bool:
        with self._lock:
            return quad in self.oxigraph

    def quads_in(self, graph: ox.NamedNode, subject=None, predicate=None, object=None) -> list[ox.Quad]:
        with self._lock:
            return list(self.oxigraph.quads_for_pattern(subject, predicate, object, graph))

    def change_graph(self, added: list[ox.Quad], removed: list[ox.Quad]) -> None:
        with self._lock:
            for quad in removed:
                self.write("remove", quad)
            if added:
                self.write("extend", added)

    def replace_graph(self, graph: ox.NamedNode, quads: list[ox.Quad]) -> None:
        """The graph's content becomes `quads` (none: the graph goes)."""
        with self._lock:
            self.write("remove_graph", graph)
            if quads:
                self.write("extend", quads)

    # -- partitioned windows (spec §6.9) ----------------------------------------------------------
    def _keyed_view(self, stream: str, keys: tuple[str, ...]) -> KeyedElements:
        """The stream's elements by `keys` (under the lock), made from what it holds the first
        time a window asks."""
        keyed = self._keyed.get((stream, keys))
        if keyed is None:
            keyed = self._keyed[(stream, keys)] = KeyedElements(keys)
            self._key_elements(keyed, self._index.timed_between(stream, -2**63, 2**63 - 1))
        return keyed

    def _key_elements(self, keyed: KeyedElements, elements: list[tuple[int, str]]) -> None:
        """Read the keys of published elements (their asserted `?s p ?o` triples) into `keyed`."""
        store = self.oxigraph
        predicates = [ox.NamedNode(p) for p in keyed.keys]
        for timestamp, graph in elements:
            name = ox.NamedNode(graph)
            values = [[str(quad.object) for quad in store.quads_for_pattern(None, p, None, name)] for p in predicates]
            keyed.add(timestamp, graph, element_keys(values))

    def partition_window(self, stream: str, keys: tuple[str, ...], through: int, size: int) -> CountContent | None:
        with self._lock:
            return self._keyed_view(stream, keys).window(through, size)

    def next_keyed_arrival(self, stream: str, keys: tuple[str, ...], after: int) -> int | None:
        with self._lock:
            return self._keyed_view(stream, keys).next_arrival(after)

    def partition_reach(self, stream: str, keys: tuple[str, ...], instant: int, size: int) -> int:
        with self._lock:
            return self._keyed_view(stream, keys).reach(instant, size)

    def evict_before(self, stream: str, instant: int) -> int:
        """Drop the elements of `stream` with τ < instant (no window can reach them any more)."""
        with self._lock:
            doomed = self._index.cut_before(stream, instant)
            if not doomed:
                return 0
            for (keyed_stream, _), keyed in self._keyed.items():
                if keyed_stream == stream:
                    keyed.cut_before(instant)
            # The index keeps each element's timestamp triple as stored, so it is removed
            # directly: no SPARQL update is parsed and matched per close (bench/eviction.py;
            # removing the element graphs costs the most either way).
            if self.remove_evicted:
                ts_graph = ox.NamedNode(timestamps_graph(stream))
                for graph, (predicate, literal) in doomed:
                    name = ox.NamedNode(graph)
                    self.write("remove_graph", name)
                    self.write("remove", ox.Quad(name, predicate, literal, ts_graph))
            self.entailment.forget(graph for graph, _ in doomed)
            self._evicted_since_compaction += len(doomed)
            self._evicted_since_flush += len(doomed)
            return len(doomed)

    def streams(self) -> dict[str, StreamStats]:
        with self._lock:
            return self._index.snapshot()

    # -- queries ---------------------------------------------------------------------------------
    def query(self, sparql: str, default_graph: list | None = None, custom_functions=None,
              named_graphs: list[str] | None = None):
        """Run SPARQL-star against the store. SyntaxError from Oxigraph propagates (the
        translator maps its position back to the user's text)."""
        kwargs = {}
        if default_graph is not None:
            kwargs["default_graph"] = [ox.NamedNode(g) if isinstance(g, str) else g for g in default_graph]
        if named_graphs is not None:
            kwargs["named_graphs"] = [ox.NamedNode(g) for g in named_graphs]
        if custom_functions:
            kwargs["custom_functions"] = custom_functions
        try:
            return self.oxigraph.query(sparql, **kwargs)
        except OSError as e:
            raise StoreError("store read failed: %s" % e) from e

    def evaluate(self, template, elements: dict[str, list[str]], functions, convert,
                 scope: EvaluationScope | None = None, share: int = 1):
        """A compiled query (a translator Template) over these window contents (graph names per
        window) and the background, with the `rspu:` functions of `functions`, its result read
        by `convert` (the functions are called as the solutions are read). Under a query's
        `scope` (store.limits) the result is read within the evaluation's budget, on this
        thread or in a worker process; `share`: how many queries the result serves (a group's
        query evaluating the constants of all its members). Under RDFS entailment (spec §6.11) the
        elements are read through their closure graphs and the background default graph with its
        inferred triples (store/entailment.py)."""
        with self.background.reading():
            closures = None
            default_graph = template.default_graph
            budget = scope.budget if scope is not None else None
            if template.entailment:     # closed within the evaluation's limits, on its time
                dataset = self.entailment.dataset(template.default_graph, budget)
                closures = self.entailment.closures(dataset, (e for graphs in elements.values() for e in graphs),
                                                    budget)
                default_graph = dataset.default_graph
            rewritten = template.instantiate(elements, self.background.graphs(), closures)
            rewritten.default_graph = default_graph
            if budget is None:
                if not template.calls_rspu:
                    return convert(self.query(rewritten.text, rewritten.default_graph))
                table = functions.table_for(rewritten.fused_functions)
                functions.begin_evaluation()
                return convert(self.query(rewritten.text, rewritten.default_graph, table))
            inputs = sum(len(names) for names in elements.values())
            key = self.view_key()
            started = budget.elapsed()          # less the time spent waiting for a worker process
            if key is not None and scope.isolates(inputs):
                value = self._evaluate_isolated(key, rewritten, template.calls_rspu, functions, convert, scope, share)
            else:
                value = self._evaluate_guarded(rewritten, template.calls_rspu, functions, convert, budget, share)
            scope.record(inputs, budget.elapsed() - started)
            return value

    def _evaluate_guarded(self, rewritten, calls_rspu: bool, functions, convert, budget, share: int):
        """On this thread: stopped between solutions (store.terms.Guarded)."""
        budget.check()
        table = None
        if calls_rspu:
            table = functions.table_for(rewritten.fused_functions)
            functions.begin_evaluation()
        result = self.query(rewritten.text, rewritten.default_graph, table)
        if isinstance(result, ox.QueryBoolean):
            budget.check()
            return convert(result)
        guarded = Guarded(result, budget, budget.rows_left(share), CHECK_EVERY)
        try:
            value = convert(guarded)
            budget.count(guarded.read, share)
        finally:
            del result, guarded     # dropped here, on the thread that made them
        return value

    def _evaluate_isolated(self, key: tuple[str, int], rewritten, calls_rspu: bool, functions, convert, scope,
                           share: int):
        """In a worker process over a read-only view of this store (as of `key`, view_key):
        killed at the time limit, the query's removal, the engine's stop or past its memory."""
        budget = scope.budget
        bound = budget.rows_left(share)
        call = IsolatedCall(rewritten.text, IsolatedCall.graph_names(rewritten.default_graph),
                            tuple(rewritten.fused_functions) if calls_rspu else None,
                            functions.cache_enabled, bound)
        for _ in range(READ_ONLY_ATTEMPTS):
            outcome = scope.workers.run(key[0], call, budget, key[1])
            if outcome[0] != "unreadable":
                break
            # A rebuild may have switched generations, or Oxigraph compacted away files that
            # the views other workers keep for this count of writes still list: the next try
            # opens a fresh view (no count: not one kept), whichever worker takes it.
            key = ((self.view_key() or key)[0], None)
        functions.counts.calls += outcome[-2]
        functions.counts.computed += outcome[-1]
        kind = outcome[0]
        if kind == "too_large":
            raise budget.limits.too_large(max(outcome[1], budget.limits.max_rows))
        if kind in ("error", "unreadable"):
            raise StoreError(outcome[1])
        if kind == "boolean":
            return convert(outcome[1])
        budget.count(len(outcome[2]), share)
        return convert(IsolatedResult(outcome[1], outcome[2]))

    def result_bound(self) -> int | None:
        """The most rows an evaluation may produce from results read here (a join of windows'
        rows made in Python): no bound outside a query's scope (ScopedStore)."""
        return None

    def close(self) -> None:
        """Flush and release the Oxigraph store (an on-disk store's lock goes with it), even
        while something still holds this object."""
        with self._lock:
            try:
                if isinstance(self.oxigraph, ox.Store) and self.path:
                    self.save_stats()
            except OSError as e:       # a full disk: the counters as last saved; the store still let go
                log.error("the streams' counters could not be saved (%s)", e)
            self.generations.close()


class ScopedStore:
    """A stream store seen by one query's evaluator: every read as the store's own, its
    evaluations under the query's scope (store.limits: the time limit, the bound on rows, the
    stop its removal sets, the worker process a call may go to)."""

    __slots__ = ("_store", "scope")     # one object per registered query for the cycle collector

    def __init__(self, store: StreamStore, scope: EvaluationScope):
        self._store = store
        self.scope = scope

    def __getattr__(self, name):
        return getattr(self._store, name)

    # What every evaluation reads, delegated directly: a lookup that falls through to
    # __getattr__ costs several times the call.
    @property
    def background(self) -> Background:
        return self._store.background

    def watermark(self, stream: str) -> int | None:
        return self._store.watermark(stream)

    def late_count(self, stream: str) -> int:
        return self._store.late_count(stream)

    def waiting(self, held):
        """`held`, its wait left out of the running evaluation's time (store.limits)."""
        budget = self.scope.budget
        return held if budget is None else budget.waiting(held)

    def elements_in(self, stream: str, opens: int, closes: int) -> list[str]:
        return self._store.elements_in(stream, opens, closes)

    def evaluate(self, template, elements: dict[str, list[str]], functions, convert, share: int = 1):
        return self._store.evaluate(template, elements, functions, convert, self.scope, share)

    @property
    def entailment(self) -> "ScopedEntailment":
        return ScopedEntailment(self._store.entailment, self.scope)

    def result_bound(self) -> int | None:
        return self.scope.limits.max_rows


class ScopedEntailment:
    """A store's entailment seen by one query's evaluator: what it computes is charged to the
    evaluation running (store.entailment)."""

    __slots__ = ("_entailment", "_scope")

    def __init__(self, entailment: Entailment, scope: EvaluationScope):
        self._entailment = entailment
        self._scope = scope

    def __getattr__(self, name):
        return getattr(self._entailment, name)

    def schema_digest(self, from_graphs: list[str] | None) -> str:
        return self._entailment.schema_digest(from_graphs, self._scope.budget)
