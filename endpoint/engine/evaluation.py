"""One continuous query evaluated at an instant, as the RSP model composes it (spec §3):

    S2R  the query's instants, what each of its windows holds at one and whether the
         evaluation there is reported, from its report policy and its windows (s2r.py);
    R2R  the query's rows over those contents, computed by the one strategy chosen for the
         query when it was registered (r2r.py: whole windows, incremental ranges, a join; a
         partitioned query's, the rows its key groups found on Spark's executors);
    R2S  RStream, IStream or DStream over consecutive evaluations (r2s.py).

The same `QueryEvaluator` serves `rspstar replay` (virtual clock) and the live scheduler, so
live results equal what a replay of the same input gives.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rspstar.config.schema import default
from rspstar.store.stream_store import StreamStore
from rspstar.translator.model import ContinuousQuery, QueryForm, WindowContent
from rspstar.translator.options import QueryOptions, r2r_plan
from rspstar.translator.policy import ReportPolicy, report_policy
from rspstar.translator.temporal import format_instant
from rspstar.translator.uncertainty import FunctionLibrary

from .facts import WindowView, fact_states
from .r2r import KeyGroupRows, Relation, Strategy, lines_with_triples, strategy_for
from .r2s import R2SOperator, r2s_operator
from .s2r import S2R, KeyGroupReport, KeyGroupWindows, ReadWindows
from .sharing import ConstantGroups, RangeResults


@dataclass
class Evaluation:
    """What one evaluation emitted, after R2S."""

    time: int
    windows: dict[str, tuple[int, int]]
    form: QueryForm
    rows: list = field(default_factory=list)   # SELECT: {var: term}; CONSTRUCT: N-Triples lines
    triples: list = field(default_factory=list)  # CONSTRUCT: the emitted triples as terms
    boolean: bool | None = None
    elements: int = 0                          # elements in all windows together
    seconds: float = 0.0                       # time spent evaluating

    def results(self) -> int:
        """How many results it emitted: rows, or one answer."""
        return len(self.rows) if self.boolean is None else 1

    def record(self, text: Callable[[int], str] = format_instant, **live) -> dict:
        """The conformance JSON line (tests/conformance/README.md), and `live`'s keys after it;
        `text` writes its instants (format_instant, or an InstantTexts keeping recent ones)."""
        line: dict = {
            "time": text(self.time),
            "windows": {w: [text(lo), text(hi)] for w, (lo, hi) in self.windows.items()},
        }
        if self.form is QueryForm.SELECT:
            line["bindings"] = self.rows
        elif self.form is QueryForm.CONSTRUCT:
            line["triples"] = self.rows
        else:
            line["boolean"] = self.boolean
        if live:
            line.update(live)
        return line


def _solution_key(row: dict):
    return tuple(sorted(row.items()))


def _triple_key(row: tuple):
    return row[0]


class QueryEvaluator:
    """Evaluates one registered query at successive instants, keeping its R2S state and its
    fact windows' facts."""

    def __init__(self, query: ContinuousQuery, store: StreamStore, options: QueryOptions = QueryOptions(),
                 functions: FunctionLibrary | None = None, shared: RangeResults | None = None,
                 groups: ConstantGroups | None = None, policy: ReportPolicy | None = None,
                 query_id: str = "query", landmark_elements: int = default("engine.landmark_elements")):
        self.store = store
        # What the windows read: the store, and the facts of the query's fact windows (None where
        # a query has none: a thousand queries' empty dicts would be objects for Python's full
        # collections to scan).
        self.facts = fact_states(query, store, query_id) or None
        self.view = WindowView(store, self.facts) if self.facts else store
        self.options = options
        self.functions = functions or FunctionLibrary(cache=options.rspu_cache)
        self.functions.cache_enabled = options.rspu_cache
        self.policy = policy if policy is not None else report_policy(query, options.report)
        self.s2r: S2R
        self.r2r: Strategy | KeyGroupRows
        if options.partition is None:
            self.s2r = ReadWindows(self.policy, self.view, landmark_elements)
            self.r2r = strategy_for(r2r_plan(query, self.policy, options), query, store, options,
                                    self.functions, shared, groups)
        else:       # its windows and rows evaluated per key group on Spark's executors
            self.s2r = KeyGroupWindows(self.policy, self.view)
            self.r2r = KeyGroupRows(query)
        # A member of a group of queries differing in constants keeps no syntax tree (r2r.Compiled).
        self.query = self.r2r.query
        self.r2s: R2SOperator = r2s_operator(query.r2s, _triple_key if query.form is QueryForm.CONSTRUCT else _solution_key)

    def close(self) -> None:
        """The query is removed: its windows leave the groups they joined, its facts go."""
        self.r2r.close()
        for facts in (self.facts or {}).values():
            facts.drop()

    def begin(self, after: int, resumed: bool = False) -> None:
        """The query evaluates after `after`: its fact windows read the elements after it,
        from no fact (unless `resumed`: restore_state puts its facts back)."""
        if not resumed:
            for facts in (self.facts or {}).values():
                facts.begin(after)

    def query_state(self) -> dict | None:
        """What the query keeps besides R2S (its fact windows' facts), as JSON; None if nothing."""
        return {"facts": {iri: facts.state() for iri, facts in self.facts.items()}} if self.facts else None

    def restore_state(self, state: dict | None, after: int) -> None:
        saved = (state or {}).get("facts", {})
        for iri, facts in (self.facts or {}).items():
            facts.restore(saved.get(iri, {"read_through": after}))

    def evaluate(self, instant: int) -> Evaluation | None:
        """Evaluate at `instant`; None when the report policy skips it."""
        started = time.perf_counter()
        contents = self.s2r.contents(instant)                                   # S2R
        if not self.s2r.reports(instant, contents):
            return None
        if self.r2r.reads_store:
            with self._reading():               # no background change lands in the middle
                relation = self.r2r.relation(contents)                          # R2R
        else:
            relation = self.r2r.relation(contents)
        evaluation = self._stream(instant, contents, relation)                  # R2S
        evaluation.seconds = time.perf_counter() - started
        return evaluation

    def _reading(self):
        """The background held for reading; the wait for it (a change of the background waits
        for the evaluations reading it, and holds the next ones back) is not the evaluation's
        time: a change held up by a slow evaluation must not make the others run out of theirs."""
        return self.store.waiting(self.store.background.reading())

    def tell(self, report: KeyGroupReport) -> None:
        """A partitioned query: what its key groups found at the instant evaluated next."""
        self.s2r.tell(report)
        self.r2r.tell(report)

    def _stream(self, instant: int, contents: dict[str, WindowContent], relation: Relation) -> Evaluation:
        """R2S: what the evaluation at `instant` emits of `relation`."""
        evaluation = Evaluation(instant, {w: content.shown for w, content in contents.items()}, relation.form,
                                elements=relation.elements)
        if relation.form is QueryForm.SELECT:
            evaluation.rows = self.r2s.apply(relation.value)
        elif relation.form is QueryForm.CONSTRUCT:
            emitted = self.r2s.apply(relation.value)
            evaluation.rows = [line for line, _ in emitted]
            evaluation.triples = [triple for _, triple in emitted]
        else:
            evaluation.boolean = relation.value
        return evaluation

    def r2s_state(self) -> list | None:
        """What IStream/DStream remember of the last evaluation, as JSON (None for RStream):
        SELECT rows as they are, CONSTRUCT triples as N-Triples lines."""
        previous = self.r2s.previous
        if previous is not None and self.query.form is QueryForm.CONSTRUCT:
            return [line for line, _ in previous]
        return previous

    def restore_r2s_state(self, state: list) -> None:
        if self.query.form is QueryForm.CONSTRUCT:
            self.r2s.restore(lines_with_triples(state))
        else:
            self.r2s.restore(state)

    def retention_bounds(self, after: int) -> dict[str, int]:
        """Per stream, the earliest timestamp an evaluation after `after` can read."""
        return self.s2r.retention(after)
