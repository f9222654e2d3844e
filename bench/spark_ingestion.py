"""Spark ingestion benchmarks (run by hand; they start a local Spark session).

  python bench/spark_ingestion.py soak [--elements 1000000] [--rate 5000] [--disk]
      The TVS simulator through Spark into the store (in memory, or on disk with --disk),
      keeping 10 s of event time
      (elements older than the newest minus 10 s are evicted after every batch, and the store
      is rebuilt when evictions pile up). Prints elements/s, process RSS, JVM RSS and store
      disk every 100k elements; the verdict compares the last reading with the first after
      warm-up (target: within 1.5x).

  python bench/spark_ingestion.py throughput [--elements 100000]
      TriG and N-Quads files through Spark (landing directory, available-now) against the
      engine's direct replay ingestion of the same files, in the same run.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pyoxigraph as ox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Table, machine, publish, sensor_stream  # noqa: E402

from rspstar.store.ingestion import SourceConfig, SparkIngestion, spark_session  # noqa: E402
from rspstar.store.rdf_input import format_for_path  # noqa: E402
from rspstar.store.stream_store import StreamStore  # noqa: E402

RETENTION = 10_000_000


def rss_mib(pid: int | str = "self") -> float:
    for line in Path("/proc/%s/status" % pid).read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def soak(elements: int, rate: int, disk: bool) -> str:
    spark = spark_session("local[2]")
    jvm_pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    with tempfile.TemporaryDirectory() as tmp:
        store = StreamStore(str(Path(tmp) / "db") if disk else None)
        source = SourceConfig("soak", "simulator", scenario="tvs", size=1000, rate=rate, trigger_seconds=1.0)
        ingestion = SparkIngestion(spark, store, [source], Path(tmp) / "ckpt", Path(tmp) / "quarantine")
        writer = ingestion.writers["soak"]
        original = writer.write
        readings: list[tuple] = []
        started = time.perf_counter()
        state = {"next": 100_000}

        def write_and_retain(batch_id, payloads):
            report = original(batch_id, payloads)
            for stream, stats in store.streams().items():
                if stats.latest is not None:
                    store.evict_before(stream, stats.latest - RETENTION)
            store.maybe_compact()
            total = sum(st.ingested for st in store.streams().values())
            if total >= state["next"]:
                state["next"] += 100_000
                elapsed = time.perf_counter() - started
                readings.append((total, total / elapsed, rss_mib(), rss_mib(jvm_pid), store.disk_bytes() / 2**20,
                                 sum(st.elements for st in store.streams().values()), len(store.compactions)))
                print("%8d elements  %7.0f el/s  RSS %6.0f MiB  JVM %6.0f MiB  disk %6.1f MiB  live %6d  rebuilds %d"
                      % readings[-1], flush=True)
            return report

        writer.write = write_and_retain
        ingestion.start()
        while state["next"] <= elements:
            time.sleep(0.5)
            for query in ingestion.queries.values():
                if query.exception() is not None:
                    raise RuntimeError(query.exception())
        ingestion.stop()
        store.close()
    spark.stop()
    table = Table("Soak: TVS simulator through Spark at %d rows/s, 10 s retention, %s store (%d elements)"
                  % (rate, "on-disk" if disk else "in-memory", elements),
                  ["elements", "elements/s", "RSS MiB", "JVM RSS MiB", "disk MiB", "live elements", "rebuilds"])
    for r in readings:
        table.add(r[0], r[1], r[2], r[3], r[4], r[5], r[6])
    first, last = readings[1] if len(readings) > 1 else readings[0], readings[-1]
    pauses = ", ".join("%.2f" % p for p in store.compactions[:5])
    verdict = ("\nLast vs first after warm-up (100k): RSS %.2fx, disk %.2fx (target <= 1.5x). Rebuild pauses (s): %s\n"
               % (last[2] / first[2], (last[4] or 1e-9) / (first[4] or 1e-9), pauses or "none"))
    return table.markdown() + verdict


def throughput(elements: int) -> str:
    spark = spark_session("local[2]")
    table = Table("Throughput through Spark vs direct ingestion (%d elements per format)" % elements,
                  ["format", "path", "seconds", "elements/s", "quads/s", "ratio to direct"])
    with tempfile.TemporaryDirectory() as tmp:
        text = sensor_stream(elements, 1000, elements // 1000)
        for fmt, suffix in (("TriG", ".trig"), ("N-Quads", ".nq")):
            land = Path(tmp) / fmt / "landing"
            land.mkdir(parents=True)
            data = text.encode()
            if suffix == ".nq":
                staging = ox.Store()
                staging.load(data, ox.RdfFormat.TRIG)
                data = staging.dump(format=ox.RdfFormat.N_QUADS)
            parts = 10
            files = []
            if suffix == ".trig":
                # An element is two lines (timestamp triple, graph): cut between elements.
                lines = text.splitlines(keepends=True)
                header = [l for l in lines if l.startswith("@prefix")]
                body = [l for l in lines if not l.startswith("@prefix")]
                step = (len(body) // parts // 2 + 1) * 2
                files = ["".join(header + body[k * step:(k + 1) * step]).encode() for k in range(parts)]
            else:
                lines = data.decode().splitlines(keepends=True)
                step = len(lines) // parts + 1
                files = ["".join(lines[k * step:(k + 1) * step]).encode() for k in range(parts)]
            for k, content in enumerate(files):
                (land / ("part-%02d%s" % (k, suffix))).write_bytes(content)
            quads = None

            direct = StreamStore()
            started = time.perf_counter()
            for path in sorted(land.iterdir()):
                result = direct.documents.stage("http://example.org/s", path.read_bytes(), format_for_path(path), str(path))
                direct.publish("http://example.org/s", result.staged)
            direct_seconds = time.perf_counter() - started
            quads = len(direct.oxigraph)

            store = StreamStore()
            source = SourceConfig("bench", "files", stream="http://example.org/s", path=str(land))
            ingestion = SparkIngestion(spark, store, [source], Path(tmp) / fmt / "ckpt", Path(tmp) / fmt / "q")
            started = time.perf_counter()
            ingestion.start(available_now=True)
            ingestion.await_termination(600)
            spark_seconds = time.perf_counter() - started
            count = sum(st.ingested for st in store.streams().values())
            assert count == elements, (count, elements)
            table.add(fmt, "direct (stage + publish)", direct_seconds, elements / direct_seconds, quads / direct_seconds, "1")
            table.add(fmt, "Spark end to end (files, available-now)", spark_seconds, elements / spark_seconds,
                      quads / spark_seconds, "%.2f" % (direct_seconds / spark_seconds))
    spark.stop()
    return table.markdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["soak", "throughput"])
    parser.add_argument("--elements", type=int)
    parser.add_argument("--rate", type=int, default=5_000)
    parser.add_argument("--disk", action="store_true")
    args = parser.parse_args()
    if args.mode == "soak":
        text = soak(args.elements or 1_000_000, args.rate, args.disk)
    else:
        text = throughput(args.elements or 100_000)
    text = "Machine: %s\n\n%s" % (machine(), text)
    publish("spark_%s%s" % (args.mode, "_disk" if getattr(args, "disk", False) else ""), text)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
