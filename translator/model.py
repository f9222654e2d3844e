"""The query model: what a parsed RSP-QL* query means, independent of its text.

The syntax tree of the body (`syntax.py`) travels with the model so the rewriter can turn it
into SPARQL-star for any window bounds.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .temporal import format_duration, format_instant

if TYPE_CHECKING:
    from .syntax import ParsedBody


class R2S(enum.Enum):
    RSTREAM = "RSTREAM"
    ISTREAM = "ISTREAM"
    DSTREAM = "DSTREAM"


class QueryForm(enum.Enum):
    SELECT = "SELECT"
    CONSTRUCT = "CONSTRUCT"
    ASK = "ASK"


@dataclass(frozen=True)
class WindowDeclaration:
    """`FROM NAMED WINDOW iri ON stream [RANGE α STEP β START τ0]`, times in microseconds."""

    iri: str
    stream: str
    range: int
    step: int
    start: int = 0
    line: int = 0
    column: int = 0

    def close_at_or_before(self, instant: int) -> int | None:
        """The latest close x_i = τ0 + α + i·β with x_i <= instant, or None before the first."""
        first = self.start + self.range
        if instant < first:
            return None
        return first + ((instant - first) // self.step) * self.step

    def bounds_at(self, instant: int) -> tuple[int, int] | None:
        """The window `[x - α, x)` an evaluation at `instant` sees, or None if none closed yet."""
        close = self.close_at_or_before(instant)
        return None if close is None else (close - self.range, close)

    def closes_between(self, after: int, until: int) -> list[int]:
        """Every close x with after < x <= until."""
        first = self.start + self.range
        if until < first:
            return []
        i = 0 if after < first else (after - first) // self.step + 1
        closes = []
        x = first + i * self.step
        while x <= until:
            closes.append(x)
            x += self.step
        return closes

    def earliest_reachable(self, instant: int) -> int:
        """No window of an evaluation at or after `instant` opens before this instant."""
        bounds = self.bounds_at(instant)
        return self.start if bounds is None else bounds[0]

    def describe(self) -> dict:
        return {"iri": self.iri, "stream": self.stream, "range": format_duration(self.range),
                "step": format_duration(self.step), "start": format_instant(self.start)}


@dataclass
class ContinuousQuery:
    """A parsed RSP-QL* query."""

    text: str
    form: QueryForm
    r2s: R2S
    windows: dict[str, WindowDeclaration]
    body: "ParsedBody"
    name: str | None = None
    output_stream: str | None = None
    computed_every: int | None = None
    from_graphs: list[str] = field(default_factory=list)
    from_named_graphs: list[str] = field(default_factory=list)

    @property
    def streams(self) -> list[str]:
        return sorted({w.stream for w in self.windows.values()})

    def policy_origin(self) -> int:
        """τ0 of the query: the earliest START of its windows, else the epoch."""
        starts = [w.start for w in self.windows.values()]
        return min(starts) if starts else 0

    def report_instants(self, after: int, until: int) -> list[int]:
        """Evaluation instants in (after, until] under the query's report policy (spec §3)."""
        if self.computed_every is not None:
            origin, period = self.policy_origin(), self.computed_every
            k = max(0, (after - origin) // period + 1)
            instants = []
            t = origin + k * period
            while t <= until:
                instants.append(t)
                t += period
            return instants
        closes: set[int] = set()
        for window in self.windows.values():
            closes.update(window.closes_between(after, until))
        return sorted(closes)

    def next_report_instant(self, after: int) -> int | None:
        """The first evaluation instant strictly after `after` (None for a query without windows
        and without COMPUTED EVERY, which never reports by itself)."""
        if self.computed_every is not None:
            return self.report_instants(after, after + self.computed_every)[0]
        candidates = []
        for window in self.windows.values():
            first = window.start + window.range
            if after < first:
                candidates.append(first)
            else:
                candidates.append(first + ((after - first) // window.step + 1) * window.step)
        return min(candidates) if candidates else None

    def window_bounds(self, instant: int) -> dict[str, tuple[int, int]]:
        bounds = {}
        for iri, window in self.windows.items():
            b = window.bounds_at(instant)
            if b is not None:
                bounds[iri] = b
        return bounds
