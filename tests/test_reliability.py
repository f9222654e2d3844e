"""Inputs that used to take the engine down, each run where a crash cannot take the test
run with it (a child process), and each answered with a clear 4xx."""
import json
import subprocess
import sys

from conftest import REPO

# The whole app, driven by Flask's test client inside a child process: a segfault there
# shows as the child's exit status instead of killing pytest.
CHILD = r'''
import json, sys
from endpoint.http import HttpSettings, create_app
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
    for status, body in results[:4]:
        assert status == 400 and "nested deeper than 128" in body["message"], (status, body)
    assert [(b["line"], b["column"]) for _, b in results[:4]] == [(1, 16 + 128), (1, 24 + 127), (1, 51 + 128),
                                                                 (3, 49 + 125)]
    assert results[4][0] == 200 and results[4][1]["boolean"] is True


def test_nesting_that_real_queries_use_still_parses():
    nested = "SELECT * WHERE " + "{" * 100 + " ?s ?p ?o " + "}" * 100
    strings = 'SELECT * WHERE { BIND("' + "(" * 500 + '" AS ?x) }'      # brackets in strings do not nest
    results = through_the_app([["get", "/sparql", {"query_string": {"query": nested}}],
                               ["get", "/sparql", {"query_string": {"query": strings}}]])
    assert [status for status, _ in results] == [200, 200]
