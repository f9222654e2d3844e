"""The continuous-query engine: registered queries evaluated at their report instants, once
their input is complete, with results going to every sink (spec §3 and §5).

`Runner.tick()` does all that is due at the clock's current time; the live scheduler calls
it from APScheduler jobs, tests call it after moving a virtual clock. Evaluation is the same
`QueryEvaluator` that `rspstar replay` uses, so live results equal a replay of the same input.
"""
from __future__ import annotations

import collections
import json
import logging
import os
import re
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable
from urllib.parse import quote

import pyoxigraph as ox

from rspstar.config.schema import LIBRARY, settings_class
from rspstar.store.errors import EvaluationCancelled
from rspstar.store.isolation import EvaluationWorkers
from rspstar.store.limits import EvaluationLimits, EvaluationScope
from rspstar.store.partitions import AT, FAILED, HOLDS, MARK, ROWS, Emitted, PartitionPlan, read_mark
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import ScopedStore, StreamStore
from rspstar.translator.errors import TranslatorError
from rspstar.translator.model import ContinuousQuery, PartitionedWindow, QueryForm
from rspstar.translator.temporal import format_instant
from rspstar.translator.admission import admit, check_landmark_starts
from rspstar.translator.warnings import background_warnings, unfed_stream_warnings

from .clock import Clock
from .errors import EndpointError
from .evaluation import Evaluation, QueryEvaluator
from .sharing import ConstantGroups, RangeResults
from .repository import QueryRepository, QuerySpec
from .sinks import (
    Delivery, EventFeed, HttpSink, Poster, ResultHistory, check_sinks_allowed,
)

log = logging.getLogger(__name__)

QUERY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# How much the latest evaluation counts in a query's moving average of CPU per evaluation.
COST_SMOOTHING = 0.2
# A query catching up gives its scheduler thread back after this many evaluations (it goes
# on at its next run), so one query far behind does not hold a thread the others need.
MAX_EVALUATIONS_PER_RUN = 8
# Due instants a query under overrun = skip passes over in one run (the rest at its next run).
MAX_SKIPPED_PER_RUN = 100_000


def _standing(records) -> tuple[list, int, set[str], dict[str, tuple[int, int]]]:
    """What partitioned windows give at an instant from each key group's latest record (store.
    partitions.AT, with its count): the rows of all, the elements read, the windows holding
    elements and the interval each lists (from the oldest element any group holds to the newest)."""
    rows, count, windows = [], 0, {}
    for record, read in records:
        rows.extend(record["rows"])
        count += read
        for window, (oldest, newest) in record["windows"].items():
            held = windows.get(window)
            windows[window] = (oldest, newest) if held is None else (min(held[0], oldest), max(held[1], newest))
    return rows, count, set(windows), windows


class UnknownQuery(EndpointError):
    """No registered query has this id."""


class DuplicateQuery(EndpointError):
    """A query with this id is already registered."""


class InvalidQueryId(EndpointError):
    """A query id that is not a short name of letters, digits, '.', '_' or '-'."""


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
    def __init__(self, spec: QuerySpec, query: ContinuousQuery, evaluator: QueryEvaluator,
                 sinks: list[HttpSink], history: ResultHistory, start: int,
                 scope: EvaluationScope | None = None, clock: Clock | None = None):
        self.spec = spec
        self.scope = scope if scope is not None else EvaluationScope(EvaluationLimits())
        self.clock = clock
        self.query = query
        self.evaluator = evaluator
        self.http_sinks = sinks
        self.history = history
        self.feed = EventFeed()
        self.status = QueryStatus(rate=evaluator.policy.rate())
        self.after = start          # the next evaluation is at the query's first instant after this
        # Evaluated per key on Spark's executors (option partition), not by the runner here.
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
        # query's instants itself (Runner._run_unheld). Saved with the query's progress.
        self.groups_hold: bool | None = None

    @property
    def id(self) -> str:
        return self.spec.id

    def next_instant(self, after: int | None = None) -> int | None:
        """The query's next evaluation instant known now (after `after`, else after its last).
        A partitioned query's key groups find its instants that depend on the data (its
        partitioned windows' closes; the store here need not hold its elements): here, only
        the others are known."""
        after = self.after if after is None else after
        if self.partitioned:
            return self.evaluator.policy.next_fixed_instant(after)
        return self.evaluator.next_instant(after)

    def behind(self) -> int:
        """µs from the query's next due instant to the clock, now: it grows while a run is
        held up (by a slow evaluation, or waiting for a worker), not only after a run."""
        pending = self.status.next_close
        if self.clock is None or pending is None or self.status.state != "running":
            return self.status.behind
        return max(self.status.behind, self.clock.now() - pending)

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
            "normalised": self.query.normalised, "readings": self.query.readings, "warnings": self.query.warnings,
            "status": dict(self.status.describe(self.behind(), self.scope.running_seconds()),
                           isolated=self.scope.isolated(), probation=self.scope.on_probation(),
                           **self.history.describe()),
            "sink_backlog": {s.url: s.state.pending for s in self.http_sinks},
            "sink_outboxes": [s.describe() for s in self.http_sinks],
        }


# The runner's configuration: every [engine] setting as config/schema.py declares it (a new one
# is declared there alone), with a library's defaults (`rspstar serve` gives every setting its
# own), and what the runner takes from the other tables.
EngineConfig = settings_class("engine", "EngineConfig", frozen=False, profile=LIBRARY, extra=(
    ("data_dir", Path | None, field(default=None)),
    ("allowed_sinks", list, field(default_factory=list)),                  # [sinks] allowed
    # [federation] allowed: origins SERVICE and LOAD may reach; None only offline (a replay of
    # the user's own files).
    ("federation_allowed", list | None, field(default_factory=list)),
    ("partition_keys", dict, field(default_factory=dict)),                 # [partition_keys], parsed
))


class EngineAtCapacity(EndpointError):
    """A registration refused because the engine is at one of its admission limits."""

    retry_after = 60


class Runner:
    """Registered continuous queries over one stream store."""

    def __init__(self, store: StreamStore, clock: Clock, config: EngineConfig | None = None,
                 post: Poster | None = None, monotonic: Callable[[], float] = time.monotonic,
                 workers: EvaluationWorkers | None = None):
        self.store = store
        self.clock = clock
        self.config = config = config if config is not None else EngineConfig()
        self.monotonic = monotonic              # what evaluations' time limits are measured on
        self.evaluation_limits = EvaluationLimits(
            None if config.evaluation_timeout is None else config.evaluation_timeout / 1e6,
            config.max_result_rows, config.isolate_evaluations, config.max_entailed_triples)
        # What RDFS entailment may derive at an element's publication too (no evaluation's limits there).
        store.entailment.max_derived = config.max_entailed_triples
        # Worker processes for evaluations that must be killable (store.isolation): only over
        # an on-disk store, which they open read-only, and under a time limit. `workers`: a
        # pool of them the caller owns (several engines may share one).
        self._own_workers = workers is None
        if store.path is None or config.evaluation_timeout is None or config.isolate_evaluations == "never":
            workers = None
        elif workers is None:
            workers = EvaluationWorkers(memory_limit=config.worker_memory)
        self.workers = workers
        self.post = post if post is not None else Delivery()
        self._queries: dict[str, RegisteredQuery] = {}
        self._lock = threading.RLock()
        self.range_results = RangeResults()     # what queries with equal window blocks share
        self.constant_groups = ConstantGroups()  # queries differing only in constants
        self.listeners: list[Callable[[str, str], None]] = []   # (event, query id): registered/removed/background
        self.repository = QueryRepository(config.data_dir)
        self._configured: set[str] = set()      # ids of the configuration's queries (`configured`)
        self.background_refresh = None          # refresh.BackgroundRefresh of [[background.graphs]], if any
        # The streams the running engine's sources feed (set by `serve`, which knows them; None:
        # not known, a replay or the Python API): a window on any other stream, holding no
        # element, is warned about at registration.
        self.fed_streams: Callable[[], set[str]] | None = None
        self.removals = 0                       # queries removed since the engine started
        # Instants up to this one closed before the engine started: their evaluations (a
        # restart's catch-up) are counted apart from the close-to-result latency.
        self.started = clock.now()
        store.listen_to_arrivals(self._arrived)
        self._restore()

    @property
    def removed_ids(self) -> set[str]:
        """Ids of configured queries a user removed through `remove` (not registered again at
        the next start)."""
        return self.repository.removed

    def configured(self, ids: set[str]) -> None:
        """The ids of the configuration's queries: only their removal is remembered across
        restarts (another query's removal leaves nothing to remember, and remembering every
        id ever deleted would grow without end); a removal remembered for an id the
        configuration no longer has is forgotten."""
        with self._lock:
            self._configured = set(ids)
            self.repository.keep_removed(self._configured)

    def _restore(self) -> None:
        """Register again the queries the data directory holds, each continuing after its last
        evaluation. One registered under an earlier version or configuration (a limit since
        lowered, say) is set aside for the operator, never silently dropped."""
        unrestorable = []
        for spec in self.repository.specs():
            try:
                restored = self.register(spec.text, spec.id, spec.sinks, spec.options, persist=False,
                                         resume_after=spec.last_evaluation, resume_r2s=spec.r2s_previous,
                                         resume_state=spec.state)
                restored.status.restore(spec.counters or {})
                restored.spec.counters = spec.counters
            except (EndpointError, TranslatorError) as e:
                log.error("query %s from the data directory is not restored: %s (kept in %s)",
                          spec.id, e, self.repository.unrestored)
                unrestorable.append(spec)
        self.repository.set_aside(unrestorable)

    # -- registration -----------------------------------------------------------------------
    def register(self, text: str, query_id: str | None = None, sinks: list[str] | tuple = (),
                 options: dict[str, str] | None = None, persist: bool = True,
                 resume_after: int | None = None, resume_r2s: list | None = None,
                 compiled: ContinuousQuery | None = None, resume_state: dict | None = None) -> RegisteredQuery:
        """Check and register a query (TranslatorError for a bad query, SinkNotAllowed for a
        sink outside the allow-list, OptionError for a bad option); nothing changes on error.
        Its first evaluation is the first report instant after now (or after `resume_after`,
        with the IStream/DStream state `resume_r2s` of the evaluation there). `compiled`: the
        text as compile_query gave it under the options' dialect, start and base, when the caller has it."""
        options = dict(options or {})
        admitted = admit(text, self.config, options, compiled=compiled)
        query = admitted.query = self._with_data_warnings(admitted.query)
        if resume_after is None:       # a restored query's landmark holds what it held
            check_landmark_starts(query, self.store.evicted_before)
        check_sinks_allowed(sinks, self.config.allowed_sinks)
        if sinks and self.config.data_dir is None:
            raise EndpointError("sinks need a data directory for their outbox")
        query_id = self._derive_id(query) if query_id is None else query_id
        if not isinstance(query_id, str) or not QUERY_ID.fullmatch(query_id):
            raise InvalidQueryId("query id %s: use 1-64 letters, digits, '.', '_' or '-'" % json.dumps(query_id)[:80])
        with self._lock:
            if query_id in self._queries:
                raise DuplicateQuery("a query with id %r is already registered" % query_id)
            if persist:        # restored queries were admitted when they were registered
                self._admit()
            spec = QuerySpec(query_id, text, list(sinks), options, resume_after, resume_r2s)
            history_file = self.repository.history_file(query_id)
            # A new registration's outboxes start empty, whatever a query of that id left.
            http_sinks = [HttpSink(query_id, url, self.repository.outbox(), self.post, admitted.options.sink_format,
                                   query.variables, admitted.options.sink_empty, self.config.outbox_bytes,
                                   fresh=persist) for url in sinks]
            scope = EvaluationScope(self.evaluation_limits, self.workers, self.monotonic)
            evaluator = QueryEvaluator(query, ScopedStore(self.store, scope), admitted.options,
                                       shared=self.range_results, groups=self.constant_groups, policy=admitted.policy,
                                       query_id=query_id, landmark_elements=self.config.landmark_elements)
            if resume_r2s is not None:
                evaluator.restore_r2s_state(resume_r2s)
            start = self.clock.now() if resume_after is None else resume_after
            evaluator.begin(start, resumed=resume_after is not None)
            if resume_after is not None:
                evaluator.restore_state(resume_state, resume_after)
            registered = RegisteredQuery(spec, evaluator.query, evaluator, http_sinks,
                                         ResultHistory(self.config.history, history_file,
                                                       self.config.history_bytes), start, scope, self.clock)
            if resume_after is not None:     # evaluated up to there before a restart
                registered.evaluated = (resume_after, evaluator.policy.complete_through(resume_after))
            registered.groups_hold = (resume_state or {}).get("partitions", {}).get("hold")
            self._queries[query_id] = registered
            if persist:
                self.repository.save(spec)
                self.repository.registered_again(query_id)
        log.info("registered query %s (%s, windows: %s)", query_id, query.form.value,
                 ", ".join(query.windows) or "none")
        for listener in self.listeners:
            listener("registered", query_id)
        return registered

    def _with_data_warnings(self, query: ContinuousQuery) -> ContinuousQuery:
        """The query with a warning for each part that can match nothing in the data the engine
        holds now (translator/warnings.py): patterns outside its windows over an empty
        background, windows on streams no source feeds and holding no element."""
        store = self.store

        def holds(graph: str | None) -> bool:
            return bool(store.query("ASK { ?s ?p ?o }" if graph is None else "ASK { GRAPH <%s> { ?s ?p ?o } }" % graph))

        found = background_warnings(query, holds, [g for g in store.background.graphs() if holds(g)])
        if self.fed_streams is not None:
            fed = set(self.fed_streams()) | {q.query.output_stream for q in self.queries() if q.query.output_stream}
            streams = store.streams()
            found += unfed_stream_warnings(query, fed, lambda s: s in streams and streams[s].ingested > 0)
        return replace(query, warnings=query.warnings + found) if found else query

    def load(self) -> float:
        """Cores the registered queries' evaluations take together, as measured; an evaluation
        running now counts with the time it has taken so far (a query's first evaluation is
        its cost before it ends)."""
        return sum(q.status.core_share(q.scope.running_seconds()) for q in self.queries())

    def load_budget(self) -> float | None:
        return None if self.config.max_load is None else self.config.max_load * (os.cpu_count() or 1)

    def _admit(self) -> None:
        """EngineAtCapacity when one more query would exceed a limit: the number of queries, or
        the evaluations' measured load, running ones counted with their time so far (a new
        query's own cost is not known before it runs: one is admitted while the others leave
        room)."""
        limit = self.config.max_queries
        if limit is not None and len(self._queries) >= limit:
            raise EngineAtCapacity("%d queries are registered, the engine's limit ([engine] max_queries): remove "
                                   "one first" % len(self._queries))
        budget = self.load_budget()
        if budget is not None:
            load = self.load()
            if load >= budget:
                raise EngineAtCapacity(
                    "the registered queries' evaluations take %.2f cores (measured), the engine's budget is %.2f "
                    "([engine] max_load = %g of %d cores): remove queries, make their windows step less often, or "
                    "raise the budget" % (load, budget, self.config.max_load, os.cpu_count() or 1))

    def _derive_id(self, query: ContinuousQuery) -> str:
        if query.name:
            candidate = re.sub(r"[^A-Za-z0-9._-]+", "-", query.name.rstrip("/").rsplit("/", 1)[-1]).strip("-.")
            if candidate and QUERY_ID.fullmatch(candidate) and candidate not in self._queries:
                return candidate
        return "q-" + uuid.uuid4().hex[:12]

    def remove(self, query_id: str) -> None:
        with self._lock:
            if query_id not in self._queries:
                raise UnknownQuery("no query with id %r" % query_id)
            removed = self._queries.pop(query_id)
            self.removals += 1
            removed.removed = True
            removed.scope.cancel()      # its running evaluation stops (store.limits)
            removed.history.discard()
            removed.feed.close()
            for sink in removed.http_sinks:
                sink.discard()
            self.repository.delete(query_id)
            if query_id in self._configured:
                self.repository.removed_by_user(query_id)
        # Outside the engine's lock: leaving a group waits for a range the group may be evaluating.
        removed.evaluator.close()
        for listener in self.listeners:
            listener("removed", query_id)

    def stop_evaluations(self) -> None:
        """The engine stops: every evaluation running ends within moments (at its next look at
        its budget on a thread, at once in a worker process, which is killed), nothing of it
        delivered and no query failed by it; none starts after."""
        for registered in self.queries():
            registered.scope.cancel()
        if self.workers is not None and self._own_workers:
            self.workers.stop()

    def close(self) -> None:
        """Let go of the sinks' connections (MQTT brokers), the outboxes keeping what is
        pending, and stop the evaluation worker processes."""
        self.store.stop_listening_to_arrivals(self._arrived)
        close = getattr(self.post, "close", None)
        if close is not None:
            close()
        if self.workers is not None and self._own_workers:
            self.workers.close()
        self.repository.close()

    def get(self, query_id: str) -> RegisteredQuery:
        with self._lock:
            try:
                return self._queries[query_id]
            except KeyError:
                raise UnknownQuery("no query with id %r" % query_id) from None

    def queries(self) -> list[RegisteredQuery]:
        with self._lock:
            return list(self._queries.values())

    # -- evaluation ------------------------------------------------------------------------------
    def due(self, registered: RegisteredQuery, instant: int) -> str | None:
        """Why the evaluation at `instant` may run now: every input stream's watermark has
        reached it ("watermark"; an instant at most `max_event_ahead` past the clock, so that a
        watermark far ahead has no query evaluate empty windows up to it), or `max_delay` of
        clock time has passed ("max_delay")."""
        streams = registered.query.streams
        needed = registered.evaluator.policy.complete_through(instant)
        watermarks = [self.store.watermark(s) for s in streams]
        if streams and all(w is not None and w >= needed for w in watermarks) \
                and instant <= self.clock.now() + self.config.max_event_ahead:
            return "watermark"
        if self.clock.now() >= instant + (self.config.max_delay if streams else 0):
            return "max_delay"
        return None

    def run_query(self, query_id: str) -> int:
        """Evaluate every due instant of one query, in order; returns how many ran."""
        try:
            registered = self.get(query_id)
        except UnknownQuery:
            return 0
        if registered.partitioned:
            return self._run_unheld(registered)
        if not registered.lock.acquire(blocking=False):
            registered.status.missed_runs += 1
            return 0
        ran = 0
        try:
            if registered.evaluator.options.overrun == "skip" and registered.status.state == "running":
                self._skip_overrun(registered)
            while registered.status.state == "running" and not registered.removed \
                    and ran < MAX_EVALUATIONS_PER_RUN:
                instant = registered.next_instant()
                if instant is None:
                    break
                trigger = self.due(registered, instant)
                if trigger is None:
                    break
                cpu = time.thread_time()
                # From now on an element the evaluation needs that is not in yet is late for it.
                registered.evaluated = (instant, registered.evaluator.policy.complete_through(instant))
                budget = registered.scope.begin()
                try:
                    evaluation = registered.evaluator.evaluate(instant)
                    if evaluation is not None:   # the output as a whole: kept ranges' rows count too
                        budget.check_output(len(evaluation.rows))
                except EvaluationCancelled:     # removed meanwhile: nothing more to do
                    break
                except Exception as e:  # any failure of one query must not stop the others
                    registered.fail(instant, "%s: %s" % (type(e).__name__, e))
                    break
                finally:
                    registered.scope.end()
                registered.after = instant
                self._emit(registered, instant, trigger, evaluation)
                # The CPU of calls made in a worker process is not this thread's: their time counts.
                registered.status.record_cost(time.thread_time() - cpu + budget.isolated_seconds, self.clock.now())
                ran += 1
            # A count window's or an arrival's next instant may have become known without an
            # evaluation here: the status says what is next now.
            pending = registered.status.next_close = registered.next_instant()
            registered.status.behind = 0 if pending is None else max(0, self.clock.now() - pending)
            if ran:
                self._save_progress(registered)
        finally:
            registered.lock.release()
        return ran

    def _skip_overrun(self, registered: RegisteredQuery) -> None:
        """Under overrun = skip: when more than one instant is due, the query goes on from the
        latest of them; the ones before are counted, not evaluated (at most MAX_SKIPPED_PER_RUN
        looked at per run, so a query far behind costs its run a bounded walk)."""
        instant = registered.next_instant()
        if instant is None or self.due(registered, instant) is None:
            return
        skipped = 0
        while skipped < MAX_SKIPPED_PER_RUN:
            following = registered.evaluator.next_instant(instant)
            if following is None or self.due(registered, following) is None:
                break
            registered.after, instant = instant, following
            skipped += 1
        if skipped:
            # Warned once; a query that stays behind skips at every run, which its status and
            # /metrics count.
            level = logging.WARNING if not registered.status.skipped_instants else logging.INFO
            registered.status.skipped_instants += skipped
            log.log(level, "query %s: %d instants skipped (overrun = skip), evaluating %s", registered.id, skipped,
                    format_instant(instant))

    def _save_progress(self, registered: RegisteredQuery) -> None:
        """One write keeps the last instant and the R2S state it produced together."""
        registered.spec.last_evaluation = registered.status.last_evaluation
        registered.spec.r2s_previous = registered.evaluator.r2s_state()
        if self.repository.data_dir is not None:      # (read only to be kept)
            registered.spec.state = registered.evaluator.query_state()
            if registered.partitioned:
                registered.spec.state = dict(registered.spec.state or {}, partitions={"hold": registered.groups_hold})
        registered.spec.counters = registered.status.saved()
        if not registered.removed:
            self.repository.save_progress(registered.spec)

    def update_background(self, sparql: str, base_iri: str | None = None) -> int:
        """A SPARQL Update of the background (store.background.update)."""
        changed = self.store.background.update(sparql, base_iri)
        self.background_changed()
        return changed

    def background_changed(self) -> None:
        """The partitioned queries' listeners hear of a background change ("background"): their
        executors hold a copy."""
        for registered in self.queries():
            if registered.partitioned:
                for listener in self.listeners:
                    listener("background", registered.id)

    # -- partitioned queries (docs/partitioned-queries.md) ----------------------------------
    def partition_plan(self, query_id: str) -> PartitionPlan:
        """What Spark's executors need to evaluate a partitioned query: its text and options, its
        streams' keys, the background as it is now."""
        registered = self.get(query_id)
        options = registered.evaluator.options
        return PartitionPlan(query_id, registered.spec.text,
                             {s: self.config.partition_keys[s] for s in registered.query.streams},
                             self.store.background.nquads(), options.dialect, options.start, options.report,
                             options.rewrite_options(registered.query), options.rspu_cache, self.config.max_delay,
                             self.config.key_groups, options.base)

    def accept_partitions(self, query_id: str, emitted: list[Emitted]) -> int:
        """A micro-batch of a partitioned query's key groups' rows (store.partitions.Emitted):
        every instant up to the watermark the keys saw is evaluated, each from the rows all keys
        found for it (none: an empty evaluation), in order; instants already evaluated (a
        micro-batch replayed after a restart, late elements of a new key) are not again.
        Returns the number of evaluations."""
        try:
            registered = self.get(query_id)
        except UnknownQuery:
            return 0
        marks = [row for row in emitted if row.kind == MARK]
        through = max((row.instant for row in marks), default=-1)
        late = sum(row.count for row in marks)
        # Every group that keeps elements runs at every micro-batch (store.partitions): one with
        # no MARK keeping some is one where none holds elements.
        told = [read_mark(row.payload) for row in marks]
        hold = any(holds for holds, _ in told)
        watermark = max((w for _, w in told if w is not None), default=None)
        failed = min((row for row in emitted if row.kind == FAILED), default=None, key=lambda row: row.instant)
        if failed is not None:     # the instants before it are complete; it and the rest are not
            through = min(through, failed.instant - 1)
        rows: dict[int, list[dict]] = {}
        counts: dict[int, int] = {}
        holding: dict[int, set[str]] = {}
        standing: list[tuple[int, str, dict, int]] = []     # partitioned windows: (instant, group, record, count)
        for row in emitted:
            if row.kind == ROWS:
                rows.setdefault(row.instant, []).extend(json.loads(row.payload))
                counts[row.instant] = counts.get(row.instant, 0) + row.count
            elif row.kind == HOLDS:
                holding.setdefault(row.instant, set()).update(json.loads(row.payload))
            elif row.kind == AT:
                standing.append((row.instant, row.key, json.loads(row.payload), row.count))
        with registered.lock:
            if registered.status.state != "running":
                return 0
            if late:
                registered.status.late_elements += late
                log.warning("query %s: %d late element(s), kept for the windows still open", query_id, late)
            policy = registered.evaluator.policy
            instants = policy.fixed_instants(registered.after, through) if through >= 0 else []
            keyed = any(isinstance(w, PartitionedWindow) for w in registered.query.windows.values())
            if keyed:
                instants = self._keyed_instants(registered, instants, standing, through)
                standing.sort(key=lambda record: record[0])
                current: dict[str, tuple[dict, int]] = {}      # each group's latest record
                taken = 0
            for instant in instants:
                if keyed:
                    while taken < len(standing) and standing[taken][0] <= instant:
                        current[standing[taken][1]] = standing[taken][2:]
                        taken += 1
                    evaluation = registered.evaluator.evaluation_of(instant, *_standing(current.values()))
                else:
                    evaluation = registered.evaluator.evaluation_of(instant, rows.get(instant, []),
                                                                    counts.get(instant, 0), holding.get(instant, set()))
                registered.after = instant
                # Due by the watermark the groups saw, or else by max_delay of processing time.
                trigger = "watermark" if watermark is not None and watermark >= policy.complete_through(instant) \
                    else "max_delay"
                self._emit(registered, instant, trigger, evaluation)
            registered.status.next_close = registered.next_instant()
            changed = hold != registered.groups_hold
            registered.groups_hold = hold
            if instants or changed:
                self._save_progress(registered)
            if failed is not None:     # as a failing evaluation stops a query of the single store
                registered.fail(failed.instant, failed.payload)
        return len(instants)

    @staticmethod
    def _keyed_instants(registered: RegisteredQuery, fixed: list[int], standing: list[tuple], through: int) -> list[int]:
        """A query over partitioned windows: its instants in (after, through], those its policy
        gives whatever the data (periodic) and those where the windows its key groups say
        closed there, together, make the policy hold."""
        closed: dict[int, set[str]] = {}
        for instant, _, record, _ in standing:
            if record["closed"] and registered.after < instant <= through:
                closed.setdefault(instant, set()).update(record["closed"])
        policy = registered.evaluator.policy
        return sorted(set(fixed) | {t for t, windows in closed.items() if policy.gives(t, windows)})

    def groups_may_hold(self, registered: RegisteredQuery) -> bool:
        """Whether a partitioned query's key groups may hold elements (so that they report its
        instants): as the latest micro-batch told, or, before any has, whether the store holds
        elements of its streams (its streaming query reads them again)."""
        if registered.groups_hold is not None:
            return registered.groups_hold
        streams = self.store.streams()
        return any(streams[s].elements for s in registered.query.streams if s in streams)

    def _run_unheld(self, registered: RegisteredQuery) -> int:
        """A partitioned query's instants while none of its key groups holds elements: none
        reports then (before the first element, after they all expired), so the runner
        evaluates them itself once due by max_delay, empty, as the single store does with
        nothing in the windows. Returns how many ran."""
        if not registered.lock.acquire(blocking=False):
            registered.status.missed_runs += 1
            return 0
        ran = 0
        try:
            while registered.status.state == "running" and not registered.removed and ran < MAX_EVALUATIONS_PER_RUN \
                    and not self.groups_may_hold(registered):
                instant = registered.next_instant()     # (those that depend on the data: none here)
                if instant is None or self.clock.now() < instant + self.config.max_delay:
                    break
                evaluation = registered.evaluator.evaluation_of(instant, [], 0, windows={} if any(
                    isinstance(w, PartitionedWindow) for w in registered.query.windows.values()) else None)
                registered.after = instant
                self._emit(registered, instant, "max_delay", evaluation)
                ran += 1
            registered.status.next_close = registered.next_instant()
            if ran:
                self._save_progress(registered)
        finally:
            registered.lock.release()
        return ran

    def _arrived(self, stream: str, timestamps: list[int]) -> None:
        """Elements published to `stream` now: those stamped below what a query's evaluations
        already needed of it came too late for them (spec section 5). Counted per query and
        logged; they are stored, and join the windows still open. (A partitioned query's keys
        count their own.) Called by the store, maybe under its lock: no engine lock is taken."""
        earliest = min(timestamps)
        for registered in tuple(self._queries.values()):
            if registered.evaluated is None or registered.partitioned:
                continue
            instant, bound = registered.evaluated
            if earliest >= bound or stream not in registered.query.streams:
                continue
            late = sum(1 for t in timestamps if t < bound)
            with registered.late_lock:
                first = not registered.status.late_elements
                registered.status.late_elements += late
            # Warned once per query; a source that keeps coming late is in its status and /metrics.
            log.log(logging.WARNING if first else logging.INFO,
                    "query %s: %d element(s) of <%s> came after the query evaluated their instant (the "
                    "latest %s); not evaluated again, kept for the windows still open", registered.id, late, stream,
                    format_instant(instant))

    def _emit(self, registered: RegisteredQuery, instant: int, trigger: str, evaluation: Evaluation | None) -> None:
        status = registered.status
        status.last_evaluation = instant
        status.last_trigger = trigger
        status.next_close = registered.next_instant(instant)
        if evaluation is None:  # skipped by the non-empty report policy
            return
        status.evaluations += 1
        status.durations.append(evaluation.seconds)
        status.results_emitted += len(evaluation.rows) if evaluation.boolean is None else 1
        record = evaluation.record()
        record["trigger"] = trigger
        latency = self.clock.now() - instant
        record["latency_ms"] = round(latency / 1000, 1)   # close to result, in clock time
        registered.history.append(instant, record)
        registered.feed.publish(record)
        for sink in registered.http_sinks:
            sink.enqueue(record)
        if instant <= self.started:
            status.caught_up += 1           # a close the engine was not running for: not its latency
        else:
            status.latencies.append(latency)
        query = registered.query
        if query.output_stream and query.form is QueryForm.CONSTRUCT:
            self._append_output_element(query.output_stream, instant, evaluation, status.next_close)

    def _append_output_element(self, stream: str, instant: int, evaluation: Evaluation,
                               complete_until: int | None) -> None:
        """A CONSTRUCT evaluation that constructs triples becomes one element of the output
        stream (timestamp = the evaluation instant), which other queries can window over. An
        evaluation with no triples adds no element (an empty named graph is no graph in RDF),
        but still moves the stream's watermark."""
        if evaluation.triples:
            graph = "urn:rspstar:output:%s:%d" % (quote(stream, safe=""), instant)
            name = ox.NamedNode(graph)
            quads = [ox.Quad(t.subject, t.predicate, t.object, name) for t in evaluation.triples]
            self.store.add_elements(stream, [Element(graph, instant, instant_literal(instant), quads)])
        # Nothing earlier than the query's next instant can appear in its output any more.
        self.store.advance_watermark(stream, complete_until if complete_until is not None else instant + 1)

    def deliver(self) -> int:
        now = self.clock.now()
        return sum(sink.deliver(now) for q in self.queries() for sink in q.http_sinks)

    def evict(self) -> int:
        """Drop elements no registered window can reach any more."""
        bounds: dict[str, int] = {}
        for registered in self.queries():
            if registered.status.state != "running" or registered.partitioned:
                continue
            for stream, bound in registered.evaluator.retention_bounds(registered.after).items():
                bounds[stream] = min(bound, bounds.get(stream, bound))
        evicted = 0
        for stream, stats in self.store.streams().items():
            if stream in bounds:
                evicted += self.store.evict_before(stream, bounds[stream])
            elif stats.latest is not None:
                # Read by no query: keep a while for queries registered later.
                evicted += self.store.evict_before(stream, stats.latest - self.config.idle_retention)
        if evicted:
            self.store.maybe_compact()
        return evicted

    def tick(self) -> int:
        """Everything due now: evaluations (repeated while outputs feed other queries),
        deliveries and retention, after the background graphs due for a reload. Returns the
        number of evaluations."""
        if self.background_refresh is not None:
            self.background_refresh.run_due()
        total = 0
        while True:
            ran = sum(self.run_query(q.id) for q in self.queries())
            total += ran
            if not ran:
                break
        self.deliver()
        self.evict()
        return total
