"""The engine's runs of a drawn case, and the fast paths they reach.

- `optimised`: the engine as it runs by default (every optimisation on), several queries
  registered together on one runner, each with the base a file of its own gives it, so that
  they share its RangeResults and ConstantGroups:
  the drawn query, a copy under another R2S operator (equal window blocks), and copies with
  other constants (a group of queries differing only in constants): one with every number
  moved, and, for a query comparing numbers with a variable, BOUND_COPIES with those numbers
  spelled other ways (decimal, double, float, typed, NaN, infinities), which the group applies
  by its index (`_Split`, lowered to SPLIT_FROM members for the run).
- `plain`: the drawn query alone with every optimisation off (QueryOptions.all_off: rspu_cache,
  lazy_bind, h4, fuse_rspu, incremental, share_constants all false), so it reaches no shared
  structure either.

`Reached` counts, while a run goes, which fast paths it took (the counters wrap the engine's
functions and return what they return; nothing else changes).
"""
from __future__ import annotations

import collections
import contextlib
import tempfile
from pathlib import Path

import pyoxigraph as ox

from rspstar.endpoint.engine import r2r, sharing
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.errors import EndpointError
from rspstar.endpoint.engine.replay import Replay, ReplayInput
from rspstar.endpoint.engine.runner import EngineConfig, Runner
from rspstar.store.codec import Payload
from rspstar.store.isolation import EvaluationWorkers
from rspstar.store.partitions import KeptStores, PlanRunner, keyed_elements
from rspstar.store.stream_store import StreamStore
from rspstar.translator import rewrite, variants
from rspstar.translator.errors import TranslatorError
from rspstar.translator.partition import PartitionError, PartitionKey
from rspstar.translator.policy import PolicyError
from test_partitions import play     # the micro-batches as Spark runs them (tests/test_partitions.py)

from .model import EX, MS, T0, Case, EventQuery, Query, bound_numbers, stream_file, with_bounds_spelled, with_other_constants

OFF = {"rspu_cache": "false", "lazy_bind": "false", "h4": "false", "fuse_rspu": "false", "incremental": "false",
       "share_constants": "false"}

# The fast paths the differential test must reach (docs/design.md, "Fast paths").
FAST_PATHS = (
    "incremental ranges", "shared ranges", "constant groups", "rspu cache", "rspu cache across evaluations",
    "lazy binding", "H4 deferred",
    "H4 in place", "fused calls", "evaluated without the rspu table", "evaluated with the rspu table",
    "rspu IRI prefixed", "rspu IRI full", "rspu IRI base-relative", "rspu IRI other prefix", "joined windows",
    "landmark rows", "landmark aggregates", "incremental ranges under entailment",
    "constant groups under entailment", "joined windows under entailment", "constant bounds",
    "constants parsed once", "constants read from their shape",
)
# Copies of a query comparing numbers with a variable, those numbers spelled other ways
# (model.with_bounds_spelled): a group of queries differing in such constants, which the optimised
# run applies by the group's index from this many sets of constants (the engine's threshold is a
# matter of speed, not of answers: the drawn groups are smaller).
BOUND_COPIES = 3
SPLIT_FROM = 2
# The fast paths that stay on under `entailment = rdfs`, counted apart when a query has it.
UNDER_ENTAILMENT = ("incremental ranges", "constant groups", "joined windows")
_SPELLING = {"rspu": "rspu IRI prefixed", "full": "rspu IRI full", "base": "rspu IRI base-relative",
             "other": "rspu IRI other prefix"}


class Refused(Exception):
    """The engine refused a query at registration."""


class Reached(collections.Counter):
    """Fast path -> how many times it was taken (`entailment`: whether the run counted now is
    of a query under entailment)."""

    entailment = False

    @contextlib.contextmanager
    def counting(self):
        patches = []

        def wrap(owner, name, after):
            original = getattr(owner, name)

            def wrapper(*args, **kwargs):
                result = original(*args, **kwargs)
                after(result, *args)
                return result
            patches.append((owner, name, original))
            setattr(owner, name, wrapper)

        def taken(path, when=lambda result, *args: True):
            def after(result, *args):
                if when(result, *args):
                    self[path] += 1
                    if self.entailment and path in UNDER_ENTAILMENT:
                        self[path + " under entailment"] += 1
            return after

        def landmark(result, ranges, contents):
            # Close by close when the rows kept reach the window's close (else it was evaluated whole).
            content = contents.get(ranges.plan.window)
            if content is not None and ranges.through == content.closes:
                self["landmark aggregates" if ranges.aggregating else "landmark rows"] += 1

        wrap(r2r.RangeRows, "rows", taken("incremental ranges"))
        wrap(sharing.RangeResults, "get", taken("shared ranges", lambda r, *a: r is not None))
        wrap(sharing._ConstantGroup, "window", taken("constant groups", lambda r, *a: r is not None))
        wrap(sharing._Split, "read", taken("constant bounds"))
        wrap(variants.CompiledShapes, "variant", taken("constants parsed once", lambda r, *a: r is not None))
        wrap(variants.CompiledShapes, "parameterized", taken("constants read from their shape",
                                                            lambda r, *a: r is not None))
        wrap(r2r, "_join_all", taken("joined windows"))
        wrap(r2r.LandmarkRanges, "relation", landmark)
        wrap(rewrite._Rewriter, "lazy_skips", taken("lazy binding", lambda r, *a: r))
        wrap(r2r.FilterPlacement, "next", lambda deferred, *a: self.update(["H4 deferred" if deferred else "H4 in place"]))

        def evaluated(result, store, template, *args):
            self["evaluated with the rspu table" if template.calls_rspu else "evaluated without the rspu table"] += 1
            if template.fused_functions:
                self["fused calls"] += 1
        wrap(StreamStore, "evaluate", evaluated)
        try:
            yield self
        finally:
            for owner, name, original in reversed(patches):
                setattr(owner, name, original)

    def spellings(self, query: Query, before: int) -> None:
        """The query's rspu: IRIs reached the function table when evaluations used it."""
        if self["evaluated with the rspu table"] > before:
            for spelling in query.spellings():
                self[_SPELLING[spelling]] += 1


def write_input(case: Case, directory: Path) -> tuple[list[tuple[str, Path]], Path]:
    streams = []
    for stream in case.streams():
        path = directory / ("s%d.trig" % stream)
        path.write_text(stream_file(list(case.elements), stream))
        streams.append((EX + "s%d" % stream, path))
    background = directory / "background.trig"
    background.write_text(case.background.trig())
    return streams, background


def replay(case: Case, queries: dict[str, Query], options: dict[str, str], reached: Reached | None = None,
           isolated: EvaluationWorkers | None = None):
    """{query id: its records} of a replay of the case's input with these queries registered
    together; Refused when the engine refuses one; AssertionError when one fails. `isolated`:
    over an on-disk store, every evaluation in these worker processes."""
    options = dict(options, **next(iter(queries.values())).options())
    with tempfile.TemporaryDirectory() as tmp:
        streams, background = write_input(case, Path(tmp))
        # Each query read from a file of its own, as `rspstar replay q.rq copy.rq ...` reads them:
        # they share what they share whatever their bases (none of them reads its base).
        spec = ReplayInput({qid: q.text() for qid, q in queries.items()}, streams, T0, T0 + case.end * MS,
                           background, options, {qid: "file:///differential/%s.rq" % qid for qid in queries})
        try:
            run = Replay(spec) if isolated is None else IsolatedReplay(spec, Path(tmp), isolated)
        except (TranslatorError, EndpointError) as e:
            raise Refused("%s: %s" % (type(e).__name__, e)) from e
        saved, sharing.SPLIT_FROM = sharing.SPLIT_FROM, SPLIT_FROM
        try:
            records: dict[str, list] = {qid: [] for qid in queries}
            for qid, record in run.run():
                records[qid].append(record)
            failures = run.failures()
            assert not failures, "the engine failed: %s" % (failures,)
            if reached is not None:
                for registered in run.registered.values():
                    counts = registered.evaluator.functions.counts
                    if counts.calls > counts.computed:
                        reached["rspu cache"] += 1
                    if counts.kept:
                        reached["rspu cache across evaluations"] += 1
            return records
        finally:
            sharing.SPLIT_FROM = saved
            if isolated is not None:
                run.engine.close()
                run.store.close()


class IsolatedReplay(Replay):
    """A replay over an on-disk store whose every evaluation runs in a worker process
    (`isolate_evaluations = always`, store/isolation.py): a second way of computing the same
    records."""

    timeout = 120 * 1_000_000          # µs an evaluation may take in its worker

    def __init__(self, spec: ReplayInput, directory: Path, workers: EvaluationWorkers):
        self.directory, self.workers, self.stores = directory, workers, 0
        super().__init__(spec)

    def _new_store(self) -> StreamStore:
        self.stores += 1
        return StreamStore(str(self.directory / ("store%d" % self.stores)), compact_after=2**62, remove_evicted=False)

    def _runner(self) -> Runner:
        config = EngineConfig(max_delay=0, max_range=2**62, max_reports_per_second=float("inf"), history=0,
                              federation_allowed=None, landmark_elements=2**62, evaluation_timeout=self.timeout,
                              isolate_evaluations="always")
        return Runner(self.store, self.clock, config, workers=self.workers, shapes=self.shapes)


def optimised_queries(query: Query | EventQuery) -> dict[str, Query]:
    """The drawn query and the queries registered beside it in the optimised run (an EP-SPARQL
    query has no R2S keyword of its own: none under another operator)."""
    found = {"q": query}
    if query.form != "ASK" and not isinstance(query, EventQuery):
        found["copy"] = query.with_r2s({"RSTREAM": "ISTREAM", "ISTREAM": "DSTREAM", "DSTREAM": "RSTREAM"}[query.r2s])
    found["constants"] = with_other_constants(query, 1)
    if not isinstance(query, EventQuery) and bound_numbers(query):
        for copy in range(1, BOUND_COPIES + 1):
            found["bounds%d" % copy] = with_bounds_spelled(query, copy)
    return found


def partitioned(case: Case, query: Query, batch_micros: int) -> tuple[list[dict], bool] | None:
    """(the records, whether a key group still held elements at the end) of the query run
    partitioned on ?k (docs/partitioned-queries.md): every stream keyed by its elements'
    ex:key, the key groups' micro-batches played in-process through the very functions Spark's
    executors run (store/partitions.py: keyed_elements, PlanRunner.step with kept stores),
    their rows joined per instant by the runner (Runner.accept_partitions). None when the
    engine refuses to run the query partitioned."""
    keys = {EX + "s%d" % s: PartitionKey(EX + "key") for s in case.streams()}
    store = StreamStore()
    store.background.load(case.background.trig().encode(), ox.RdfFormat.TRIG, "background.trig")
    engine = Runner(store, VirtualClock(T0), EngineConfig(partition_keys=keys, federation_allowed=None))
    try:
        registered = engine.register(query.text(), "q", options=dict(query.options(), partition="?k"))
    except (PartitionError, PolicyError):    # refused (the main differential test checks PolicyError's refusals)
        return None
    payloads = [Payload(stream, "trig", "s.trig", stream_file(list(case.elements), int(stream[-1])), 0)
                for stream in keys]
    batches, left = play(PlanRunner(engine.partition_plan("q"), KeptStores(8)), keyed_elements(payloads, keys),
                         T0 + case.end * MS, batch_micros)
    for emitted in batches:
        engine.accept_partitions("q", emitted)
    assert registered.status.state == "running", registered.status.last_error
    records = [{k: v for k, v in r.items() if k not in ("trigger", "latency_ms")} for r in registered.history.since()]
    return records, bool(left)
