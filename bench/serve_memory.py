"""Memory given back: the real server (waitress over an in-memory engine, in a process of its own)
through rounds of what a hostile or careless client does, with its resident memory read after
each phase. A phase whose memory is bounded costs something in its first round and about nothing
in the next ones; one that leaks grows by the same amount every round.

Phases of a round:
- queries: register 1,000 continuous queries, then delete them;
- event streams: 500 clients open /queries/q/events at once (beyond [http] max_event_streams
  they are answered 503) and go away;
- large bodies: 40 posts to /streams of 15 MiB N-Quads that fail on their last line (parsed to
  the end, stored never), 20 of 40 MiB declared and 20 of 40 MiB chunked (413).

The server's process is configured as `rspstar serve` configures it (two malloc arenas);
`--arenas glibc` keeps the C library's default to compare.

Run by hand: python bench/serve_memory.py [--rounds 4] [--event-streams 8] [--arenas serve|glibc]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Table, machine, publish  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TOKEN = "bench"
SERVER = r"""
import sys, json, tempfile, pathlib
from rspstar.endpoint.engine.clock import WallClock
from rspstar.endpoint.engine.runner import Runner, EngineConfig
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.endpoint.http.server import HttpServer
from rspstar.store.stream_store import StreamStore
settings = json.loads(sys.argv[1])
if settings["configure"]:
    from rspstar.endpoint.serve import configure_process
    configure_process()                       # as `rspstar serve` does, before any thread
data = pathlib.Path(tempfile.mkdtemp(prefix="rspstar-memory-"))
engine = Runner(StreamStore(), WallClock(), EngineConfig(data_dir=data / "engine"))
engine.register("PREFIX ex: <http://example.org/> SELECT ?o FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S] "
                "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }", "q")
app = create_app(engine, HttpSettings(token=settings["token"], landing_dir=data / "landing",
                                      max_event_streams=settings["event_streams"]))
server = HttpServer(app, "127.0.0.1", 0, threads=settings["event_streams"] + 8, connection_limit=4096, idle_timeout=60,
                    request_timeout=30, max_body=16 << 20)
print(server.port, flush=True)
server.serve_forever()
"""
QUERY = ("PREFIX ex: <http://example.org/> SELECT ?o ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT10S STEP PT10S] "
         "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v > %d) } } }")


def rss_mib(pid: int) -> float:
    for line in Path("/proc/%d/status" % pid).read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS for %d" % pid)


def threads(pid: int) -> int:
    return len(os.listdir("/proc/%d/task" % pid))


def request(port: int, method: str, path: str, body: bytes = b"", headers: dict | None = None) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request(method, path, body=body or None,
                           headers={"Authorization": "Bearer " + TOKEN, **(headers or {})})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def queries(port: int) -> str:
    for k in range(1000):
        status = request(port, "POST", "/queries?id=m%d" % k, (QUERY % k).encode(),
                         {"Content-Type": "application/sparql-query"})
        assert status == 201, status
    for k in range(1000):
        assert request(port, "DELETE", "/queries/m%d" % k) == 204
    return "1,000 registered, 1,000 deleted"


def event_streams(port: int, clients: int = 500) -> str:
    sockets, statuses = [], {}
    for _ in range(clients):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(b"GET /queries/q/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
        sockets.append(s)
    for s in sockets:
        head = s.recv(64).split(b" ")
        statuses[head[1].decode()] = statuses.get(head[1].decode(), 0) + 1
    for s in sockets:
        s.close()
    time.sleep(16)      # the server notices a stream closed by its client at the next keep-alive (15 s)
    return ", ".join("%d answered %s" % (n, status) for status, n in sorted(statuses.items()))


def big_bodies(port: int) -> str:
    line = b"<http://example.org/o%d> <http://example.org/v> \"%d\" <http://example.org/g%d> .\n"
    lines = b"".join(line % (k, k, k % 1000) for k in range(200_000))
    bad = lines[: 15 << 20] + b"\n<broken\n"
    over = b"x" * (40 << 20)
    statuses: dict[int | str, int] = {}

    def post(kind: str) -> int | str:
        body = bad if kind == "bad" else over
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            connection.putrequest("POST", "/streams?stream=http://example.org/s")
            connection.putheader("Authorization", "Bearer " + TOKEN)
            connection.putheader("Content-Type", "application/n-quads")
            if kind == "chunked":
                connection.putheader("Transfer-Encoding", "chunked")
            else:
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders()
            try:
                for start in range(0, len(body), 1 << 20):
                    chunk = body[start:start + (1 << 20)]
                    connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk) if kind == "chunked" else chunk)
                if kind == "chunked":
                    connection.send(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass            # answered 413 and closed before the whole body was sent
            try:
                response = connection.getresponse()
                response.read()
                return response.status
            except (ConnectionResetError, http.client.RemoteDisconnected):
                return "reset"  # the 413 was lost with the rest of the body the server dropped
        finally:
            connection.close()

    with ThreadPoolExecutor(8) as pool:
        for status in pool.map(post, ["bad"] * 40 + ["declared"] * 20 + ["chunked"] * 20):
            statuses[status] = statuses.get(status, 0) + 1
    return ", ".join("%d answered %s" % (n, status) for status, n in sorted(statuses.items(), key=str))


PHASES = (("register and delete 1,000 queries", queries), ("500 event-stream clients", event_streams),
          ("80 large bodies (15-40 MiB)", big_bodies))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--event-streams", type=int, default=8, help="[http] max_event_streams")
    parser.add_argument("--arenas", choices=("serve", "glibc"), default="serve",
                        help="malloc arenas as `rspstar serve` limits them, or glibc's default")
    args = parser.parse_args()
    process = subprocess.Popen([sys.executable, "-c", SERVER,
                                json.dumps({"token": TOKEN, "event_streams": args.event_streams,
                                            "configure": args.arenas == "serve"})],
                               cwd=REPO, stdout=subprocess.PIPE, text=True)
    port = int(process.stdout.readline())
    allocator = "jemalloc" if "jemalloc" in os.environ.get("LD_PRELOAD", "") else "glibc malloc"
    if os.environ.get("MALLOC_ARENA_MAX"):
        allocator += ", MALLOC_ARENA_MAX=" + os.environ["MALLOC_ARENA_MAX"]
    elif allocator == "glibc malloc":
        allocator += ", %s arenas" % ("2" if args.arenas == "serve" else "default")
    table = Table("Memory given back: the waitress server, %d rounds, [http] max_event_streams = %d, %s (%s)"
                  % (args.rounds, args.event_streams, allocator, machine()),
                  ["round", "phase", "what the server answered", "RSS after (MiB)", "change (MiB)", "threads"])
    try:
        time.sleep(1)
        before = rss_mib(process.pid)
        table.add("-", "started", "", "%.0f" % before, "", threads(process.pid))
        for round_ in range(1, args.rounds + 1):
            for name, phase in PHASES:
                answered = phase(port)
                after = rss_mib(process.pid)
                table.add(round_, name, answered, "%.0f" % after, "%+.0f" % (after - before), threads(process.pid))
                print(table.rows[-1], flush=True)
                before = after
    finally:
        process.kill()
        process.wait()
    publish("serve_memory" + ("" if args.arenas == "serve" else "_glibc_arenas")
            + ("" if args.event_streams == 8 else "_streams%d" % args.event_streams), table.markdown())


if __name__ == "__main__":
    main()
