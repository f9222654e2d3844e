"""What one micro-batch of the main job's simulators costs Spark's JVM, under each setting that
was measured to choose the defaults (bench/out/NOTES.md#spark-checkpoint-files).

Each variant starts its own Spark session (local[2]) with the two default simulators (tunnel
ventilation, 20 sectors at 40 observations/s; home care, 3 patients at 15/s) as one streaming
query triggering every second into an in-memory store, waits out the warm-up, then measures the
CPU time of the JVM (with the commands it ran and reaped) and of this Python process per
micro-batch. Variants, in one run:

- `engine`: the engine's settings (checkpoints through Hadoop's FileSystem on the raw local
  file system; a simulator's rate source in one partition per 2,000 rows);
- `spark-checkpoints`: Spark's own checkpoint writing (FileContext over the checksummed local
  file system), the rest as the engine;
- `spark-partitions`: the rate source in one partition per core, the rest as the engine;
- `before`: both of Spark's own;
- `c2`: the engine's settings with the JVM's optimising compiler on (the engine's JVM stops at
  the first tier, which starts faster); give it a long warm-up, the second tier compiles late.

Run by hand: python bench/spark_batch_cost.py [--measure 90] [--warmup 40] [--rounds 1]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Table, machine, process_tree_by_kind, publish  # noqa: E402

SPARK_CHECKPOINTS = {
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager",
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.LocalFs",
}
VARIANTS = {"engine": ({}, False), "spark-checkpoints": (SPARK_CHECKPOINTS, False),
            "spark-partitions": ({}, True), "before": (SPARK_CHECKPOINTS, True), "c2": ({}, False)}


def measure(variant: str, warmup: float, seconds: float) -> tuple[float, float, float]:
    """(micro-batches per second, JVM ms per batch, driver Python ms per batch) of one variant,
    in a child process of its own (one Spark session each)."""
    done = subprocess.run([sys.executable, __file__, "--child", variant, "--warmup", str(warmup),
                           "--measure", str(seconds)], capture_output=True, text=True, timeout=warmup + seconds + 300)
    if done.returncode != 0:
        raise SystemExit("variant %s failed:\n%s" % (variant, done.stderr[-3000:]))
    rate, java, python = done.stdout.split()[-3:]
    return float(rate), float(java), float(python)


def child(variant: str, warmup: float, seconds: float) -> None:
    from rspstar.store import ingestion as module
    from rspstar.store.ingestion import SourceConfig, SparkIngestion, spark_session, stop_session
    from rspstar.store.stream_store import StreamStore
    settings, partition_per_core = VARIANTS[variant]
    if variant == "c2":
        module._FAST_JVM = module._FAST_JVM.replace("-XX:TieredStopAtLevel=1 ", "")
        assert "TieredStopAtLevel" not in module._FAST_JVM, "the c2 variant found no first-tier option to drop"
    work = Path(tempfile.mkdtemp(prefix="rspstar-batch-cost-"))
    spark = spark_session("local[2]", settings)
    options = {"numPartitions": "2"} if partition_per_core else {}
    sources = [SourceConfig("tvs", "simulator", scenario="tvs", size=20, rate=40, options=options),
               SourceConfig("homecare", "simulator", scenario="homecare", size=3, rate=15, options=options)]
    ingestion = SparkIngestion(spark, StreamStore(), sources, work / "checkpoints", work / "quarantine")
    ingestion.start()
    try:
        time.sleep(warmup)
        before, batches, started = process_tree_by_kind(), ingestion.batches["tvs"], time.monotonic()
        time.sleep(seconds)
        after, elapsed = process_tree_by_kind(), time.monotonic() - started
        count = max(ingestion.batches["tvs"] - batches, 1)
        java = after["java"]["cpu"] - before["java"]["cpu"]
        python = after["root"]["cpu"] - before["root"]["cpu"]
        print(count / elapsed, 1000 * java / count, 1000 * python / count)
    finally:
        ingestion.stop()
        stop_session(spark)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warmup", type=float, default=40)
    parser.add_argument("--measure", type=float, default=90)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--child", choices=VARIANTS)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    args = parser.parse_args()
    if args.child:
        child(args.child, args.warmup, args.measure)
        return
    table = Table("Micro-batch cost of the default simulators (%d round(s), %.0f s each, %s)"
                  % (args.rounds, args.measure, machine()),
                  ["variant", "round", "micro-batches/s", "JVM ms per batch", "driver Python ms per batch"])
    for round_ in range(1, args.rounds + 1):
        for variant in args.variants:
            rate, java, python = measure(variant, args.warmup, args.measure)
            table.add(variant, str(round_), "%.2f" % rate, "%.0f" % java, "%.1f" % python)
            print(table.rows[-1], flush=True)
    publish("spark_batch_cost", table.markdown())


if __name__ == "__main__":
    main()
