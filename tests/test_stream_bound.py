"""Streams are bounded in number ([engine] max_streams) through every door, and landing the
elements of many streams costs one file, not a folder, a file and their fsyncs per stream."""
import json
import os

import pyoxigraph as ox
import pytest

from http_app import AUTH, T0
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import EngineConfig, Runner
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.store.batches import BatchWriter
from rspstar.store.codec import Payload
from rspstar.store.disk import DiskGuard
from rspstar.store.landing import LandedFiles
from rspstar.store.mqtt import MqttSource, _Received
from rspstar.store.stream_store import StreamStore


def envelopes(streams, first=0) -> str:
    return "\n".join(json.dumps({"stream": s, "time": "2026-03-01T08:00:%02dZ" % ((first + k) % 60),
                                 "data": "<http://example.org/o%d> <http://example.org/v> %d ." % (first + k, k)})
                     for k, s in enumerate(streams)) + "\n"


def stream(k) -> str:
    return "http://example.org/stream/%d" % k


def app(tmp_path, max_streams, landed=None):
    engine = Runner(StreamStore(), VirtualClock(T0), EngineConfig(data_dir=tmp_path, max_streams=max_streams))
    disk = DiskGuard(tmp_path, 0, landed) if landed is not None else None
    return engine, create_app(engine, HttpSettings(token="s3cret", landing_dir=tmp_path / "landing"),
                              disk=disk).test_client()


def post(client, body):
    return client.post("/streams", query_string={"stream": stream(0)}, data=body, content_type="application/x-ndjson",
                       headers=AUTH)


def files_source_payloads(landing):
    """The landing directory's files as the files source hands them to the batch writer."""
    from rspstar.store.ingestion import SOURCE_KINDS, SourceConfig
    source = SourceConfig("landing", "files", stream=stream(0), path=str(landing))
    rows = [{"stream": stream(0), "origin": p.as_uri(), "text": p.read_bytes(), "ingest_time": T0}
            for p in sorted(landing.rglob("*")) if p.is_file() and not p.name.startswith(".")]
    return SOURCE_KINDS["files"].payloads(source, rows)


def test_one_post_for_a_thousand_streams_lands_one_file_and_each_element_reaches_its_stream(tmp_path):
    # Before: a folder and a file per stream, each fsynced (5,000 streams: 3.4 s).
    engine, client = app(tmp_path, 2000)
    fsyncs = []
    real = os.fsync
    os.fsync = lambda fd: (fsyncs.append(fd), real(fd))[1]
    try:
        answer = post(client, envelopes([stream(k) for k in range(1000)]))
    finally:
        os.fsync = real
    assert answer.status_code == 202, answer.get_json()
    landing = tmp_path / "landing"
    assert [p.relative_to(landing).parts[0] for p in landing.rglob("*") if p.is_file()] == ["+streams"]
    assert len(fsyncs) <= 3                       # the file and its folder, not a thousand of each
    report = BatchWriter(engine.store, "landing", tmp_path / "quarantine").write(0, files_source_payloads(landing))
    assert report.quarantined == {} and report.stored == {stream(k): 1 for k in range(1000)}


def test_a_post_past_the_bound_on_streams_is_refused_naming_it(tmp_path):
    landed = LandedFiles()
    engine, client = app(tmp_path, 3, landed)
    assert post(client, envelopes([stream(0), stream(1)])).status_code == 202
    refused = post(client, envelopes([stream(2), stream(3)]))       # 2 + 2 > 3, though none is stored yet
    assert refused.status_code == 400, refused.get_json()
    message = refused.get_json()["message"]
    assert "[engine] max_streams" in message and "<%s>" % stream(3) in message and "3 streams" in message, message
    assert len([p for p in (tmp_path / "landing").rglob("*") if p.is_file()]) == 1     # nothing of it landed
    assert post(client, envelopes([stream(2)])).status_code == 202
    assert post(client, envelopes([stream(0), stream(2)], first=10)).status_code == 202   # streams it holds
    # Stored, the streams still count.
    BatchWriter(engine.store, "landing", tmp_path / "quarantine", acknowledged=landed).write(
        0, files_source_payloads(tmp_path / "landing"))
    assert landed.bytes() == 0 and len(engine.store.streams()) == 3
    assert post(client, envelopes([stream(9)], first=20)).status_code == 400


@pytest.mark.parametrize("decoding", ["driver", "executors"])
def test_any_sources_elements_of_streams_past_the_bound_are_set_aside_with_the_reason(tmp_path, decoding):
    from test_batches import ExecutorDecoding
    kind = BatchWriter if decoding == "driver" else ExecutorDecoding
    store = StreamStore()
    writer = kind(store, "files", tmp_path / "quarantine", max_streams=2)
    payload = Payload(stream(0), "jsonl", "dropped.jsonl", envelopes([stream(k) for k in range(4)]), T0, line=1)
    report = writer.write(0, [payload])
    assert report.stored == {stream(0): 1, stream(1): 1}
    assert report.quarantined == {stream(2): 1, stream(3): 1}
    reasons = [json.loads(p.read_text())["reason"] for p in (tmp_path / "quarantine").glob("*.reason.json")]
    assert len(reasons) == 2 and all("[engine] max_streams" in r for r in reasons)
    kept = [ox.parse(p.read_bytes(), format=ox.RdfFormat.N_QUADS) for p in (tmp_path / "quarantine").glob("*.data")]
    assert all(len(list(quads)) == 2 for quads in kept)        # each element whole: its timestamp and its triple
    # The streams it holds still take elements.
    again = Payload(stream(0), "jsonl", "more.jsonl", envelopes([stream(1), stream(5)], first=30), T0, line=1)
    assert writer.write(1, [again]).stored == {stream(1): 1}


class Acks:
    def __init__(self):
        self.acked = []

    def ack(self, mid, qos):
        self.acked.append(mid)


def test_mqtt_messages_naming_streams_past_the_bound_are_set_aside_before_they_land(tmp_path):
    landing = tmp_path / "mqtt"
    store = StreamStore()
    quarantined = []
    source = MqttSource("s", "mqtt://127.0.0.1:1", {"#": ""}, "jsonl", landing,
                        lambda payload, reason, line: quarantined.append((payload, reason)),
                        max_streams=2, stored_streams=store.streams)
    source.client = Acks()
    source.commit([_Received("t/%d" % k, envelopes([stream(k)], first=k).encode(), k + 1, 1, False, False, T0)
                   for k in range(5)])
    assert source.client.acked == [1, 2, 3, 4, 5]
    folders = sorted(p.name for p in landing.iterdir() if p.is_dir())
    assert len(folders) == 2                                      # no folder for the streams set aside
    assert len(quarantined) == 3 and all("[engine] max_streams" in reason for _, reason in quarantined)
    assert all(payload.text for payload, _ in quarantined)        # kept whole
