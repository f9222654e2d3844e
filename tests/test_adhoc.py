"""Ad-hoc queries over an on-disk store run in worker processes: a query past its time limit
is stopped (its worker killed and replaced) while others keep being answered, a query that
kills its worker costs only itself, writes are visible, and closing stops busy workers."""
import os
import threading
import time

import pyoxigraph as ox
import pytest

from rspstar.endpoint.adhoc import AdhocQueries, Job, Negotiated, QueryCrashed, QueryRefused
from rspstar.store.errors import QueryTimeout
from rspstar.store.stream_store import StreamStore

pytestmark = pytest.mark.slow
JSON = Negotiated("application/sparql-results+json", ("text/turtle",))
SLOW = "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?a { ?s1 ?p1 ?o1 } GRAPH ?b { ?s2 ?p2 ?o2 } GRAPH ?c { ?s3 ?p3 ?o3 } }"


def job(text: str) -> Job:
    return Job(text, (), (), JSON)


@pytest.fixture
def store(tmp_path):
    store = StreamStore(str(tmp_path / "store"))
    store.background.load("\n".join("<http://s%d> <http://p> \"%d\" <http://g%d> ." % (i, i, i) for i in range(400)),
                          ox.RdfFormat.N_QUADS, "bg.nq")
    yield store
    store.close()


@pytest.fixture
def adhoc(store):
    queries = AdhocQueries(store, timeout=1.0, workers=2)
    assert queries.wait_ready()
    yield queries
    queries.close()


def alive(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid) as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_a_query_past_its_limit_is_stopped_and_others_are_served(adhoc):
    pids = {p.pid for p in adhoc.processes()}
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match="was stopped"):
        adhoc.run(job(SLOW))
    assert time.monotonic() - started < 5
    body, media = adhoc.run(job("ASK { GRAPH ?g { ?s ?p ?o } }"))
    assert media == "application/sparql-results+json" and b"true" in body
    assert adhoc.wait_ready()
    stopped = pids - {p.pid for p in adhoc.processes()}
    assert len(stopped) == 1 and not alive(stopped.pop())     # no CPU spent on it any more
    assert len(adhoc.processes()) == 2


def test_while_slow_queries_run_out_their_time_a_third_client_waits_at_most_the_limit(adhoc):
    threads = [threading.Thread(target=lambda: pytest.raises(QueryTimeout, adhoc.run, job(SLOW))) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    started = time.monotonic()
    body, _ = adhoc.run(job("ASK { }"))      # served once a worker is free again, never later than the limit
    assert b"true" in body and time.monotonic() - started < 4
    for t in threads:
        t.join()


def test_a_query_that_kills_its_worker_costs_only_itself(adhoc):
    deep = "SELECT * WHERE " + "{" * 3000 + " ?s ?p ?o " + "}" * 3000    # past what the HTTP layer lets in
    with pytest.raises(QueryCrashed, match="worker process ended"):
        adhoc.run(job(deep))
    body, _ = adhoc.run(job("ASK { GRAPH ?g { ?s ?p ?o } }"))
    assert b"true" in body


def test_syntax_errors_keep_their_position_and_writes_are_visible(adhoc, store):
    with pytest.raises(QueryRefused) as refused:
        adhoc.run(job("SELECT * WHERE {\n  ?s ?p }"))
    assert refused.value.kind == "syntax" and refused.value.line == 2
    store.background.update("INSERT DATA { <http://new> <http://p> 1 }")
    body, _ = adhoc.run(job("ASK { <http://new> <http://p> 1 }"))
    assert b"true" in body


def test_closing_stops_busy_workers_at_once(store):
    adhoc = AdhocQueries(store, timeout=60.0, workers=1)
    assert adhoc.wait_ready()
    pid = adhoc.processes()[0].pid
    runner = threading.Thread(target=lambda: pytest.raises(Exception, adhoc.run, job(SLOW)), daemon=True)
    runner.start()
    time.sleep(0.5)
    started = time.monotonic()
    adhoc.close()
    runner.join(timeout=10)
    assert not runner.is_alive() and not alive(pid) and time.monotonic() - started < 10
    assert os.path.exists(store.generation_path())


def test_ctrl_c_to_the_process_group_leaves_the_workers_to_the_engine(adhoc, store):
    # A terminal's Ctrl-C reaches every process of the group: a worker must not die of it with
    # a traceback of its own (the engine stops its workers when it stops).
    import signal
    for process in adhoc.processes():
        os.kill(process.pid, signal.SIGINT)
    for process in adhoc.processes():
        process.join(timeout=0.5)
        assert process.is_alive()
    assert b"results" in adhoc.run(job("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } } LIMIT 1"))[0]
