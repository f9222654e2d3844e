"""What unflushed writes cost every read that opens a view of the store (issue 60's reproduction):
a PUT /store of about 200,000 triples and a DROP ALL through /update on `rspstar serve`, then
`ASK {}` on /sparql, which a worker process answers over a read-only view of the store (opened
again whenever the store has been written since: Oxigraph replays the write-ahead log past the
last flush at every opening).

Run by hand: python bench/store_flush.py [--triples N] [--rounds R] [--asks A] [--code DIR]

Each round starts a fresh engine (no sources: no Spark) on a fresh data directory, writes, drops,
waits `--settle` seconds (what a flush off the request path takes), then times `--asks` ASKs
(each one after a small write, a background triple added, so that every ASK opens a view, as it
does while sources write) and reads the size of the store's write-ahead log files (`*.log` in the
live generation; Oxigraph keeps recycled log files of earlier sizes, so the size of the log is an
upper bound, not what an opening replays). `--code DIR`: run the engine from another checkout (a
directory holding the package as `rspstar/`, e.g. `git archive <commit>` unpacked there), to
compare with the code before a change. Prints the medians of the rounds with their ranges.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import free_port, machine  # noqa: E402

# A DROP ALL of 200,000 triples is past the default bound on one update's changes (100,000):
# raised, as the engine had no such bound.
CONFIG = """
[http]
token = ""
update_max_changes = 1000000
"""


def turtle(count: int) -> bytes:
    return (b"@prefix ex: <http://example.org/> .\n" +
            b"".join(b"ex:r%d ex:p%d \"reading %d\" .\n" % (k, k % 7, k) for k in range(count)))


def one_round(triples: int, asks: int, settle: float, code: str | None) -> dict:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "engine.toml").write_text(CONFIG)
        port = free_port()
        base = "http://127.0.0.1:%d" % port
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if code:
            env["PYTHONPATH"] = code
        log = (root / "serve.log").open("w")
        process = subprocess.Popen([sys.executable, "-m", "rspstar.endpoint.cli", "serve", "--config",
                                    str(root / "engine.toml"), "--port", str(port), "--data", str(root / "data")],
                                   stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if requests.get(base + "/health", timeout=2).json()["status"] != "starting":
                        break
                except (requests.RequestException, ValueError):
                    pass
                assert time.monotonic() < deadline and process.poll() is None, (root / "serve.log").read_text()
                time.sleep(0.2)
            body = turtle(triples)
            started = time.perf_counter()
            put = requests.put(base + "/store?default", data=body, headers={"Content-Type": "text/turtle"}, timeout=600)
            put_seconds = time.perf_counter() - started
            assert put.status_code in (200, 201, 204), put.text
            started = time.perf_counter()
            dropped = requests.post(base + "/update", data="DROP ALL",
                                    headers={"Content-Type": "application/sparql-update"}, timeout=600)
            drop_seconds = time.perf_counter() - started
            assert dropped.status_code in (200, 204), dropped.text
            time.sleep(settle)
            generation = max((root / "data" / "store").glob("gen-*"), key=lambda p: int(p.name[4:]))
            log_bytes = sum(f.stat().st_size for f in generation.glob("*.log"))
            times = []
            for k in range(asks):
                requests.post(base + "/update", data="INSERT DATA { <http://example.org/a%d> <http://example.org/b> 1 }"
                              % k, headers={"Content-Type": "application/sparql-update"}, timeout=60)
                started = time.perf_counter()
                answer = requests.get(base + "/sparql", params={"query": "ASK {}"}, timeout=120)
                times.append(time.perf_counter() - started)
                assert answer.status_code == 200, answer.text
            return {"put": put_seconds, "drop": drop_seconds, "log_mb": log_bytes / 1e6,
                    "ask": statistics.median(times), "ask_max": max(times)}
        finally:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
            log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triples", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--asks", type=int, default=5)
    parser.add_argument("--settle", type=float, default=3.0)
    parser.add_argument("--code", default=None)
    args = parser.parse_args()
    rounds = [one_round(args.triples, args.asks, args.settle, args.code) for _ in range(args.rounds)]
    print("# %s; %d triples, %d rounds%s" % (machine(), args.triples, args.rounds,
                                               ", code from %s" % args.code if args.code else ""))
    for key, unit in (("put", "s"), ("drop", "s"), ("log_mb", "MB"), ("ask", "s"), ("ask_max", "s")):
        values = [r[key] for r in rounds]
        print("%-8s median %.3f %s (%.3f-%.3f)" % (key, statistics.median(values), unit, min(values), max(values)))


if __name__ == "__main__":
    main()
