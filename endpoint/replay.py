"""`rspstar replay`: the live engine, on a virtual clock, over recorded streams
(shared/conformance/README.md). Elements are published as the clock reaches their timestamps,
each stream's watermark follows them, and the engine does the rest exactly as it does live:
it decides the due instants, evaluates, applies R2S, emits and evicts. Live == replay holds by
construction: there is one runner."""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from store.errors import RdfInputError
from store.rdf_input import format_for_path
from store.stream_store import OptimisticLoadFailed, StagedElement, StreamStore
from translator.model import ContinuousQuery
from translator.temporal import format_instant
from translator.validate import compile_query

from .clock import VirtualClock
from .engine import Engine, EngineConfig
from .errors import UsageError

# Replay is offline, over the user's own files: the limits that protect a shared live engine
# do not apply (a replay may ask for any step, and SERVICE calls are the user's own).
_OFFLINE = dict(max_delay=0, max_range=2**62, max_reports_per_second=float("inf"), federation_allowed=None)
# What a live record carries about its delivery, and a replay's output leaves out.
_LIVE_ONLY = ("trigger", "latency_ms")
_QUERY_ID = "replay"


@dataclass
class ReplayInput:
    query_text: str
    streams: list[tuple[str, Path]]
    start: int          # evaluation instants t with start < t <= end
    end: int
    background: Path | None = None
    options: dict[str, str] = field(default_factory=dict)   # query options, as `--option` gives them


class Replay:
    """A replay in progress: the store, the engine and the elements not yet published.

    Stream files are written to the store up front (one Oxigraph load each) and their
    elements published to the stream index as the virtual clock reaches their timestamps:
    until then no query can see them."""

    def __init__(self, spec: ReplayInput, query: ContinuousQuery | None = None):
        self.spec = spec
        self.query = query or compile_query(spec.query_text)
        unread = [stream for stream, _ in spec.streams if stream not in self.query.streams]
        if unread:
            raise UsageError("the query reads no stream <%s> (it reads %s)" % (
                unread[0], ", ".join("<%s>" % s for s in sorted(self.query.streams)) or "none"))
        if spec.start > spec.end:
            raise UsageError("the replay starts after it ends (from %s, to %s)"
                             % (format_instant(spec.start), format_instant(spec.end)))
        try:
            self.store, pending = self._stage(optimistic=True)
        except OptimisticLoadFailed:
            # Some input needs the careful path (blank graph names, untimed graphs, a reused
            # graph name): start again with a fresh store, validating before writing.
            self.store, pending = self._stage(optimistic=False)
        heapq.heapify(pending)
        self.pending = pending
        self.clock = VirtualClock(spec.start)
        self.engine = Engine(self.store, self.clock, EngineConfig(**_OFFLINE))
        self.registered = self.engine.register(spec.query_text, _QUERY_ID, options=spec.options)

    def _stage(self, optimistic: bool) -> tuple[StreamStore, list]:
        store = StreamStore()
        spec = self.spec
        if spec.background is not None:
            store.load_background(spec.background.read_bytes(), format_for_path(spec.background),
                                  str(spec.background))
        # (timestamp, stream order, document position, ...): elements sharing a timestamp are
        # published in document order and never compared themselves.
        pending: list[tuple[int, int, int, str, StagedElement]] = []
        for order, (stream, path) in enumerate(spec.streams):
            stage = store.stage_document_optimistically if optimistic else store.stage_document
            result = stage(stream, path.read_bytes(), format_for_path(path), str(path))
            if result.untimed_graphs:
                raise RdfInputError("graph %s has no timestamp triple; a replay needs event time for every "
                                    "element" % result.untimed_graphs[0], str(path))
            pending.extend((e.timestamp, order, k, stream, e) for k, e in enumerate(result.staged))
        return store, pending

    def publish_until(self, instant: int) -> int:
        """Publish every element with τ <= instant (the virtual watermark)."""
        batches: dict[str, list[StagedElement]] = {}
        while self.pending and self.pending[0][0] <= instant:
            _, _, _, stream, element = heapq.heappop(self.pending)
            batches.setdefault(stream, []).append(element)
        return sum(self.store.publish(stream, elements) for stream, elements in batches.items())

    def run(self) -> Iterator[dict]:
        """The record of every evaluation in (start, end], as the engine emits it."""
        feed = self.registered.feed.subscribe()
        try:
            for instant in self.query.report_instants(self.spec.start, self.spec.end):
                self.publish_until(instant)
                for stream in self.query.streams:
                    self.store.advance_watermark(stream, instant)
                self.clock.set(instant)
                self.engine.tick()
                while not feed.empty():
                    record = feed.get_nowait()
                    yield {k: v for k, v in record.items() if k not in _LIVE_ONLY}
        finally:
            self.registered.feed.unsubscribe(feed)


def replay(spec: ReplayInput) -> Iterator[dict]:
    """The conformance JSON records of every evaluation in (start, end]."""
    return Replay(spec).run()
