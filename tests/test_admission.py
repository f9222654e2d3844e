"""Admission: each query's evaluation cost is measured and shown, and registrations are refused
(503, naming the load or the count and the limit) while the engine is at a limit."""
from __future__ import annotations

import os

import pyoxigraph as ox
import pytest

from http_app import AUTH, T0, TOKEN
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import Runner, EngineAtCapacity, EngineConfig
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.endpoint.http.operations import prometheus_text
from rspstar.store.stream_store import StreamStore

S = 1_000_000
QUERY = ("PREFIX ex: <http://example.org/> SELECT ?o ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT4S STEP PT2S] "
         "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v > %d) } } }")


def stream(count: int) -> bytes:
    lines = ["@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> ."]
    for k in range(count):
        lines.append('ex:e%d prov:generatedAtTime "2026-03-01T08:00:%02d.%03dZ"^^<http://www.w3.org/2001/XMLSchema#dateTime> .'
                     % (k, k * 10 // count, k % 1000))
        lines.append("ex:e%d { ex:o%d ex:v %d . }" % (k, k, k))
    return "\n".join(lines).encode()


def evaluated(engine: Runner, clock: VirtualClock, store: StreamStore, until: int) -> None:
    staged = store.documents.stage("http://example.org/s", stream(400), ox.RdfFormat.TRIG, "s.trig").staged
    store.publish("http://example.org/s", staged)
    store.advance_watermark("http://example.org/s", until)
    clock.set(until)
    engine.tick()


def test_each_query_shows_what_its_evaluations_cost():
    clock, store = VirtualClock(T0), StreamStore()
    engine = Runner(store, clock, EngineConfig(max_delay=0))
    engine.register(QUERY % 10, "q")
    assert engine.get("q").status.describe()["core_share"] == 0
    evaluated(engine, clock, store, T0 + 10 * S)
    status = engine.get("q").status.describe()
    assert status["evaluations"] == 5 and status["cpu_seconds"] > 0 and status["cpu_ms_per_evaluation"] > 0
    # STEP 2 s: half an evaluation per second.
    measured = engine.get("q").status
    assert measured.core_share() == pytest.approx(measured.cpu_per_evaluation / 2)
    assert status["core_share"] == round(measured.core_share(), 4)
    metrics = prometheus_text(engine, {})
    assert 'rspstar_query_core_share{query="q"}' in metrics and "rspstar_evaluation_load_cores" in metrics


def test_registrations_are_refused_while_the_measured_load_is_over_the_budget():
    clock, store = VirtualClock(T0), StreamStore()
    # A budget any evaluation exceeds: the first query is admitted (nothing is measured yet).
    engine = Runner(store, clock, EngineConfig(max_delay=0, max_load=1e-9))
    engine.register(QUERY % 10, "first")
    engine.register(QUERY % 11, "second")
    evaluated(engine, clock, store, T0 + 10 * S)
    with pytest.raises(EngineAtCapacity, match=r"take \d+\.\d\d cores \(measured\), the engine's budget is 0\.00 "
                                               r"\(\[engine\] max_load = 1e-09 of %d cores\)" % (os.cpu_count() or 1)):
        engine.register(QUERY % 12, "third")
    assert [q.id for q in engine.queries()] == ["first", "second"]
    engine.remove("first")
    engine.remove("second")
    engine.register(QUERY % 12, "third")          # the load went with them


def test_registrations_beyond_the_number_of_queries_get_503_naming_the_limit(tmp_path):
    engine = Runner(StreamStore(), VirtualClock(T0), EngineConfig(data_dir=tmp_path / "e", max_queries=2))
    client = create_app(engine, HttpSettings(token=TOKEN)).test_client()
    for k in range(2):
        assert client.post("/queries", data=QUERY % k, headers={**AUTH, "Content-Type": "application/sparql-query"},
                           query_string={"id": "q%d" % k}).status_code == 201
    refused = client.post("/queries", data=QUERY % 9, headers={**AUTH, "Content-Type": "application/sparql-query"})
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "60"
    assert refused.json["error"] == "EngineAtCapacity"
    assert refused.json["message"] == "2 queries are registered, the engine's limit ([engine] max_queries): remove one first"
    client.delete("/queries/q0", headers=AUTH)
    assert client.post("/queries", data=QUERY % 9, headers={**AUTH, "Content-Type": "application/sparql-query"}
                       ).status_code == 201
    # Restored at a restart, the registered queries are not refused.
    again = Runner(StreamStore(), VirtualClock(T0), EngineConfig(data_dir=tmp_path / "e", max_queries=1))
    assert len(again.queries()) == 2


def test_serve_takes_the_limits_from_the_configuration(tmp_path):
    from rspstar.endpoint.config import load_config
    (tmp_path / "engine.toml").write_text("[engine]\nmax_queries = 7\nmax_load = 0.5\n")
    config = load_config(tmp_path / "engine.toml")
    assert (config.engine.max_queries, config.engine.max_load) == (7, 0.5)
    (tmp_path / "default.toml").write_text("")
    default = load_config(tmp_path / "default.toml")
    assert (default.engine.max_queries, default.engine.max_load) == (2000, 0.8)
