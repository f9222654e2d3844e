"""The MQTT source against a real broker (mosquitto): messages land durably before they are
acknowledged, bad ones are set aside with their topic, and neither a kill -9 of the subscriber
nor a broker restart loses or duplicates an acknowledged message."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rspstar.store.codec import Payload, decode
from rspstar.store.mqtt import (
    HEADER, Journal, MqttSettingsError, MqttSource, _Received, finish_commits, parse_broker, routes_of,
)

from mqtt_broker import Broker, client, publish_all

STREAM = "http://example.org/stream/sensors"


def reading(k: int) -> bytes:
    return ('<http://example.org/g%d> <http://example.org/value> "%d" <http://example.org/g%d> .' % (k, k, k)).encode()


def landed_graphs(landing: Path) -> list[str]:
    """Every element graph in the landing directory, as often as it is there."""
    graphs = []
    for path in sorted(landing.rglob("*.nq")):
        decoded = decode(Payload(STREAM, "nquads", str(path), path.read_bytes(), 0, line=1))
        assert not decoded.rejected, decoded.rejected
        graphs += [e.graph for elements in decoded.elements.values() for e in elements]
    return graphs


def wait_for(condition, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.05)


@pytest.fixture
def broker(tmp_path):
    started = Broker(tmp_path / "broker").start()
    yield started
    started.stop()


def test_broker_urls_and_topic_filters_are_checked_with_what_is_wrong():
    assert parse_broker("mqtt://10.0.0.5").port == 1883
    assert parse_broker("mqtts://broker.example.org").port == 8883
    assert parse_broker("mqtts://broker.example.org").tls
    for bad in ("http://127.0.0.1:1883", "mqtt://", "mqtt://h:1883/sensors", "mqtt://h:99999"):
        with pytest.raises(MqttSettingsError, match="broker"):
            parse_broker(bad)
    for bad in ("sensors/#/more", "sensors/a+", "", "a/b#"):
        with pytest.raises(MqttSettingsError, match="topic filter"):
            routes_of("s", bad, STREAM, "nquads")
    with pytest.raises(MqttSettingsError, match="needs stream"):
        routes_of("s", "sensors/#", None, "nquads")
    assert routes_of("s", "sensors/#", None, "jsonl") == {"sensors/#": ""}     # envelopes name their stream
    assert routes_of("s", {"a/+": "http://x/a", "b/#": "http://x/b"}, None, "trig") == {"a/+": "http://x/a",
                                                                                       "b/#": "http://x/b"}


class Acks:
    """Stands in for the network side where only the order of acknowledgements matters."""

    def __init__(self):
        self.acked: list[int] = []

    def ack(self, mid, qos):
        self.acked.append(mid)

    def disconnect(self):
        pass

    def loop_stop(self):
        pass


def test_a_redelivered_landed_message_is_acknowledged_and_not_landed_again(tmp_path):
    landing = tmp_path / "landing"
    source = MqttSource("s", "mqtt://127.0.0.1:1", {"#": STREAM}, "nquads", landing, lambda *a: None)
    source.client = Acks()
    first = _Received("sensors/a", reading(1), 7, 1, False, False, 1_000)
    source.commit([first, _Received("sensors/a", reading(2), 8, 1, False, False, 1_000)])
    # The same packet, sent again by the broker (its acknowledgement was lost in a crash),
    # and a new message that merely reuses the id later with other content.
    source.commit([_Received("sensors/a", reading(1), 7, 1, True, False, 2_000),
                   _Received("sensors/a", reading(3), 7, 1, True, False, 2_000)])
    assert source.client.acked == [7, 8, 7, 7]
    assert sorted(landed_graphs(landing)) == ["http://example.org/g1", "http://example.org/g2", "http://example.org/g3"]
    assert source.status.redelivered == 1
    # After a restart the landing files' headers say what was landed.
    again = MqttSource("s", "mqtt://127.0.0.1:1", {"#": STREAM}, "nquads", landing, lambda *a: None)
    again.client = Acks()
    again.commit([_Received("sensors/a", reading(2), 8, 1, True, False, 3_000)])
    assert again.status.redelivered == 1 and len(landed_graphs(landing)) == 3
    assert all(p.read_text().startswith(HEADER) for p in landing.rglob("*.nq"))


def test_a_group_of_several_streams_appears_whole_even_after_a_crash_between_files(tmp_path):
    landing = tmp_path / "landing"
    source = MqttSource("s", "mqtt://127.0.0.1:1", {"a/#": "http://x/a", "b/#": "http://x/b"}, "nquads", landing,
                        lambda *a: None)
    source.client = Acks()
    real_reveal = __import__("rspstar.store.mqtt", fromlist=["reveal"]).reveal
    revealed = []

    def crash_after_first(hidden, final):
        if revealed:
            raise KeyboardInterrupt("killed")
        revealed.append(final)
        real_reveal(hidden, final)

    import rspstar.store.mqtt as module
    module.reveal = crash_after_first
    try:
        with pytest.raises(KeyboardInterrupt):
            source.commit([_Received("a/1", reading(1), 1, 1, False, False, 0),
                           _Received("b/1", reading(2), 2, 1, False, False, 0)])
    finally:
        module.reveal = real_reveal
    assert source.client.acked == []                      # nothing acknowledged
    assert len(landed_graphs(landing)) == 1               # one of two files visible
    assert finish_commits(landing) == 1                   # the next start completes the group
    assert sorted(landed_graphs(landing)) == ["http://example.org/g1", "http://example.org/g2"]
    assert not list(landing.rglob(".*"))
    assert "1:" in " ".join(Journal.read_back(landing)._keys)


def test_messages_land_before_acknowledgement_and_bad_ones_are_set_aside_with_their_topic(tmp_path, broker):
    landing = tmp_path / "landing"
    quarantined = []
    source = MqttSource("s", broker.url, {"sensors/#": STREAM}, "nquads", landing,
                        lambda payload, reason, line: quarantined.append(
                            (payload.origin, reason, payload.text if isinstance(payload.text, bytes)
                             else payload.text.encode())))
    publisher = client(broker)
    # A retained reading is an old one: not taken by default.
    publish_all(publisher, "sensors/old", [reading(0)])
    publisher.publish("sensors/old", reading(0), qos=1, retain=True).wait_for_publish(5)
    source.start()
    try:
        wait_for(lambda: source.status.subscribed, what="the subscriber's subscription")
        publish_all(publisher, "sensors/kitchen", [reading(k) for k in range(1, 101)])
        publish_all(publisher, "sensors/hall", [b"not N-Quads", b"\xff\xfe"])
        publish_all(publisher, "other/topic", [reading(500)])          # not subscribed
        wait_for(lambda: source.status.landed == 102, what="102 messages landed")
        assert sorted(landed_graphs(landing)) == sorted("http://example.org/g%d" % k for k in range(1, 101))
        assert source.status.retained_ignored == 1
        assert [(origin, text) for origin, _, text in quarantined] == [("mqtt:sensors/hall", b"not N-Quads"),
                                                                        ("mqtt:sensors/hall", b"\xff\xfe")]
        assert "not UTF-8" in quarantined[1][1]
        assert source.describe()["connected"] and source.describe()["elements"] == 100
    finally:
        source.stop()
        publisher.loop_stop()
    assert not source.status.connected


def test_retained_messages_are_taken_when_asked(tmp_path, broker):
    publisher = client(broker)
    publisher.publish("sensors/old", reading(9), qos=1, retain=True).wait_for_publish(5)
    source = MqttSource("s", broker.url, {"sensors/#": STREAM}, "nquads", tmp_path / "l", lambda *a: None,
                        retained=True)
    source.start()
    try:
        wait_for(lambda: source.status.landed == 1, what="the retained message")
        assert landed_graphs(tmp_path / "l") == ["http://example.org/g9"]
    finally:
        source.stop()
        publisher.loop_stop()


def test_a_broker_that_goes_away_is_reported_and_reconnected(tmp_path, broker):
    source = MqttSource("s", broker.url, {"sensors/#": STREAM}, "nquads", tmp_path / "l", lambda *a: None)
    source.start()
    try:
        wait_for(lambda: source.status.connected, what="the connection")
        broker.stop()
        wait_for(lambda: not source.status.connected, what="the disconnection")
        assert "disconnected" in source.status.last_error or "cannot reach" in source.status.last_error
        broker.start()
        wait_for(lambda: source.status.connected, timeout=60, what="the reconnection")
        assert source.status.connects == 2
        publisher = client(broker)
        publish_all(publisher, "sensors/x", [reading(1)])
        wait_for(lambda: source.status.landed == 1, what="a message after the reconnection")
        publisher.loop_stop()
    finally:
        source.stop()


SUBSCRIBER = """
import signal, sys, time
from pathlib import Path
from rspstar.store.mqtt import MqttSource
source = MqttSource("crash", sys.argv[1], {"sensors/#": %r}, "nquads", Path(sys.argv[2]), lambda *a: None)
source.start()
signal.signal(signal.SIGTERM, lambda *a: (source.stop(), sys.exit(0)))
while not source.status.subscribed:
    time.sleep(0.02)
Path(sys.argv[3]).write_text("connected")
while True:
    time.sleep(1)
""" % STREAM


@pytest.mark.slow
def test_kill_9_of_the_subscriber_and_a_broker_restart_lose_and_duplicate_nothing(tmp_path, broker):
    landing, ready = tmp_path / "landing", tmp_path / "ready"

    def subscriber() -> subprocess.Popen:
        ready.unlink(missing_ok=True)
        process = subprocess.Popen([sys.executable, "-c", SUBSCRIBER, broker.url, str(landing), str(ready)],
                                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        wait_for(ready.exists, what="the subscriber")
        return process

    process = subscriber()     # subscribed: the broker's session keeps what comes from now on
    publisher = client(broker, client_id="readings", clean=False)
    acknowledged: set[int] = set()          # packet ids the broker acknowledged to the publisher
    publisher.on_publish = lambda c, userdata, mid, reason, properties: acknowledged.add(mid)
    count = 4000
    mids: dict[int, int] = {}

    def publish():
        for k in range(count):
            mids[publisher.publish("sensors/a", reading(k), qos=1).mid] = k
            if k % 100 == 99:
                time.sleep(0.05)

    feeding = threading.Thread(target=publish)
    feeding.start()
    try:
        wait_for(lambda: len(landed_graphs(landing)) > 500, what="the first messages")
        process.send_signal(signal.SIGKILL)           # mid-stream, between any two instructions
        process.wait()
        process = subscriber()
        wait_for(lambda: len(landed_graphs(landing)) > 1500, what="messages after the restart")
        broker.stop()                                  # mid-stream too
        broker.start()
        feeding.join()
        # The publisher sends again what the broker had not acknowledged when it stopped.
        wait_for(lambda: len(acknowledged) == count, timeout=90, what="the publisher's acknowledgements")
        wait_for(lambda: len(set(landed_graphs(landing))) == count, timeout=90, what="every message landed")
        time.sleep(1.0)                                # anything sent twice would land meanwhile
        graphs = landed_graphs(landing)
        assert len(graphs) == count and len(set(graphs)) == count
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(20)
        publisher.loop_stop()


def test_a_message_that_breaks_the_reader_is_set_aside_and_the_next_lands(tmp_path, monkeypatch):
    import rspstar.store.mqtt as module
    quarantined = []
    source = MqttSource("s", "mqtt://127.0.0.1:1", {"#": STREAM}, "nquads", tmp_path / "l",
                        lambda payload, reason, line: quarantined.append((payload.origin, reason)))
    source.client = Acks()
    real = module.decode

    def breaks_on_poison(payload):
        if payload.text == b"poison":
            raise MemoryError("boom")
        return real(payload)

    monkeypatch.setattr(module, "decode", breaks_on_poison)
    source.commit([_Received("s/1", b"poison", 1, 1, False, False, 0), _Received("s/1", reading(5), 2, 1, False, False, 0)])
    assert quarantined == [("mqtt:s/1", "unexpected: MemoryError: boom")]
    assert source.client.acked == [1, 2] and landed_graphs(tmp_path / "l") == ["http://example.org/g5"]


def test_a_broker_with_passwords_takes_the_password_from_the_environment(tmp_path):
    from rspstar.config.schema import Source
    from rspstar.store.mqtt import from_settings
    from mqtt_broker import password_file
    passwords = password_file(tmp_path / "auth", "sensor-gateway", "s3cret-pw")
    broker = Broker(tmp_path / "broker", settings="allow_anonymous false\npassword_file %s" % passwords).start()
    settings = Source("s", "mqtt", stream=STREAM, broker=broker.url, topic="sensors/#", username="sensor-gateway",
                      password_env="RSPSTAR_TEST_MQTT_PASSWORD", path=str(tmp_path / "l"))
    with pytest.raises(MqttSettingsError, match="RSPSTAR_TEST_MQTT_PASSWORD, which is not set"):
        from_settings(settings, lambda *a: None, environ={})
    wrong = from_settings(settings, lambda *a: None, environ={"RSPSTAR_TEST_MQTT_PASSWORD": "wrong"})
    right = from_settings(settings, lambda *a: None, environ={"RSPSTAR_TEST_MQTT_PASSWORD": "s3cret-pw"})
    wrong.start()
    right.start()
    try:
        wait_for(lambda: right.status.connected, what="the connection with the right password")
        wait_for(lambda: wrong.status.last_error is not None, what="the refusal")
        assert not wrong.status.connected and "refused" in wrong.status.last_error
    finally:
        wrong.stop()
        right.stop()
        broker.stop()


def test_an_mqtts_broker_is_trusted_through_the_configured_ca_file(tmp_path):
    import ssl
    from mqtt_broker import certificates
    files = certificates(tmp_path / "tls")
    broker = Broker(tmp_path / "broker", tls=True, settings="allow_anonymous true\ncafile %s\ncertfile %s\nkeyfile %s"
                    % (files["ca.crt"], files["server.crt"], files["server.key"])).start()
    trusted = MqttSource("s", broker.url, {"sensors/#": STREAM}, "nquads", tmp_path / "l", lambda *a: None,
                         ca_file=str(files["ca.crt"]))
    untrusting = MqttSource("u", broker.url, {"sensors/#": STREAM}, "nquads", tmp_path / "u", lambda *a: None)
    trusted.start()
    untrusting.start()
    try:
        wait_for(lambda: trusted.status.connected, what="the TLS connection")
        publisher = __import__("paho.mqtt.client", fromlist=["Client"]).Client(
            __import__("paho.mqtt.client", fromlist=["CallbackAPIVersion"]).CallbackAPIVersion.VERSION2)
        publisher.tls_set(ca_certs=str(files["ca.crt"]), cert_reqs=ssl.CERT_REQUIRED)
        publisher.connect("127.0.0.1", broker.port)
        publisher.loop_start()
        publish_all(publisher, "sensors/t", [reading(3)])
        wait_for(lambda: trusted.status.landed == 1, what="a message over TLS")
        assert landed_graphs(tmp_path / "l") == ["http://example.org/g3"]
        time.sleep(1)
        assert not untrusting.status.connected and untrusting.status.connects == 0   # the system's CAs do not sign it
        publisher.loop_stop()
    finally:
        trusted.stop()
        untrusting.stop()
        broker.stop()


def test_a_message_larger_than_the_limit_is_set_aside_unread_with_its_beginning(tmp_path):
    from rspstar.store.mqtt import MAX_MESSAGE_BYTES, QUARANTINED_PREFIX
    quarantined = []
    source = MqttSource("s", "mqtt://127.0.0.1:1", {"#": STREAM}, "nquads", tmp_path / "l",
                        lambda payload, reason, line: quarantined.append((payload.text, reason)))
    source.client = Acks()
    huge = reading(1) * (MAX_MESSAGE_BYTES // len(reading(1)) + 1)
    source.commit([_Received("s/1", huge, 1, 1, False, False, 0), _Received("s/1", reading(2), 2, 1, False, False, 0)])
    [(kept, reason)] = quarantined
    assert kept == huge[:QUARANTINED_PREFIX] and "a message of %d bytes, larger than" % len(huge) in reason
    assert source.client.acked == [1, 2] and landed_graphs(tmp_path / "l") == ["http://example.org/g2"]


def test_the_network_thread_waits_while_too_many_messages_are_uncommitted(tmp_path, monkeypatch):
    import rspstar.store.mqtt as module
    monkeypatch.setattr(module, "MAX_PENDING_MESSAGES", 3)
    source = MqttSource("s", "mqtt://127.0.0.1:1", {"#": STREAM}, "nquads", tmp_path / "l", lambda *a: None)
    source.client = Acks()

    class Message:
        def __init__(self, k):
            self.topic, self.payload, self.mid, self.qos, self.dup, self.retain = "s/1", reading(k), k, 1, False, False

    arrived = threading.Event()

    def network_thread():
        for k in range(1, 6):
            source._on_message(None, None, Message(k))
        arrived.set()

    receiving = threading.Thread(target=network_thread, daemon=True)
    receiving.start()
    receiving.join(0.5)
    assert not arrived.is_set() and source.status.received == 3      # held back at the bound
    source._committer = threading.Thread(target=source._commit_loop, daemon=True)
    source._committer.start()                                        # committing makes room
    assert arrived.wait(10)
    wait_for(lambda: source.status.landed == 5, what="all five landed")
    source.stop()
    assert source.client.acked == [1, 2, 3, 4, 5]
