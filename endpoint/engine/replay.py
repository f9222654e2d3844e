"""`rspstar replay`: the live engine, on a virtual clock, over recorded streams
(tests/conformance/README.md). Elements are published as the clock reaches their timestamps,
each stream's watermark follows them, and the engine does the rest exactly as it does live:
it decides the due instants, evaluates, applies R2S, emits and evicts. Live == replay holds by
construction: there is one runner. Several queries replay in one pass over the streams, as
they would run together live."""
from __future__ import annotations

import bisect
import heapq
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pyoxigraph as ox

from rspstar.store.errors import RdfInputError
from rspstar.store.rdf_input import format_for_path
from rspstar.store.documents import OptimisticLoadFailed
from rspstar.store.staged import StagedColumns, StagedElement
from rspstar.store.stream_store import StreamStore
from rspstar.translator.model import ContinuousQuery
from rspstar.translator.temporal import format_instant
from rspstar.translator.options import QueryOptions
from rspstar.translator.validate import compile_query
from rspstar.translator.variants import CompiledShapes

from .clock import VirtualClock
from .runner import Runner, EngineConfig
from .errors import UsageError

# Replay is offline, over the user's own files: the limits that protect a shared live engine
# do not apply (a replay may ask for any step, and SERVICE calls are the user's own).
# Its records go to its output: nobody polls a replay's history.
_OFFLINE = dict(max_delay=0, max_range=2**62, max_reports_per_second=float("inf"), federation_allowed=None,
                history=0, max_result_rows=None, landmark_elements=2**62)
# What a live record carries about its delivery, and a replay's output leaves out.
_LIVE_ONLY = ("trigger", "latency_ms")


@dataclass(frozen=True)
class Document:
    """Input given as data rather than a file (the Python API's): the name messages give it,
    its bytes and its format."""
    name: str
    data: bytes
    format: ox.RdfFormat


def _read(source: Path | Document) -> tuple[bytes, ox.RdfFormat, str]:
    if isinstance(source, Document):
        return source.data, source.format, source.name
    return source.read_bytes(), format_for_path(source), str(source)


@dataclass
class ReplayInput:
    queries: dict[str, str]     # query id -> RSP-QL* text, in the order they are registered
    streams: list[tuple[str, Path | Document]]
    start: int          # evaluation instants t with start < t <= end
    end: int
    background: Path | Document | None = None
    options: dict[str, str] = field(default_factory=dict)   # query options, as `--option` gives them
    # Per query id, the IRI its text was read from (a file's `file:` IRI), which its relative
    # IRIs resolve against unless the options give a base.
    bases: dict[str, str] = field(default_factory=dict)

    @classmethod
    def single(cls, query_text: str, streams: list[tuple[str, Path | Document]], start: int, end: int,
               background: Path | Document | None = None, options: dict[str, str] | None = None) -> "ReplayInput":
        return cls({REPLAY_ID: query_text}, streams, start, end, background, dict(options or {}))


REPLAY_ID = "replay"


class Replay:
    """A replay in progress: the store, the engine and the elements not yet published.

    Stream files are read up front and written to the store (one Oxigraph load each, or a
    large file part by part in the background while the first windows are evaluated), and
    their elements published to the stream index as the virtual clock reaches their
    timestamps: until then no query can see them."""

    def __init__(self, spec: ReplayInput):
        self.spec = spec
        if not spec.queries:
            raise UsageError("a replay needs a query")
        self.options = {query_id: self.query_options(query_id) for query_id in spec.queries}
        given = tuple(stream for stream, _ in spec.streams)
        # Query files differing only in constants (a thousand sensors') are parsed once, and
        # the runner reads their constants from the tree kept.
        self.shapes = CompiledShapes()
        self.queries = {}
        for query_id, text in spec.queries.items():
            options = QueryOptions.from_pairs(self.options[query_id])
            self.queries[query_id] = compile_query(text, dialect=options.dialect, start=options.start,
                                                   base=options.base, streams=options.streams or given,
                                                   shapes=self.shapes if options.share_constants else None)
        read = set().union(*(q.streams for q in self.queries.values()))
        unread = [stream for stream, _ in spec.streams if stream not in read]
        if unread:
            raise UsageError("no query reads stream <%s> (they read %s)" % (
                unread[0], ", ".join("<%s>" % s for s in sorted(read)) or "none"))
        if spec.start > spec.end:
            raise UsageError("the replay starts after it ends (from %s, to %s)"
                             % (format_instant(spec.start), format_instant(spec.end)))
        try:
            self.store, pending = self._stage(optimistic=True)
        except OptimisticLoadFailed:
            # Some input needs the careful path (blank graph names, untimed graphs, a reused
            # graph name): start again with a fresh store, validating before writing.
            self.store, pending = self._stage(optimistic=False)
        self.pending = pending
        self.clock = VirtualClock(spec.start)
        self.engine = self._runner()
        self.registered = {query_id: self.engine.register(text, query_id, options=self.options[query_id],
                                                          compiled=self.queries[query_id])
                           for query_id, text in spec.queries.items()}

    def query_options(self, query_id: str) -> dict[str, str]:
        """The options of one query: the replay's, with its own base unless they give one."""
        options = dict(self.spec.options)
        if "base" not in options and query_id in self.spec.bases:
            options["base"] = self.spec.bases[query_id]
        return options

    @property
    def query(self) -> ContinuousQuery:
        """The query of a one-query replay."""
        [query] = self.queries.values()
        return query

    def _new_store(self) -> StreamStore:
        # Every stream file is in the store from the start, so memory peaks there; rebuilding
        # the store after evictions (what keeps a live engine bounded) would lower nothing and
        # cost a copy of what is left, and removing evicted elements from Oxigraph frees no
        # memory in a store that is never rebuilt: eviction only drops them from the index
        # (bench/out/NOTES.md#replay-store).
        return StreamStore(compact_after=2**62, remove_evicted=False)

    def _runner(self) -> Runner:
        """The engine the replay drives (a subclass may give another store or other settings:
        the differential test replays over an on-disk store with evaluations in workers)."""
        return Runner(self.store, self.clock, EngineConfig(**_OFFLINE), shapes=self.shapes)

    def _stage(self, optimistic: bool) -> tuple[StreamStore, dict[str, "_Pending"]]:
        store = self._new_store()
        spec = self.spec
        if spec.background is not None:
            store.background.load(*_read(spec.background))
        staged: dict[str, list[StagedColumns]] = {}
        for stream, source in spec.streams:
            stage = store.documents.stage_optimistically if optimistic else store.documents.stage
            data, fmt, name = _read(source)
            result = stage(stream, data, fmt, name)
            if result.untimed_graphs:
                raise RdfInputError("graph %s has no timestamp triple; a replay needs event time for every "
                                    "element" % result.untimed_graphs[0], name)
            staged.setdefault(stream, []).append(result.columns)
        return store, {stream: _Pending(StagedColumns.merged(columns)) for stream, columns in staged.items()}

    def publish_until(self, instant: int) -> int:
        """Publish every element with τ <= instant."""
        return sum(self.store.publish(stream, pending.take_through(instant))
                   for stream, pending in self.pending.items())

    def candidate_instants(self) -> Iterator[int]:
        """Every instant in (start, end] at which some query may be due: the instants its
        policy fixes in advance and, where a policy reports as elements arrive (count windows,
        content change), every element's timestamp. The engine decides which are due."""
        start, end = self.spec.start, self.spec.end
        policies = [registered.evaluator.policy for registered in self.registered.values()]
        sources = [p.fixed_instants(start, end) for p in policies]
        if any(p.arrivals for p in policies):
            sources.append(sorted({timestamp for pending in self.pending.values()
                                   for timestamp in pending.timestamps_after(start) if timestamp <= end}))
        for instant, _ in itertools.groupby(heapq.merge(*sources)):
            yield instant

    def failures(self) -> list[tuple[str, str, str]]:
        """(query id, instant, error) of each query that failed during the replay."""
        return [(query_id, format_instant(registered.status.failed_at or 0), registered.status.last_error or "")
                for query_id, registered in self.registered.items() if registered.status.state == "failed"]

    def run(self) -> Iterator[tuple[str, dict]]:
        """(query id, record) of every evaluation in (start, end], instant by instant, as the
        engine emits them."""
        feeds = {query_id: registered.feed.subscribe(backlog=0) for query_id, registered in self.registered.items()}
        streams = set().union(*(q.streams for q in self.queries.values()))
        try:
            for instant in self.candidate_instants():
                self.publish_until(instant)
                for stream in streams:
                    # Every element with τ <= instant is in: the streams are complete past it.
                    self.store.advance_watermark(stream, instant + 1)
                self.clock.set(instant)
                self.engine.tick()
                for query_id, feed in feeds.items():
                    for record in feed.drain():
                        yield query_id, {k: v for k, v in record.items() if k not in _LIVE_ONLY}
        finally:
            for query_id, feed in feeds.items():
                self.registered[query_id].feed.unsubscribe(feed)


class _Pending:
    """A stream's elements not yet published, in time order (ties in file order, then in
    document order), kept as columns (StagedColumns: a replay holds every element of its
    files here)."""

    def __init__(self, columns: StagedColumns):
        self.columns = columns
        self.timestamps = columns.timestamps
        self.taken = 0          # how many have been published

    def take_through(self, instant: int) -> list[StagedElement]:
        """The elements with τ <= instant not taken yet."""
        start = self.taken
        self.taken = bisect.bisect_right(self.timestamps, instant, start)
        return self.columns.elements(start, self.taken)

    def timestamps_after(self, instant: int) -> list[int]:
        """The timestamps > instant of the elements not taken yet."""
        return self.timestamps[bisect.bisect_right(self.timestamps, instant, self.taken):]
