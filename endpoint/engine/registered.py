"""A registered query as the engine keeps it, apart from its text (QuerySpec): its evaluator,
where its results go, its status (what /queries and /metrics show of it), and the run of its due
instants, which the runner's tick asks for (`run`) and the partitioned protocol makes from its
key groups' micro-batches (partitioned.py)."""
from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from rspstar.store.errors import EvaluationCancelled
from rspstar.store.limits import EvaluationLimits, EvaluationScope
from rspstar.translator.model import ContinuousQuery
from rspstar.translator.temporal import InstantTexts, format_instant

from .clock import Clock
from .evaluation import Evaluation, QueryEvaluator
from .repository import QuerySpec
from .sinks import EventFeed, OutboxSink, OutputStream, Result, ResultHistory

log = logging.getLogger(__name__)

# How much the latest evaluation counts in a query's moving average of CPU per evaluation.
COST_SMOOTHING = 0.2
# Due instants a query under overrun = skip passes over in one run (the rest at its next run).
MAX_SKIPPED_PER_RUN = 100_000


@dataclass
class QueryStatus:
    state: str = "running"                 # running | failed
    last_evaluation: int | None = None
    last_trigger: str | None = None        # watermark | max_delay
    next_close: int | None = None
    evaluations: int = 0
    results_emitted: int = 0
    late_elements: int = 0                 # elements that came after the query evaluated their instant
    failures: int = 0
    last_error: str | None = None
    failed_at: int | None = None           # the instant whose evaluation failed
    missed_runs: int = 0                   # scheduler firings coalesced because a run was busy
    behind: int = 0                        # µs from the next due instant to the clock, after a run
    skipped_instants: int = 0              # due instants passed over under the option overrun = skip
    durations: collections.deque = field(default_factory=lambda: collections.deque(maxlen=1000))
    cpu_seconds: float = 0.0               # CPU this run's evaluations took (the evaluating thread's)
    cpu_per_evaluation: float | None = None   # a moving average of it, seconds
    rate: float = 0.0                      # evaluations per second its report policy asks for (0: as data comes)
    # Clock instants of the latest evaluations: the rate of a query that reports as data comes.
    evaluated_at: collections.deque = field(default_factory=lambda: collections.deque(maxlen=100))
    # Clock time from the instant a result is for to the moment it reached the sinks (µs), of the
    # instants that closed while the engine ran.
    latencies: collections.deque = field(default_factory=lambda: collections.deque(maxlen=1000))
    # Evaluations of instants that closed before the engine started (a restart catching up):
    # their latency is the time the engine was stopped, left out of close_to_result_ms.
    caught_up: int = 0

    # What a restart restores of the status (the rest describes this run: timings, the next close).
    SAVED = ("evaluations", "results_emitted", "failures", "late_elements", "last_trigger", "last_evaluation",
             "skipped_instants")

    def saved(self) -> dict:
        return {name: getattr(self, name) for name in self.SAVED}

    def restore(self, saved: dict) -> None:
        for name in self.SAVED:
            if name in saved:
                setattr(self, name, saved[name])

    def reached(self, instant: int, trigger: str, next_close: int | None) -> None:
        """The instant was evaluated (or skipped), due by `trigger`."""
        self.last_evaluation = instant
        self.last_trigger = trigger
        self.next_close = next_close

    def emitted(self, seconds: float, results: int, latency: int, caught_up: bool) -> None:
        """An evaluation taking `seconds` emitted `results` (rows, or an answer), `latency` µs
        after its instant (`caught_up`: an instant that closed before the engine started)."""
        self.evaluations += 1
        self.durations.append(seconds)
        self.results_emitted += results
        if caught_up:
            self.caught_up += 1
        else:
            self.latencies.append(latency)

    def record_cost(self, cpu: float, now: int) -> None:
        self.cpu_seconds += cpu
        self.cpu_per_evaluation = cpu if self.cpu_per_evaluation is None else \
            COST_SMOOTHING * cpu + (1 - COST_SMOOTHING) * self.cpu_per_evaluation
        self.evaluated_at.append(now)

    def core_share(self, running: float | None = None) -> float:
        """The share of one core the query's evaluations take: CPU per evaluation times the
        evaluations per second its policy asks for (or, reporting as data comes, has made).
        `running`: seconds the evaluation running now has taken so far, a lower bound of what
        an evaluation costs before the first one ends (with no rate known yet, it counts as
        the core it holds, once it has held it a second)."""
        cost = max(self.cpu_per_evaluation or 0.0, running or 0.0)
        if not cost:
            return 0.0
        rate = self.rate
        if not rate and len(self.evaluated_at) > 1:
            span = (self.evaluated_at[-1] - self.evaluated_at[0]) / 1e6
            rate = (len(self.evaluated_at) - 1) / span if span > 0 else 0.0
        if not rate and running:
            return max(self.cpu_per_evaluation or 0.0, min(1.0, running))
        return cost * rate

    def percentiles(self, values=None) -> dict[float, float]:
        """The 50th, 90th and 99th percentiles (nearest rank) of evaluation time in seconds, or
        of `values`."""
        ordered = sorted(self.durations if values is None else values)
        if not ordered:
            return {}
        return {q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in (0.5, 0.9, 0.99)}

    def describe(self, behind: int | None = None, running: float | None = None) -> dict:
        """As JSON; `behind`: µs the next due instant is behind the clock now (else as of the
        latest run), `running`: seconds the evaluation running now has taken (None: none runs)."""
        data = {k: v for k, v in asdict(self).items()
                if k not in ("durations", "latencies", "evaluated_at", "cpu_per_evaluation", "rate", "cpu_seconds")}
        data["cpu_seconds"] = round(self.cpu_seconds, 3)
        data["cpu_ms_per_evaluation"] = None if self.cpu_per_evaluation is None else \
            round(1000 * self.cpu_per_evaluation, 3)
        data["core_share"] = round(self.core_share(running), 4)
        for key in ("last_evaluation", "next_close", "failed_at"):
            if data[key] is not None:
                data[key] = format_instant(data[key])
        data["behind_ms"] = round((data.pop("behind") if behind is None else behind) / 1000, 1)
        data["evaluating_ms"] = None if running is None else round(1000 * running, 1)
        percentiles = self.percentiles()
        if percentiles:
            data["evaluation_ms"] = {"p%d" % round(q * 100): round(1000 * v, 3) for q, v in percentiles.items()}
        latency = self.percentiles(self.latencies)
        if latency:
            data["close_to_result_ms"] = {"p%d" % round(q * 100): round(v / 1000, 1) for q, v in latency.items()}
        return data


class RegisteredQuery:
    """A query registered with the engine, evaluated after `start` on `clock`; instants up to
    `started` closed before the engine started (their evaluations catch up)."""

    def __init__(self, spec: QuerySpec, query: ContinuousQuery, evaluator: QueryEvaluator,
                 url_sinks: tuple[OutboxSink, ...], history: ResultHistory, start: int,
                 scope: EvaluationScope | None = None, clock: Clock | None = None,
                 output: OutputStream | None = None, started: int | None = None,
                 texts: InstantTexts | None = None):
        self.spec = spec
        # What writes its records' instants (the runner's, shared by every query it evaluates
        # at a close).
        self.texts = texts if texts is not None else InstantTexts()
        self.started = start if started is None else started
        self.scope = scope if scope is not None else EvaluationScope(EvaluationLimits())
        self.clock = clock
        self.query = query
        # Its input streams, read at every instant and every publication: worked out once.
        self.streams = tuple(query.streams)
        self.evaluator = evaluator
        # Its S2R's answer, asked directly: a run asks it about four times an evaluation.
        self._next_instant = evaluator.s2r.next_instant
        self.url_sinks = url_sinks
        self.history = history
        self.feed = EventFeed()
        # Every destination of its results, in order: what polling and server-sent events read,
        # the sinks at URLs, and a CONSTRUCT query's output stream.
        self.sinks = (history, self.feed) + url_sinks + ((output,) if output is not None else ())
        self.status = QueryStatus(rate=evaluator.policy.rate())
        self.after = start          # the next evaluation is at the query's first instant after this
        # Evaluated per key group on Spark's executors (option partition, partitioned.py).
        self.partitioned = evaluator.options.partition is not None
        self.status.next_close = self.next_instant()
        self.lock = threading.Lock()
        self.removed = False        # set by Runner.remove: an evaluation loop stops at the next instant
        # The latest instant evaluated and what its evaluation needed of the streams (its
        # complete_through), or None: elements stamped below that arriving now came after an
        # evaluation that needed them. Counted in status.late_elements under their own lock
        # (publications count them, on any thread).
        self.evaluated: tuple[int, int] | None = None
        self.late_lock = threading.Lock()
        # Whether one of its key groups kept elements after the latest micro-batch (None: no
        # micro-batch told yet). While none does, none reports, and the runner evaluates the
        # query's instants itself (partitioned.py, run_unheld). Saved with its progress.
        self.groups_hold: bool | None = None

    @property
    def id(self) -> str:
        return self.spec.id

    def next_instant(self, after: int | None = None) -> int | None:
        """The query's next evaluation instant known now (after `after`, else after its last).
        A partitioned query's key groups find its instants that depend on the data (its
        partitioned windows' closes; the store here need not hold its elements): its S2R
        knows only the others."""
        return self._next_instant(self.after if after is None else after)

    def behind(self) -> int:
        """µs from the query's next due instant to the clock, now: it grows while a run is
        held up (by a slow evaluation, or waiting for a worker), not only after a run."""
        pending = self.status.next_close
        if self.clock is None or pending is None or self.status.state != "running":
            return self.status.behind
        return max(self.status.behind, self.clock.now() - pending)

    # -- its run ---------------------------------------------------------------------------------
    def run(self, due: Callable[["RegisteredQuery", int], str | None], most: int,
            save: Callable[["RegisteredQuery"], None]) -> int:
        """Evaluate its due instants (`due` says why one may run now: "watermark", "max_delay",
        or None), in order, at most `most` of them, keeping its progress (`save`) when any ran;
        returns how many ran. A run already under way (on another thread) is missed, not waited for."""
        if not self.lock.acquire(blocking=False):
            self.status.missed_runs += 1
            return 0
        ran = 0
        try:
            if self.evaluator.options.overrun == "skip" and self.status.state == "running":
                self._skip_overrun(due)
            while self.status.state == "running" and not self.removed and ran < most:
                instant = self.next_instant()
                trigger = None if instant is None else due(self, instant)
                if trigger is None:
                    break
                cpu = time.thread_time()
                # From now on an element the evaluation needs that is not in yet is late for it.
                self.evaluated = (instant, self.evaluator.policy.complete_through(instant))
                budget = self.scope.begin()
                try:
                    evaluation = self.evaluator.evaluate(instant)
                    if evaluation is not None:   # the output as a whole: kept ranges' rows count too
                        budget.check_output(len(evaluation.rows))
                except EvaluationCancelled:     # removed meanwhile: nothing more to do
                    break
                except Exception as e:  # any failure of one query must not stop the others
                    self.fail(instant, "%s: %s" % (type(e).__name__, e))
                    break
                finally:
                    self.scope.end()
                self.after = instant
                self.emit(instant, trigger, evaluation)
                # The CPU of calls made in a worker process is not this thread's: their time counts.
                self.status.record_cost(time.thread_time() - cpu + budget.isolated_seconds, self.clock.now())
                ran += 1
            # A count window's or an arrival's next instant may have become known without an
            # evaluation here: the status says what is next now.
            pending = self.status.next_close = self.next_instant()
            self.status.behind = 0 if pending is None else max(0, self.clock.now() - pending)
            if ran:
                save(self)
        finally:
            self.lock.release()
        return ran

    def _skip_overrun(self, due: Callable[["RegisteredQuery", int], str | None]) -> None:
        """Under overrun = skip: when more than one instant is due, the query goes on from the
        latest of them; the ones before are counted, not evaluated (at most MAX_SKIPPED_PER_RUN
        looked at per run, so a query far behind costs its run a bounded walk)."""
        instant = self.next_instant()
        if instant is None or due(self, instant) is None:
            return
        skipped = 0
        while skipped < MAX_SKIPPED_PER_RUN:
            following = self.next_instant(instant)
            if following is None or due(self, following) is None:
                break
            self.after, instant = instant, following
            skipped += 1
        if skipped:
            # Warned once; a query that stays behind skips at every run, which its status and
            # /metrics count.
            level = logging.WARNING if not self.status.skipped_instants else logging.INFO
            self.status.skipped_instants += skipped
            log.log(level, "query %s: %d instants skipped (overrun = skip), evaluating %s", self.id, skipped,
                    format_instant(instant))

    def emit(self, instant: int, trigger: str, evaluation: Evaluation | None) -> None:
        """The evaluation at `instant` (None: skipped by the non-empty report policy) to every
        sink of the query, `trigger` what made it due."""
        next_close = self.next_instant(instant)
        self.status.reached(instant, trigger, next_close)
        if evaluation is None:
            return
        latency = self.clock.now() - instant        # close to result, in clock time
        # A close the engine was not running for (a restart catching up): not its latency.
        self.status.emitted(evaluation.seconds, evaluation.results(), latency, caught_up=instant <= self.started)
        record = evaluation.record(self.texts, trigger=trigger, latency_ms=round(latency / 1000, 1))
        result = Result(instant, record, evaluation.triples, next_close)
        for sink in self.sinks:
            sink.accept(result)

    def resume(self, after: int, r2s: list | None, state: dict | None) -> None:
        """It was evaluated up to `after` before a restart: its R2S state and its query's state
        as its progress (`progress`) kept them."""
        if r2s is not None:
            self.evaluator.restore_r2s_state(r2s)
        self.evaluator.restore_state(state, after)
        self.evaluated = (after, self.evaluator.policy.complete_through(after))
        self.groups_hold = (state or {}).get("partitions", {}).get("hold")

    def progress(self) -> QuerySpec:
        """Its specification with its progress, to be written at once: the last instant and the
        R2S state it produced, its counters, and its query's state (its fact windows' facts,
        whether its key groups hold elements)."""
        spec = self.spec
        spec.last_evaluation = self.status.last_evaluation
        spec.r2s_previous = self.evaluator.r2s_state()
        spec.state = self.evaluator.query_state()
        if self.partitioned:
            spec.state = dict(spec.state or {}, partitions={"hold": self.groups_hold})
        spec.counters = self.status.saved()
        return spec

    def count_late(self, stream: str, timestamps: list[int], earliest: int) -> None:
        """Elements published to `stream` now (the earliest stamped `earliest`): those stamped
        below what its evaluations already needed of it came too late for them (spec section 5).
        Counted and logged; they are stored, and join the windows still open. (A partitioned
        query's key groups count their own.) Called by the store, maybe under its lock."""
        if self.evaluated is None or self.partitioned:
            return
        instant, bound = self.evaluated
        if earliest >= bound or stream not in self.streams:
            return
        late = sum(1 for t in timestamps if t < bound)
        with self.late_lock:
            first = not self.status.late_elements
            self.status.late_elements += late
        # Warned once per query; a source that keeps coming late is in its status and /metrics.
        log.log(logging.WARNING if first else logging.INFO,
                "query %s: %d element(s) of <%s> came after the query evaluated their instant (the "
                "latest %s); not evaluated again, kept for the windows still open", self.id, late, stream,
                format_instant(instant))

    def fail(self, instant: int, error: str) -> None:
        """The evaluation at `instant` failed: the query stops there, saying why."""
        self.status.state = "failed"
        self.status.failures += 1
        self.status.last_error = error
        self.status.failed_at = instant
        log.error("query %s failed at %s: %s", self.id, format_instant(instant), error)

    def describe(self) -> dict:
        return {
            "id": self.id, "query": self.spec.text, "form": self.query.form.value, "r2s": self.query.r2s.value,
            "output_stream": self.query.output_stream, "sinks": self.spec.sinks, "options": self.spec.options,
            "windows": [w.describe() for w in self.query.windows.values()],
            "report": self.evaluator.policy.describe(), "policy": self.evaluator.policy.show(),
            "variables": None if self.query.variables is None else list(self.query.variables),
            "dialect": self.query.dialect, "translation": self.query.translation,
            "normalised": self.query.normalised, "readings": self.evaluator.options.readings(self.query),
            "warnings": self.query.warnings,
            "status": dict(self.status.describe(self.behind(), self.scope.running_seconds()),
                           isolated=self.scope.isolated(), probation=self.scope.on_probation(),
                           **self.history.describe()),
            "sink_backlog": {s.url: s.state.pending for s in self.url_sinks},
            "sink_outboxes": [s.describe() for s in self.url_sinks],
        }
