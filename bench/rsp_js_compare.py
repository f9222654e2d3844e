"""Workload (a) against rsp-js 1.3.5 and raw pyoxigraph, in one run (run by hand).

  python bench/rsp_js_compare.py [--sensors 1000] [--seconds 100] [--rspjs-seconds 10]

1000 sensors, one observation per sensor per second, RANGE 10 s STEP 2 s; a filter query and an
AVG-per-sensor query. rsp-js is installed from npm into bench/scratch/ (never committed) and fed
the same observations; its result count is checked against ours (windows aligned as rsp-js
aligns them) before anything is timed. rsp-js runs on the first `--rspjs-seconds` of the stream
(it is slow); rates are per event, so the ratio compares like with like. rsp-js is fed with a
pause after each STEP (fed in one go it evicts windows before evaluating them and loses
results), and its rate is its process CPU time, so the pauses do not count against it; ours
are wall-clock times of one process doing everything.
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
from common import OUT, PREFIXES, Table, machine, peak_rss_mib  # noqa: E402

from endpoint.evaluation import EvaluationOptions  # noqa: E402
from endpoint.replay import Replay, ReplayInput  # noqa: E402
from translator.rewrite import rewrite  # noqa: E402

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


def run_rspjs(modules: Path, values: list[float], sensors: int, seconds: int, kind: str, tmp: Path) -> dict:
    (tmp / "values.json").write_text(json.dumps(values[:sensors * seconds]))
    out = tmp / ("rspjs-%s.json" % kind)
    env = {**os.environ, "RSPJS_MODULES": str(modules), "RSPJS_VALUES": str(tmp / "values.json"), "RSPJS_OUT": str(out)}
    subprocess.run(["node", str(HERE / "rspjs" / "run.js"), str(sensors), str(seconds), kind], env=env,
                   cwd=SCRATCH, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=3600)
    return json.loads(out.read_text())


def run_ours(path: Path, kind: str, seconds: int, start: str | None, until_extra: int = 0) -> tuple[float, int, int]:
    """(seconds, evaluations, result rows) of a replay over the stream file."""
    spec = ReplayInput(query_text(kind, start), [("http://example.org/stream", path)], -1,
                       (seconds + until_extra) * 1_000_000, options=EvaluationOptions())
    started = time.perf_counter()
    evaluations = rows = 0
    for evaluation in Replay(spec).run():
        evaluations += 1
        rows += len(evaluation.rows)
    return time.perf_counter() - started, evaluations, rows


def run_raw(data: bytes, kind: str, seconds: int, sensors: int) -> float:
    """The limit: bulk insert, then the same SPARQL per window on the raw store."""
    spec = ReplayInput(query_text(kind, None), [], -1, seconds * 1_000_000)
    replay = Replay(spec)
    query = replay.query
    started = time.perf_counter()
    store = ox.Store()
    store.bulk_load(data, ox.RdfFormat.TRIG)
    for close in query.report_instants(0, seconds * 1_000_000):
        lo, hi = query.windows["http://example.org/w"].bounds_at(close)
        first, last = max(0, lo * sensors // 1_000_000), min(seconds * sensors, hi * sensors // 1_000_000)
        elements = {"http://example.org/w": ["http://example.org/e%d" % i for i in range(first, last)]}
        list(store.query(rewrite(query, elements, []).text))
    return time.perf_counter() - started


def run(sensors: int = 1000, seconds: int = 100, rspjs_seconds: int = 10) -> str:
    modules = ensure_rspjs()
    values, text = workload(sensors, seconds)
    events = sensors * seconds
    table = Table("Workload (a): %d sensors, RANGE 10 s STEP 2 s (ours over %d s = %d events; rsp-js over %d s)"
                  % (sensors, seconds, events, rspjs_seconds),
                  ["query", "system", "seconds", "events/s", "ratio to rsp-js", "results"])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        full = tmp / "stream.trig"
        full.write_text(text)
        _, small_text = workload(sensors, rspjs_seconds)
        small = tmp / "small.trig"
        small.write_text(small_text)
        for kind in ("filter", "avg"):
            theirs = run_rspjs(modules, values, sensors, rspjs_seconds, kind, tmp)
            # rsp-js opens its first window at -8 s: align ours (START) and count the same windows.
            _, _, check_rows = run_ours(small, kind, rspjs_seconds, "1969-12-31T23:59:52Z", until_extra=2)
            agree = "agree" if check_rows == theirs["results"] else "DIFFER (%d vs %d)" % (check_rows, theirs["results"])
            rspjs_rate = theirs["events"] / theirs["cpu_seconds"]
            table.add(kind, "rsp-js 1.3.5 (CPU time; RSS %.0f MiB)" % theirs["rss_mib"], theirs["cpu_seconds"],
                      rspjs_rate, "1", "%d, counts %s" % (theirs["results"], agree))
            elapsed, evaluations, rows = run_ours(full, kind, seconds, None)
            table.add(kind, "rspstar replay", elapsed, events / elapsed, "%.0f" % (events / elapsed / rspjs_rate),
                      "%d over %d evaluations" % (rows, evaluations))
            raw = run_raw(full.read_bytes(), kind, seconds, sensors)
            table.add(kind, "raw pyoxigraph (bulk load + same SPARQL per window)", raw, events / raw,
                      "%.0f" % (events / raw / rspjs_rate), "")
    return "%s\nPeak RSS of the Python process: %.0f MiB\n" % (table.markdown(), peak_rss_mib())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sensors", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=100)
    parser.add_argument("--rspjs-seconds", type=int, default=10)
    args = parser.parse_args()
    text = "Machine: %s\n\n%s" % (machine(), run(args.sensors, args.seconds, args.rspjs_seconds))
    print(text)
    OUT.mkdir(exist_ok=True)
    (OUT / "rsp_js_compare.md").write_text(text)


if __name__ == "__main__":
    main()
