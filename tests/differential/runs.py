"""The engine's runs of a drawn case, and the fast paths they reach.

- `optimised`: the engine as it runs by default (every optimisation on), several queries
  registered together on one runner, so that they share its RangeResults and ConstantGroups:
  the drawn query, a copy under another R2S operator (equal window blocks), and copies with
  other constants (a group of queries differing only in constants).
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
from rspstar.store.partitions import KeptStores, PlanRunner, keyed_elements
from rspstar.store.stream_store import StreamStore
from rspstar.translator import rewrite
from rspstar.translator.errors import TranslatorError
from rspstar.translator.partition import PartitionError, PartitionKey
from rspstar.translator.policy import PolicyError
from test_partitions import play     # the micro-batches as Spark runs them (tests/test_partitions.py)

from .model import EX, MS, T0, Case, Context, Query, stream_file, with_other_constants

OFF = {"rspu_cache": "false", "lazy_bind": "false", "h4": "false", "fuse_rspu": "false", "incremental": "false",
       "share_constants": "false"}

# The fast paths the differential test must reach (docs/design.md, "Fast paths").
FAST_PATHS = (
    "incremental ranges", "shared ranges", "constant groups", "rspu cache", "lazy binding", "H4 deferred",
    "H4 in place", "fused calls", "evaluated without the rspu table", "evaluated with the rspu table",
    "rspu IRI prefixed", "rspu IRI full", "rspu IRI base-relative", "rspu IRI other prefix", "joined windows",
)
_SPELLING = {"rspu": "rspu IRI prefixed", "full": "rspu IRI full", "base": "rspu IRI base-relative",
             "other": "rspu IRI other prefix"}


class Refused(Exception):
    """The engine refused a query at registration."""


class Reached(collections.Counter):
    """Fast path -> how many times it was taken."""

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
            return after

        wrap(r2r.RangeRows, "rows", taken("incremental ranges"))
        wrap(sharing.RangeResults, "get", taken("shared ranges", lambda r, *a: r is not None))
        wrap(sharing._ConstantGroup, "rows", taken("constant groups", lambda r, *a: r is not None))
        wrap(sharing._ConstantGroup, "unread", taken("constant groups", lambda r, *a: r is not None))
        wrap(r2r, "_join_all", taken("joined windows"))
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
            ctx = Context()
            for item in query.where:
                item.render(ctx)
            for spelling in ctx.spellings:
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


def replay(case: Case, queries: dict[str, Query], options: dict[str, str], reached: Reached | None = None):
    """{query id: its records} of a replay of the case's input with these queries registered
    together; Refused when the engine refuses one; AssertionError when one fails."""
    options = dict(options, **next(iter(queries.values())).options())
    with tempfile.TemporaryDirectory() as tmp:
        streams, background = write_input(case, Path(tmp))
        spec = ReplayInput({qid: q.text() for qid, q in queries.items()}, streams, T0, T0 + case.end * MS,
                           background, options)
        try:
            run = Replay(spec)
        except (TranslatorError, EndpointError) as e:
            raise Refused("%s: %s" % (type(e).__name__, e)) from e
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
        return records


def optimised_queries(query: Query) -> dict[str, Query]:
    """The drawn query and the queries registered beside it in the optimised run."""
    found = {"q": query}
    if query.form != "ASK":
        found["copy"] = query.with_r2s({"RSTREAM": "ISTREAM", "ISTREAM": "DSTREAM", "DSTREAM": "RSTREAM"}[query.r2s])
    found["constants"] = with_other_constants(query, 1)
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
