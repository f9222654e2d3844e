"""Inputs that used to take the engine down, each run where a crash cannot take the test
run with it (a child process), and each answered with a clear 4xx."""
import json
import subprocess
import sys
import threading
import time

import pyoxigraph as ox

from conftest import REPO
from rspstar.endpoint.engine.clock import WallClock
from rspstar.endpoint.engine.runner import Runner, EngineConfig
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.store.stream_store import StreamStore

# The whole app, driven by Flask's test client inside a child process: a segfault there
# shows as the child's exit status instead of killing pytest.
CHILD = r'''
import json, sys
from rspstar.endpoint.http import HttpSettings, create_app
client = create_app(settings=HttpSettings(max_body=1 << 20)).test_client()
results = []
for method, path, kwargs in json.loads(sys.stdin.read()):
    response = getattr(client, method)(path, **kwargs)
    results.append([response.status_code, response.get_json()])
print(json.dumps(results))
'''


def through_the_app(requests_: list) -> list:
    done = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(requests_), capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, "the engine died (exit %d): %s" % (done.returncode, done.stderr[-2000:])
    return json.loads(done.stdout)


def test_deeply_nested_queries_and_updates_are_refused_with_a_position_not_a_crash():
    braces = "SELECT * WHERE " + "{" * 2500 + " ?s ?p ?o " + "}" * 2500
    parentheses = "SELECT * WHERE { FILTER(" + "(" * 5000 + "1" + ")" * 5000 + ") }"
    update = "INSERT { <http://a> <http://b> <http://c> } WHERE " + "{" * 2500 + "}" * 2500
    registration = ("PREFIX ex: <http://example.org/>\nSELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S]\n"
                    "WHERE { WINDOW ex:w { GRAPH ?g { ?s ?p ?o FILTER(" + "(" * 3000 + "1" + ")" * 3000 + ") } } }")
    results = through_the_app([
        ["get", "/sparql", {"query_string": {"query": braces}}],
        ["post", "/sparql", {"data": parentheses, "content_type": "application/sparql-query"}],
        ["post", "/update", {"data": update, "content_type": "application/sparql-update"}],
        ["post", "/queries", {"data": registration, "content_type": "application/sparql-query"}],
        ["get", "/sparql", {"query_string": {"query": "ASK {}"}}],
    ])
    texts = [braces, parentheses, update, registration]
    for (status, body), text in zip(results[:4], texts):
        assert status == 400 and "nested and chained too deeply to parse" in body["message"], (status, body)
        # The position names the bracket where the text passes what a parser's stack may take.
        line = text.split("\n")[body["line"] - 1]
        assert line[body["column"] - 1] in "({", (body, line[body["column"] - 5:body["column"] + 5])
    assert results[4][0] == 200 and results[4][1]["boolean"] is True


def test_nesting_that_real_queries_use_still_parses():
    nested = "SELECT * WHERE " + "{" * 30 + " ?s ?p ?o " + "}" * 30           # deeper than any real query
    strings = 'SELECT * WHERE { BIND("' + "(" * 500 + '" AS ?x) }'      # brackets in strings do not nest
    results = through_the_app([["get", "/sparql", {"query_string": {"query": nested}}],
                               ["get", "/sparql", {"query_string": {"query": strings}}]])
    assert [status for status, _ in results] == [200, 200]


def test_slow_queries_are_stopped_and_do_not_starve_other_clients(tmp_path):
    # Five copies of a query that runs for minutes used to hold every worker thread, and
    # every /sparql request (even ASK {}) got 503 until they finished.
    store = StreamStore(str(tmp_path / "store"))
    store.background.load("\n".join('<http://s%d> <http://p> "%d" <http://g%d> .' % (i, i, i) for i in range(400)),
                          ox.RdfFormat.N_QUADS, "bg.nq")
    app = create_app(Runner(store, WallClock(), EngineConfig()), HttpSettings(query_timeout=1.0, query_workers=2))
    adhoc = app.extensions["rspstar"].adhoc
    assert adhoc.wait_ready()
    client = app.test_client()
    slow = ("SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?a { ?s1 ?p1 ?o1 } GRAPH ?b { ?s2 ?p2 ?o2 } "
            "GRAPH ?c { ?s3 ?p3 ?o3 } }")
    statuses = []
    threads = [threading.Thread(target=lambda: statuses.append(
        app.test_client().get("/sparql", query_string={"query": slow}).status_code)) for _ in range(5)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert statuses == [503] * 5
        started = time.monotonic()
        assert client.get("/sparql", query_string={"query": "ASK {}"}).status_code == 200
        assert time.monotonic() - started < 15
        assert all(p.is_alive() for p in adhoc.processes()) and len(adhoc.processes()) == 2
    finally:
        adhoc.close()
        store.close()
