"""Soak of the main job: `rspstar serve` on its embedded defaults (on-disk store, Spark local,
simulators, example queries), sampled every 30 s: resident memory of its whole process tree
(Python, Spark's JVM, query workers) and the bytes of its store and recordings. Prints the
slope of each after the warm-up (least squares, MiB per minute): flat within noise is the goal.

Also prints the CPU time the process tree used per 1,000 elements ingested after the warm-up.

Run by hand: python bench/serve_soak.py [--minutes 30] [--warmup 10] [--scale 1] [--trigger S]
[--landing-trigger S] [--spark KEY=VALUE ...] (`--scale` multiplies the simulators' rates: 1 is the
defaults' 55 elements/s; `--trigger` sets the simulators' micro-batch interval, `--landing-trigger`
the landing directory's; `--spark` adds a setting to the configuration's [spark] table,
to compare one against the defaults; a run with any of them writes a table of its own).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Table, free_port, machine, process_tree_by_kind, publish  # noqa: E402
from rspstar.config.schema import default  # noqa: E402
from rspstar.endpoint.allocator import allocator_environment  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULTS = REPO / "config" / "default.toml"
SAMPLE_SECONDS = 30


def mib(path: Path) -> float:
    """What the files under `path` hold; Spark and the store delete files meanwhile (os.walk
    passes over a folder that is gone)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(folder, name)).st_size
            except FileNotFoundError:
                continue
    return total / 2**20


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (minute, value) points."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def config(scale: float, directory: Path, spark: list[str], trigger: float | None = None,
           landing_trigger: float | None = None) -> Path:
    """The embedded defaults with the simulators' rates scaled (and their micro-batch interval
    `trigger`; the landing directory's `landing_trigger`), `spark` settings added (and paths
    kept absolute)."""
    text = DEFAULTS.read_text()
    settings = dict(setting.split("=", 1) for setting in spark)
    if settings:
        # The defaults have no [spark] table: one is added at the end, its keys and values quoted.
        text += "\n[spark]\n" + "".join("%s = %s\n" % (json.dumps(k), json.dumps(v)) for k, v in settings.items())
    raw = tomllib.loads(text)
    if {k: raw.get("spark", {}).get(k) for k in settings} != settings:
        raise SystemExit("the [spark] settings did not reach the configuration: %s" % settings)
    for source in raw.get("sources", []):
        if source.get("kind") == "simulator":
            text = text.replace("rate = %d" % source["rate"], "rate = %d" % round(source["rate"] * scale), 1)
    if trigger is not None:
        # The simulators set their interval (the landing directory takes the default's).
        text = re.sub(r"(?m)^trigger_seconds = [0-9.]+", "trigger_seconds = %g" % trigger, text)
    if landing_trigger is not None:
        text = text.replace('path = "landing"', 'trigger_seconds = %g\npath = "landing"' % landing_trigger, 1)
    sources = tomllib.loads(text).get("sources", [])
    if trigger is not None and any(s.get("trigger_seconds") != trigger for s in sources if s.get("kind") == "simulator"):
        raise SystemExit("the trigger did not reach the simulators' configuration")
    if landing_trigger is not None and [s.get("trigger_seconds") for s in sources if s.get("kind") == "files"] != [landing_trigger]:
        raise SystemExit("the trigger did not reach the landing directory's configuration")
    text = text.replace('"background/', '"%s/background/' % DEFAULTS.parent).replace(
        '"queries/', '"%s/queries/' % DEFAULTS.parent)
    path = directory / "soak.toml"
    path.write_text(text)
    return path


def ingested(port: int) -> int:
    with urllib.request.urlopen("http://127.0.0.1:%d/streams" % port, timeout=30) as response:
        return sum(s["ingested"] for s in json.load(response)["streams"])


def run(minutes: float, warmup: float, scale: float, spark: list[str], trigger: float | None = None,
        landing_trigger: float | None = None) -> Table:
    # What `rspstar serve` will run under: it runs itself again under jemalloc when this says so.
    allocator = "jemalloc" if allocator_environment(dict(os.environ), "") is not None else "glibc malloc"
    work = Path(tempfile.mkdtemp(prefix="rspstar-soak-"))
    port = free_port()
    log = (work / "serve.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "rspstar.endpoint.cli", "serve", "--config", str(config(scale, work, spark, trigger, landing_trigger)),
                               "--port", str(port), "--data", str(work / "data")], cwd=REPO, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    samples = []
    started = time.monotonic()
    try:
        while time.monotonic() - started < minutes * 60:
            time.sleep(SAMPLE_SECONDS)
            assert server.poll() is None, (work / "serve.log").read_text()[-2000:]
            minute = (time.monotonic() - started) / 60
            kinds = process_tree_by_kind(server.pid)
            rss = {kind: measured["rss"] for kind, measured in kinds.items()}
            try:
                count = ingested(port)
            except OSError:
                count = None        # not serving yet
            data = mib(work / "data")
            store, recordings = mib(work / "data" / "store"), mib(work / "data" / "recording")
            samples.append((minute, sum(rss.values()), rss["root"], rss["java"], rss["other"], store, recordings,
                            sum(k["cpu"] for k in kinds.values()), kinds["java"]["cpu"], count,
                            data - store - recordings))
            print("%.1f min: RSS %.0f MiB (Python %.0f, JVM %.0f, workers %.0f), store %.1f MiB, "
                  "recording %.1f MiB, CPU %.0f s (JVM %.0f s), %s elements, rest of the data %.1f MiB"
                  % samples[-1], flush=True)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=120)
        log.close()
    variant = ([] if trigger is None else ["simulators' trigger %g s" % trigger]) + \
        ([] if landing_trigger is None else ["landing directory's trigger %g s" % landing_trigger])
    return report(samples, minutes, warmup, scale, spark + variant, allocator)


def report(samples: list[tuple], minutes: float, warmup: float, scale: float, spark: list[str], allocator: str) -> Table:
    steady = [s for s in samples if s[0] >= warmup and s[9] is not None]
    budget = default("recording.max_bytes") / 2**20
    malloc_conf = os.environ.get("MALLOC_CONF")
    table = Table("rspstar serve soak: %.0f min, defaults' rates x %g%s, warm-up %.0f min, %s%s (%s)"
                  % (minutes, scale, "".join(", " + setting for setting in spark), warmup, allocator,
                     " (MALLOC_CONF=%s)" % malloc_conf if malloc_conf else "", machine()),
                  ["measure", "after warm-up", "at the end", "lowest - highest after warm-up",
                   "slope after warm-up (MiB/min)", "slope in the second half (MiB/min)"])
    # A slope that falls from the first half to the second is memory settling; one that holds is growth.
    second_half = [s for s in steady if s[0] >= (steady[0][0] + steady[-1][0]) / 2]
    for k, name in ((1, "RSS of the process tree (MiB)"), (2, "  of it the Python server (MiB)"),
                    (3, "  of it Spark's JVM (MiB)"), (4, "  of it query workers (MiB)"),
                    (5, "store on disk (MiB)"), (6, "recordings (MiB; budget %.0f)" % budget),
                    (10, "rest of the data directory: history, outboxes, checkpoints (MiB)")):
        table.add(name, "%.1f" % steady[0][k], "%.1f" % steady[-1][k],
                  "%.1f - %.1f" % (min(s[k] for s in steady), max(s[k] for s in steady)),
                  "%.2f" % slope([(s[0], s[k]) for s in steady]), "%.2f" % slope([(s[0], s[k]) for s in second_half]))
    elements = steady[-1][9] - steady[0][9]
    seconds = 60 * (steady[-1][0] - steady[0][0])
    for k, name in ((7, "whole tree"), (8, "Spark's JVM")):
        table.add("CPU s per 1,000 elements, " + name, "",
                  "%.2f" % (1000 * (steady[-1][k] - steady[0][k]) / max(elements, 1)), "", "", "")
        table.add("share of a core after warm-up, " + name, "", "%.3f" % ((steady[-1][k] - steady[0][k]) / seconds),
                  "", "", "")
    table.add("elements per second after warm-up", "", "%.0f" % (elements / seconds), "", "", "")
    return table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=10)
    parser.add_argument("--scale", type=float, default=1)
    parser.add_argument("--trigger", type=float, help="the simulators' micro-batch interval, seconds")
    parser.add_argument("--landing-trigger", type=float, help="the landing directory's micro-batch interval, seconds")
    parser.add_argument("--spark", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    table = run(args.minutes, args.warmup, args.scale, args.spark, args.trigger, args.landing_trigger)
    variant = ("" if args.trigger is None else "_trigger%g" % args.trigger) + \
        ("" if args.landing_trigger is None else "_landing%g" % args.landing_trigger) + ("_spark" if args.spark else "")
    publish("serve_soak" + variant, table.markdown())


if __name__ == "__main__":
    main()
