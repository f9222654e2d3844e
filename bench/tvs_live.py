"""Live runs through Spark, in one process as `rspstar serve` runs it but with the in-memory
store (run by hand: python bench/tvs_live.py [--seconds 90] [--workload tvs|sensors] [--rate N]):

- workload (b): the TVS simulator at 4000 observations/s (1000 sectors), the RSPU paper's Listing 2;
- workload (a): 1000 plain sensors at 1000 observations/s, RANGE 10 s STEP 2 s, the filter and
  the AVG-per-sensor queries.

Reports whether ingestion kept up with the simulator, the close-to-result latency (clock time
from an evaluation instant to its record reaching the sinks) at p50 and p99, and peak memory.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Table, machine, process_tree_rss_mib, publish  # noqa: E402
from uncertainty_tvs import LISTING_2  # noqa: E402

from rspstar.endpoint.engine.clock import WallClock  # noqa: E402
from rspstar.endpoint.engine.runner import Runner, EngineConfig  # noqa: E402
from rspstar.endpoint.engine.scheduler import LiveScheduler  # noqa: E402
from rspstar.endpoint.serve import configure_process  # noqa: E402
from rspstar.store.ingestion import SourceConfig, SparkIngestion, spark_session  # noqa: E402
from rspstar.store.simulator import STREAMS  # noqa: E402
from rspstar.store.stream_store import StreamStore  # noqa: E402

SENSOR_QUERIES = {
    "filter": "SELECT ?o ?v WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v FILTER(?v < 0.165) } } }",
    "avg": "SELECT ?sensor (AVG(?v) AS ?avg) WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:madeBySensor ?sensor ; "
           "sosa:hasSimpleResult ?v } } } GROUP BY ?sensor",
}
SENSOR_HEADER = ("PREFIX sosa: <http://www.w3.org/ns/sosa/>\nPREFIX ex: <http://example.org/>\n"
                 "PREFIX sim: <%s>\n" % STREAMS)


def sensor_query(kind: str) -> str:
    select, where = SENSOR_QUERIES[kind].split(" WHERE ", 1)
    return SENSOR_HEADER + select + "\nFROM NAMED WINDOW ex:w ON sim:sensors [RANGE PT10S STEP PT2S]\nWHERE " + where


QUERY = LISTING_2.replace("PREFIX ex: <http://example.org/>", "PREFIX ex: <http://example.org/>\n"
                          "PREFIX sim: <%s>" % STREAMS).replace("ex:stream/oxygen", "sim:tvs/oxygen").replace(
    "ex:stream/temperature", "sim:tvs/temperature")


TRIGGER = 0.5   # seconds between micro-batches (Spark's rate source releases a second of rows at a time)


def live(scenario: str, size: int, rate: int, queries: dict[str, str], seconds: int,
         decode: str = "auto") -> tuple[float, dict, float, str]:
    """Run the simulator through Spark with `queries` registered, its micro-batches decoded
    where `decode` says; (elements/s, per-query status, highest memory sampled once a second, MiB,
    where the batches were parsed)."""
    configure_process()
    spark = spark_session("local[2]")
    with tempfile.TemporaryDirectory() as tmp:
        store = StreamStore()
        engine = Runner(store, WallClock(), EngineConfig(max_delay=5_000_000))
        registered = [engine.register(text, name) for name, text in queries.items()]
        source = SourceConfig("live", "simulator", scenario=scenario, size=size, rate=rate, trigger_seconds=TRIGGER,
                              decode=decode)
        ingestion = SparkIngestion(spark, store, [source], Path(tmp) / "ckpt", Path(tmp) / "q")
        scheduler = LiveScheduler(engine)
        ingestion.start()
        scheduler.start()
        time.sleep(20)                       # Spark start-up and first batches: not measured
        warm = sum(s.ingested for s in store.streams().values())
        for q in registered:
            q.status.latencies.clear()
            q.status.durations.clear()
        started = time.perf_counter()
        memory = 0.0
        while time.perf_counter() - started < seconds:     # the live run being measured
            time.sleep(1)
            memory = max(memory, process_tree_rss_mib())
        elapsed = time.perf_counter() - started
        ingested = sum(s.ingested for s in store.streams().values()) - warm
        statuses = {q.id: q.status for q in registered}
        scheduler.shutdown()
        ingestion.stop()
        batches = ingestion.batches[source.name] + 1
        where = "%d of %d batches on the executors" % (ingestion.decoded_on_executors[source.name], batches)
    spark.stop()
    return ingested / elapsed, statuses, memory, where


def run(seconds: int, rate: int = 4000, sectors: int = 1000, decode: str = "auto") -> str:
    """Workload (b) live."""
    per_second, statuses, memory, where = live("tvs", sectors, rate, {"tvs": QUERY}, seconds, decode)
    table = Table("TVS live: %d sectors, simulator at %d observations/s through Spark (%g s batches, %s), "
                  "Listing 2 COMPUTED EVERY PT4S, %d s measured after warm-up" % (sectors, rate, TRIGGER, decoded(decode), seconds),
                  ["figure", "value"])
    add_figures(table, per_second, rate, statuses["tvs"], memory)
    table.add("micro-batches parsed", where)
    return table.markdown()


def decoded(decode: str) -> str:
    return "parsed where `decode = auto` chooses" if decode == "auto" else "decoded on the " + decode


def run_sensors(seconds: int, rate: int = 1000, sensors: int = 1000, decode: str = "auto") -> str:
    """Workload (a) end to end through Spark."""
    per_second, statuses, memory, where = live("sensors", sensors, rate, {k: sensor_query(k) for k in SENSOR_QUERIES},
                                               seconds, decode)
    table = Table("Workload (a) through Spark: %d sensors at %d observations/s (%g s batches, %s), "
                  "RANGE 10 s STEP 2 s, filter and AVG queries together, %d s measured after warm-up"
                  % (sensors, rate, TRIGGER, decoded(decode), seconds),
                  ["figure", "value"])
    for name, status in statuses.items():
        add_figures(table, per_second, rate, status, memory, name + ": ")
    table.add("micro-batches parsed", where)
    return table.markdown()


def add_figures(table: Table, per_second: float, rate: int, status, memory: float, prefix: str = "") -> None:
    latency = status.percentiles(status.latencies)
    evaluation = status.percentiles()
    table.add(prefix + "observations ingested per second", "%.0f (target %d: %s)" % (
        per_second, rate, "sustained" if per_second >= 0.95 * rate else "NOT sustained"))
    table.add(prefix + "evaluations", str(len(status.latencies)))
    table.add(prefix + "evaluation time p50 / p99", "%.0f ms / %.0f ms" % (
        1000 * evaluation.get(0.5, 0), 1000 * evaluation.get(0.99, 0)))
    table.add(prefix + "close to result p50 / p99", "%.0f ms / %.0f ms" % (
        latency.get(0.5, 0) / 1000, latency.get(0.99, 0) / 1000))
    table.add(prefix + "last trigger", str(status.last_trigger))
    table.add(prefix + "memory, Python + Spark JVM (highest sample)", "%.0f MiB" % memory)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=90)
    parser.add_argument("--workload", choices=["tvs", "sensors"], default="tvs")
    parser.add_argument("--rate", type=int, help="observations/s (default 4000 for tvs, 1000 for sensors)")
    parser.add_argument("--decode", choices=["auto", "driver", "executors"], default="auto",
                        help="where the simulator's micro-batches are parsed (the source's `decode` setting)")
    args = parser.parse_args()
    default_rate = 4000 if args.workload == "tvs" else 1000
    rate = args.rate or default_rate
    body = run(args.seconds, rate=rate, decode=args.decode) if args.workload == "tvs" else \
        run_sensors(args.seconds, rate=rate, decode=args.decode)
    text = "Machine: %s\n\n%s" % (machine(), body)
    # Each rate and decoding keeps its own table: live_tvs.md at the defaults, live_tvs_8000.md at
    # 8,000/s, live_tvs_8000_executors.md decoded on the executors whatever the batch.
    publish("live_%s%s%s" % (args.workload, "" if rate == default_rate else "_%d" % rate,
                             "" if args.decode == "auto" else "_" + args.decode), text)


if __name__ == "__main__":
    main()
