"""A background graph's reload bounded (issue 60; endpoint/engine/refresh.py, store/background.py):
a real local HTTP server drips its answer, stays silent, or serves a large document, and
meanwhile /health and /metrics answer within a second; a fetch is bounded in total time, in bytes
and in triples; a reload longer than its period skips what it ran past; a source that gives the
same document writes nothing and one that changes writes what changed, so the store does not grow
with each reload. The engine's clock is virtual; the fetch's bound is real time."""
from __future__ import annotations

import http.server
import threading
import time

import pytest

from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.refresh import BackgroundRefresh, RefreshedGraph
from rspstar.endpoint.engine.runner import EngineConfig, Runner
from rspstar.endpoint.http.app import create_app
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import parse_instant

T0 = parse_instant("2026-03-01T08:00:00Z")
S = 1_000_000
EX = "http://example.org/"
LIMITS = EX + "limits"


def document(count: int, value: int = 0) -> bytes:
    return b"".join(b'<http://example.org/sensor%d> <http://example.org/limit> "%d" .\n' % (k, k + value)
                    for k in range(count))


class Upstream(http.server.BaseHTTPRequestHandler):
    """Serves `body` in the way `mode` says: whole, dripping one byte of its body (or of its
    status line) every `drip` seconds, or not at all (silent) until `stopped`."""

    mode = "whole"
    body = document(3)
    drip = 0.3
    stopped = threading.Event()
    served = 0
    while_serving = None       # called while a request is answered

    def do_GET(self):
        type(self).served += 1
        if self.while_serving is not None:
            type(self).while_serving()
        if self.mode == "silent":
            self.stopped.wait(60)
            return
        if self.mode == "drip-status":
            for byte in b"HTTP/1.1 200 OK\r\n" * 100:
                if self.stopped.wait(self.drip):
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/n-triples")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        if self.mode == "drip":
            for byte in self.body:
                if self.stopped.wait(self.drip):
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
        else:
            self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def upstream():
    Upstream.mode, Upstream.body, Upstream.served, Upstream.while_serving = "whole", document(3), 0, None
    Upstream.stopped = threading.Event()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % server.server_port
    Upstream.stopped.set()
    server.shutdown()
    server.server_close()
    thread.join(10)


def engine_with(url: str, store: StreamStore | None = None, refresh: int | None = 10 * S, **bounds):
    store = store if store is not None else StreamStore()
    clock = VirtualClock(T0)
    runner = Runner(store, clock, EngineConfig(max_delay=0))
    runner.background_refresh = BackgroundRefresh(store, [RefreshedGraph(LIMITS, url + "/limits", None, refresh)],
                                                  clock, [url], on_change=runner.background_changed, **bounds)
    return runner, clock, runner.background_refresh


def answers_within_a_second_while(running: threading.Thread, client, until: float) -> int:
    """Ask /health and /metrics over and over while `running` runs (at most until `until`,
    monotonic); each must answer within a second. How many answers came."""
    answers = 0
    while running.is_alive() and time.monotonic() < until:
        for path in ("/health", "/metrics"):
            got = []
            asking = threading.Thread(target=lambda: got.append(client.get(path).status_code), daemon=True)
            started = time.monotonic()
            asking.start()
            asking.join(1.0)
            assert got, "%s did not answer within a second while a reload ran (%.1f s)" % (
                path, time.monotonic() - started)
            answers += 1
        time.sleep(0.05)
    return answers


@pytest.mark.parametrize("mode", ["drip", "drip-status"])
def test_an_upstream_that_drips_fails_the_reload_at_its_bound_and_health_answers_meanwhile(upstream, mode):
    runner, clock, refresh = engine_with(upstream, reload_seconds=2.0, timeout=1.0)
    assert refresh.run_due() == 1                      # the first document, whole
    Upstream.mode = mode                               # a byte every 0.3 s: no single read waits a second
    clock.advance(10 * S)
    client = create_app(runner).test_client()
    reload = threading.Thread(target=refresh.run_due, daemon=True)
    started = time.monotonic()
    reload.start()
    try:
        assert answers_within_a_second_while(reload, client, started + 10) >= 4
        reload.join(5)
        assert not reload.is_alive(), "the reload still runs %.1f s after it began" % (time.monotonic() - started)
    finally:
        Upstream.stopped.set()
    assert time.monotonic() - started < 5
    assert refresh.failing() == {LIMITS: "%s/limits did not give its whole document within [background] "
                                         "reload_seconds (2 s)" % upstream}
    assert len(runner.store.background.triples(LIMITS)) == 3         # kept what it held
    health = client.get("/health")
    assert health.status_code == 503 and health.json["background"][0]["failures"] == 1


def test_a_silent_upstream_fails_the_reload_after_its_timeout_and_health_answers_meanwhile(upstream):
    runner, clock, refresh = engine_with(upstream, timeout=2.5)
    Upstream.mode = "silent"
    client = create_app(runner).test_client()
    reload = threading.Thread(target=refresh.run_due, daemon=True)
    started = time.monotonic()
    reload.start()
    assert answers_within_a_second_while(reload, client, started + 10) >= 2
    reload.join(5)
    assert not reload.is_alive()
    assert refresh.failing() == {LIMITS: "%s/limits: timed out" % upstream}
    assert runner.store.background.graphs() == []


def test_a_document_past_max_triples_or_max_bytes_is_a_failed_reload_that_keeps_the_graph(upstream):
    runner, clock, refresh = engine_with(upstream, max_triples=500)
    Upstream.body = document(500)
    assert refresh.run_due() == 1
    Upstream.body = document(501)
    clock.advance(10 * S)
    assert refresh.run_due() == 0
    assert refresh.failing() == {LIMITS: "%s/limits: the document holds more than [background] max_triples (500) "
                                         "triples" % upstream}
    assert len(runner.store.background.triples(LIMITS)) == 500
    refresh.max_bytes = 1000                           # Content-Length says more: refused before its body
    clock.advance(10 * S)
    assert refresh.run_due() == 0
    assert refresh.failing() == {LIMITS: "%s/limits gave more than [background] max_bytes (1000 bytes)" % upstream}


def test_a_reload_longer_than_its_period_skips_what_it_ran_past_and_runs_never_pile_up(upstream):
    runner, clock, refresh = engine_with(upstream)
    serving, go_on = threading.Event(), threading.Event()

    def slow():                                        # 35 s of the engine's clock pass while it answers
        serving.set()
        go_on.wait(10)
        clock.advance(35 * S)
    Upstream.while_serving = staticmethod(slow)
    reload = threading.Thread(target=refresh.run_due, daemon=True)
    reload.start()
    assert serving.wait(10)
    assert refresh.run_due() == 0                      # a run under way: this one returns at once
    assert refresh.statuses()[0].reloading_since == T0
    go_on.set()
    reload.join(10)
    status = refresh.statuses()[0]
    assert (status.reloads, status.skipped, status.next_at) == (1, 3, T0 + 40 * S)
    assert status.note.startswith("the reload at 2026-03-01T08:00:00Z took ") and "3 reload(s) skipped" in status.note
    assert refresh.run_due() == 0 and Upstream.served == 1          # nothing due before 40 s
    metrics = create_app(runner).test_client().get("/metrics").get_data(as_text=True)
    assert 'rspstar_background_reloads_skipped_total{graph="%s"} 3.0' % LIMITS in metrics


def test_a_large_source_reloaded_writes_only_what_changed_and_the_store_does_not_grow(upstream, tmp_path):
    store = StreamStore(str(tmp_path / "store"))
    runner, clock, refresh = engine_with(upstream, store)
    Upstream.body = document(40_000)
    client = create_app(runner).test_client()
    reload = threading.Thread(target=refresh.run_due, daemon=True)
    reload.start()
    answers_within_a_second_while(reload, client, time.monotonic() + 120)
    reload.join(120)
    assert refresh.statuses()[0].changed == 40_000 and refresh.failing() == {}
    version = store.background.version
    sizes = []
    for k in range(1, 9):
        clock.advance(10 * S)
        refresh.run_due()                              # the same document: nothing written
        assert store.background.version == version and refresh.statuses()[0].unchanged == k
        sizes.append(store.generations.disk_bytes())
    # A source whose values change in part: what changed is written, and the store holds what
    # the graph holds, not every reload's.
    for k in range(1, 9):
        Upstream.body = document(1_000, value=k) + document(40_000)[len(document(1_000)):]
        clock.advance(10 * S)
        assert refresh.run_due() == 1
        status = refresh.statuses()[0]
        assert (status.changed, status.triples) == (2_000, 40_000)
        sizes.append(store.generations.disk_bytes())
    assert len(store.background.triples(LIMITS)) == 40_000
    assert sizes[-1] <= 1.5 * sizes[0], sizes
    store.close()
