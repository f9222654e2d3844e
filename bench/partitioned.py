"""Partitioned evaluation against the single store (README "Partitioned queries"): the RSPU paper's
Listing 2 partitioned by sector, over the TVS workload at the simulator's profile (two readings
per sensor per second, 9% of temperatures above 30 °C).

Run by hand: python bench/partitioned.py [--sectors 1000] [--seconds 30] [--files-per-batch 2] [--key-groups 64]
Three runs over the same recorded streams, in one go: `rspstar replay` (the single store, on a
virtual clock), and the partitioned query through Spark on local[1] and local[2] (the streams
as files, one second of event time each, read by Spark's file source, two per micro-batch by default).
Each Spark run is a process of its own. Rates are elements over wall-clock seconds, from the
start of the run to the last instant evaluated; CPU is split between the driver's Python
process (R2S, sinks), Spark's JVM, and the executors' Python workers (parsing, keeping and
evaluating the key groups). Each partitioned run's CPU is also taken as its first micro-batch
delivered: past it, what a standing query costs once Spark's plans, the JVM's compiled code and
the Python workers are warm ("past the first micro-batch").
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import PREFIXES, Table, machine, process_tree_by_kind, publish  # noqa: E402
from uncertainty_tvs import LISTING_2, START, tvs_streams  # noqa: E402

from rspstar.endpoint.engine.clock import VirtualClock  # noqa: E402
from rspstar.endpoint.engine.runner import Runner, EngineConfig  # noqa: E402
from rspstar.endpoint.engine.replay import Replay, ReplayInput  # noqa: E402
from rspstar.config.schema import default  # noqa: E402
from rspstar.store.stream_store import StreamStore  # noqa: E402
from rspstar.translator.partition import PartitionKey  # noqa: E402
from rspstar.translator.temporal import format_instant  # noqa: E402

OXYGEN, TEMPERATURE = "http://example.org/stream/oxygen", "http://example.org/stream/temperature"
KEYS = {s: PartitionKey("http://www.w3.org/ns/sosa/hasFeatureOfInterest") for s in (OXYGEN, TEMPERATURE)}
YEARS = 100 * 365 * 86_400_000_000
# Every record kept for the comparison of rows (the engine's default history keeps a query's
# newest records up to a size a long run at 1,000 sectors exceeds).
HISTORY_BYTES = 1 << 34
# COST asked of partitioned evaluation, by elements per micro-batch (two streams, two readings
# per sector a second: --files-per-batch 2 and 15 at 1,000 sectors).
COST_TARGETS = {8_000: 4, 60_000: 3}


def write_streams(root: Path, sectors: int, seconds: int) -> dict[str, Path]:
    """Each stream whole (for the replay) and as one file per second under a folder of its own
    (for Spark), then a keyless element past the end that moves Spark's watermark past the last
    instant (and is set aside)."""
    oxygen, temperature = tvs_streams(sectors, seconds, per_second=2, hot=0.09)
    whole = {}
    for k, (stream, text) in enumerate(((OXYGEN, oxygen), (TEMPERATURE, temperature))):
        whole[stream] = root / ("stream%d.trig" % k)
        whole[stream].write_text(text)
        body = text[len(PREFIXES):].splitlines(keepends=True)
        per_second = 2 * 2 * sectors          # two lines per element, two elements per sensor
        landing = root / ("landing%d" % k)
        landing.mkdir()
        chunks = [body[i:i + per_second] for i in range(0, len(body), per_second)]
        end = START + (seconds + 1) * 1_000_000
        chunks.append(['ex:end%d prov:generatedAtTime "%s"^^xsd:dateTime .\nex:end%d { ex:x ex:y 1 . }\n'
                       % (k, format_instant(end), k)])
        for n, chunk in enumerate(chunks):
            path = landing / ("%04d.trig" % n)
            path.write_text(PREFIXES + "".join(chunk))
            os.utime(path, (1_000_000 + n, 1_000_000 + n))
    return whole


def single_store(streams: dict[str, Path], seconds: int) -> dict:
    spec = ReplayInput.single(LISTING_2, list(streams.items()), START, START + seconds * 1_000_000)
    before = process_tree_by_kind()
    started = time.perf_counter()
    records = [record for _, record in Replay(spec).run()]
    elapsed = time.perf_counter() - started
    after = process_tree_by_kind()
    return {"seconds": elapsed, "records": records,
            "cpu": {k: after[k]["cpu"] - before[k]["cpu"] for k in after}, "rss": after["root"]["rss"]}


CLUSTER = "standalone cluster"     # master and two 1-core workers on this machine


def partitioned(master: str, root: Path, seconds: int, conf: dict[str, str] | None = None,
                files_per_batch: int = 2, key_groups: int = default("engine.key_groups")) -> dict:
    from rspstar.store.ingestion import SourceConfig, SparkIngestion, spark_session
    cluster = None
    if master == CLUSTER:
        # A standalone master and two one-core workers from the installed pyspark, on loopback.
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from spark_cluster import Cluster
        cluster = Cluster(root / "cluster").start()
        spark = spark_session(cluster.master, {"spark.executor.memory": "1g", "spark.executor.cores": "1",
                                               "spark.cores.max": "2", "spark.pyspark.python": sys.executable,
                                               **(conf or {})})
        while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3:     # the driver and two executors
            time.sleep(0.5)
        cores = 2
    else:
        spark = spark_session(master, conf)
        cores = int(master[len("local["):-1])
    spark.conf.set("spark.sql.shuffle.partitions", str(cores))
    store = StreamStore()
    engine = Runner(store, VirtualClock(START), EngineConfig(partition_keys=KEYS, max_delay=YEARS, key_groups=key_groups,
                                                             history_bytes=HISTORY_BYTES))
    registered = engine.register(LISTING_2, "q", options={"partition": "?location"})
    sources = [SourceConfig("s%d" % k, "files", stream=stream, path=str(root / ("landing%d" % k)),
                            trigger_seconds=0.5, options={"maxFilesPerTrigger": str(files_per_batch)})
               for k, stream in enumerate((OXYGEN, TEMPERATURE))]
    run = root / ("run-" + master.strip("[]").replace("[", "-").replace(" ", "-"))
    ingestion = SparkIngestion(spark, store, sources, run / "checkpoints", run / "quarantine")
    last = registered.evaluator.policy.fixed_instants(START, START + seconds * 1_000_000)[-1]
    peak_workers = [0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.5):
            peak_workers[0] = max(peak_workers[0], process_tree_by_kind()["other"]["rss"])

    sampler = threading.Thread(target=sample, daemon=True)
    first: list[dict] = []

    def deliver(query_id, emitted):
        if not first:
            first.append(process_tree_by_kind())
        return engine.accept_partitions(query_id, emitted)

    before = process_tree_by_kind()
    started = time.perf_counter()
    sampler.start()
    ingestion.start_partitioned(engine.partition_plan("q"), deliver)
    while registered.after < last:
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    after = process_tree_by_kind()
    done.set()
    ingestion.stop()
    spark.stop()
    if cluster is not None:
        cluster.stop()
    return {"seconds": elapsed, "records": registered.history.since(),
            "cpu": {k: after[k]["cpu"] - before[k]["cpu"] for k in after}, "rss": after["root"]["rss"],
            "java_rss": after["java"]["rss"], "workers_peak_rss": peak_workers[0],
            "first_batch_cpu": {k: first[0][k]["cpu"] - before[k]["cpu"] for k in after}}


def same_rows(a: list[dict], b: list[dict]) -> bool:
    def rows(records):
        return {r["time"]: sorted(json.dumps(x, sort_keys=True) for x in r["bindings"]) for r in records}
    return rows(a) == rows(b)


def run(sectors: int, seconds: int, masters: list[str] | None = None, conf: dict[str, str] | None = None,
        files_per_batch: int = 2, key_groups: int = default("engine.key_groups")) -> str:
    masters = masters or ["local[1]", "local[2]", CLUSTER]
    conf = conf or {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        streams = write_streams(root, sectors, seconds)
        elements = 2 * 2 * sectors * seconds
        results = {"single store (rspstar replay)": single_store(streams, seconds)}
        for master in masters:
            out = root / ("%s.json" % master)
            subprocess.run([sys.executable, __file__, "--one", master, "--root", str(root), "--seconds", str(seconds),
                            "--out", str(out), "--files-per-batch", str(files_per_batch),
                            "--key-groups", str(key_groups)] + ["--spark=%s=%s" % item for item in conf.items()], check=True)
            results["partitioned, Spark %s" % master] = json.loads(out.read_text())
    reference = results["single store (rspstar replay)"]
    table = Table("Listing 2 partitioned by sector: %d sectors, %d s of event time (%d elements), "
                  "%d key groups, %d s of each stream per micro-batch%s"
                  % (sectors, seconds, elements, key_groups, files_per_batch,
                     "".join(", %s=%s" % item for item in conf.items())),
                  ["run", "seconds", "elements/s", "ratio to single store", "same rows",
                   "driver Python CPU s per 1,000 elements", "JVM CPU s per 1,000", "workers' CPU s per 1,000",
                   "peak workers' memory (MiB)"])
    for name, r in results.items():
        table.add(name, r["seconds"], elements / r["seconds"], reference["seconds"] / r["seconds"],
                  "yes" if same_rows(reference["records"], r["records"]) else "NO",
                  1000 * r["cpu"]["root"] / elements, 1000 * r["cpu"]["java"] / elements,
                  1000 * r["cpu"]["other"] / elements, r.get("workers_peak_rss", 0.0))
    rows = sum(len(r["bindings"]) for r in reference["records"])
    return "%s\n\n%s\n%d evaluations, %d rows in all.\n\n%s" % (
        machine(), table.markdown(), len(reference["records"]), rows,
        projection(results, elements, 2 * 2 * sectors * files_per_batch))


def past_first_batch(r: dict, elements: int, per_batch: int) -> tuple[dict, int] | None:
    """A partitioned run's CPU by kind past its first micro-batch, and the elements read after
    it (the first holds `per_batch`: each file source takes its files in order); None with fewer
    than three micro-batches after it. No instant is due in the first micro-batch (Spark's
    watermark moves after it), so the groups load and evaluate its elements in the next: the
    figure past it carries one micro-batch's evaluations more than its elements, which is
    small only when many follow."""
    if "first_batch_cpu" not in r or elements < 4 * per_batch:
        return None
    return {k: r["cpu"][k] - r["first_batch_cpu"][k] for k in r["cpu"]}, elements - per_batch


def cpu_per_element(r: dict, elements: int) -> float:
    return sum(r["cpu"][kind] for kind in ("root", "java", "other")) / elements


def projection(results: dict, elements: int, per_batch: int) -> str:
    """The cores each run's measured CPU per element would need at higher rates (CPU alone:
    no headroom, no network), and COST (McSherry et al.: the cores a scalable system needs to
    beat one good single-threaded one; here each run's CPU per element over the single
    store's) against the targets at this many elements per micro-batch."""
    table = Table("Cores needed at the CPU per element measured above", ["run", "CPU s per 1,000 elements",
                                                                          "cores for 50,000 elements/s",
                                                                          "cores for 1,000,000 elements/s"])
    for name, r in results.items():
        cost = cpu_per_element(r, elements)
        table.add(name, 1000 * cost, 50_000 * cost, 1_000_000 * cost)
    single = cpu_per_element(results["single store (rspstar replay)"], elements)
    target = COST_TARGETS.get(per_batch)
    lines = ["%s: COST %.2f%s" % (name, cpu_per_element(r, elements) / single,
                                  "" if target is None else " (target <= %g at %s elements per micro-batch)"
                                  % (target, format(per_batch, ",")))
             for name, r in results.items() if name.startswith("partitioned")]
    warm = Table("CPU of the first micro-batch and past it (s, and s per 1,000 elements past it)",
                 ["run", "first micro-batch: driver / JVM / workers", "past it: driver / JVM / workers per 1,000",
                  "past it: CPU s per 1,000 elements", "COST past the first micro-batch"])
    for name, r in results.items():
        split = past_first_batch(r, elements, per_batch)
        if split is None:
            continue
        cpu, rest = split
        warm.add(name, " / ".join("%.2f" % r["first_batch_cpu"][k] for k in ("root", "java", "other")),
                 " / ".join("%.4f" % (1000 * cpu[k] / rest) for k in ("root", "java", "other")),
                 1000 * sum(cpu[k] for k in ("root", "java", "other")) / rest,
                 "%.2f" % (sum(cpu[k] for k in ("root", "java", "other")) / rest / single))
    if warm.rows:
        table = "%s\n%s" % (table.markdown(), warm.markdown())
    else:
        table = table.markdown()
    one, cluster = results.get("partitioned, Spark local[1]"), results.get("partitioned, Spark %s" % CLUSTER)
    if one is not None and cluster is not None:
        lines.append("standalone cluster CPU per element / local[1]'s: %.2f (target <= 1.2)"
                     % (cpu_per_element(cluster, elements) / cpu_per_element(one, elements)))
    return "%s\n%s\n" % (table, "\n".join("- " + line for line in lines))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sectors", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--one")
    parser.add_argument("--root")
    parser.add_argument("--out")
    parser.add_argument("--master", action="append", help="local[1], local[2], %r (default: all three)" % CLUSTER)
    parser.add_argument("--spark", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting of the runs")
    parser.add_argument("--files-per-batch", type=int, default=2,
                        help="files (seconds of event time) of each stream per micro-batch")
    parser.add_argument("--key-groups", type=int, default=default("engine.key_groups"),
                        help="[engine] key_groups of the partitioned runs")
    parser.add_argument("--name", default="partitioned", help="the table's name in bench/out")
    args = parser.parse_args()
    conf = dict(item.split("=", 1) for item in args.spark)
    if args.one:
        Path(args.out).write_text(json.dumps(partitioned(args.one, Path(args.root), args.seconds, conf, args.files_per_batch,
                                                          args.key_groups)))
        return
    report = run(args.sectors, args.seconds, args.master, conf, args.files_per_batch, args.key_groups)
    publish(args.name, report)


if __name__ == "__main__":
    main()
