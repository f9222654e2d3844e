"""The continuous-query engine: registered queries evaluated at their report instants, once
their input is complete, with results going to every sink (spec §3 and §5).

The runner registers queries (admission, ids, persistence) and ticks: `Runner.tick()` does all
that is due at the clock's current time, asking each registered query to run its due instants
(registered.py; `due` says when one is), delivering the sinks' outboxes and evicting what no
window reaches. The live scheduler calls it, tests call it after moving a virtual clock.
Evaluation is the same `QueryEvaluator` that `rspstar replay` uses, so live results equal a
replay of the same input. A partitioned query's key groups report through partitioned.py.
"""
from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from dataclasses import field, replace
from pathlib import Path
from typing import Callable

from rspstar.config.schema import LIBRARY, settings_class
from rspstar.store.isolation import EvaluationWorkers
from rspstar.store.limits import EvaluationLimits, EvaluationScope
from rspstar.store.partitions import Emitted, PartitionPlan
from rspstar.store.stream_store import ScopedStore, StreamStore
from rspstar.translator.errors import TranslatorError
from rspstar.translator.model import ContinuousQuery, QueryForm
from rspstar.translator.admission import admit, check_landmark_starts
from rspstar.translator.warnings import background_warnings, unfed_stream_warnings
from rspstar.translator.temporal import InstantTexts
from rspstar.translator.variants import CompiledShapes

from .clock import Clock
from .errors import DuplicateQuery, EndpointError, EngineAtCapacity, InvalidQueryId, UnknownQuery
from .evaluation import QueryEvaluator
from .partitioned import PartitionedQueries
from .sharing import ConstantGroups, RangeResults
from .repository import QueryRepository, QuerySpec
from .registered import RegisteredQuery
from .sinks import OutputStream, Poster, ResultHistory, Transports, check_sinks_allowed

log = logging.getLogger(__name__)

QUERY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# A query catching up gives its scheduler thread back after this many evaluations (it goes
# on at its next run), so one query far behind does not hold a thread the others need.
MAX_EVALUATIONS_PER_RUN = 8


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


class Runner:
    """Registered continuous queries over one stream store."""

    def __init__(self, store: StreamStore, clock: Clock, config: EngineConfig | None = None,
                 post: Poster | None = None, monotonic: Callable[[], float] = time.monotonic,
                 workers: EvaluationWorkers | None = None, shapes: CompiledShapes | None = None):
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
        # What outbox sinks deliver through (`post`: the HTTP sinks' poster instead of requests).
        self.transports = Transports({"http": post} if post is not None else None)
        self._queries: dict[str, RegisteredQuery] = {}
        self._lock = threading.RLock()
        self.range_results = RangeResults()     # what queries with equal window blocks share
        # The syntax trees of the queries registered, by shape (`shapes`: a caller's that compiled
        # them): a text differing from one of them only in constants is not parsed again, and
        # joins its group without working out its constants again.
        self.shapes = shapes if shapes is not None else CompiledShapes()
        # Queries differing only in constants; a group keeps the windows it made for two turns of
        # its members (a turn: each member's closes up to MAX_EVALUATIONS_PER_RUN, one after another).
        self.constant_groups = ConstantGroups(self.shapes, windows_kept=2 * MAX_EVALUATIONS_PER_RUN)
        # The texts of the instants its queries' records carry (at a close, the same few for all).
        self.instant_texts = InstantTexts()
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
        self.partitions = PartitionedQueries(store, clock, config, self._save_progress)
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
        admitted = admit(text, self.config, options, compiled=compiled, shapes=self.shapes)
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
            url_sinks = tuple(self.transports.sink(query_id, url, self.repository.outbox(),
                                                   shape=admitted.options.sink_format, variables=query.variables,
                                                   send_empty=admitted.options.sink_empty,
                                                   max_bytes=self.config.outbox_bytes, fresh=persist) for url in sinks)
            scope = EvaluationScope(self.evaluation_limits, self.workers, self.monotonic)
            evaluator = QueryEvaluator(query, ScopedStore(self.store, scope), admitted.options,
                                       shared=self.range_results, groups=self.constant_groups, policy=admitted.policy,
                                       query_id=query_id, landmark_elements=self.config.landmark_elements)
            start = self.clock.now() if resume_after is None else resume_after
            evaluator.begin(start, resumed=resume_after is not None)
            output = OutputStream(self.store, query.output_stream) \
                if query.output_stream and query.form is QueryForm.CONSTRUCT else None
            registered = RegisteredQuery(spec, evaluator.query, evaluator, url_sinks,
                                         ResultHistory(self.config.history, history_file,
                                                       self.config.history_bytes), start, scope, self.clock, output,
                                         self.started, self.instant_texts)
            if resume_after is not None:     # evaluated up to there before a restart
                registered.resume(resume_after, resume_r2s, resume_state)
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
            for sink in removed.sinks:
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
        self.transports.close()
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
        now = self.clock.now()
        if self.complete(registered, instant) and instant <= now + self.config.max_event_ahead:
            return "watermark"
        if now >= instant + (self.config.max_delay if registered.streams else 0):
            return "max_delay"
        return None

    def complete(self, registered: RegisteredQuery, instant: int) -> bool:
        """Whether every stream of the query is complete through what `instant` needs."""
        streams = registered.streams
        if not streams:
            return False
        needed = registered.evaluator.policy.complete_through(instant)
        watermark = self.store.watermark
        for stream in streams:       # (asked of every query at every tick: a loop, not all() over a generator)
            reached = watermark(stream)
            if reached is None or reached < needed:
                return False
        return True

    def run_query(self, query_id: str) -> int:
        """Evaluate every due instant of one query, in order (at most MAX_EVALUATIONS_PER_RUN);
        returns how many ran."""
        with self._lock:
            registered = self._queries.get(query_id)
        if registered is None:
            return 0
        if registered.partitioned:
            return self.partitions.run_unheld(registered, MAX_EVALUATIONS_PER_RUN)
        return registered.run(self.due, MAX_EVALUATIONS_PER_RUN, self._save_progress)

    def _save_progress(self, registered: RegisteredQuery) -> None:
        """One write keeps the last instant and the R2S state it produced together (none
        without a data directory: nothing else reads a query's saved progress)."""
        if self.repository.data_dir is None:
            return
        spec = registered.progress()
        if not registered.removed:
            self.repository.save_progress(spec)

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

    # -- partitioned queries (docs/partitioned-queries.md, partitioned.py) -------------------
    def partition_plan(self, query_id: str) -> PartitionPlan:
        """What Spark's executors need to evaluate a partitioned query."""
        return self.partitions.plan(self.get(query_id))

    def accept_partitions(self, query_id: str, emitted: list[Emitted]) -> int:
        """A micro-batch of a partitioned query's key groups: the number of evaluations it made."""
        with self._lock:
            registered = self._queries.get(query_id)
        return self.partitions.accept(registered, emitted)

    def _arrived(self, stream: str, timestamps: list[int]) -> None:
        """Elements published to `stream` now: each query counts those that came too late for
        it. Called by the store, maybe under its lock: no engine lock is taken."""
        earliest = min(timestamps)
        for registered in tuple(self._queries.values()):
            registered.count_late(stream, timestamps, earliest)

    def deliver(self) -> int:
        now = self.clock.now()
        return sum(sink.deliver(now) for q in self.queries() for sink in q.url_sinks)

    def evict(self) -> int:
        """Drop elements no registered window can reach any more."""
        bounds: dict[str, int] = {}
        for registered in self.queries():
            if registered.status.state != "running":
                continue
            # (A partitioned query's elements are kept by its key groups: its S2R bounds nothing.)
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
        pending = self.queries()
        while pending:
            ran = [(q, self.run_query(q.id)) for q in pending]
            total += sum(n for _, n in ran)
            if any(n and q.query.output_stream for q, n in ran):
                pending = self.queries()    # an output may complete other queries' windows
            else:   # only a query that stopped at its run's cap may have more due now
                pending = [q for q, n in ran if n >= MAX_EVALUATIONS_PER_RUN]
        self.deliver()
        self.evict()
        return total
