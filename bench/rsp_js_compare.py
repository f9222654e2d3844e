"""Workload (a) against rsp-js 1.3.5 and raw pyoxigraph, in one run (run by hand).

  python bench/rsp_js_compare.py [--sensors 1000] [--seconds 100]

1000 sensors, one observation per sensor per second, RANGE 10 s STEP 2 s; a filter query and an
AVG-per-sensor query. rsp-js is installed from npm into bench/scratch/ (never committed) and fed
the same observations, pausing after each STEP until its evaluations have ended (fed in one go
it evicts windows before evaluating them). Its result count per window is compared with ours
(our windows aligned as rsp-js aligns them) before any rate is reported.

rsp-js 1.3.5 as shipped stops reporting after a few windows: it moves its window origin one
STEP forward per result binding. It is run twice: as shipped (results only) and with the origin
put back after each binding ("t0-reset", an observation hook in the feeder; rsp-js's own code
does the work), which is the run that is timed. Rates are events over wall-clock seconds from
the first event in to the last result out, for every system.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyoxigraph as ox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import PREFIXES, Table, machine, peak_rss_mib, publish  # noqa: E402

from rspstar.endpoint.allocator import use_jemalloc  # noqa: E402
from rspstar.endpoint.engine.replay import Replay, ReplayInput  # noqa: E402
from rspstar.translator.rewrite import rewrite  # noqa: E402
from rspstar.translator.temporal import parse_instant  # noqa: E402
from rspstar.translator.policy import report_policy  # noqa: E402

HERE = Path(__file__).resolve().parent
SCRATCH = HERE / "scratch" / "rspjs"
QUERIES = {
    "filter": "SELECT ?o ?v WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v FILTER(?v < 0.165) } } }",
    "avg": "SELECT ?sensor (AVG(?v) AS ?avg) WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:madeBySensor ?sensor ; "
           "sosa:hasSimpleResult ?v } } } GROUP BY ?sensor",
}


def query_text(kind: str, start: str | None) -> str:
    window = "FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S STEP PT2S%s]" % (
        ' START "%s"^^<http://www.w3.org/2001/XMLSchema#dateTime>' % start if start else "")
    select, where = QUERIES[kind].split(" WHERE ", 1)
    return ("PREFIX ex: <http://example.org/>\nPREFIX sosa: <http://www.w3.org/ns/sosa/>\n%s\n%s\nWHERE %s"
            % (select, window, where))


def workload(sensors: int, seconds: int) -> tuple[list[float], str]:
    """Values and the TriG stream: observation i at i/sensors seconds + 0.5 ms after the epoch
    (never on a window boundary, so [l, u) and (l, u] windows hold the same elements)."""
    rng = random.Random(1)
    values = [round(rng.uniform(0.16, 0.21), 3) for _ in range(sensors * seconds)]
    parts = [PREFIXES]
    for i, value in enumerate(values):
        micros = i * 1_000_000 // sensors + 500
        stamp = "1970-01-01T00:%02d:%02d.%06dZ" % (micros // 60_000_000, micros // 1_000_000 % 60, micros % 1_000_000)
        parts.append('ex:e%d prov:generatedAtTime "%s"^^xsd:dateTime .\nex:e%d { ex:o%d sosa:madeBySensor ex:s%d ; '
                     "sosa:hasSimpleResult %s . }\n" % (i, stamp, i, i, i % sensors, value))
    return values, "".join(parts)


def ensure_rspjs() -> Path:
    if not (SCRATCH / "node_modules" / "rsp-js").is_dir():
        SCRATCH.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--prefix", str(SCRATCH), "rsp-js@1.3.5"], check=True)
    (SCRATCH / "logs").mkdir(exist_ok=True)
    return SCRATCH / "node_modules"


def run_rspjs(modules: Path, values: list[float], sensors: int, seconds: int, kind: str, mode: str,
              tmp: Path) -> dict:
    (tmp / "values.json").write_text(json.dumps(values[:sensors * seconds]))
    out = tmp / ("rspjs-%s.json" % kind)
    env = {**os.environ, "RSPJS_MODULES": str(modules), "RSPJS_VALUES": str(tmp / "values.json"), "RSPJS_OUT": str(out)}
    # rsp-js prints traces for every element on standard output, as shipped.
    subprocess.run(["node", str(HERE / "rspjs" / "run.js"), str(sensors), str(seconds), kind, mode], env=env,
                   cwd=SCRATCH, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=3600)
    result = json.loads(out.read_text())
    result["per_close"] = {int(close) * 1000: count for close, count in result["per_close"].items()}
    return result


def run_ours(path: Path, kind: str, seconds: int) -> tuple[float, dict[int, int]]:
    """(seconds, result rows per window close) of a replay over the stream file, windows
    aligned as rsp-js aligns them (its first closes at 2 s, holding [-8 s, 2 s))."""
    spec = ReplayInput.single(query_text(kind, "1969-12-31T23:59:52Z"), [("http://example.org/stream", path)], -1,
                       seconds * 1_000_000)
    started = time.perf_counter()
    per_close = {parse_instant(record["time"]): len(record.get("bindings", [])) for _, record in Replay(spec).run()}
    return time.perf_counter() - started, per_close


def agreement(theirs: dict[int, int], ours: dict[int, int]) -> str:
    differ = [close for close in sorted(theirs) if theirs[close] != ours.get(close)]
    missing = [close for close in sorted(ours) if close not in theirs and ours[close]]
    if not differ and not missing:
        return "agree on all %d windows" % len(theirs)
    parts = []
    if differ:
        parts.append("DIFFER on %d of %d windows (first at %g s: %d vs our %s)" % (
            len(differ), len(theirs), differ[0] / 1e6, theirs[differ[0]], ours.get(differ[0])))
    if missing:
        parts.append("%d windows NOT REPORTED (from %g s)" % (len(missing), missing[0] / 1e6))
    return "; ".join(parts)


def run_raw(data: bytes, kind: str, seconds: int, sensors: int) -> float:
    """The limit: bulk insert, then the same SPARQL per window on the raw store."""
    spec = ReplayInput.single(query_text(kind, None), [], -1, seconds * 1_000_000)
    replay = Replay(spec)
    query = replay.query
    started = time.perf_counter()
    store = ox.Store()
    store.bulk_load(data, ox.RdfFormat.TRIG)
    for close in report_policy(query).fixed_instants(0, seconds * 1_000_000):
        lo, hi = query.windows["http://example.org/w"].bounds_at(close)
        first, last = max(0, lo * sensors // 1_000_000), min(seconds * sensors, hi * sensors // 1_000_000)
        elements = {"http://example.org/w": ["http://example.org/e%d" % i for i in range(first, last)]}
        list(store.query(rewrite(query, elements, []).text))
    return time.perf_counter() - started


def run(sensors: int = 1000, seconds: int = 100) -> str:
    modules = ensure_rspjs()
    values, text = workload(sensors, seconds)
    events = sensors * seconds
    table = Table("Workload (a): %d sensors, RANGE 10 s STEP 2 s, %d s of event time (%d events), every system on "
                  "the same stream and windows" % (sensors, seconds, events),
                  ["query", "system", "seconds", "events/s", "ratio to rsp-js", "peak RSS MiB", "results"])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        stream = tmp / "stream.trig"
        stream.write_text(text)
        for kind in ("filter", "avg"):
            elapsed, ours = run_ours(stream, kind, seconds)
            shipped = run_rspjs(modules, values, sensors, seconds, kind, "as-shipped", tmp)
            table.add(kind, "rsp-js 1.3.5 as shipped", shipped["wall_seconds"], "", "", shipped["peak_rss_mib"],
                      "%d results; %s" % (sum(shipped["per_close"].values()), agreement(shipped["per_close"], ours)))
            theirs = run_rspjs(modules, values, sensors, seconds, kind, "t0-reset", tmp)
            rspjs_rate = events / theirs["wall_seconds"]
            table.add(kind, "rsp-js 1.3.5, window origin reset (CPU %.1f s)" % theirs["cpu_seconds"],
                      theirs["wall_seconds"], rspjs_rate, "1", theirs["peak_rss_mib"],
                      "%d results; %s" % (sum(theirs["per_close"].values()), agreement(theirs["per_close"], ours)))
            table.add(kind, "rspstar replay", elapsed, events / elapsed, "%.1f" % (events / elapsed / rspjs_rate), "",
                      "%d results over %d windows" % (sum(ours.values()), len(ours)))
            raw = run_raw(stream.read_bytes(), kind, seconds, sensors)
            table.add(kind, "raw pyoxigraph (bulk load + same SPARQL per window)", raw, events / raw,
                      "%.1f" % (events / raw / rspjs_rate), "", "")
    return "%s\nPeak RSS of the Python process (rspstar and raw runs): %.0f MiB\n" % (table.markdown(), peak_rss_mib())


def main() -> None:
    # As `rspstar replay` runs (endpoint/allocator.py); raw pyoxigraph runs under it too.
    use_jemalloc()
    parser = argparse.ArgumentParser()
    parser.add_argument("--sensors", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=100)
    args = parser.parse_args()
    text = "Machine: %s\n\n%s" % (machine(), run(args.sensors, args.seconds))
    publish("rsp_js_compare", text)


if __name__ == "__main__":
    main()
