"""What one continuous query's evaluations may take: a time limit, a bound on the rows (or
triples) one evaluation produces, and a stop for the evaluation running when the query is
removed (docs/running.md#evaluation-limits).

Oxigraph cannot be interrupted from Python: it evaluates without Python's lock, an exception
raised in a custom function is taken as an unbound value and the evaluation goes on, and a
signal is only seen once the call returns. Between two solutions the engine has control again;
inside one call (a sort, a grouping, a filter rejecting a large join) it has none. So an
evaluation is stopped in one of two places:

- on the engine's threads, where its rows are read (`store.terms.Guarded`): the rows are counted
  as they come and the clock is looked at every CHECK_EVERY of them, so a result past the bound
  is never materialised and a time limit is kept to the next solution;
- in a worker process over a read-only view of the on-disk store (`store.isolation`), which is
  killed at the time limit, when the query is removed, when the engine stops, or past the
  memory a worker may take: its CPU and memory go at once, whatever Oxigraph was doing.

A server (`isolate_evaluations = always`, the default) evaluates every call in a worker,
whatever the query's age: a query proven cheap can be handed an element that makes it run away
(a property path over a long chain), and only a process can be stopped inside one Oxigraph call
and held to a memory bound. The read-only view a worker evaluates over is kept while the store
is not written, so the evaluations of one micro-batch share its opening (store.isolation). Under
`new` only the calls of a query that has not shown its input is safe go to a worker: its first
evaluations (probation), an input more than GROWTH times the largest one it was evaluated on
within TRUST_SHARE of the limit, and after an evaluation that came near the limit; the others
run on the engine's threads, faster and unbounded inside one call. Either way a query not
proven yet (`on_probation`) is evaluated apart from the others by the scheduler, so that
queries that may run away wait for each other and not for the rest.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from .errors import EvaluationCancelled, EvaluationTimeout, ResultTooLarge

# Rows read between two looks at the clock on a thread (and at the query's removal).
CHECK_EVERY = 256
# A call that ended within this share of the time limit proves its input size on a thread.
TRUST_SHARE = 0.25
# An input more than this many times the largest proven one is evaluated in a worker again.
GROWTH = 2
ISOLATION = ("always", "new", "never")


def too_large(bound: int) -> ResultTooLarge:
    return ResultTooLarge("the evaluation produced more than %d rows or triples, the most one evaluation may "
                          "([engine] max_result_rows); it was stopped and nothing of it was delivered" % bound)


@dataclass(frozen=True)
class EvaluationLimits:
    """The engine's limits ([engine] evaluation_timeout, max_result_rows, isolate_evaluations)."""
    timeout: float | None = None        # seconds one evaluation may run (None: no limit)
    max_rows: int | None = None         # rows or triples one evaluation may produce (None: no bound)
    isolation: str = "always"           # always | new | never: which evaluations run in a worker process
    max_entailed: int | None = None     # triples one RDFS closure may derive (None: the store's own bound)

    def timeout_text(self) -> str:
        return "the evaluation ran past the time limit of %g s ([engine] evaluation_timeout) and was stopped" \
            % self.timeout

    def too_large(self, bound: int) -> ResultTooLarge:
        return too_large(bound)


class Budget:
    """One evaluation in progress: how long it has run (less the time it waited for a worker
    process), what it has read, and whether it must stop."""

    def __init__(self, limits: EvaluationLimits, monotonic: Callable[[], float], scope: "EvaluationScope"):
        self.limits = limits
        self.monotonic = monotonic
        self._scope = scope
        self.started = monotonic()
        self.rows = 0                   # rows read so far, over every call of the evaluation
        self.waited = 0.0               # seconds spent waiting for a free worker process
        self.isolated_seconds = 0.0     # seconds its calls ran in worker processes (their CPU is not this thread's)

    @property
    def cancelled(self) -> bool:
        return self._scope.cancelled

    def waiting(self, held) -> "_Waiting":
        """Hold the context manager `held` (a lock), its acquisition not counted as the
        evaluation's time (another evaluation, or a change of the background, holds it)."""
        return _Waiting(self, held)

    def elapsed(self) -> float:
        return self.monotonic() - self.started - self.waited

    def remaining(self) -> float | None:
        return None if self.limits.timeout is None else self.limits.timeout - self.elapsed()

    def check(self) -> None:
        """EvaluationCancelled once the query is removed, EvaluationTimeout past the limit."""
        if self._scope.cancelled:
            raise EvaluationCancelled("the query was removed")
        if self.limits.timeout is not None and self.elapsed() > self.limits.timeout:
            raise EvaluationTimeout(self.limits.timeout_text())

    def rows_left(self, share: int = 1) -> int | None:
        """How many more rows a call may read: the bound less what this evaluation has read,
        or, for a call that serves `share` queries at once (a group of queries differing in
        constants), `share` bounds of its own."""
        bound = self.limits.max_rows
        if bound is None:
            return None
        return bound * share if share > 1 else max(0, bound - self.rows)

    def count(self, rows: int, share: int = 1) -> None:
        """`rows` read by a call (after it stayed within `rows_left`)."""
        if share == 1:
            self.rows += rows

    def check_output(self, rows: int) -> None:
        """The evaluation's result as a whole (the rows of ranges kept from earlier
        evaluations count too): ResultTooLarge past the bound."""
        if self.limits.max_rows is not None and rows > self.limits.max_rows:
            raise self.limits.too_large(self.limits.max_rows)


class EvaluationScope:
    """One query's evaluations under the engine's limits: the budget of the one running now
    (a query's evaluations run one at a time), the stop its removal sets, and where its next
    store call runs."""

    # A registered query holds one: no __dict__ (and a flag, not an Event, for its removal)
    # keeps it to one object for Python's cycle collector.
    __slots__ = ("limits", "workers", "monotonic", "cancelled", "budget", "proven")

    def __init__(self, limits: EvaluationLimits, workers=None, monotonic: Callable[[], float] | None = None):
        self.limits = limits
        self.workers = workers            # store.isolation.EvaluationWorkers, or None (threads only)
        self.monotonic = monotonic if monotonic is not None else time.monotonic
        self.cancelled = False            # set once, by the query's removal
        self.budget: Budget | None = None
        # The largest input (elements named by a call) evaluated within TRUST_SHARE of the
        # limit: None until one is (the query is on probation).
        self.proven: int | None = None

    def begin(self) -> Budget:
        self.budget = Budget(self.limits, self.monotonic, self)
        return self.budget

    def end(self) -> None:
        self.budget = None

    def cancel(self) -> None:
        """The query is removed: the evaluation running stops (at its next row on a thread, at
        once in a worker process) and no other starts."""
        self.cancelled = True

    def running_seconds(self) -> float | None:
        """How long the evaluation running now has run (None: none runs)."""
        budget = self.budget
        return None if budget is None else budget.elapsed()

    def can_isolate(self) -> bool:
        return self.workers is not None and self.limits.timeout is not None and self.limits.isolation != "never"

    def on_probation(self) -> bool:
        """Whether the query has not shown yet that its evaluations stay well within the limit
        (the scheduler runs it apart from the proven ones)."""
        return self.can_isolate() and self.proven is None

    def isolated(self) -> bool:
        """Whether the query's next evaluation goes to a worker process whatever its input."""
        return self.can_isolate() and (self.limits.isolation == "always" or self.proven is None)

    def isolates(self, inputs: int) -> bool:
        """Whether a call over `inputs` elements runs in a worker process."""
        if not self.can_isolate():
            return False
        return self.isolated() or inputs > GROWTH * self.proven

    def record(self, inputs: int, seconds: float) -> None:
        """A call over `inputs` elements ended after `seconds`: within TRUST_SHARE of the
        limit it proves that input; under `new` a call that took longer sends the query back to
        probation (its next calls must be killable again). Under `always` every call is
        killable already: a slow one leaves a proven query where it is, and an evaluation past
        the limit fails it."""
        if self.limits.timeout is None:
            return
        if seconds <= TRUST_SHARE * self.limits.timeout:
            self.proven = inputs if self.proven is None else max(self.proven, inputs)
        elif self.limits.isolation != "always":
            self.proven = None


class _Waiting:
    """Budget.waiting's hold (a class rather than a generator: every evaluation takes one)."""

    __slots__ = ("_budget", "_held")

    def __init__(self, budget: Budget, held):
        self._budget, self._held = budget, held

    def __enter__(self) -> None:
        budget = self._budget
        started = budget.monotonic()
        self._held.__enter__()
        budget.waited += budget.monotonic() - started

    def __exit__(self, *exc):
        return self._held.__exit__(*exc)
