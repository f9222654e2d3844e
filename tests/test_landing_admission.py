"""Admission by what the pipeline can hold, before anything is acknowledged: landing files small
beside a micro-batch's bound, an element no micro-batch takes refused (413) or set aside, and
input waiting to be stored bounded ([engine] max_landed_bytes: 503 with Retry-After, or an MQTT
group left unacknowledged at the broker). The Spark side is tests/test_ingestion_burst.py."""
import json
import threading
import time

import pytest

from http_app import AUTH, T0
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import EngineConfig, Runner
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.store.batches import BatchWriter
from rspstar.store.disk import DiskGuard
from rspstar.store.landing import LANDING_FILE_BYTES, LandedFiles, finish_commits, land_elements
from rspstar.store.codec import Payload, decode
from rspstar.store.mqtt import MqttSource, _Received
from rspstar.store.stream_store import StreamStore

STREAM = "http://example.org/s"
MIB = 1 << 20


def nquads(first: int, count: int, size: int = 40) -> bytes:
    return "".join('<http://example.org/e%d> <http://www.w3.org/ns/prov#generatedAtTime> '
                   '"2026-03-01T08:00:01Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
                   '<http://example.org/s%d> <http://example.org/v> "%s" <http://example.org/e%d> .\n'
                   % (k, k, "x" * size, k) for k in range(first, first + count)).encode()


def app(tmp_path, landed):
    engine = Runner(StreamStore(), VirtualClock(T0), EngineConfig(data_dir=tmp_path))
    client = create_app(engine, HttpSettings(token="s3cret", landing_dir=tmp_path / "landing", max_body=64 * MIB),
                        disk=DiskGuard(tmp_path, 0, landed)).test_client()
    return engine, client


def post(client, body):
    return client.post("/streams", query_string={"stream": STREAM}, data=body, content_type="application/n-quads",
                       headers=AUTH)


def landed_files(landing):
    return [p for p in landing.rglob("*") if p.is_file() and not p.name.startswith(".")]


def test_a_large_post_lands_in_small_files_that_appear_together_and_are_stored_whole(tmp_path):
    # One file per post: Spark's micro-batch takes at least one file, however large.
    landed = LandedFiles()
    engine, client = app(tmp_path, landed)
    answer = post(client, nquads(0, 50_000))
    assert answer.status_code == 202, answer.get_json()
    files = landed_files(tmp_path / "landing")
    assert len(files) > 5 and all(p.stat().st_size <= LANDING_FILE_BYTES for p in files)
    assert sorted(answer.get_json()["accepted"]) == sorted(p.name for p in files)
    assert landed.bytes() == sum(p.stat().st_size for p in files)
    writer = BatchWriter(engine.store, "landing", tmp_path / "quarantine", acknowledged=landed)
    for batch, path in enumerate(files):
        writer.write(batch, [Payload(STREAM, "nquads", str(path), path.read_bytes(), 0, line=1)])
    assert engine.store.streams()[STREAM].ingested == 50_000 and landed.bytes() == 0


def test_a_crash_while_a_posts_files_appear_leaves_all_of_them_or_none_at_the_next_start(tmp_path):
    landing = tmp_path / "landing"
    elements = decode(Payload(STREAM, "nquads", "body", nquads(0, 20_000), 0, line=1)).elements
    revealed = []

    def crash_after_two(hidden, final):
        if len(revealed) == 2:
            raise KeyboardInterrupt("killed")
        from rspstar.store.landing import reveal
        reveal(hidden, final)
        revealed.append(final)

    with pytest.raises(KeyboardInterrupt):
        land_elements(landing, elements, reveal_one=crash_after_two, file_bytes=256 * 1024)
    assert len(landed_files(landing)) == 2
    assert finish_commits(landing) > 2                # what a files source does at start
    graphs = [e.graph for p in landed_files(landing)
              for e in decode(Payload(STREAM, "nquads", str(p), p.read_bytes(), 0, line=1)).elements[STREAM]]
    assert len(graphs) == len(set(graphs)) == 20_000


def test_an_element_no_micro_batch_takes_is_refused_413_naming_the_bound(tmp_path):
    landed = LandedFiles(max_element_bytes=64 * 1024)
    _, client = app(tmp_path, landed)
    huge = (b'<http://example.org/big> <http://www.w3.org/ns/prov#generatedAtTime> "2026-03-01T08:00:01Z" .\n' +
            b"".join(b'<http://example.org/s%d> <http://example.org/v> "%s" <http://example.org/big> .\n'
                     % (k, b"x" * 100) for k in range(1000)))
    answer = post(client, nquads(0, 10) + huge)
    assert answer.status_code == 413, answer.get_json()
    message = answer.get_json()["message"]
    assert "<http://example.org/big>" in message and "max_batch_bytes" in message, message
    assert not landed_files(tmp_path / "landing") and landed.bytes() == 0
    assert post(client, nquads(0, 10)).status_code == 202            # the names were let go


def test_posts_past_the_bound_on_input_waiting_to_be_stored_get_503_and_retry_after(tmp_path):
    landed = LandedFiles(max_bytes=2 * MIB)
    engine, client = app(tmp_path, landed)
    assert post(client, nquads(0, 20_000)).status_code == 202        # alone, a post always fits (3.5 MB)
    refused = post(client, nquads(20_000, 10))
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "5"
    assert "[engine] max_landed_bytes" in refused.get_json()["message"]
    writer = BatchWriter(engine.store, "landing", tmp_path / "quarantine", acknowledged=landed)
    writer.write(0, [Payload(STREAM, "nquads", str(p), p.read_bytes(), 0, line=1)
                     for p in landed_files(tmp_path / "landing")])
    assert post(client, nquads(20_000, 10)).status_code == 202        # stored: room again


class Acks:
    def __init__(self):
        self.acked = []

    def ack(self, mid, qos):
        self.acked.append(mid)

    def disconnect(self):
        pass

    def loop_stop(self):
        pass


def test_an_mqtt_element_no_micro_batch_takes_is_set_aside_and_the_rest_lands(tmp_path):
    quarantined = []
    source = MqttSource("s", "mqtt://127.0.0.1:1", {"#": STREAM}, "nquads", tmp_path / "mqtt",
                        lambda payload, reason, line: quarantined.append((payload, reason)), max_element_bytes=64 * 1024)
    source.client = Acks()
    big = (b'<http://example.org/big> <http://www.w3.org/ns/prov#generatedAtTime> "2026-03-01T08:00:01Z" .\n' +
           b"".join(b'<http://example.org/s%d> <http://example.org/v> "%s" <http://example.org/big> .\n'
                    % (k, b"x" * 100) for k in range(1000)))
    source.commit([_Received("a", nquads(0, 1000), 1, 1, False, False, 0), _Received("b", big, 2, 1, False, False, 0)])
    assert source.client.acked == [1, 2]
    assert [reason for _, reason in quarantined if "max_batch_bytes" in reason]
    files = landed_files(tmp_path / "mqtt")
    assert all(p.stat().st_size <= 64 * 1024 + 200 for p in files)
    graphs = [e.graph for p in files for e in decode(Payload(STREAM, "nquads", str(p), p.read_bytes(), 0,
                                                             line=1)).elements[STREAM]]
    assert len(graphs) == 1000 and "http://example.org/big" not in graphs


def test_mqtt_messages_wait_unacknowledged_while_the_input_waiting_to_be_stored_is_at_its_bound(tmp_path):
    landed = LandedFiles(max_bytes=256 * 1024)
    source = MqttSource("s", "mqtt://127.0.0.1:1", {"#": STREAM}, "nquads", tmp_path / "mqtt", lambda *a: None,
                        landed=landed)
    source.client = Acks()
    committer = threading.Thread(target=source._commit_loop, daemon=True)
    committer.start()
    try:
        source._on_message(None, None, type("M", (), {"topic": "a", "payload": nquads(0, 2000), "mid": 1, "qos": 1,
                                                      "dup": False, "retain": False})())
        deadline = time.monotonic() + 10
        while source.client.acked != [1]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        source._on_message(None, None, type("M", (), {"topic": "a", "payload": nquads(2000, 10), "mid": 2, "qos": 1,
                                                      "dup": False, "retain": False})())
        time.sleep(1)
        assert source.client.acked == [1] and source.status.waiting      # the first waits to be stored
        landed.stored(str(p) for p in landed_files(tmp_path / "mqtt"))
        deadline = time.monotonic() + 10
        while source.client.acked != [1, 2]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        source.stop()
