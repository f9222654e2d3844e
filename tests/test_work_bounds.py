"""Every piece of work the server does for a client that runs Oxigraph is bounded in time and
memory, stoppable, and leaves /health and the other queries alone (issue 60's third pass):

- a continuous evaluation, whatever the query's age: a proven query handed an element that
  makes it run away is stopped at its time limit, at DELETE and at SIGTERM, and held to
  [engine] worker_memory;
- an ad-hoc /sparql query: its answer bounded ([http] query_max_bytes, 413, never cut short),
  its worker's memory bounded, and queries admitted so that /health keeps answering;
- a SPARQL Update: computed in a worker within the time and memory limits, bounded in the quads
  it changes, without the locks /health needs;
- planning: a query Oxigraph would plan for minutes is refused before it reaches Oxigraph;
- RDFS entailment: bounded in size and time, charged to the query that asked for it.

Each is attacked on a real engine in a process of its own (tests/bounded_server.py), watched
as an operator watches it: /health every quarter second, a canary query evaluating every
second, the processes' memory."""
from __future__ import annotations

import threading
import time

import pytest

from bounded_server import CANARY, BoundedServer

EX = "http://example.org/"
PREFIX = "PREFIX ex: <http://example.org/>\n"
# Cheap on the elements it proves itself on; over one element holding a long ex:p chain, the
# closure of the path is every pair of the chain's nodes: minutes of Oxigraph and gigabytes.
PATH_COUNT = PREFIX + """SELECT (COUNT(*) AS ?n) FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S STEP PT1S]
WHERE { WINDOW ex:w { GRAPH ?g { ?a (ex:p|^ex:p)* ?b } } }"""


def chain(nodes: int) -> str:
    return "".join("<%sn%d> <%sp> <%sn%d> .\n" % (EX, k, EX, EX, k + 1) for k in range(nodes))


class Watch:
    """/health asked every quarter second (the slowest answer kept) and the canary's
    evaluations counted, from `start()` to `stop()`."""

    def __init__(self, server: BoundedServer):
        self.server = server
        self.slowest = 0.0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                answer = self.server.get("/health", timeout=30)
                if answer.status_code != 200:
                    self.failures.append("health %d: %s" % (answer.status_code, answer.text[:200]))
            except Exception as e:       # a hung /health is what this looks for
                self.failures.append("health: %s" % e)
            self.slowest = max(self.slowest, time.monotonic() - started)
            self._stop.wait(0.25)

    def __enter__(self) -> "Watch":
        self.evaluations = self.server.status("canary")["evaluations"]
        self.started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(60)
        self.seconds = time.monotonic() - self.started
        self.canary = self.server.status("canary")
        self.canary_evaluations = self.canary["evaluations"] - self.evaluations

    def assert_unharmed(self) -> None:
        """/health under a second throughout, the canary on schedule (an evaluation a second,
        but for two), still running."""
        assert not self.failures, self.failures[:5]
        assert self.slowest < 1.0, "/health took %.1f s" % self.slowest
        assert self.canary["state"] == "running", self.canary
        assert self.canary_evaluations >= int(self.seconds) - 2, (self.canary_evaluations, self.seconds)


@pytest.fixture
def server(tmp_path):
    started = BoundedServer(tmp_path / "data")
    started.register("canary", CANARY)
    yield started
    started.close()


def proven(server: BoundedServer, query_id: str, deadline: float = 60) -> None:
    """Feed small elements to ex:s until `query_id` has left probation (its evaluations proven
    well within the limit)."""
    give_up = time.monotonic() + deadline
    while server.status(query_id)["probation"]:
        assert time.monotonic() < give_up, server.status(query_id)
        server.feed(EX + "s", chain(3))
        time.sleep(0.5)
    assert server.status(query_id)["state"] == "running"


def wait_for(condition, seconds: float, what: str):
    give_up = time.monotonic() + seconds
    while True:
        found = condition()
        if found:
            return found
        assert time.monotonic() < give_up, what
        time.sleep(0.1)


# -- a continuous evaluation, whatever its age ---------------------------------------------------
@pytest.mark.slow
def test_a_proven_query_that_runs_away_is_stopped_at_its_time_limit_and_the_engine_is_unharmed(server):
    server.register("paths", PATH_COUNT)
    proven(server, "paths")
    rss = server.rss()
    with Watch(server) as watch:
        server.feed(EX + "s", chain(8000))
        status = wait_for(lambda: (s := server.status("paths"))["state"] == "failed" and s, 40,
                          "the runaway evaluation was never stopped")
        time.sleep(2)
    assert "EvaluationTimeout" in status["last_error"] and "evaluation_timeout" in status["last_error"], status
    watch.assert_unharmed()
    # The evaluation's memory was the worker's, and went with it.
    assert server.rss() - rss < 100 << 20, (rss >> 20, server.rss() >> 20)
    assert server.terminate(within=10) < 10


@pytest.mark.slow
def test_deleting_a_runaway_query_and_sigterm_stop_its_evaluation_within_seconds(server):
    server.register("paths", PATH_COUNT)
    server.register("paths2", PATH_COUNT.replace("PT2S", "PT3S"))
    proven(server, "paths")
    proven(server, "paths2")
    with Watch(server) as watch:
        server.feed(EX + "s", chain(8000))
        wait_for(lambda: all((server.status(q)["evaluating_ms"] or 0) > 1500 for q in ("paths", "paths2")), 20,
                 "the runaways never started")
        workers = set(server.workers())
        deleted = time.monotonic()
        assert server.delete("/queries/paths").status_code == 204
        # Its worker is killed (its CPU and memory gone at once), and only its: the other
        # runaway's goes on.
        wait_for(lambda: len(workers - set(server.workers())) == 1, 5, "the evaluation went on after DELETE")
        assert time.monotonic() - deleted < 5
        assert server.status("paths2")["state"] == "running" and server.status("paths2")["evaluating_ms"]
    watch.assert_unharmed()
    # SIGTERM while paths2 still runs away: the engine stops within seconds all the same.
    assert server.status("paths2")["evaluating_ms"]
    assert server.terminate(within=10) < 10


@pytest.mark.slow
def test_a_runaway_evaluation_is_held_to_the_memory_a_worker_may_take(tmp_path):
    server = BoundedServer(tmp_path / "data", {"engine.worker_memory": 256 << 20,
                                               "engine.evaluation_timeout": "PT60S"})
    try:
        server.register("canary", CANARY)
        server.register("paths", PATH_COUNT)
        proven(server, "paths")
        with Watch(server) as watch:
            server.feed(EX + "s", chain(8000))
            status = wait_for(lambda: (s := server.status("paths"))["state"] == "failed" and s, 50,
                              "the runaway evaluation was never stopped")
            assert "EvaluationOverMemory" in status["last_error"] and "worker_memory" in status["last_error"], status
            assert max(server.rss(pid) for pid in server.workers()) < 600 << 20
        watch.assert_unharmed()
    finally:
        server.close()


# -- ad-hoc queries -----------------------------------------------------------------------------
VALUES = " ".join(str(k) for k in range(1500))
# 12.8 KB: 2.25 million solutions, some 415 MB of SPARQL JSON.
CROSS = "SELECT * WHERE { VALUES ?a { %s } VALUES ?b { %s } }" % (VALUES, VALUES)
# A small answer computed in a large table: the distinct pairs, counted.
DISTINCT = ("SELECT (COUNT(DISTINCT ?c) AS ?n) WHERE { VALUES ?a { %s } VALUES ?b { %s } "
            "BIND(CONCAT(STR(?a), \"-\", STR(?b)) AS ?c) }" % (VALUES, VALUES))


@pytest.mark.slow
def test_a_sparql_answer_past_the_bound_is_refused_not_sent_and_not_held(server):
    rss = server.rss()
    with Watch(server) as watch:
        started = time.monotonic()
        answer = server.get("/sparql", params={"query": CROSS})
        took = time.monotonic() - started
    assert answer.status_code == 413, (answer.status_code, answer.text[:300])
    assert answer.json()["error"] == "AnswerPastBound" and "[http] query_max_bytes" in answer.json()["message"]
    assert len(answer.content) < 4096 and took < 20
    assert server.rss() - rss < 64 << 20, (rss >> 20, server.rss() >> 20)
    watch.assert_unharmed()
    # A query within the bound is answered whole.
    small = server.get("/sparql", params={"query": "SELECT * WHERE { VALUES ?a { %s } }" % VALUES})
    assert small.status_code == 200 and len(small.json()["results"]["bindings"]) == 1500


@pytest.mark.slow
def test_a_sparql_query_past_the_memory_a_worker_may_take_is_stopped(tmp_path):
    server = BoundedServer(tmp_path / "data", {"engine.worker_memory": 160 << 20})
    try:
        server.register("canary", CANARY)
        with Watch(server) as watch:
            answer = server.get("/sparql", params={"query": DISTINCT})
        assert answer.status_code == 503, (answer.status_code, answer.text[:300])
        assert answer.json()["error"] == "QueryOverMemory" and "[engine] worker_memory" in answer.json()["message"]
        watch.assert_unharmed()
        assert server.get("/sparql", params={"query": "ASK {}"}).json()["boolean"] is True
    finally:
        server.close()


@pytest.mark.slow
def test_many_large_sparql_queries_at_once_leave_health_and_the_engine_answering(server):
    answers = []

    def ask() -> None:
        answers.append(server.get("/sparql", params={"query": CROSS}, timeout=120))

    clients = [threading.Thread(target=ask) for _ in range(16)]
    with Watch(server) as watch:
        for client in clients:
            client.start()
        for client in clients:
            client.join(120)
        time.sleep(1)
    statuses = sorted(answer.status_code for answer in answers)
    # As many as there are workers and waiting places are evaluated (and refused past the
    # bound); the others are told at once to come back.
    assert statuses.count(413) >= 1 and set(statuses) <= {413, 503}, statuses
    busy = [answer for answer in answers if answer.status_code == 503]
    assert busy and all(answer.headers.get("Retry-After") == "2" and answer.json()["error"] == "QueriesBusy"
                        for answer in busy)
    watch.assert_unharmed()


# -- SPARQL Update ------------------------------------------------------------------------------
def numbers(count: int) -> str:
    return " ".join(str(k) for k in range(count))


# 600³ rows, none passing its filter: minutes of Oxigraph that change nothing.
NOTHING = ("INSERT { <http://example.org/s> <http://example.org/p> ?a } WHERE { VALUES ?a { %s } VALUES ?b { %s } "
           "VALUES ?c { %s } FILTER(?a + ?b + ?c < 0) }" % (numbers(600), numbers(600), numbers(600)))
# 4.3 KB inserting a million triples.
MILLION = ("INSERT { ?x <http://example.org/p> ?z } WHERE { VALUES ?a { %s } VALUES ?b { %s } VALUES ?c { %s } "
           "BIND(IRI(CONCAT(\"http://example.org/x\", STR(?a), \"-\", STR(?b))) AS ?x) BIND(?c AS ?z) }"
           % (numbers(100), numbers(100), numbers(100)))


def update(server: BoundedServer, text: str):
    return server.post("/update", data=text.encode(), headers={"Content-Type": "application/sparql-update"},
                       timeout=120)


def background(server: BoundedServer) -> int:
    return int(server.get("/sparql", params={"query": "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"})
               .json()["results"]["bindings"][0]["n"]["value"])


@pytest.mark.slow
def test_an_update_past_its_time_limit_is_stopped_without_holding_the_engine(tmp_path):
    server = BoundedServer(tmp_path / "data", {"http.query_timeout": 5.0})
    try:
        server.register("canary", CANARY)
        assert update(server, "INSERT DATA { <http://example.org/a> <http://example.org/b> 1 }").status_code == 204
        with Watch(server) as watch:
            started = time.monotonic()
            answer = update(server, NOTHING)
            took = time.monotonic() - started
            # Reads of the background go on meanwhile, and it is intact.
            assert background(server) == 1
        assert answer.status_code == 503 and answer.json()["error"] == "QueryTimeout", answer.text[:300]
        assert "nothing was changed" in answer.json()["message"] and took < 15
        watch.assert_unharmed()
        assert background(server) == 1
    finally:
        server.close()


@pytest.mark.slow
def test_an_update_changing_a_million_quads_is_refused_and_changes_nothing(tmp_path):
    server = BoundedServer(tmp_path / "data", {"http.query_timeout": 15.0})
    try:
        server.register("canary", CANARY)
        rss = server.rss()
        with Watch(server) as watch:
            answer = update(server, MILLION)
        assert answer.status_code in (413, 503), answer.text[:300]
        assert answer.json()["error"] in ("UpdateTooLarge", "QueryTimeout", "QueryOverMemory"), answer.text[:300]
        watch.assert_unharmed()
        assert background(server) == 0 and server.rss() - rss < 64 << 20
        # Past the bound on the quads one update changes, in a few seconds: 125,000 of them.
        answer = update(server, MILLION.replace(numbers(100), numbers(50)))
        assert answer.status_code == 413 and "update_max_changes" in answer.json()["message"], answer.text[:300]
        assert background(server) == 0
    finally:
        server.close()


def test_an_update_calling_an_unknown_rspu_function_is_refused_naming_it(tmp_path):
    server = BoundedServer(tmp_path / "data")
    try:
        answer = update(server, "PREFIX rspu: <http://w3id.org/rsp/rspu#>\nINSERT { <http://example.org/s> "
                                "<http://example.org/p> ?x } WHERE { BIND(rspu:nosuch(1) AS ?x) }")
        assert answer.status_code == 400, answer.text[:300]
        assert "rspu#nosuch" in answer.json()["message"] and answer.json()["line"] == 2, answer.json()
        # The engine's own functions are there for updates too.
        assert update(server, "PREFIX rspu: <http://w3id.org/rsp/rspu#>\nINSERT { <http://example.org/s> "
                              "<http://example.org/p> ?x } WHERE { BIND(rspu:add(1, 2) AS ?x) }").status_code == 204
    finally:
        server.close()


# -- planning -----------------------------------------------------------------------------------
def optionals(groups: int, depth: int) -> str:
    """`groups` chains of OPTIONALs `depth` deep, each sharing ?a0 ... with the ones before it:
    Oxigraph's planning of them doubles with each level."""
    chain = "".join("OPTIONAL { ?a%d ex:p ?a%d " % (k, k + 1) for k in range(depth)) + "}" * depth
    return "?s ex:p ?a0 " + " ".join([chain] * groups)


@pytest.mark.slow
def test_a_query_too_costly_to_plan_is_refused_on_every_route_before_oxigraph_sees_it(server):
    pattern = optionals(36, 20)
    texts = {
        "/sparql": PREFIX + "SELECT * WHERE { %s }" % pattern,
        "/update": PREFIX + "INSERT { ex:s ex:p 1 } WHERE { %s }" % pattern,
        "/queries": PREFIX + "SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S]\nWHERE { WINDOW ex:w { GRAPH ?g "
                             "{ %s } } }" % pattern,
    }
    assert len(texts["/sparql"]) < 20_000      # a fifth of a typical request
    with Watch(server) as watch:
        for route, text in texts.items():
            started = time.monotonic()
            kind = {"/sparql": "application/sparql-query", "/update": "application/sparql-update",
                    "/queries": "application/sparql-query"}[route]
            answer = server.post(route, data=text.encode(), headers={"Content-Type": kind}, timeout=30)
            assert answer.status_code == 400, (route, answer.status_code, answer.text[:300])
            assert "OPTIONALs nested too deeply to plan" in answer.json()["message"], (route, answer.json())
            assert answer.json()["line"] and answer.json()["column"]
            assert time.monotonic() - started < 5, route
    watch.assert_unharmed()
    # Nested OPTIONALs as queries write them are planned as before.
    assert server.post("/sparql", data=PREFIX + "SELECT * WHERE { %s }" % optionals(8, 4),
                       headers={"Content-Type": "application/sparql-query"}).status_code == 200


def test_the_planning_budget_counts_each_optional_by_the_levels_it_is_nested_in():
    from rspstar.translator.errors import QuerySyntaxError
    from rspstar.translator.nesting import PLANNING_BUDGET, check_nesting, planning_cost
    query = PREFIX + "SELECT * WHERE { %s }"
    assert planning_cost(query % optionals(1, 1)) == 2
    assert planning_cost(query % optionals(3, 2)) == 3 * (2 + 4)
    # OPTIONALs in data, or apart from each other, cost nothing more.
    assert planning_cost(PREFIX + "INSERT DATA { ex:s ex:p 1 } ; INSERT { ex:s ex:p ?o } WHERE { OPTIONAL { ?s ex:p "
                                  "?o } }") == 2
    assert planning_cost(query % " ".join(["OPTIONAL { ?s ex:p ?o }"] * 10)) == 20
    # At the budget's edge: one chain 15 deep, two 14 deep, thirty-two 10 deep pass; one more level does not.
    for groups, depth in ((1, 15), (2, 14), (32, 10)):
        check_nesting(query % optionals(groups, depth), language="sparql")
        assert planning_cost(query % optionals(groups, depth)) <= PLANNING_BUDGET
        with pytest.raises(QuerySyntaxError, match="OPTIONALs nested too deeply to plan"):
            check_nesting(query % optionals(groups, depth + 1), language="sparql")


# -- RDFS entailment ----------------------------------------------------------------------------
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
TYPED = PREFIX + """SELECT (COUNT(*) AS ?n) FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S STEP PT1S]
WHERE { WINDOW ex:w { GRAPH ?g { ?x a ?c } } }"""


def subclasses(classes: int) -> str:
    """A chain of `classes` classes, each a subclass of the next, and one instance of the first:
    n²/2 triples entailed."""
    return "".join("<%sc%d> <%ssubClassOf> <%sc%d> .\n" % (EX, k, RDFS, EX, k + 1) for k in range(classes)) + \
        "<%sx> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <%sc0> .\n" % (EX, EX)


def register_entailing(server: BoundedServer, query_id: str) -> None:
    answer = server.post("/queries", json={"query": TYPED, "id": query_id, "options": {"entailment": "rdfs"}})
    assert answer.status_code == 201, answer.text


@pytest.mark.slow
def test_an_element_whose_closure_is_past_the_bound_fails_its_query_and_nothing_else(server):
    register_entailing(server, "entailed")
    server.feed(EX + "s", subclasses(3))
    wait_for(lambda: server.status("entailed")["evaluations"] >= 1, 30, "the entailing query never evaluated")
    rss = server.rss()
    with Watch(server) as watch:
        server.feed(EX + "s", subclasses(1400))             # 48 KB, a million triples entailed
        status = wait_for(lambda: (s := server.status("entailed"))["state"] == "failed" and s, 30,
                          "the closure was never stopped")
        time.sleep(2)
    assert "ClosureTooLarge" in status["last_error"] and "max_entailed_triples" in status["last_error"], status
    watch.assert_unharmed()
    assert server.rss() - rss < 200 << 20, (rss >> 20, server.rss() >> 20)
    assert server.disk() < 64 << 20


@pytest.mark.slow
def test_a_schema_whose_closure_is_past_the_bound_fails_the_entailing_query_alone(server):
    assert server.post("/store?default", data=subclasses(1000).encode(),
                       headers={"Content-Type": "application/n-triples"}).status_code in (201, 204)
    with Watch(server) as watch:
        register_entailing(server, "entailed")
        for _ in range(3):
            server.feed(EX + "s", subclasses(2).replace("c0", "d0"))
            time.sleep(1)
        status = wait_for(lambda: (s := server.status("entailed"))["state"] == "failed" and s, 30,
                          "the closure was never stopped")
        time.sleep(3)
    assert "ClosureTooLarge" in status["last_error"] or "EvaluationTimeout" in status["last_error"], status
    watch.assert_unharmed()

