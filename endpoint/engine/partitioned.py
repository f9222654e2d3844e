"""Partitioned queries on the driver (docs/partitioned-queries.md): a query run per key group
on Spark's executors (store/partitions.py) still goes S2R -> R2R -> R2S here, instant by
instant, from what its key groups told of the instant.

- `KeyGroupWindows` is its S2R: its instants known in advance (the others come from the key
  groups), its windows as the groups listed them, whether to report from the windows the
  groups found holding elements;
- `KeyGroupRows` is its R2R: the rows the groups found, united.
"""
from __future__ import annotations

from dataclasses import dataclass

from rspstar.translator.model import ContinuousQuery, QueryForm
from rspstar.translator.policy import ReportPolicy
from rspstar.translator.windows import StreamView, WindowContent

from .r2r import Relation, lines_with_triples


@dataclass(frozen=True)
class KeyGroupReport:
    """What a partitioned query's key groups told of one instant: the rows of all of them
    (SELECT: {var: term}; CONSTRUCT: N-Triples lines; ASK: [true] or nothing), the elements
    their windows held, the windows holding some, and the interval each window lists when the
    windows' contents depend on the elements (partitioned windows; None: as the query's time
    windows list them)."""

    rows: list
    elements: int = 0
    holding: frozenset[str] = frozenset()
    windows: dict[str, tuple[int, int]] | None = None


class KeyGroupWindows:
    """S2R of a partitioned query: what its key groups told (`tell`) of the instant evaluated
    next. Its instants that depend on the data come from the groups; only the others are known
    here. Its windows are read on the executors: the engine keeps nothing of them for it."""

    def __init__(self, policy: ReportPolicy, view: StreamView):
        self.policy = policy
        self.view = view
        self.told: KeyGroupReport | None = None

    def tell(self, report: KeyGroupReport) -> None:
        self.told = report

    def next_instant(self, after: int) -> int | None:
        return self.policy.next_fixed_instant(after)

    def contents(self, instant: int) -> dict[str, WindowContent]:
        if self.told.windows is not None:
            return {w: WindowContent(interval) for w, interval in self.told.windows.items()}
        return {w.iri: c for w in self.policy.windows if (c := w.content_at(instant, self.view)) is not None}

    def reports(self, instant: int, contents: dict[str, WindowContent]) -> bool:
        return self.policy.report_where(self.told.holding.__contains__)

    def retention(self, after: int) -> dict[str, int]:
        return {}


class KeyGroupRows:
    """R2R of a partitioned query: the rows its key groups found at the instant (told with
    them), united; a CONSTRUCT triple two groups made is one triple."""

    kind = "partitioned"
    reads_store = False

    def __init__(self, query: ContinuousQuery):
        self.query = query
        self.told: KeyGroupReport | None = None

    def tell(self, report: KeyGroupReport) -> None:
        self.told = report

    def relation(self, contents: dict[str, WindowContent]) -> Relation:
        rows, form = self.told.rows, self.query.form
        if form is QueryForm.CONSTRUCT:
            value = lines_with_triples(list(dict.fromkeys(rows)))
        else:
            value = rows if form is QueryForm.SELECT else bool(rows)
        return Relation(form, value, self.told.elements)

    def close(self) -> None:
        pass
