"""A thousand queries on the default engine: the real `rspstar serve` (embedded defaults: the TVS
and home-care simulators through Spark, the three example queries) first alone, then with 1,000
queries of one shape registered over HTTP (each RANGE PT10S STEP PT10S on the simulator's oxygen
stream with a FILTER constant of its own), then after deleting them.

Reported per phase: the example queries' close-to-result p50 / p99 (from their result records,
`latency_ms`), their evaluations, the CPU the engine's processes used (Python, Spark's JVM) as a
share of a core, and resident memory; and the time to register and to delete each query.

Run by hand: python bench/many_queries_live.py [--queries 1000] [--seconds 60]
Checked in under a minute (20 queries, 11 s phases: each query evaluated, its records holding
the readings, nothing timed or written): --check, which `make bench-check` runs.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Table, free_port, machine, process_tree_by_kind, publish, start_serve, stop_serve  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = ("oxygen-warning", "tvs-warning", "homecare-low-emergency")
SHAPE = """PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX sim: <http://rspstar.example/stream/>
PREFIX ex: <http://rspstar.example/>
SELECT ?o ?value
FROM NAMED WINDOW ex:w ON sim:tvs/oxygen [RANGE PT10S STEP PT10S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?value FILTER(?value > %s) } } }
"""


def spread(times: list[float]) -> str:
    """p50 / p99 / max of per-query times (ms), which one was the slowest and how many took over 50 ms."""
    slowest = max(range(len(times)), key=times.__getitem__)
    return "%.1f / %.1f / %.1f (the slowest: number %d; %d over 50 ms)" % (
        statistics.median(times), percentile(times, 0.99), times[slowest], slowest + 1, sum(t > 50 for t in times))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def measure(base: str, pid: int, seconds: float) -> dict:
    """The example queries' latencies over `seconds` from now, and the engine's CPU and memory."""
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    before = process_tree_by_kind(pid)
    time.sleep(seconds)                      # the live engine running: what is measured
    after = process_tree_by_kind(pid)
    latencies, evaluations = [], 0
    for query_id in EXAMPLES:
        text = requests.get(base + "/queries/%s/results" % query_id, params={"since": started_at}, timeout=30).text
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        evaluations += len(records)
        latencies += [r["latency_ms"] for r in records if "latency_ms" in r]
    cpu = {kind: (after[kind]["cpu"] - before[kind]["cpu"]) / seconds for kind in after}
    return {"p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99), "evaluations": evaluations,
            "cores": sum(cpu.values()), "jvm": cpu["java"], "rss": sum(k["rss"] for k in after.values())}


def run(queries: int, seconds: int, warmup: int = 20, check: bool = False) -> str:
    """The table; `check`: also that every query registered was evaluated and its records hold
    the readings above its threshold (read before it is deleted)."""
    table = Table("%d queries of one shape on the default engine (`rspstar serve`, simulators through Spark), %d s "
                  "per phase (%s)" % (queries, seconds, machine()),
                  ["phase", "example queries' close to result p50 / p99 (ms)", "their evaluations",
                   "engine CPU (cores; JVM)", "RSS (MiB)", "register / delete each (ms p50 / p99 / max)"])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        port = free_port()
        base = "http://127.0.0.1:%d" % port
        process = start_serve(tmp, port)
        try:
            token = (tmp / "data" / "token").read_text().strip()     # made at the first start
            time.sleep(warmup)                # the first windows close: not measured
            alone = measure(base, process.pid, seconds)
            table.add("the three example queries", "%.0f / %.0f" % (alone["p50"], alone["p99"]),
                      str(alone["evaluations"]), "%.2f; %.2f" % (alone["cores"], alone["jvm"]), "%.0f" % alone["rss"], "")
            session = requests.Session()
            headers = {"Authorization": "Bearer " + token, "Content-Type": "application/sparql-query"}
            register = []
            for k in range(queries):
                started = time.perf_counter()
                response = session.post(base + "/queries", data=SHAPE % round(0.15 + k * 0.00005, 5),
                                        params={"id": "shape-%d" % k}, headers=headers, timeout=60)
                register.append(1000 * (time.perf_counter() - started))
                assert response.status_code == 201, response.text
            many = measure(base, process.pid, seconds)
            if check:
                for k in range(queries):
                    described = session.get(base + "/queries/shape-%d" % k, timeout=30).json()
                    records = session.get(base + "/queries/shape-%d/results" % k, params={"format": "compact"},
                                          timeout=30).text.splitlines()
                    assert described["status"]["evaluations"] >= 1 and described["status"]["state"] == "running", \
                        described["status"]
                    assert any(json.loads(line)["bindings"] for line in records), "shape-%d: no rows" % k
            table.add("with %d more queries of one shape" % queries, "%.0f / %.0f" % (many["p50"], many["p99"]),
                      str(many["evaluations"]), "%.2f; %.2f" % (many["cores"], many["jvm"]), "%.0f" % many["rss"],
                      "register: %s" % spread(register))
            delete = []
            for k in range(queries):
                started = time.perf_counter()
                response = session.delete(base + "/queries/shape-%d" % k, headers=headers, timeout=60)
                delete.append(1000 * (time.perf_counter() - started))
                assert response.status_code == 204, response.text
            after = measure(base, process.pid, seconds)
            table.add("after deleting them", "%.0f / %.0f" % (after["p50"], after["p99"]), str(after["evaluations"]),
                      "%.2f; %.2f" % (after["cores"], after["jvm"]), "%.0f" % after["rss"],
                      "delete: %s" % spread(delete))
        finally:
            stop_serve(process)
    return table.markdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--name", default="many_queries_live", help="the table's file in bench/out")
    parser.add_argument("--check", action="store_true",
                        help="20 queries, 11 s phases, every query's evaluations and rows asserted, nothing written: "
                             "make bench-check")
    args = parser.parse_args()
    if args.check:
        print(run(20, 11, warmup=2, check=True))
        return
    publish(args.name, run(args.queries, args.seconds))


if __name__ == "__main__":
    main()
