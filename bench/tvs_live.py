"""Workload (b) live: the TVS simulator through Spark at 4000 observations/s (1000 sectors),
seed 002's Listing 2 evaluated by the live scheduler, in one process as `rspstar serve` runs it
but with the in-memory store (run by hand: python bench/tvs_live.py [--seconds 90]).

Reports whether ingestion kept up with the simulator, and the close-to-result latency (clock
time from an evaluation instant to its record reaching the sinks) at p50 and p99.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import OUT, Table, machine  # noqa: E402
from uncertainty_tvs import LISTING_2  # noqa: E402

from endpoint.clock import WallClock  # noqa: E402
from endpoint.engine import Engine, EngineConfig  # noqa: E402
from endpoint.scheduler import LiveScheduler  # noqa: E402
from store.ingestion import SourceConfig, SparkIngestion, spark_session  # noqa: E402
from store.simulator import STREAMS  # noqa: E402
from store.stream_store import StreamStore  # noqa: E402

QUERY = LISTING_2.replace("PREFIX ex: <http://example.org/>", "PREFIX ex: <http://example.org/>\n"
                          "PREFIX sim: <%s>" % STREAMS).replace("ex:stream/oxygen", "sim:tvs/oxygen").replace(
    "ex:stream/temperature", "sim:tvs/temperature")


def run(seconds: int, rate: int = 4000, sectors: int = 1000) -> str:
    spark = spark_session("local[2]")
    with tempfile.TemporaryDirectory() as tmp:
        store = StreamStore()
        engine = Engine(store, WallClock(), EngineConfig(max_delay=5_000_000))
        registered = engine.register(QUERY, "tvs")
        source = SourceConfig("tvs", "simulator", scenario="tvs", size=sectors, rate=rate, trigger_seconds=0.5)
        ingestion = SparkIngestion(spark, store, [source], Path(tmp) / "ckpt", Path(tmp) / "q")
        scheduler = LiveScheduler(engine)
        ingestion.start()
        scheduler.start()
        time.sleep(20)                       # Spark start-up and first batches: not measured
        warm = sum(s.ingested for s in store.streams().values())
        registered.status.latencies.clear()
        registered.status.durations.clear()
        started = time.perf_counter()
        time.sleep(seconds)                  # the live run being measured
        elapsed = time.perf_counter() - started
        ingested = sum(s.ingested for s in store.streams().values()) - warm
        status = registered.status
        latency = status.percentiles(status.latencies)
        evaluation = status.percentiles()
        triggers = status.last_trigger
        scheduler.shutdown()
        ingestion.stop()
    spark.stop()
    table = Table("TVS live: %d sectors, simulator at %d observations/s through Spark (0.5 s batches), Listing 2 "
                  "COMPUTED EVERY PT4S, %d s measured after warm-up" % (sectors, rate, seconds),
                  ["figure", "value"])
    table.add("observations ingested per second", "%.0f (target %d: %s)" % (
        ingested / elapsed, rate, "sustained" if ingested / elapsed >= 0.95 * rate else "NOT sustained"))
    table.add("evaluations", str(len(status.latencies)))
    table.add("evaluation time p50 / p99", "%.0f ms / %.0f ms" % (1000 * evaluation.get(0.5, 0), 1000 * evaluation.get(0.99, 0)))
    table.add("close to result p50 / p99", "%.0f ms / %.0f ms (target p99 < 1000 ms: %s)" % (
        latency.get(0.5, 0) / 1000, latency.get(0.99, 0) / 1000,
        "met" if latency and latency[0.99] < 1_000_000 else "NOT met"))
    table.add("last trigger", str(triggers))
    return table.markdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=90)
    parser.add_argument("--rate", type=int, default=4000)
    args = parser.parse_args()
    text = "Machine: %s\n\n%s" % (machine(), run(args.seconds, args.rate))
    print(text)
    OUT.mkdir(exist_ok=True)
    (OUT / "tvs_live.md").write_text(text)


if __name__ == "__main__":
    main()
