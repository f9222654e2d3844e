"""`rspstar replay`: evaluate a query over recorded streams in event time on a virtual clock
(shared/conformance/README.md). Elements enter the store as the clock reaches their
timestamps and leave it once no window can reach them, as in a live run."""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from store.errors import RdfInputError
from store.rdf_input import Element, format_for_path, read_elements
from store.stream_store import StreamStore
from translator.model import ContinuousQuery
from translator.uncertainty import FunctionLibrary
from translator.validate import compile_query

from .evaluation import Evaluation, EvaluationOptions, QueryEvaluator


@dataclass
class ReplayInput:
    query_text: str
    streams: list[tuple[str, Path]]
    start: int          # evaluation instants t with start < t <= end
    end: int
    background: Path | None = None
    options: EvaluationOptions = field(default_factory=EvaluationOptions)


def read_stream_file(path: Path) -> list[Element]:
    result = read_elements(path.read_bytes(), str(path), format_for_path(path))
    if result.untimed_graphs:
        raise RdfInputError("graph %s has no timestamp triple; a replay needs event time for every element"
                            % result.untimed_graphs[0], str(path))
    return result.elements


class Replay:
    """A replay in progress: the store, the evaluator and the elements not yet ingested."""

    def __init__(self, spec: ReplayInput, query: ContinuousQuery | None = None):
        self.spec = spec
        self.functions = FunctionLibrary(cache=spec.options.rspu_cache)
        self.query = query or compile_query(spec.query_text, self.functions)
        self.store = StreamStore()
        if spec.background is not None:
            self.store.load_background(spec.background.read_bytes(), format_for_path(spec.background),
                                       str(spec.background))
        read_streams = set(self.query.streams)
        pending: list[tuple[int, int, str, Element]] = []
        for order, (stream, path) in enumerate(spec.streams):
            elements = read_stream_file(path)
            if stream in read_streams:
                pending.extend((e.timestamp, order, stream, e) for e in elements)
        heapq.heapify(pending)
        self.pending = pending
        self.evaluator = QueryEvaluator(self.query, self.store, spec.options, self.functions)

    def ingest_until(self, instant: int) -> int:
        """Move every element with τ <= instant into the store (the virtual watermark)."""
        batches: dict[str, list[Element]] = {}
        while self.pending and self.pending[0][0] <= instant:
            _, _, stream, element = heapq.heappop(self.pending)
            batches.setdefault(stream, []).append(element)
        for stream, elements in batches.items():
            self.store.add_elements(stream, elements)
        return sum(len(e) for e in batches.values())

    def run(self) -> Iterator[Evaluation]:
        for instant in self.query.report_instants(self.spec.start, self.spec.end):
            self.ingest_until(instant)
            evaluation = self.evaluator.evaluate(instant)
            if evaluation is not None:
                yield evaluation
            for stream, bound in self.evaluator.retention_bounds(instant).items():
                self.store.evict_before(stream, bound)


def replay(spec: ReplayInput) -> Iterator[dict]:
    """The conformance JSON records of every evaluation in (start, end]."""
    for evaluation in Replay(spec).run():
        yield evaluation.record()
