"""Soak of the main job: `rspstar serve` on its embedded defaults (on-disk store, Spark local,
simulators, example queries), sampled every 30 s: resident memory of its whole process tree
(Python, Spark's JVM, query workers) and the bytes of its store and recordings. Prints the
slope of each after the warm-up (least squares, MiB per minute): flat within noise is the goal.

Run by hand: python bench/serve_soak.py [--minutes 30] [--warmup 10] [--scale 1]
(`--scale` multiplies the simulators' rates: 1 is the defaults' 55 elements/s).
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import OUT, Table, machine, process_tree_rss_by_kind  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULTS = REPO / "endpoint" / "defaults" / "default.toml"
SAMPLE_SECONDS = 30


def mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20 if path.exists() else 0.0


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (minute, value) points."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def config(scale: float, directory: Path) -> Path:
    """The embedded defaults with the simulators' rates scaled (and paths kept absolute)."""
    text = DEFAULTS.read_text()
    raw = tomllib.loads(text)
    for source in raw.get("sources", []):
        if source.get("kind") == "simulator":
            text = text.replace("rate = %d" % source["rate"], "rate = %d" % round(source["rate"] * scale), 1)
    text = text.replace('"background/', '"%s/background/' % DEFAULTS.parent).replace(
        '"queries/', '"%s/queries/' % DEFAULTS.parent)
    path = directory / "soak.toml"
    path.write_text(text)
    return path


def run(minutes: float, warmup: float, scale: float) -> Table:
    work = Path(tempfile.mkdtemp(prefix="rspstar-soak-"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (work / "serve.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "endpoint.cli", "serve", "--config", str(config(scale, work)),
                               "--port", str(port), "--data", str(work / "data")], cwd=REPO, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    samples = []
    started = time.monotonic()
    try:
        while time.monotonic() - started < minutes * 60:
            time.sleep(SAMPLE_SECONDS)
            assert server.poll() is None, (work / "serve.log").read_text()[-2000:]
            minute = (time.monotonic() - started) / 60
            kinds = process_tree_rss_by_kind(server.pid)
            samples.append((minute, sum(kinds.values()), kinds["root"], kinds["java"], kinds["other"],
                            mib(work / "data" / "store"), mib(work / "data" / "recording")))
            print("%.1f min: RSS %.0f MiB (Python %.0f, JVM %.0f, workers %.0f), store %.1f MiB, "
                  "recording %.1f MiB" % samples[-1], flush=True)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=120)
        log.close()
    steady = [s for s in samples if s[0] >= warmup]
    table = Table("rspstar serve soak: %.0f min, defaults' rates x %g, warm-up %.0f min (%s)"
                  % (minutes, scale, warmup, machine()),
                  ["measure", "after warm-up", "at the end", "slope after warm-up (MiB/min)"])
    for k, name in ((1, "RSS of the process tree (MiB)"), (2, "  of it the Python server (MiB)"),
                    (3, "  of it Spark's JVM (MiB)"), (4, "  of it query workers (MiB)"),
                    (5, "store on disk (MiB)"), (6, "recordings (MiB)")):
        table.add(name, "%.1f" % steady[0][k], "%.1f" % steady[-1][k],
                  "%.2f" % slope([(s[0], s[k]) for s in steady]))
    return table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=10)
    parser.add_argument("--scale", type=float, default=1)
    args = parser.parse_args()
    table = run(args.minutes, args.warmup, args.scale)
    print(table.markdown())
    OUT.mkdir(exist_ok=True)
    (OUT / "serve_soak.md").write_text(table.markdown())


if __name__ == "__main__":
    main()
