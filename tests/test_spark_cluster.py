"""Partitioned queries on a real Spark standalone cluster (a master and two workers started from
the installed pyspark on this machine): the executors are other processes than the driver's, as
on a cluster of machines, and the rows are still the single store's."""
from __future__ import annotations

import sys
import time

import pytest

from rspstar.store.ingestion import spark_session, stop_session
from spark_cluster import Cluster
from test_partitions_spark import run_partitioned

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster_spark(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("cluster")).start()
    session = spark_session(cluster.master, {"spark.executor.memory": "512m", "spark.executor.cores": "1",
                                             "spark.cores.max": "2", "spark.pyspark.python": sys.executable})
    try:
        # Executors register with the driver as their workers start them.
        deadline = time.monotonic() + 120
        while executors(session) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        yield session, cluster
    finally:
        stop_session(session)
        cluster.stop()


def executors(session) -> int:
    return session.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1    # less the driver


def test_a_partitioned_query_on_a_standalone_cluster_gives_the_single_store_results(cluster_spark, tmp_path):
    session, cluster = cluster_spark
    assert executors(session) == 2 and cluster.alive_workers() == 2
    run_partitioned(session, "sliding-window-count", 2, tmp_path)


def test_the_ingestion_runs_on_a_standalone_cluster_exactly_once(cluster_spark, tmp_path):
    from rspstar.store.ingestion import SourceConfig, SparkIngestion
    from rspstar.store.stream_store import StreamStore
    session, _ = cluster_spark
    landing = tmp_path / "landing"
    landing.mkdir()
    for n in range(6):
        (landing / ("%02d.nq" % n)).write_text("".join(
            '<http://example.org/e%d> <http://www.w3.org/ns/prov#generatedAtTime> "2026-03-01T08:00:%02dZ"^^'
            '<http://www.w3.org/2001/XMLSchema#dateTime> .\n<http://example.org/o%d> <http://example.org/v> "%d" '
            '<http://example.org/e%d> .\n' % (k, k % 60, k, k, k) for k in range(n * 50, n * 50 + 50)))
    (landing / "bad.nq").write_text("not N-Quads\n")
    store = StreamStore()
    source = SourceConfig("files", "files", stream="http://example.org/s", path=str(landing))
    for attempt in range(2):          # the second run finds everything committed: nothing twice
        ingestion = SparkIngestion(session, store, [source], tmp_path / "checkpoints", tmp_path / "quarantine")
        ingestion.start(available_now=True)
        ingestion.await_termination(300)
        ingestion.stop()
    assert store.streams()["http://example.org/s"].ingested == 300
    assert ingestion.status()["files"]["quarantined"] == {"http://example.org/s": 1}
    assert len(store.oxigraph) >= 600          # each element's value and timestamp
