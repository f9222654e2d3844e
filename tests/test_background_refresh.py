"""Background graphs that refresh themselves (spec §6.14, endpoint/engine/refresh.py): a file
changed under a running engine, a local HTTP server that fails once, atomic replacement, and
the configuration. Time is a virtual clock: nothing sleeps for a refresh."""
from __future__ import annotations

import http.server
import threading

import pyoxigraph as ox
import pytest

from rspstar.config.schema import ConfigError
from rspstar.endpoint.config import load_config, refreshed_graphs
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.refresh import BackgroundRefresh, RefreshedGraph
from rspstar.endpoint.engine.runner import EngineConfig, Runner
from rspstar.endpoint.engine.scheduler import INLINE, REFRESH_JOB, LiveScheduler
from rspstar.endpoint.http.app import create_app
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import parse_instant

T0 = parse_instant("2026-03-01T08:00:00Z")
S = 1_000_000
EX = "http://example.org/"
LIMITS = EX + "limits"
QUERY = """PREFIX ex: <http://example.org/>
SELECT ?o ?v ?limit FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S STEP PT1S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } GRAPH ex:limits { ex:oxygen ex:limit ?limit } FILTER(?v > ?limit) }"""


def limit(value: int) -> bytes:
    return b'<http://example.org/oxygen> <http://example.org/limit> "%d"^^<http://www.w3.org/2001/XMLSchema#integer> .' % value


def engine_with(graphs: list[RefreshedGraph], tmp_path, **refresh) -> tuple[Runner, VirtualClock, BackgroundRefresh]:
    store = StreamStore()
    clock = VirtualClock(T0)
    runner = Runner(store, clock, EngineConfig(data_dir=tmp_path / "data", max_delay=0))
    runner.background_refresh = BackgroundRefresh(store, graphs, clock, on_change=runner.background_changed, **refresh)
    return runner, clock, runner.background_refresh


def feed_second(runner: Runner, clock: VirtualClock, second: int, value: int) -> list[dict]:
    """One element at `second` with value `value`; the clock at the close after it; the rows
    the evaluation there gave."""
    at = T0 + second * S
    graph = EX + "e%d" % second
    runner.store.add_elements(EX + "s", [Element(graph, at, instant_literal(at), [
        ox.Quad(ox.NamedNode(EX + "o%d" % second), ox.NamedNode(EX + "v"), ox.Literal(value), ox.NamedNode(graph))])])
    runner.store.advance_watermark(EX + "s", at + S)
    clock.set(at + S)
    runner.tick()
    records = runner.get("q").history.since(at)
    return [{k: v for k, v in row.items()} for record in records for row in record["bindings"]]


INT = "^^<http://www.w3.org/2001/XMLSchema#integer>"


def test_a_file_changed_under_a_running_engine_is_seen_after_its_refresh(tmp_path):
    source = tmp_path / "limits.nt"
    source.write_bytes(limit(5))
    runner, clock, refresh = engine_with([RefreshedGraph(LIMITS, str(source), None, 3 * S)], tmp_path)
    runner.register(QUERY, "q")
    # Loaded when the engine first runs (at 1 s), next at 4 s.
    assert feed_second(runner, clock, 0, 7) == [{"o": "<%so0>" % EX, "v": '"7"' + INT, "limit": '"5"' + INT}]
    source.write_bytes(limit(8))
    assert [r["limit"] for r in feed_second(runner, clock, 1, 7)] == ['"5"' + INT]     # at 2 s: not yet
    assert [r["limit"] for r in feed_second(runner, clock, 2, 7)] == ['"5"' + INT]     # at 3 s: not yet
    assert refresh.statuses()[0].reloads == 1
    assert feed_second(runner, clock, 3, 7) == []                                       # at 4 s: 7 > 8 no more
    assert [r["limit"] for r in feed_second(runner, clock, 4, 9)] == ['"8"' + INT]
    status = refresh.statuses()[0]
    assert (status.reloads, status.failures, status.triples, status.last_error) == (2, 0, 1, None)
    assert status.loaded_at == T0 + 4 * S and status.next_at == T0 + 7 * S


class Flaky(http.server.BaseHTTPRequestHandler):
    """Answers 500 to the requests listed in `failing` (by number), else the current document."""
    served: list = []
    failing: set = set()
    document = limit(5)

    def do_GET(self):
        number = len(self.served)
        self.served.append(self.path)
        if number in self.failing:
            self.send_response(500)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/n-triples")
        self.send_header("Content-Length", str(len(self.document)))
        self.end_headers()
        self.wfile.write(self.document)

    def log_message(self, *args):
        pass


@pytest.fixture
def flaky():
    Flaky.served, Flaky.failing, Flaky.document = [], {1}, limit(5)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % server.server_port
    server.shutdown()
    thread.join(10)


def test_a_reload_that_fails_keeps_the_graph_and_shows_in_health_metrics_until_one_succeeds(flaky, tmp_path):
    runner, clock, refresh = engine_with([RefreshedGraph(LIMITS, flaky + "/limits", None, 2 * S)], tmp_path,
                                         allowed=[flaky])
    runner.register(QUERY, "q")
    client = create_app(runner).test_client()
    assert [r["limit"] for r in feed_second(runner, clock, 0, 7)] == ['"5"' + INT]     # loaded at 1 s
    assert client.get("/health").json["background_failing"] == {}
    Flaky.document = limit(8)
    feed_second(runner, clock, 1, 7)
    # At 3 s the server fails: the graph keeps 5, and everyone hears of it.
    assert [r["limit"] for r in feed_second(runner, clock, 2, 7)] == ['"5"' + INT]
    health = client.get("/health")
    assert health.status_code == 503 and health.json["status"] == "degraded"
    assert health.json["background_failing"] == {LIMITS: "%s/limits answered HTTP 500" % flaky}
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'rspstar_background_reload_failing{error="%s/limits answered HTTP 500",graph="%s"} 1.0' % (flaky, LIMITS) \
        in metrics
    assert 'rspstar_background_reload_failures_total{graph="%s"} 1.0' % LIMITS in metrics
    assert 'rspstar_background_reloads_total{graph="%s"} 1.0' % LIMITS in metrics
    # At 5 s it answers again: 8, and the error is gone.
    feed_second(runner, clock, 3, 7)
    assert feed_second(runner, clock, 4, 7) == []
    assert Flaky.served == ["/limits"] * 3
    health = client.get("/health")
    assert health.status_code == 200 and health.json["background_failing"] == {}
    assert 'rspstar_background_reload_failing{error="",graph="%s"} 0.0' % LIMITS in client.get("/metrics").get_data(as_text=True)


def test_a_source_off_the_allow_list_a_redirect_and_a_document_too_large_are_failed_reloads(flaky, tmp_path):
    Flaky.failing = set()
    runner, clock, refresh = engine_with([RefreshedGraph(LIMITS, flaky + "/limits", None, S)], tmp_path,
                                         allowed=["http://elsewhere.test"], max_bytes=10)
    refresh.run_due()
    assert refresh.failing() == {LIMITS: "%s/limits is not under [background] allowed (http://elsewhere.test)" % flaky}
    assert Flaky.served == []                 # not even asked
    refresh.allowed = [flaky]
    clock.advance(S)
    refresh.run_due()
    assert refresh.failing() == {LIMITS: "%s/limits gave more than [background] max_bytes (10 bytes)" % flaky}
    assert runner.store.background.graphs() == []

    class Redirect(Flaky):
        def do_GET(self):
            self.send_response(302)
            self.send_header("Location", "http://elsewhere.test/x")
            self.end_headers()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = "http://127.0.0.1:%d" % server.server_port
        moved = BackgroundRefresh(runner.store, [RefreshedGraph(LIMITS, url + "/x", "ntriples", S)], clock, [url])
        moved.run_due()
        assert moved.failing() == {LIMITS: "%s/x answered HTTP 302" % url}
    finally:
        server.shutdown()
        thread.join(10)


def test_a_document_that_does_not_parse_keeps_the_graph(tmp_path):
    source = tmp_path / "limits.ttl"
    source.write_bytes(limit(5))
    runner, clock, refresh = engine_with([RefreshedGraph(LIMITS, str(source), None, S)], tmp_path)
    assert refresh.run_due() == 1
    source.write_bytes(b"<http://example.org/oxygen> <http://example.org/limit> .")
    clock.advance(S)
    assert refresh.run_due() == 0
    assert refresh.failing()[LIMITS].startswith("%s:1:" % source)
    assert len(runner.store.background.triples(LIMITS)) == 1
    source.unlink()
    clock.advance(S)
    refresh.run_due()
    assert refresh.failing()[LIMITS] == "cannot read %s: No such file or directory" % source
    assert len(runner.store.background.triples(LIMITS)) == 1


def test_a_reload_waits_for_the_evaluation_under_way_and_the_next_one_sees_all_of_it(tmp_path, monkeypatch):
    from rspstar.endpoint.engine.evaluation import QueryEvaluator
    from rspstar.translator.validate import compile_query
    small, large = tmp_path / "small.nt", tmp_path / "large.nt"
    small.write_bytes(b"\n".join(b"<http://example.org/s%d> <http://example.org/p> <http://example.org/o> ." % k
                                 for k in range(50)))
    large.write_bytes(b"\n".join(b"<http://example.org/t%d> <http://example.org/p> <http://example.org/o> ." % k
                                 for k in range(300)))
    runner, clock, refresh = engine_with([RefreshedGraph(LIMITS, str(small), "ntriples", S)], tmp_path)
    refresh.run_due()
    counting = """PREFIX ex: <http://example.org/>
    SELECT (COUNT(*) AS ?n) FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S STEP PT1S]
    WHERE { GRAPH ex:limits { ?s ex:p ?o } }"""
    evaluator = QueryEvaluator(compile_query(counting), runner.store)
    store, query = runner.store, runner.store.query
    querying, go_on, counts = threading.Event(), threading.Event(), []

    def paused_query(*args, **kwargs):       # the evaluation has read the background's state, not run yet
        querying.set()
        go_on.wait(10)
        return query(*args, **kwargs)
    monkeypatch.setattr(store, "query", paused_query)
    evaluation = threading.Thread(target=lambda: counts.append(evaluator.evaluate(T0 + S).rows[0]["n"]))
    evaluation.start()
    assert querying.wait(10)
    refresh.graphs[0].source = str(large)
    clock.advance(S)
    reload = threading.Thread(target=refresh.run_due)
    reload.start()
    reload.join(0.3)
    assert reload.is_alive() and len(store.background.triples(LIMITS)) == 50    # held back
    go_on.set()
    evaluation.join(10)
    reload.join(10)
    assert counts == ['"50"' + INT] and len(store.background.triples(LIMITS)) == 300
    assert evaluator.evaluate(T0 + S).rows[0]["n"] == '"300"' + INT


def test_the_scheduler_reloads_when_the_engine_has_refreshed_graphs(tmp_path):
    runner, clock, refresh = engine_with([], tmp_path)
    scheduler = LiveScheduler(runner, executor=INLINE)
    assert REFRESH_JOB in scheduler.job_ids()
    runner.background_refresh = None
    assert REFRESH_JOB not in LiveScheduler(runner, executor=INLINE).job_ids()


# -- the configuration ----------------------------------------------------------------------------
def config_with(tmp_path, text: str):
    path = tmp_path / "engine.toml"
    path.write_text(text)
    return load_config(path)


def test_background_graphs_from_the_configuration(tmp_path):
    config = config_with(tmp_path, """
[background]
allowed = ["https://data.example.org"]
[[background.graphs]]
graph = "http://example.org/limits"
source = "limits.nt"
refresh = "PT20S"
[[background.graphs]]
graph = "http://example.org/rooms"
source = "https://data.example.org/rooms"
format = "turtle"
""")
    assert refreshed_graphs(config) == [
        RefreshedGraph("http://example.org/limits", str(tmp_path / "limits.nt"), None, 20 * S),
        RefreshedGraph("http://example.org/rooms", "https://data.example.org/rooms", "turtle", None)]


@pytest.mark.parametrize("entry, message", [
    ('graph = "http://example.org/g"\nsource = "https://other.example.org/x"',
     "source https://other.example.org/x is not under [background] allowed (empty: files only)"),
    ('graph = "urn:rspstar:g"\nsource = "g.nt"', "graph <urn:rspstar:g> is reserved by the engine"),
    ('graph = "not an iri"\nsource = "g.nt"', "graph 'not an iri' is not an IRI"),
    ('graph = "http://example.org/g"\nsource = "g.data"', "cannot tell the format of g.data from its extension"),
    ('graph = "http://example.org/g"\nsource = "g.nt"\nrefresh = "PT0S"', "refresh must be positive"),
    ('graph = "http://example.org/g"\nsource = "g.nt"\nformat = "csv"', "format must be one of turtle"),
    ('graph = "http://example.org/g"', "needs source"),
])
def test_a_bad_background_graph_entry_names_the_file_and_the_entry(tmp_path, entry, message):
    with pytest.raises(ConfigError, match="engine.toml.*#1.*" + message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        refreshed_graphs(config_with(tmp_path, "[[background.graphs]]\n" + entry + "\n"))


def test_two_entries_for_one_graph_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="two \\[\\[background.graphs\\]\\] are graph <http://example.org/g>"):
        config_with(tmp_path, "[[background.graphs]]\ngraph = \"http://example.org/g\"\nsource = \"a.nt\"\n"
                              "[[background.graphs]]\ngraph = \"http://example.org/g\"\nsource = \"b.nt\"\n")


@pytest.mark.slow
def test_the_dashboard_says_which_background_graph_was_not_reloaded_and_why(tmp_path):
    import shutil
    import subprocess

    from werkzeug.serving import make_server
    runner, clock, refresh = engine_with([RefreshedGraph(LIMITS, str(tmp_path / "missing.nt"), None, S)], tmp_path)
    refresh.run_due()
    http = make_server("127.0.0.1", 0, create_app(runner), threaded=True)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        assert binary, "Debian's chromium is needed for this test (.ci/run installs it)"
        done = subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--virtual-time-budget=5000", "--user-data-dir=%s" % (tmp_path / "profile"),
                               "--dump-dom", "http://127.0.0.1:%d/?refresh=poll" % http.server_port],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        http.shutdown()
        thread.join(10)
    assert "degraded · 0 queries" in done.stdout
    assert "background &lt;%s&gt; not reloaded: cannot read %s: No such file or directory" % (
        LIMITS, tmp_path / "missing.nt") in done.stdout
