"""Event time far from the engine's clock (issue 60): one element stamped 9999-12-31 moved its
stream's watermark to the year 9999, so that every later reading was late, and each query on
the stream evaluated empty windows in a tight loop. An element stamped further ahead of the
engine's clock than `[engine] max_event_ahead` is refused at a post (400 naming it, its time and
the bound) and set aside with the reason when a source brings it; instants outside the years
0001-9999 are refused wherever they are read; and a watermark ahead of the clock, however far,
has a query evaluate at most `max_event_ahead` ahead of the clock, at the clock's pace."""
import json
import logging

import pyoxigraph as ox
import pytest

from http_app import AUTH, RSPQL, T0
from test_batches import ExecutorDecoding, trig
from test_scheduler import QUERY, Monotonic
from rspstar import Engine, replay
from rspstar.config.schema import default
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import MAX_EVALUATIONS_PER_RUN, EngineConfig, Runner
from rspstar.endpoint.engine.scheduler import INLINE, LiveScheduler
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.store.batches import BatchWriter
from rspstar.store.codec import EventTimeBound, Payload
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import parse_instant
from rspstar.translator.vocabulary import timestamps_graph

S = 1_000_000
STREAM = "http://example.org/s"
XSD_DATETIME = "http://www.w3.org/2001/XMLSchema#dateTime"
FAR = "9999-12-31T23:59:59Z"


def element_at(graph: str, time: str) -> bytes:
    return ('<http://example.org/%s> <http://www.w3.org/ns/prov#generatedAtTime> "%s"^^<%s> .\n'
            '<http://example.org/o> <http://example.org/v> "1" <http://example.org/%s> .\n'
            % (graph, time, XSD_DATETIME, graph)).encode()


def post(client, body: bytes, content_type: str = "application/n-quads"):
    return client.post("/streams", query_string={"stream": STREAM}, data=body, content_type=content_type,
                       headers=AUTH)


def landed(tmp_path) -> list:
    return [p for p in (tmp_path / "landing").rglob("*") if p.is_file()] if (tmp_path / "landing").exists() else []


# -- the edge: POST /streams ----------------------------------------------------------------------
def test_the_bound_is_declared_once_with_its_default():
    assert default("engine.max_event_ahead") == 60 * S
    assert EngineConfig().max_event_ahead == 60 * S


def envelope(graph: str, time: str) -> bytes:
    return (json.dumps({"graph": "http://example.org/" + graph, "time": time,
                        "data": "<http://example.org/o> <http://example.org/v> 1 ."}) + "\n").encode()


@pytest.mark.parametrize("body,content_type,stamped", [
    (element_at("now", "2026-03-01T08:00:00Z") + element_at("far", FAR), "application/n-quads", FAR),
    (element_at("far", "2026-03-01T08:01:00.000001Z"), "application/n-quads", "2026-03-01T08:01:00.000001Z"),
    (envelope("now", "2026-03-01T08:00:00Z") + envelope("far", FAR), "application/x-ndjson", FAR),
])
def test_a_post_of_an_element_stamped_past_the_bound_is_refused_naming_it_its_time_and_the_bound(
        client, engine, tmp_path, body, content_type, stamped):
    # The engine's clock is at T0 (2026-03-01T08:00:00Z); the bound is a minute.
    response = post(client, body, content_type)
    assert response.status_code == 400
    refused = response.get_json()
    assert refused["error"] == "EventTimeAhead"
    message = refused["message"]
    assert "graph <http://example.org/far> is stamped %s" % stamped in message
    assert "more than PT60S ahead of the engine's clock (2026-03-01T08:00:00Z; [engine] max_event_ahead)" in message
    assert landed(tmp_path) == []              # nothing of the body is acknowledged
    assert engine.store.watermark(STREAM) is None


def test_a_post_up_to_the_bound_is_taken(client, tmp_path):
    response = post(client, element_at("edge", "2026-03-01T08:01:00Z"))
    assert response.status_code == 202 and len(landed(tmp_path)) == 1


def test_the_bound_is_the_engines_setting(engine, tmp_path):
    engine.config.max_event_ahead = 3600 * S
    client = create_app(engine, HttpSettings(token=AUTH["Authorization"].split()[1],
                                             landing_dir=tmp_path / "landing")).test_client()
    assert post(client, element_at("later", "2026-03-01T08:59:00Z")).status_code == 202
    refused = post(client, element_at("past", "2026-03-01T09:00:01Z"))
    assert refused.status_code == 400 and "PT3600S ahead" in refused.get_json()["message"]


@pytest.mark.parametrize("time", ["10000-01-01T00:00:00Z", "-0001-01-01T00:00:00Z"])
def test_a_post_stamped_outside_the_years_0001_to_9999_is_refused_naming_the_instant(client, tmp_path, time):
    response = post(client, element_at("odd", time))
    assert response.status_code == 400
    message = response.get_json()["message"]
    assert repr(time) in message and "outside the years 0001-9999" in message
    envelope = json.dumps({"time": time, "data": "<http://a> <http://b> 1 ."}).encode()
    response = post(client, envelope, "application/x-ndjson")
    assert response.status_code == 400 and 'field "time"' in response.get_json()["message"]
    assert landed(tmp_path) == []


# -- a source's micro-batches -----------------------------------------------------------------------
@pytest.fixture(params=["driver", "executors"])
def writer(request, tmp_path):
    """A source's batch writer on an engine's clock at T0 + 10 s, wherever its input is decoded."""
    kind = BatchWriter if request.param == "driver" else ExecutorDecoding
    clock = VirtualClock(T0 + 10 * S)
    return kind(StreamStore(), "mqtt", tmp_path / "quarantine",
                event_time=EventTimeBound(clock, default("engine.max_event_ahead")))


def far_nquads(time: str = FAR) -> str:
    return element_at("far", time).decode()


def test_a_source_element_stamped_past_the_bound_is_set_aside_with_the_reason(writer, tmp_path):
    report = writer.write(1, [Payload(STREAM, "trig", "mqtt:sensors/kitchen", trig(1, 2, 3), T0),
                              Payload(STREAM, "nquads", "mqtt:sensors/hall", far_nquads(), T0, line=1)])
    assert report.stored == {STREAM: 3} and report.quarantined == {STREAM: 1}
    # The watermark follows what was stored, not the year 9999.
    assert writer.store.watermark(STREAM) == T0 + 3 * S
    assert writer.store.streams()[STREAM].latest == T0 + 3 * S
    assert not writer.store.is_taken("http://example.org/far")
    [reason] = [json.loads(p.read_text()) for p in (tmp_path / "quarantine").glob("*.reason.json")]
    assert reason["stream"] == STREAM and reason["origin"] == "http://example.org/far"
    assert "stamped %s, more than PT60S ahead of the engine's clock (2026-03-01T08:00:10Z" % FAR in reason["reason"]
    assert "[engine] max_event_ahead" in reason["reason"]
    [data] = (tmp_path / "quarantine").glob("*.data")
    assert {q.graph_name.value for q in ox.parse(data.read_bytes(), format=ox.RdfFormat.N_QUADS)
            if q.graph_name != ox.DefaultGraph()} == {"http://example.org/far"}
    assert writer.quarantined == {STREAM: 1}
    # Readings that come after it are on time.
    later = writer.write(2, [Payload(STREAM, "trig", "mqtt:sensors/kitchen", trig(4), T0)])
    assert later.stored == {STREAM: 1} and not later.late
    assert writer.store.late_count(STREAM) == 0


def test_a_source_element_up_to_the_bound_is_stored(writer):
    report = writer.write(1, [Payload(STREAM, "nquads", "a.nq", far_nquads("2026-03-01T08:01:10Z"), T0, line=1)])
    assert report.stored == {STREAM: 1} and not report.quarantined


@pytest.mark.parametrize("time", ["10000-01-01T00:00:00Z", "-0001-01-01T00:00:00Z"])
def test_a_source_element_stamped_outside_the_years_0001_to_9999_is_set_aside_naming_the_instant(writer, tmp_path,
                                                                                                 time):
    report = writer.write(1, [Payload(STREAM, "nquads", "mqtt:sensors/hall", far_nquads(time), T0, line=1),
                              Payload(STREAM, "nquads", "mqtt:sensors/kitchen",
                                      element_at("ok", "2026-03-01T08:00:01Z").decode(), T0, line=1)])
    assert report.stored == {STREAM: 1} and report.quarantined == {STREAM: 1}
    [reason] = [json.loads(p.read_text()) for p in (tmp_path / "quarantine").glob("*.reason.json")]
    assert reason["origin"] == "mqtt:sensors/hall"
    assert repr(time) in reason["reason"] and "outside the years 0001-9999" in reason["reason"]
    assert writer.store.watermark(STREAM) == T0 + S


# -- a watermark ahead of the clock ---------------------------------------------------------------------
def far_ahead(options=None):
    """An engine at T0 whose stream's watermark is at the year 9999 (as a store written before
    the bound, or any other way a watermark gets far ahead, leaves it), and a query on it."""
    store = StreamStore()
    engine = Runner(store, VirtualClock(T0), EngineConfig(max_delay=3 * S))
    registered = engine.register(QUERY, "q", options=options)
    store.add_elements(STREAM, [Element("http://example.org/far", parse_instant(FAR), instant_literal(
        parse_instant(FAR)))])
    store.advance_watermark(STREAM, parse_instant(FAR))
    return engine, registered


def test_a_watermark_years_ahead_has_a_query_evaluate_at_most_the_bound_ahead_of_the_clock():
    engine, registered = far_ahead()
    # The window closes every 2 s: a minute ahead of the clock is 30 instants, whatever the
    # number of runs (each ran MAX_EVALUATIONS_PER_RUN more, up to the year 9999).
    runs = sum(engine.run_query("q") for _ in range(100))
    assert runs == registered.status.evaluations == 30
    assert registered.status.last_evaluation == T0 + 60 * S
    assert {record["trigger"] for record in registered.history.since()} == {"watermark"}
    engine.clock.set(T0 + 10 * S)
    assert sum(engine.run_query("q") for _ in range(100)) == 5          # at the clock's pace
    assert registered.status.last_evaluation == T0 + 70 * S


def test_a_watermark_years_ahead_does_not_make_the_scheduler_ask_a_query_in_a_loop():
    engine, registered = far_ahead()
    clock = Monotonic()
    scheduler = LiveScheduler(engine, monotonic=clock, executor=INLINE)
    try:
        asked = [query for _ in range(200) for query in scheduler.step()]
        assert registered.status.evaluations == 30
        # Asked for its turns of MAX_EVALUATIONS_PER_RUN, then once the clock nears its next
        # instant (T0 + 62 s, evaluated from T0 + 2 s), not at every step.
        assert len(asked) == 30 // MAX_EVALUATIONS_PER_RUN + 1
        assert scheduler.planned("q") == clock.now + 2
        clock.now += 2
        engine.clock.set(T0 + 2 * S)
        assert scheduler.step() == ["q"] and registered.status.evaluations == 31
    finally:
        scheduler.shutdown()


def test_a_query_skipping_overrun_walks_to_the_bound_not_to_the_watermark():
    engine, registered = far_ahead({"overrun": "skip"})
    assert engine.run_query("q") == 1
    assert registered.status.skipped_instants == 29 and registered.status.last_evaluation == T0 + 60 * S
    assert engine.run_query("q") == 0


# -- where event time is the user's: replays and the Python API --------------------------------------------
def test_a_replay_runs_in_the_recordings_event_time_whatever_the_wall_clock():
    far = "\n".join(trig(0, 1, 2).replace("2026-", "2999-").splitlines())
    results = replay(RSPQL, {STREAM: far}, start="2999-03-01T08:00:00Z", end="2999-03-01T08:00:04Z")
    assert [r["time"] for r in results] == ["2999-03-01T08:00:02Z", "2999-03-01T08:00:04Z"]
    assert [len(r["bindings"]) for r in results] == [2, 1]
    engine = Engine("2999-03-01T08:00:00Z")
    assert engine.push(STREAM, far) == 3


def test_a_store_holding_an_instant_outside_the_years_0001_to_9999_opens_without_it(tmp_path, caplog):
    store = StreamStore(str(tmp_path / "store"))
    store.add_elements(STREAM, [Element("http://example.org/e", T0, instant_literal(T0))])
    odd = ox.NamedNode("http://example.org/odd")
    store.oxigraph.add(ox.Quad(odd, ox.NamedNode("http://www.w3.org/ns/prov#generatedAtTime"),
                               ox.Literal("10000-01-01T00:00:00Z", datatype=ox.NamedNode(XSD_DATETIME)),
                               ox.NamedNode(timestamps_graph(STREAM))))
    store.oxigraph.add(ox.Quad(ox.NamedNode("http://example.org/o"), ox.NamedNode("http://example.org/v"),
                               ox.Literal("1"), odd))
    store.close()
    with caplog.at_level(logging.ERROR):
        reopened = StreamStore(str(tmp_path / "store"))
    assert reopened.elements_in(STREAM, 0, 2**62) == ["http://example.org/e"]
    assert not reopened.is_taken("http://example.org/odd") and "http://example.org/odd" not in reopened.background.names
    assert "<http://example.org/odd>" in caplog.text and "outside the years 0001-9999" in caplog.text
    reopened.close()
