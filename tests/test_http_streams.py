"""The streams blueprint: posted bodies decoded at the edge and landed for Spark, refused with their
line when an element is bad, and what each stream holds."""
import json

import pyoxigraph as ox
import pytest

from rspstar.endpoint.http import HttpSettings, create_app
from http_app import AUTH, RSPQL, STREAM


def test_posted_streams_land_durably_for_spark_and_streams_are_listed(client, engine, tmp_path):
    response = client.post("/streams", query_string={"stream": "http://example.org/s"}, data=STREAM,
                           content_type="application/trig", headers=AUTH)
    assert response.status_code == 202 and response.get_json()["elements"] == 1
    landed = list((tmp_path / "landing").rglob("*"))
    [file] = [p for p in landed if p.is_file()]
    assert file.parent.name == "http%3A%2F%2Fexample.org%2Fs" and file.suffix == ".nq"
    assert response.get_json()["accepted"] == [file.name]
    # Decoded once, here: what lands is the canonical form of the body's elements.
    assert set(ox.parse(file.read_bytes(), format=ox.RdfFormat.N_QUADS)) == \
        set(ox.parse(STREAM, format=ox.RdfFormat.TRIG))
    bad = client.post("/streams", query_string={"stream": "http://example.org/s"},
                      data=b"@prefix ex: <http://example.org/> .\nex:g { ex:a ex:b }",
                      content_type="application/trig", headers=AUTH)
    assert bad.status_code == 400 and bad.get_json()["line"] == 2
    assert len([p for p in (tmp_path / "landing").rglob("*") if p.is_file()]) == 1
    engine.store.publish("http://example.org/s",
                         engine.store.documents.stage("http://example.org/s", STREAM, ox.RdfFormat.TRIG, "s").staged)
    listed = client.get("/streams").get_json()["streams"]
    assert listed == [{"stream": "http://example.org/s", "elements": 1, "ingested": 1, "evicted": 0, "late": 0,
                       "quarantined": 2, "watermark": None, "latest": "2026-03-01T08:00:00Z"}]


def test_streams_without_a_landing_source_are_unavailable(engine):
    client = create_app(engine, HttpSettings()).test_client()
    response = client.post("/streams", query_string={"stream": "http://example.org/s"}, data=STREAM,
                           content_type="application/trig")
    assert response.status_code == 503


@pytest.mark.parametrize("fields,reason", [
    ({"time": 5}, 'field "time": a string is required, got 5'),
    ({"graph": "not an iri"}, 'field "graph": not an IRI'),
    ({"graph": "urn:rspstar:batches"}, "reserved by the engine"),
])
def test_a_poison_envelope_post_is_refused_with_its_line_and_field(client, tmp_path, fields, reason):
    good = json.dumps({"time": "2026-03-01T08:00:01Z", "data": "<http://a> <http://b> <http://c> ."})
    bad = json.dumps(dict({"time": "2026-03-01T08:00:02Z", "data": "<http://a> <http://b> <http://c> ."}, **fields))
    response = client.post("/streams", query_string={"stream": "http://test.example/p"}, data=good + "\n" + bad + "\n",
                           content_type="application/x-ndjson", headers=AUTH)
    assert response.status_code == 400
    body = response.get_json()
    assert reason in body["message"] and body["line"] == 2
    assert not (tmp_path / "landing").exists() or not any((tmp_path / "landing").rglob("*.nq"))


@pytest.mark.parametrize("body,content_type,line", [
    (b"@prefix prov: <http://www.w3.org/ns/prov#> .\n<http://g> prov:generatedAtTime \"yesterday\" .\n"
     b"<http://g> { <http://a> <http://b> <http://c> }", "application/trig", None),
    (b"<http://g> <http://www.w3.org/ns/prov#generatedAtTime> \"2026-03-01T08:00:00Z\" .\n"
     b"<http://a> <http://b> <http://c> <urn:rspstar:timestamps:x> .\n", "application/n-quads", None),
    (b'{"time": "2026-03-01T08:00:01Z", "data": "<http://a> <http://b> ."}\n', "application/x-ndjson", 1),
])
def test_a_body_is_refused_for_what_would_only_be_quarantined_later(client, tmp_path, body, content_type, line):
    # The check at the edge used to be a syntax scan: a timestamp that is no dateTime, a graph
    # the engine reserves or envelope data that does not parse got 202 and then went to
    # quarantine. Now the same decoding as the batch writer's decides.
    response = client.post("/streams", query_string={"stream": "http://example.org/s"}, data=body,
                           content_type=content_type, headers=AUTH)
    assert response.status_code == 400, response.get_json()
    assert response.get_json().get("line") == line
    assert not (tmp_path / "landing").exists() or not any(p.is_file() for p in (tmp_path / "landing").rglob("*"))


def test_envelopes_of_several_streams_land_together_each_naming_its_stream(client, tmp_path):
    # They landed as a folder and a file per stream, each fsynced (issue 60: 5,000 streams in
    # one post, 5,000 of each): now as one file of envelopes.
    lines = [json.dumps({"stream": "http://example.org/%s" % s, "time": "2026-03-01T08:00:0%dZ" % k,
                         "data": "<http://a> <http://b> %d ." % k}) for k, s in enumerate("aab")]
    response = client.post("/streams", query_string={"stream": "http://example.org/s"}, data="\n".join(lines),
                           content_type="application/x-ndjson", headers=AUTH)
    assert response.status_code == 202 and response.get_json()["elements"] == 3
    [landed] = [p for p in (tmp_path / "landing").rglob("*") if p.is_file()]
    assert landed.parent.name == "+streams" and landed.suffix == ".jsonl"
    envelopes = [json.loads(line) for line in landed.read_text().splitlines()]
    assert [e["stream"] for e in envelopes] == ["http://example.org/a", "http://example.org/a", "http://example.org/b"]


def test_stream_iris_and_sink_urls_longer_than_a_file_name_are_fine(engine, tmp_path):
    # Both used to be file names as they were: errno 36, a 500.
    from rspstar.store.landing import stream_of_landing_file
    client = create_app(engine, HttpSettings(landing_dir=tmp_path / "landing")).test_client()
    stream = "http://example.org/" + "s" * 400
    posted = client.post("/streams", query_string={"stream": stream}, data=STREAM, content_type="application/trig")
    assert posted.status_code == 202
    [dropped] = [p for p in (tmp_path / "landing").rglob("*.nq")]
    assert stream_of_landing_file(tmp_path / "landing", dropped, "default") == stream
    sink = "http://localhost:9/" + "a" * 400
    registered = client.post("/queries", json={"query": RSPQL, "id": "long", "sinks": [sink]})
    assert registered.status_code == 201
    assert engine.get("long").describe()["sink_backlog"] == {sink: 0}


def test_bytes_that_are_not_utf8_are_refused_with_their_line_and_byte_on_every_route(client, tmp_path):
    # A Latin-1 'é' in an N-Quads literal was decoded with a replacement character and stored.
    body = (b'<http://example.org/e9> <http://www.w3.org/ns/prov#generatedAtTime> '
            b'"2026-03-01T08:00:09Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
            b'<http://example.org/o9> <http://example.org/v> "caf\xe9" <http://example.org/e9> .\n')
    posted = client.post("/streams?stream=http://example.org/s", data=body, content_type="application/n-quads",
                         headers=AUTH)
    assert posted.status_code == 400
    assert "not UTF-8: byte 0xE9 at line 2, byte 52 of the line" in posted.get_json()["message"]
    assert not list((tmp_path / "landing").rglob("*.nq"))                       # nothing landed
    for path, content_type, data in (("/queries", "application/sparql-query", b"SELECT * WHERE { ?s ?p \"\xe9\" }"),
                                     ("/update", "application/sparql-update", b"INSERT DATA { <a:b> <a:c> \"\xe9\" }"),
                                     ("/sparql", "application/sparql-query", b"ASK { ?s ?p \"\xe9\" }")):
        answer = client.post(path, data=data, content_type=content_type, headers=AUTH)
        assert answer.status_code == 400 and "byte 0xE9 at line 1" in answer.get_json()["message"], path
    # A charset other than UTF-8 is refused as a media type the server does not take.
    labelled = client.post("/sparql", data="ASK {}".encode("utf-16"), headers=AUTH,
                           content_type="application/sparql-query; charset=UTF-16")
    assert labelled.status_code == 415 and "charset=UTF-16" in labelled.get_json()["message"]
    form = client.post("/sparql", data="query=ASK%20%7B%22%E9%22%7D", content_type="application/x-www-form-urlencoded")
    assert form.status_code == 400 and "not UTF-8" in form.get_json()["message"]


@pytest.mark.parametrize("stream", ["temp", "<http://example.org/s>", "http://example.org/a b"])
def test_a_stream_named_as_no_other_door_takes_it_is_refused_naming_why(client, tmp_path, stream):
    """POST /streams checks the stream name as push, replay and configuration do: a relative
    name would reach no query."""
    response = client.post("/streams", query_string={"stream": stream}, data=STREAM, content_type="application/trig",
                           headers=AUTH)
    assert response.status_code == 400
    answer = response.get_json()
    assert answer["error"] == "StreamNameError" and "the stream parameter" in answer["message"]
    assert not [p for p in (tmp_path / "landing").rglob("*") if p.is_file()]
