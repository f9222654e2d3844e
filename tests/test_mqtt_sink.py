"""Results published to an MQTT topic (a sink URL mqtt://host:port/topic) through the same durable
outbox as HTTP sinks: in order, and a broker outage delays records, never drops them."""
from __future__ import annotations

import io
import json
import time

import pytest
from rdflib import Literal, Variable
from rdflib.query import Result

from rspstar.endpoint.engine.sinks import Delivery, HttpSink, SinkNotAllowed, check_sink_allowed

from mqtt_broker import Broker, client


def test_mqtt_sinks_are_allowed_by_origin_and_need_a_plain_topic():
    allowed = ["mqtt://127.0.0.1:1883", "http://localhost:9000"]
    check_sink_allowed("mqtt://127.0.0.1:1883/results/oxygen", allowed)
    check_sink_allowed("mqtt://127.0.0.1/results", allowed)               # 1883 is MQTT's port
    check_sink_allowed("http://localhost:9000/hook", allowed)
    for refused, reason in [("mqtt://127.0.0.1:1884/results", "not in the allow-list"),
                            ("mqtts://127.0.0.1:1883/results", "not in the allow-list"),
                            ("mqtt://127.0.0.1:1883/results/#", "no '\\+' or '#'"),
                            ("mqtt://127.0.0.1:1883", "the path is the topic"),
                            ("ftp://127.0.0.1/x", "not a URL of a sink kind \\(http://, https://, mqtt://, mqtts://\\)")]:
        with pytest.raises(SinkNotAllowed, match=reason):
            check_sink_allowed(refused, allowed)


def test_a_sink_url_and_a_broker_url_without_a_port_reach_the_same_port():
    # One table of MQTT's ports (store/mqtt.py) serves the source's broker and the sink.
    from rspstar.endpoint.engine.sinks import sink_origin
    from rspstar.store.mqtt import parse_broker
    for scheme in ("mqtt", "mqtts"):
        broker = parse_broker("%s://broker.example.org" % scheme)
        assert sink_origin("%s://broker.example.org/results" % scheme) == broker.origin
    assert broker.origin == "mqtts://broker.example.org:8883"


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def record(k: int) -> dict:
    return {"time": "2026-01-01T00:00:0%dZ" % k, "windows": {"http://example.org/w": ["2026-01-01T00:00:00Z",
                                                                                   "2026-01-01T00:00:0%dZ" % k]},
            "bindings": [{"k": '"%d"^^<http://www.w3.org/2001/XMLSchema#integer>' % k}]}


def test_records_reach_the_topic_in_order_and_wait_out_a_broker_outage(tmp_path):
    broker = Broker(tmp_path / "broker").start()
    received = []
    reader = client(broker, on_message=lambda c, u, m: received.append(m.payload), subscribe="results/q")
    delivery = Delivery()
    sink = HttpSink("q", "%s/results/q" % broker.url, tmp_path / "outbox", delivery, variables=("k",))
    try:
        assert reader.subscribed.wait(10)
        for k in range(3):
            sink.enqueue(record(k))
        assert sink.deliver(now=0) == 3
        wait_for(lambda: len(received) == 3)
        broker.stop()
        for k in range(3, 5):
            sink.enqueue(record(k))
        assert sink.deliver(now=1_000_000) == 0
        assert sink.state.pending == 2 and "not connected" in sink.state.last_error
        broker.start()
        sent = 0
        deadline = time.monotonic() + 60
        now = 2_000_000
        while sent < 2 and time.monotonic() < deadline:     # the publisher reconnects by itself
            now += 120_000_000                               # past any back-off
            sent += sink.deliver(now)
            time.sleep(0.2)
        assert sent == 2 and sink.state.pending == 0
        wait_for(lambda: len(received) == 5)
        # Each payload is one evaluation in the SPARQL Query Results JSON shape, which a SPARQL
        # client's parser reads as it is.
        parsed = [Result.parse(io.BytesIO(payload), format="json") for payload in received]
        assert [[row[Variable("k")] for row in result.bindings] for result in parsed] == [[Literal(k)] for k in range(5)]
        assert [json.loads(payload)["time"] for payload in received] == ["2026-01-01T00:00:0%dZ" % k for k in range(5)]
    finally:
        delivery.close()
        reader.loop_stop()
        broker.stop()
