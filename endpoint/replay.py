"""`rspstar replay`: evaluate a query over recorded streams in event time on a virtual clock
(shared/conformance/README.md). Elements enter the store as the clock reaches their
timestamps and leave it once no window can reach them, as in a live run."""
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

from .errors import UsageError
from .evaluation import Evaluation, EvaluationOptions, QueryEvaluator


@dataclass
class ReplayInput:
    query_text: str
    streams: list[tuple[str, Path]]
    start: int          # evaluation instants t with start < t <= end
    end: int
    background: Path | None = None
    options: EvaluationOptions = field(default_factory=EvaluationOptions)


class Replay:
    """A replay in progress: the store, the evaluator and the elements not yet published.

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
        self.evaluator = QueryEvaluator(self.query, self.store, spec.options)

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

    def run(self) -> Iterator[Evaluation]:
        for instant in self.query.report_instants(self.spec.start, self.spec.end):
            self.publish_until(instant)
            evaluation = self.evaluator.evaluate(instant)
            if evaluation is not None:
                yield evaluation
            for stream, bound in self.evaluator.retention_bounds(instant).items():
                self.store.evict_before(stream, bound)


def replay(spec: ReplayInput) -> Iterator[dict]:
    """The conformance JSON records of every evaluation in (start, end]."""
    for evaluation in Replay(spec).run():
        yield evaluation.record()
