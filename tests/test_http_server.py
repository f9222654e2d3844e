"""The real HTTP server (waitress, endpoint/http/server.py) under the loads a hostile client
brings: thousands of idle connections, slow senders, chunked bodies past the limit, event-stream
subscribers beyond the cap. It runs in a process of its own, as `rspstar serve` runs it."""
import json
import os
import re
import socket
import time

import pytest
import requests

import served

pytestmark = pytest.mark.slow

@pytest.fixture
def server():
    process, base, port = served.start(token="t", max_body=1 << 20, max_event_streams=2, event_keepalive=0.5,
                                       threads=8, connections=4000, idle=30, request=3)
    yield process, base, port
    process.kill()
    process.wait()


def threads_of(pid: int) -> int:
    return len(os.listdir("/proc/%d/task" % pid))


def test_idle_and_slow_connections_hold_no_thread_and_the_server_answers_meanwhile(server):
    process, base, port = server
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(2000)]
    slow = []
    for _ in range(300):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")          # and never the end of the headers
        slow.append(s)
    try:
        started = time.monotonic()
        assert requests.get(base + "/health", timeout=2).status_code == 200
        answer = requests.get(base + "/sparql", params={"query": "ASK { }"}, timeout=2,
                              headers={"Accept": "application/sparql-results+json"})
        assert answer.status_code == 200 and answer.json()["boolean"] is True
        assert time.monotonic() - started < 2
        assert threads_of(process.pid) <= 300
        # The slow senders are dropped once they pass the request timeout (3 s here).
        slow[0].settimeout(10)
        assert slow[0].recv(1) == b""
        assert requests.get(base + "/health", timeout=2).status_code == 200
    finally:
        for s in idle + slow:
            s.close()


def test_a_chunked_body_past_the_limit_is_refused_with_413_before_the_app_reads_it(server):
    process, base, port = server

    def chunks(total):
        block = b"<http://example.org/s> <http://example.org/p> \"x\" .\n" * 2000
        sent = 0
        while sent < total:
            yield block
            sent += len(block)

    response = requests.post(base + "/streams?stream=http://example.org/s", data=chunks(8 << 20), timeout=30,
                             headers={"Content-Type": "application/n-quads", "Authorization": "Bearer t"})
    assert response.status_code == 413
    # Declared too: the same answer.
    big = requests.post(base + "/streams?stream=http://example.org/s", data=b"x" * (2 << 20), timeout=30,
                        headers={"Content-Type": "application/n-quads", "Authorization": "Bearer t"})
    assert big.status_code == 413
    # The documented JSON error, like every other error of the API, naming the limit.
    for refused in (response, big):
        assert refused.headers["Content-Type"] == "application/json"
        assert refused.json()["error"] == "RequestEntityTooLarge" and "max_body" in refused.json()["message"]
    assert requests.get(base + "/health", timeout=2).status_code == 200


def test_headers_past_64_kib_are_refused_with_431(server):
    _, _, port = server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (70 << 10) + b"\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < int(
                re.search(rb"Content-Length: (\d+)", answer).group(1)):
            answer += s.recv(4096)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 431 ") and b"Content-Type: application/json" in head
    assert json.loads(body)["error"] == "RequestHeaderFieldsTooLarge"


def test_responses_carry_the_security_headers_and_name_rspstar(server):
    _, base, _ = server
    for path in ("/", "/health", "/queries", "/nowhere"):
        response = requests.get(base + path, timeout=5)
        assert response.headers["Server"] == "rspstar"
        assert "default-src 'self'" in response.headers["Content-Security-Policy"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["X-Frame-Options"] == "SAMEORIGIN"
        assert response.headers["Referrer-Policy"] == "no-referrer"


def read_events(response, count):
    """The first `count` events (name, data) or comments of an event stream."""
    found, event, data = [], None, None
    for raw in response.iter_lines(decode_unicode=True):
        if raw.startswith(":"):
            found.append(("comment", raw))
        elif raw.startswith("event: "):
            event = raw[7:]
        elif raw.startswith("data: "):
            data = json.loads(raw[6:])
        elif raw == "" and event is not None:
            found.append((event, data))
            event = None
        if len(found) >= count:
            break
    return found


def test_event_streams_are_capped_kept_alive_and_closed_when_their_query_goes(server):
    _, base, _ = server
    first = requests.get(base + "/queries/q/events", stream=True, timeout=10)
    second = requests.get(base + "/queries/q/events", stream=True, timeout=10)
    assert first.status_code == second.status_code == 200
    third = requests.get(base + "/queries/q/events", stream=True, timeout=10)
    assert third.status_code == 503 and third.headers["Retry-After"] == "30"
    assert "max_event_streams" in third.json()["message"]
    assert requests.get(base + "/health", timeout=2).json()["event_streams"] == 2
    events = read_events(first, 2)
    assert events[0] == ("comment", ": subscribed to q") and events[1] == ("comment", ": keep-alive")
    assert requests.delete(base + "/queries/q", headers={"Authorization": "Bearer t"}, timeout=5).status_code == 204
    closing = [e for e in read_events(second, 10) if e[0] != "comment"]
    assert closing == [("closed", {"query": "q", "reason": "removed"})]
    # The slots are given back: a new stream is answered (404: the query is gone, not 503).
    assert requests.get(base + "/queries/q/events", timeout=5).status_code == 404
