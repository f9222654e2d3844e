"""What one micro-batch of landing files costs Spark's JVM heap, by its size and where it is
decoded ([[sources]] max_batch_bytes, bench/out/NOTES.md#batch-bytes).

Each measurement runs in a process of its own (a batch too large ends the JVM): files of
canonical N-Quads (two quads an element) are landed as POST /streams lands them, a files source
takes them in one available-now micro-batch into an on-disk store, and the driver's heap at its
peak is read from the JVM (the heap pools' peak usage, reset after a collection before the batch;
garbage not yet collected is counted). "died" when the JVM ended.

Run by hand: python bench/batch_heap.py [--sizes 4,6,12] [--files 1] [--decode driver,executors]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ELEMENT_BYTES = 240          # an element of canonical N-Quads below, about
CHILD = r"""
import json, sys, time
from pathlib import Path
from rspstar.store.codec import Payload, canonical, decode
from rspstar.store.ingestion import SourceConfig, SparkIngestion, spark_session
from rspstar.store.landing import drop_file
from rspstar.store.stream_store import StreamStore
root, files, elements, decode_at = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
stream = "http://example.org/s"
size = 0
for f in range(files):
    text = "".join('<http://example.org/e%d> <http://www.w3.org/ns/prov#generatedAtTime> '
                   '"2026-03-01T08:00:01Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
                   '<http://example.org/o%d> <http://example.org/value> "value %d" <http://example.org/e%d> .\n'
                   % (k, k, k, k) for k in range(f * elements, (f + 1) * elements))
    data = canonical(decode(Payload(stream, "nquads", "body", text, 0, line=1)).elements[stream])
    size += len(data)
    drop_file(root / "landing", stream, data, ".nq")
spark = spark_session("local[2]")
jvm = spark._jvm
pools = [p for p in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
         if str(p.getType()) == "Heap memory"]
jvm.java.lang.System.gc()
for pool in pools:
    pool.resetPeakUsage()
store = StreamStore(str(root / "store"))
source = SourceConfig("landing", "files", stream=stream, path=str(root / "landing"), decode=decode_at,
                      max_batch_bytes=1 << 40)
ingestion = SparkIngestion(spark, store, [source], root / "checkpoints", root / "quarantine")
started = time.perf_counter()
ingestion.start(available_now=True)
ingestion.await_termination(900)
print(json.dumps({"bytes": size, "seconds": time.perf_counter() - started, "stored": store.streams()[stream].ingested,
                  "peak_mib": sum(p.getPeakUsage().getUsed() for p in pools) / 2**20}))
"""


def measure(megabytes: float, files: int, decode_at: str) -> dict:
    directory = Path(tempfile.mkdtemp(prefix="batch-heap-"))
    try:
        elements = max(1, int(megabytes * 1e6 / files / ELEMENT_BYTES))
        done = subprocess.run([sys.executable, "-c", CHILD, str(directory), str(files), str(elements), decode_at],
                              capture_output=True, text=True, timeout=1800)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode or not lines:
            return {"died": "OutOfMemoryError" in done.stderr or "Connection refused" in done.stderr}
        return json.loads(lines[-1])
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4,6,12", help="megabytes of landing files in the micro-batch")
    parser.add_argument("--files", type=int, default=1, help="files they are cut into")
    parser.add_argument("--decode", default="driver,executors")
    args = parser.parse_args()
    print("| MB | decoded | files | peak heap MiB | seconds |\n| --- | --- | --- | --- | --- |")
    for size in [float(s) for s in args.sizes.split(",")]:
        for where in args.decode.split(","):
            found = measure(size, args.files, where)
            if "peak_mib" in found:
                print("| %.1f | %s | %d | %.0f | %.1f |" % (found["bytes"] / 1e6, where, args.files, found["peak_mib"],
                                                           found["seconds"]), flush=True)
            else:
                print("| %.1f | %s | %d | died | |" % (size, where, args.files), flush=True)


if __name__ == "__main__":
    main()
