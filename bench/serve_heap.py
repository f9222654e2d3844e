"""What the Python server's memory holds as `rspstar serve` runs: the packaged configuration in
this process under tracemalloc, Python's traced memory every minute, and the lines whose
allocations grew from the end of the warm-up to the end, with the calls that made them.

Run by hand: python bench/serve_heap.py [--minutes 40] [--warmup 10]  (into bench/out/serve_heap.md)

tracemalloc slows every allocation and its snapshots take memory of their own, so this measures
what Python objects hold, not the resident memory or the CPU of `rspstar serve` (bench/serve_soak.py
measures those). The server runs under this interpreter's malloc, not restarted under jemalloc.
"""
from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import free_port, machine, publish  # noqa: E402

FRAMES = 6
TOP = 12


def watch(minutes: float, warmup: float, started: float) -> None:
    """Sample every minute; after `minutes`, publish the growth since `warmup` and stop the
    server."""
    samples, first = [], None
    while True:
        time.sleep(60)
        minute = (time.monotonic() - started) / 60
        traced, _ = tracemalloc.get_traced_memory()
        samples.append((minute, traced / 2**20, len(gc.get_objects())))
        if first is None and minute >= warmup:
            gc.collect()
            first = tracemalloc.take_snapshot()
        if minute >= minutes and first is not None:
            gc.collect()
            last = tracemalloc.take_snapshot()
            publish("serve_heap", report(samples, first, last, minutes, warmup))
            # Stopped as a user stops it: the server stops Spark and returns.
            os.kill(os.getpid(), signal.SIGTERM)
            return


def report(samples, first, last, minutes: float, warmup: float) -> str:
    lines = ["Machine: %s" % machine(), "",
             "### rspstar serve under tracemalloc: %.0f min, growth after a %.0f-minute warm-up" % (minutes, warmup), "",
             "| minute | traced Python memory (MiB) | objects the cycle collector tracks (not frozen) |",
             "|---|---|---|"]
    lines += ["| %.0f | %.2f | %d |" % sample for sample in samples]
    lines += ["", "Lines whose allocations still held grew most, and the calls that made them:", "", "```"]
    for stat in last.compare_to(first, "traceback")[:TOP]:
        lines.append(str(stat))
        lines += ["    " + line for line in stat.traceback.format()[-2 * FRAMES:]]
    lines.append("```")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=40)
    parser.add_argument("--warmup", type=float, default=10)
    args = parser.parse_args()
    tracemalloc.start(FRAMES)
    from rspstar.endpoint import cli
    started = time.monotonic()
    threading.Thread(target=watch, args=(args.minutes, args.warmup, started), daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="rspstar-heap-") as data:
        cli.main(["serve", "--data", data, "--port", str(free_port())])


if __name__ == "__main__":   # the server's worker processes are spawned: they import this module again
    main()
