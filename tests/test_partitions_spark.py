"""Partitioned queries through Spark (README "Partitioned queries"): elements keyed as they
are read, kept per key in Spark's state and evaluated on the executors give the single
store's results, with 1, 2 and 8 partitions and across a restart from the checkpoint."""
import json
import os
import time

import pytest

from conftest import compare_lines
from rspstar.store.codec import Payload, canonical, decode
from rspstar.store.ingestion import RESTART_FIRST_SECONDS, SourceConfig, SparkIngestion, spark_session
from rspstar.store.stream_store import StreamStore
from test_partitions import registered_case
from rspstar.translator.temporal import format_instant, parse_instant

pytestmark = pytest.mark.slow
TIMEOUT = 240
YEARS = 100 * 365 * 86_400_000_000


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]")
    yield session
    session.stop()


def land(directory, manifest, root):
    """Each stream's elements as files of one element each, written in time order (the files
    source reads one per micro-batch), then an element past `to` without a key: it moves the
    watermark past the last instant and is set aside."""
    sources = []
    to = parse_instant(manifest["to"])
    for k, (stream, file) in enumerate(manifest["streams"].items()):
        landing = root / ("landing%d" % k)
        landing.mkdir(parents=True)
        elements = decode(Payload(stream, "trig", file, (directory / file).read_text(), 0)).elements[stream]
        elements.sort(key=lambda e: e.timestamp)
        end = ('<http://example.org/end%d> <http://www.w3.org/ns/prov#generatedAtTime> "%s"^^<http://www.w3.org/2001/'
               'XMLSchema#dateTime> .\n<http://example.org/end%d> { <http://example.org/x> <http://example.org/y> 1 . }\n'
               % (k, format_instant(to + 1), k))
        texts = [canonical([e]).decode() for e in elements] + [end]
        for n, text in enumerate(texts):
            path = landing / ("%04d.nq" % n)
            path.write_text(text)
            os.utime(path, (1_000_000 + n, 1_000_000 + n))
        sources.append(SourceConfig("s%d" % k, "files", stream=stream, path=str(landing),
                                    trigger_seconds=0.2, options={"maxFilesPerTrigger": "8"}))
    return sources


def wait_for(predicate, seconds=TIMEOUT):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def run_partitioned(spark, name, partitions, tmp_path, restart_after=None):
    store = StreamStore()
    # The recorded elements are months old: instants are due by the watermark alone here, not
    # by max_delay of wall-clock time.
    directory, manifest, _, engine, registered = registered_case(name, store=store, max_delay=YEARS)
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    ingestion = SparkIngestion(spark, store, land(directory, manifest, tmp_path), tmp_path / "checkpoints",
                               tmp_path / "quarantine")
    to = parse_instant(manifest["to"])
    expected = [json.loads(line) for line in (directory / manifest["expected"]).read_text().splitlines() if line]
    try:
        ingestion.start_partitioned(engine.partition_plan("q"), engine.accept_partitions)
        if restart_after is not None:
            # Its streaming query stops under it (as a failure would stop it): the supervisor
            # starts it again from the checkpoint after the back-off.
            assert wait_for(lambda: len(registered.history.since()) >= restart_after)
            ingestion.queries["partitioned-q"].stop()
            assert ingestion.supervise(1000.0) == []
            assert ingestion.supervise(1000.0 + RESTART_FIRST_SECONDS) == ["partitioned-q"]
            assert ingestion.status()["partitioned-q"]["restarts"] == 1
        last = parse_instant(expected[-1]["time"])
        assert wait_for(lambda: registered.after >= last), registered.status.describe()
    finally:
        ingestion.stop()
    actual = [{k: v for k, v in r.items() if k not in ("trigger", "latency_ms")} for r in registered.history.since()]
    assert not compare_lines(expected, actual, manifest.get("ordered", False))
    quarantined = sorted(p.name for p in (tmp_path / "quarantine").glob("*.reason.json"))
    assert len(quarantined) == len(manifest["streams"])
    assert all("no partition key" in json.loads((tmp_path / "quarantine" / q).read_text())["reason"]
               for q in quarantined)
    return registered


@pytest.mark.parametrize("partitions", [1, 2, 8])
def test_partitioned_on_spark_gives_the_single_store_results(spark, tmp_path, partitions):
    run_partitioned(spark, "sliding-window-count", partitions, tmp_path)


def test_partitioned_on_spark_with_uncertainty_and_istream(spark, tmp_path):
    run_partitioned(spark, "annotation-uncertainty-filter", 2, tmp_path)
    run_partitioned(spark, "istream-new-results", 2, tmp_path / "istream")


def test_partitioned_on_spark_restarts_from_its_checkpoint(spark, tmp_path):
    run_partitioned(spark, "sliding-window-count", 2, tmp_path, restart_after=2)


def test_a_partitioned_window_on_spark_gives_the_single_store_results_across_a_restart(spark, tmp_path):
    # [ELEMS 1 PARTITION BY ex:sensor] keyed by ex:sensor: the latest element of every sensor,
    # ties in arrival order, the key groups' records joined per instant by the driver.
    run_partitioned(spark, "partitioned-window-ties", 2, tmp_path)
    run_partitioned(spark, "partitioned-window-ties", 2, tmp_path / "restarted", restart_after=1)


def test_the_tvs_example_query_partitioned_by_sector_equals_the_single_store(spark, tmp_path):
    # The default tvs-warning query (the RSPU paper's Listing 2) over the TVS simulator on a fixed
    # clock: the single store (ingestion + runner) and the partitioned run read the same rows.
    from rspstar.endpoint.config import DEFAULT_CONFIG
    from rspstar.endpoint.engine.clock import VirtualClock
    from rspstar.endpoint.engine.runner import Runner, EngineConfig
    from rspstar.store.simulator import SOSA, TVS
    from rspstar.translator.partition import PartitionKey

    start = parse_instant("2026-03-01T08:00:00Z")
    keys = {stream: PartitionKey(SOSA + "hasFeatureOfInterest") for stream in TVS.streams}
    store = StreamStore()
    engine = Runner(store, VirtualClock(start), EngineConfig(partition_keys=keys, max_delay=YEARS))
    text = (DEFAULT_CONFIG.parent / "queries" / "tvs-warning.rq").read_text()
    single = engine.register(text, "single")
    partitioned = engine.register(text, "partitioned", options={"partition": "?location"})
    source = SourceConfig("tvs", "simulator", scenario="tvs", size=4, rate=40, trigger_seconds=0.25,
                          options={"startTimestamp": str(start // 1000), "advanceMillisPerBatch": "1000"})
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    ingestion = SparkIngestion(spark, store, [source], tmp_path / "checkpoints", tmp_path / "quarantine")
    enough = 6
    try:
        ingestion.start()
        ingestion.start_partitioned(engine.partition_plan("partitioned"), engine.accept_partitions)

        def both():
            engine.tick()
            return min(len(single.history.since()), len(partitioned.history.since())) >= enough
        assert wait_for(both), (single.status.describe(), partitioned.status.describe())
    finally:
        ingestion.stop()
    mine = {r["time"]: r for r in single.history.since()}
    theirs = {r["time"]: r for r in partitioned.history.since()}
    common = sorted(set(mine) & set(theirs))
    assert len(common) >= enough - 1
    rows = 0
    for instant in common:
        a, b = mine[instant], theirs[instant]
        assert a["windows"] == b["windows"]
        assert sorted(map(json.dumps, a["bindings"])) == sorted(map(json.dumps, b["bindings"])), instant
        rows += len(a["bindings"])
    assert rows > 0
