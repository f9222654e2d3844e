"""A real engine in a process of its own, as `rspstar serve` runs it without Spark: the on-disk
store, the runner with the configuration's defaults (evaluation limits, worker processes), the
live scheduler on the wall clock and the HTTP server, stopped by SIGTERM in serve's order. The
attack tests of test_work_bounds.py drive it from outside, as a client would, and watch it as an
operator would (/health, a canary query, the processes' memory and CPU).

Instead of Spark's ingestion a ticker publishes one element a second to TICK (the canary's
stream) and moves every fed stream's watermark to the clock; the test adds elements of its own
through the process's stdin, one JSON line each: {"stream": IRI, "nquads": "..."} becomes one
element stamped now (its triples in a graph of its own).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from conftest import REPO

TICK = "http://example.org/tick"
CANARY = """PREFIX ex: <http://example.org/>
SELECT ?v FROM NAMED WINDOW ex:w ON ex:tick [RANGE PT1S STEP PT1S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }"""

SERVER = r"""
import json, pathlib, signal, sys, threading, time
import pyoxigraph as ox
from rspstar.endpoint.serve import configure_process, http_settings
from rspstar.endpoint.config import load_config
from rspstar.endpoint.engine.clock import WallClock
from rspstar.endpoint.engine.runner import Runner
from rspstar.endpoint.engine.scheduler import LiveScheduler
from rspstar.endpoint.http import create_app
from rspstar.endpoint.http.server import HttpServer
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore

arguments = json.loads(sys.argv[1])
configure_process()
data = pathlib.Path(arguments["data"])
data.mkdir(parents=True, exist_ok=True)
(data / "engine.toml").write_text("")
config = load_config(data / "engine.toml", data / "engine", arguments.get("overrides", {}))
store = StreamStore(str(data / "store"))
engine = Runner(store, WallClock(), config.engine)
app = create_app(engine, http_settings(config, None, None))
http_config = config.settings.http
server = HttpServer(app, "127.0.0.1", 0, threads=http_config.threads, connection_limit=http_config.connection_limit,
                    idle_timeout=http_config.idle_timeout, request_timeout=http_config.request_timeout,
                    max_body=http_config.max_body)
scheduler = LiveScheduler(engine)
TICK = ox.NamedNode("http://example.org/v")
fed = {"http://example.org/tick"}
lock = threading.Lock()
made = [0]


def element(stream, quads):
    with lock:
        made[0] += 1
        graph = "http://example.org/element/%d" % made[0]
        now = engine.clock.now()
        name = ox.NamedNode(graph)
        store.add_elements(stream, [Element(graph, now, instant_literal(now),
                                            [ox.Quad(q.subject, q.predicate, q.object, name) for q in quads])])
        fed.add(stream)


def ticker():
    count = 0
    while True:
        count += 1
        element("http://example.org/tick", [ox.Quad(ox.NamedNode("http://example.org/o%d" % count), TICK,
                                                    ox.Literal(count))])
        now = engine.clock.now()
        for stream in list(fed):
            store.advance_watermark(stream, now)
        time.sleep(1.0 - time.time() % 1.0)


def feeder():
    for line in sys.stdin:
        message = json.loads(line)
        element(message["stream"], list(ox.parse(message["nquads"], format=ox.RdfFormat.N_QUADS)))


def stop(signum, frame):
    def stopping():
        app.extensions["rspstar"].adhoc.close()
        server.shutdown()
    threading.Thread(target=stopping, daemon=True).start()


signal.signal(signal.SIGTERM, stop)
http = threading.Thread(target=server.serve_forever, name="http")
http.start()
scheduler.start()
threading.Thread(target=ticker, daemon=True).start()
threading.Thread(target=feeder, daemon=True).start()
print(server.port, flush=True)
http.join()
app.extensions["rspstar"].adhoc.close()
scheduler.shutdown()
engine.close()
store.close()
print("stopped cleanly", flush=True)
"""


class BoundedServer:
    """The engine above, started in `data` with these configuration overrides ("table.key": value)."""

    def __init__(self, data: Path, overrides: dict | None = None):
        self.data = data
        self.log = open(data.parent / (data.name + ".log"), "w+")
        self.process = subprocess.Popen([sys.executable, "-c", SERVER, json.dumps({"data": str(data),
                                                                                    "overrides": overrides or {}})],
                                        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                        text=True)
        self.port = int(self.process.stdout.readline())
        self.base = "http://127.0.0.1:%d" % self.port

    def feed(self, stream: str, nquads: str) -> None:
        """One element of `stream` stamped now, holding these triples."""
        self.process.stdin.write(json.dumps({"stream": stream, "nquads": nquads}) + "\n")
        self.process.stdin.flush()

    def get(self, path: str, **kwargs) -> requests.Response:
        return requests.get(self.base + path, timeout=kwargs.pop("timeout", 60), **kwargs)

    def post(self, path: str, **kwargs) -> requests.Response:
        return requests.post(self.base + path, timeout=kwargs.pop("timeout", 60), **kwargs)

    def delete(self, path: str, **kwargs) -> requests.Response:
        return requests.delete(self.base + path, timeout=kwargs.pop("timeout", 60), **kwargs)

    def register(self, query_id: str, text: str) -> None:
        answer = self.post("/queries", json={"query": text, "id": query_id})
        assert answer.status_code == 201, answer.text

    def status(self, query_id: str) -> dict:
        return self.get("/queries/%s" % query_id).json()["status"]

    def rss(self, pid: int | None = None) -> int:
        """Resident memory of the engine's process (or of `pid`), bytes."""
        return rss(pid or self.process.pid)

    def disk(self) -> int:
        """Bytes of the on-disk store."""
        return sum(f.stat().st_size for f in (self.data / "store").rglob("*") if f.is_file())

    def workers(self) -> list[int]:
        """The pids of the engine's worker processes."""
        return children(self.process.pid)

    def terminate(self, within: float) -> float:
        """SIGTERM; the seconds it took to exit (cleanly: exit 0), failing past `within`."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=within)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError("the engine was still running %g s after SIGTERM" % within) from None
        took = time.monotonic() - started
        assert self.process.returncode == 0, self.text()[-3000:]
        return took

    def text(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.log.close()


def rss(pid: int) -> int:
    with open("/proc/%d/statm" % pid) as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found
