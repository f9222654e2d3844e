"""The live scheduler: drives an `Runner` in wall-clock time.

Each registered query is asked to evaluate when it can have something to do: at its next close
plus `max_delay` (the latest it may wait for complete input), or at once when a watermark it
waits for passes its next close. A dispatcher thread keeps those wake-ups in one heap and hands
the queries that are due to a small pool of evaluation workers, in the order they became due;
the semantics stay in `Runner` (tested on a virtual clock), this layer only decides when to ask.

With a thousand queries, one polling job per query (ten firings a second each) cost the
scheduler more than the evaluations; a query now costs nothing between its closes. A query
behind the clock evaluates at most `MAX_EVALUATIONS_PER_RUN` instants per turn and is then put
behind the queries already due, so one slow query delays the others by one turn at most; a query
ahead of the clock (a watermark ahead of it) evaluates at most `max_event_ahead` ahead of it
(Runner.due) and is asked again once the clock nears its next instant, never in a loop over the
empty windows up to a watermark far ahead. A query
asked while its evaluation runs is asked again when it ends (counted as a folded poll,
`missed_runs`). A query on probation (store.limits: new, or back after an evaluation that came
near its limit) is handed to a pool of its own, of PROBATION_RUNS threads: queries that may run
away wait for each other, never for the threads the others need, and they take at most that
many of the worker processes the evaluations run in. Delivery to sinks, retention and the
engine's other periodic work are APScheduler interval jobs (`scheduler`). Shutting the
scheduler down stops the evaluations running (their worker processes killed): the engine stops
within moments, whatever they were doing.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from apscheduler.schedulers.background import BackgroundScheduler

from rspstar.store.isolation import WORKERS as ISOLATED_WORKERS
from rspstar.store.stream_store import WatermarkAdvanced

from .errors import UnknownQuery
from .runner import MAX_EVALUATIONS_PER_RUN, Runner

log = logging.getLogger(__name__)

DELIVERY_JOB = "sinks:deliver"
RETENTION_JOB = "store:retention"
REFRESH_JOB = "background:refresh"
_NO_OVERLAP = {"max_instances": 1, "coalesce": True, "misfire_grace_time": 30}
# Evaluations at once: Oxigraph evaluates without the interpreter lock, so two or more use both
# cores; more would only queue inside the store.
WORKERS = 4
# Runs of queries on probation at once: with a runaway among the proven queries held to its time
# limit in another, a worker process stays free for the rest.
PROBATION_RUNS = max(1, ISOLATED_WORKERS - 2)
# A query whose next instant is not known yet (a count window, content change) is asked this
# often as well as at every watermark of its streams.
UNKNOWN_NEXT_SECONDS = 1.0


class _Inline:
    """Runs each task at once, in the caller's thread (tests step the scheduler by hand)."""

    def submit(self, task, *args):
        task(*args)

    def shutdown(self, wait: bool = True) -> None:
        pass


INLINE = _Inline()


class LiveScheduler:
    def __init__(self, engine: Runner, interval: float = 0.1, housekeeping_interval: float = 1.0,
                 workers: int = WORKERS, monotonic: Callable[[], float] = time.monotonic, executor=None):
        self.engine = engine
        self.interval = interval                 # the shortest wait between two asks of one query
        self.monotonic = monotonic
        self.scheduler = BackgroundScheduler()
        self.scheduler.add_job(engine.deliver, "interval", seconds=housekeeping_interval / 2, id=DELIVERY_JOB,
                               **_NO_OVERLAP)
        self.scheduler.add_job(engine.evict, "interval", seconds=housekeeping_interval, id=RETENTION_JOB,
                               **_NO_OVERLAP)
        if engine.background_refresh is not None:     # background graphs reloaded when due (refresh.py)
            self.scheduler.add_job(engine.background_refresh.run_due, "interval", seconds=housekeeping_interval,
                                   id=REFRESH_JOB, **_NO_OVERLAP)
        self._executor = executor if executor is not None else ThreadPoolExecutor(workers, "evaluation")
        # Runs of queries on probation wait for their worker processes here.
        self._isolated = executor if executor is not None else \
            ThreadPoolExecutor(PROBATION_RUNS, "isolated-evaluation")
        self._wakes: list[tuple[float, int, str]] = []      # (when, order, query id): a heap
        self._planned: dict[str, float] = {}                # each query's earliest wake in the heap
        self._running: set[str] = set()
        self._asked_while_running: set[str] = set()
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        for registered in engine.queries():
            self.plan(registered.id, self.monotonic())
        engine.listeners.append(self._on_change)
        engine.store.subscribe(self._on_watermark)

    # -- when each query is asked ---------------------------------------------------------------
    def plan(self, query_id: str, when: float) -> None:
        """Ask `query_id` at `when` (monotonic seconds), unless it is asked earlier already."""
        with self._changed:
            if self._stopping:
                return
            planned = self._planned.get(query_id)
            if planned is not None and planned <= when:
                return
            self._planned[query_id] = when
            heapq.heappush(self._wakes, (when, next(self._order), query_id))
            self._changed.notify()

    def planned(self, query_id: str) -> float | None:
        with self._changed:
            return self._planned.get(query_id)

    def next_wake(self, query_id: str) -> float | None:
        """When a query is next worth asking: now if it is due, else at its next close plus
        `max_delay` (or in UNKNOWN_NEXT_SECONDS when its next close is not known yet); None for
        a query that is gone or failed."""
        try:
            registered = self.engine.get(query_id)
        except UnknownQuery:
            return None
        if registered.removed or registered.status.state != "running":
            return None
        now = self.monotonic()
        if registered.partitioned:
            # Its key groups report its instants (Runner.accept_partitions); while none holds
            # elements it evaluates them itself, at max_delay. Asked again now and then: the
            # groups may stop holding elements.
            instant = registered.next_instant()
            if self.engine.partitions.may_hold(registered) or instant is None:
                return now + UNKNOWN_NEXT_SECONDS
            wait = (instant + self.engine.config.max_delay - self.engine.clock.now()) / 1e6
            return now + max(self.interval, wait)
        instant = registered.next_instant()
        if instant is None:
            return now + UNKNOWN_NEXT_SECONDS
        if self.engine.due(registered, instant) is not None:
            return now
        clock = self.engine.clock.now()
        wait = instant + self.engine.config.max_delay - clock
        if self.engine.complete(registered, instant):
            # The watermark is past it already, but the instant is further ahead of the clock
            # than a query evaluates (Runner.due): asked once the clock is near enough, not at
            # once after every turn (with a watermark years ahead, a query evaluated empty
            # windows in a tight loop).
            wait = min(wait, instant - self.engine.config.max_event_ahead - clock)
        return now + max(self.interval, wait / 1e6)

    def step(self) -> list[str]:
        """Hand every query due now to the workers; returns their ids."""
        now = self.monotonic()
        due = []
        with self._changed:
            while self._wakes and self._wakes[0][0] <= now:
                when, _, query_id = heapq.heappop(self._wakes)
                if self._planned.get(query_id) != when:
                    continue             # planned earlier since; that entry decided
                del self._planned[query_id]
                if query_id in self._running:
                    self._asked_while_running.add(query_id)
                    self._count_folded(query_id)
                    continue
                self._running.add(query_id)
                due.append(query_id)
        for query_id in due:
            (self._isolated if self._on_probation(query_id) else self._executor).submit(self._run, query_id)
        return due

    def _on_probation(self, query_id: str) -> bool:
        try:
            return self.engine.get(query_id).scope.on_probation()
        except UnknownQuery:
            return False

    def _run(self, query_id: str) -> None:
        ran = 0
        try:
            ran = self.engine.run_query(query_id)
            # Evaluations of a CONSTRUCT query feed other queries: ask them at once.
            if ran and self.engine.get(query_id).query.output_stream:
                now = self.monotonic()
                for registered in self.engine.queries():
                    if registered.id != query_id:
                        self.plan(registered.id, now)
        except UnknownQuery:
            pass
        except Exception:   # a worker must survive any query
            log.exception("query %s: the scheduler's run failed", query_id)
        finally:
            with self._changed:
                self._running.discard(query_id)
                again = query_id in self._asked_while_running
                self._asked_while_running.discard(query_id)
            # Behind the clock (a full turn ran), or asked meanwhile: again, after those due now.
            when = self.monotonic() if again or ran >= MAX_EVALUATIONS_PER_RUN else self.next_wake(query_id)
            if when is not None:
                self.plan(query_id, when)

    def _count_folded(self, query_id: str) -> None:
        try:
            self.engine.get(query_id).status.missed_runs += 1
        except UnknownQuery:
            pass

    def _on_change(self, event: str, query_id: str) -> None:
        if event == "registered":
            self.plan(query_id, self.monotonic())
        elif event == "removed":
            with self._changed:
                self._planned.pop(query_id, None)     # its heap entry is skipped when it comes up

    def _on_watermark(self, event: WatermarkAdvanced) -> None:
        now = self.monotonic()
        for registered in self.engine.queries():
            if event.stream not in registered.query.streams:
                continue
            due = registered.next_instant()
            if due is not None and registered.evaluator.policy.complete_through(due) <= event.watermark:
                self.plan(registered.id, now)

    # -- the dispatcher thread ------------------------------------------------------------------
    def _dispatch(self) -> None:
        while True:
            with self._changed:
                if self._stopping:
                    return
                wait = self._wakes[0][0] - self.monotonic() if self._wakes else 1.0
                if wait > 0:
                    self._changed.wait(min(wait, 1.0))
                    continue
            self.step()

    def start(self) -> None:
        self.scheduler.start()
        self._thread = threading.Thread(target=self._dispatch, name="scheduler", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self.engine.listeners.remove(self._on_change)
        self.engine.store.unsubscribe(self._on_watermark)
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join()
        self.engine.stop_evaluations()
        self._executor.shutdown(wait=True)
        self._isolated.shutdown(wait=True)
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)

    def job_ids(self) -> list[str]:
        """The periodic jobs (queries are not jobs: see `planned`)."""
        return sorted(job.id for job in self.scheduler.get_jobs())
