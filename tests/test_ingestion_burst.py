"""Nothing acknowledged is lost to Spark: a burst of large posts (or MQTT messages) is taken in
micro-batches bounded in bytes, so that no burst exceeds the JVM's heap; a JVM that dies anyway
is started again and the landed files are ingested again, exactly once; a landed file that the
pipeline cannot take is set aside with the reason instead of killing the JVM for ever.

Each test runs `rspstar serve` in a process of its own, as the attack did (issue 60)."""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
import requests

from mqtt_broker import Broker, client
from served_engine import Served

pytestmark = pytest.mark.slow
STREAM = "http://example.org/burst"
ELEMENTS = 50_000                       # per post: 8.3 MB of N-Quads, as in the attack


def nquads(first: int, count: int) -> bytes:
    """`count` elements of two quads each (about 166 bytes an element)."""
    return "".join(
        '<http://example.org/e%d> <http://www.w3.org/ns/prov#generatedAtTime> '
        '"2026-03-01T08:%02d:%02dZ"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
        '<http://example.org/s%d> <http://example.org/value> "%d" <http://example.org/e%d> .\n'
        % (k, (k // 60) % 60, k % 60, k % 100, k, k) for k in range(first, first + count)).encode()


def envelopes(first: int, count: int) -> bytes:
    return "".join(json.dumps({"time": "2026-03-01T08:%02d:%02dZ" % ((k // 60) % 60, k % 60),
                               "graph": "http://example.org/m%d" % k,
                               "data": '<http://example.org/s%d> <http://example.org/value> "%d" .' % (k % 100, k)})
                   + "\n" for k in range(first, first + count)).encode()


CONFIG = """
[http]
token = ""
[[sources]]
name = "landing"
kind = "files"
stream = "%s"
""" % STREAM


def post_until_taken(base: str, body: bytes, content_type: str = "application/n-quads") -> requests.Response:
    """A well-behaved client: a 503 with Retry-After is tried again after it."""
    for _ in range(60):
        answer = requests.post(base + "/streams", params={"stream": STREAM}, data=body,
                               headers={"Content-Type": content_type}, timeout=120)
        if answer.status_code != 503:
            return answer
        time.sleep(float(answer.headers["Retry-After"]))
    raise AssertionError("the engine never took the post: %s" % answer.text)


@pytest.fixture
def served(tmp_path):
    engine = Served(tmp_path, CONFIG)
    yield engine
    log = engine.stop()
    assert "stopped cleanly" in log, log[-3000:]


def test_a_burst_of_large_posts_is_ingested_whole_without_exhausting_the_jvm(served):
    # Before: four posts of 50,000 elements (8.3 MB each) within 12 s, each answered 202, ended
    # Spark's JVM with OutOfMemoryError: Java heap space; the sources never came back ("Connection
    # refused") and 150,000 of the 200,000 acknowledged elements were never ingested.
    served.start()
    answers = []
    threads = [threading.Thread(target=lambda k=k: answers.append(post_until_taken(served.base, nquads(k * ELEMENTS,
                                                                                                        ELEMENTS))))
               for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [a.status_code for a in answers] == [202] * 4, [a.text for a in answers]
    acknowledged = sum(a.json()["elements"] for a in answers)
    assert acknowledged == 4 * ELEMENTS
    served.wait_for(lambda: served.ingested(STREAM) >= acknowledged, 400, "every acknowledged element")
    time.sleep(2)
    listed = {s["stream"]: s for s in served.streams()["streams"]}[STREAM]
    assert listed["ingested"] == acknowledged and listed["quarantined"] == 0, listed
    assert "OutOfMemoryError" not in served.tail(10**7)
    assert served.health()["status"] == "ok", served.health()


def test_large_mqtt_messages_are_ingested_whole_without_exhausting_the_jvm(tmp_path):
    # Before: two MQTT messages of 7.7 MB were enough to end the JVM (the attack; here three
    # published back to back, which a commit group lands together, end it every time), and after
    # a restart it died again at once on the same landing files.
    broker = Broker(tmp_path / "broker").start()
    served = Served(tmp_path, CONFIG + """
[[sources]]
name = "sensors"
kind = "mqtt"
broker = "%s"
topic = "sensors/#"
stream = "%s"
format = "jsonl"
""" % (broker.url, STREAM))
    try:
        served.start()
        served.wait_for(lambda: served.streams()["sources"]["sensors"]["mqtt"]["connected"], 60, "the subscription")
        publisher = client(broker, client_id="big-sensor", clean=False)
        acknowledged = []
        publisher.on_publish = lambda c, userdata, mid, reason, properties: acknowledged.append(mid)
        messages = [envelopes(k * 53_000, 53_000) for k in range(3)]
        assert all(7_000_000 < len(m) < 9_000_000 for m in messages), [len(m) for m in messages]
        for message in messages:
            publisher.publish("sensors/big", message, qos=1)
        served.wait_for(lambda: len(acknowledged) == 3, 120, "the broker's acknowledgements")
        served.wait_for(lambda: served.ingested(STREAM) >= 159_000, 400, "every element of the messages")
        time.sleep(2)
        listed = {s["stream"]: s for s in served.streams()["streams"]}[STREAM]
        assert listed["ingested"] == 159_000 and listed["quarantined"] == 0, listed
        assert "OutOfMemoryError" not in served.tail(10**7)
        publisher.loop_stop()
    finally:
        log = served.stop()
        broker.stop()
    assert "stopped cleanly" in log, log[-3000:]


def test_a_jvm_that_dies_is_started_again_and_what_was_landed_is_ingested_once(served):
    # Before: once Spark's JVM was gone, every restart of the sources failed ("Connection
    # refused") for as long as the engine ran, and nothing landed after was ingested.
    served.start()
    first = post_until_taken(served.base, nquads(0, 20_000))
    assert first.status_code == 202
    served.wait_for(lambda: served.ingested(STREAM) > 0, 120, "ingestion to start")
    [jvm] = served.java()
    second = post_until_taken(served.base, nquads(20_000, 40_000))
    assert second.status_code == 202
    os.kill(jvm, signal.SIGKILL)                 # mid-ingestion, as an OutOfMemoryError ends it
    third = post_until_taken(served.base, nquads(60_000, 20_000))
    assert third.status_code == 202
    served.wait_for(lambda: served.ingested(STREAM) >= 80_000, 400, "every acknowledged element")
    time.sleep(3)
    listed = {s["stream"]: s for s in served.streams()["streams"]}[STREAM]
    assert listed["ingested"] == 80_000 and listed["quarantined"] == 0, listed
    served.wait_for(lambda: served.health()["status"] == "ok", 60, "/health ok again")
    assert served.java() and served.java() != [jvm]
    assert "Spark's JVM is gone" in served.tail(10**7)


def test_a_landed_file_the_pipeline_cannot_take_is_set_aside_with_the_reason(served):
    # A file dropped straight into the landing directory, too large for the JVM's heap: before,
    # it ended the JVM, and after every restart again, at once, for as long as it was there.
    # Now: after it has ended the JVM twice, it is set aside (quarantine/, with the reason) and
    # never read again; what lands after it is ingested.
    served.start()
    landing = served.data / "landing"
    huge = landing / ".huge.nq.tmp"
    huge.write_bytes(nquads(0, 600_000))                 # about 100 MB of N-Quads in one file
    os.replace(huge, landing / "huge.nq")
    served.wait_for(lambda: list((served.data / "quarantine").glob("*.reason.json")), 600,
                    "the file to be set aside")
    [reason] = [json.loads(p.read_text()) for p in (served.data / "quarantine").glob("*.reason.json")]
    assert reason["origin"].endswith("huge.nq") and "JVM" in reason["reason"], reason
    assert not (landing / "huge.nq").stat().st_size          # nothing of it left to read again
    after = post_until_taken(served.base, nquads(1_000_000, 1_000))
    assert after.status_code == 202
    served.wait_for(lambda: served.ingested(STREAM) >= 1_000, 300, "the post after it")
    served.wait_for(lambda: served.health()["status"] == "ok", 120, "/health ok again")
    assert served.ingested(STREAM) == 1_000
