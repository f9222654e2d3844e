"""What POST /streams makes of a body, as a client meets it: every element it answers 202 for is
stored (a body posted twice is two posts, not a duplicate set aside in silence), an element
already stored is answered 409 naming it, an empty body says so, and plain triples are one
element stamped on arrival, as the Python API's `push` makes them."""
import json

import pyoxigraph as ox
import pytest

from http_app import AUTH, STREAM, T0
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.store.batches import BatchWriter
from rspstar.store.codec import Payload
from rspstar.store.disk import DiskGuard
from rspstar.store.landing import LandedFiles
from rspstar.translator.temporal import format_instant

S_IRI = "http://example.org/s"
ENVELOPE = json.dumps({"time": "2026-03-01T08:00:01Z", "data": "<http://example.org/a> <http://example.org/v> 1 ."})
BLANK_GRAPH = (b'@prefix prov: <http://www.w3.org/ns/prov#> .\n'
               b'_:g prov:generatedAtTime "2026-03-01T08:00:02Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
               b'_:g { <http://example.org/a> <http://example.org/v> 2 . }\n')


def post(client, data, content_type, stream=S_IRI):
    return client.post("/streams", query_string={"stream": stream}, data=data, content_type=content_type,
                       headers=AUTH)


def store_landed(engine, landing, quarantine, batch=0, landed=None):
    """Spark's part, as the files source does it: every landing file not stored yet, one batch."""
    files = sorted(p for p in landing.rglob("*") if p.is_file() and not p.name.startswith("."))
    from rspstar.store import formats
    from rspstar.store.landing import stream_of_landing_file
    payloads = [Payload(stream_of_landing_file(landing, p, S_IRI), formats.by_path(p).name, str(p), p.read_bytes(), 0,
                        line=1) for p in files]
    writer = BatchWriter(engine.store, "landing", quarantine, acknowledged=landed)
    report = writer.write(batch, payloads)
    for p in files:
        p.rename(p.with_name("." + p.name + ".done"))    # read: the next batch does not take it again
    return report


@pytest.mark.parametrize("body,content_type", [(ENVELOPE + "\n", "application/x-ndjson"),
                                               (BLANK_GRAPH, "application/trig")])
def test_a_body_posted_twice_is_two_elements_each_stored(client, engine, tmp_path, body, content_type):
    # An envelope without a graph name was named by a digest of "request body", its line and
    # its text, and a blank graph name by a digest of "request body" and its order: posted
    # again, the same name, and the second post (answered 202) was quarantined as a
    # duplicate, with an empty payload.
    first, second = post(client, body, content_type), post(client, body, content_type)
    assert (first.status_code, second.status_code) == (202, 202), (first.get_json(), second.get_json())
    report = store_landed(engine, tmp_path / "landing", tmp_path / "quarantine")
    assert report.quarantined == {} and report.stored == {S_IRI: 2}
    assert engine.store.streams()[S_IRI].elements == 2


def test_a_duplicate_set_aside_keeps_its_content(engine, tmp_path):
    # The quarantine kept an empty payload for an element whose name was taken: nothing to
    # look at or to post again.
    writer = BatchWriter(engine.store, "landing", tmp_path / "quarantine")
    writer.write(0, [Payload(S_IRI, "trig", "a.trig", STREAM, 0)])
    assert writer.write(1, [Payload(S_IRI, "trig", "b.trig", STREAM, 0)]).quarantined == {S_IRI: 1}
    [data] = (tmp_path / "quarantine").glob("*.data")
    kept = set(ox.parse(data.read_bytes(), format=ox.RdfFormat.N_QUADS))
    assert kept == set(ox.parse(STREAM, format=ox.RdfFormat.TRIG))


def test_an_element_already_stored_is_answered_409_naming_it(client, engine, tmp_path):
    assert post(client, STREAM, "application/trig").status_code == 202
    store_landed(engine, tmp_path / "landing", tmp_path / "quarantine")
    again = post(client, STREAM, "application/trig")
    assert again.status_code == 409, again.get_json()
    assert again.get_json()["error"] == "DuplicateElementError"
    assert "<http://example.org/e0>" in again.get_json()["message"]
    twice = STREAM + b"ex:e1 prov:generatedAtTime \"2026-03-01T08:00:01Z\"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n"
    repeated = post(client, twice + b"ex:e1 { ex:o1 ex:v 2 . }\n", "application/trig")   # e0 stored, e1 fresh
    assert repeated.status_code == 409 and "<http://example.org/e0>" in repeated.get_json()["message"]
    assert len([p for p in (tmp_path / "landing").rglob("*.nq")]) == 0      # nothing of either landed


def test_an_element_landed_and_not_yet_stored_is_answered_409_too(engine, tmp_path):
    landed = LandedFiles()
    client = create_app(engine, HttpSettings(token="s3cret", landing_dir=tmp_path / "landing"),
                        disk=DiskGuard(tmp_path, 0, landed)).test_client()
    assert post(client, STREAM, "application/trig").status_code == 202
    again = post(client, STREAM, "application/trig")
    assert again.status_code == 409 and "not stored yet" in again.get_json()["message"], again.get_json()
    envelopes = "\n".join([json.dumps({"graph": "http://example.org/e8", "data": "<http://a> <http://b> 1 ."})] * 2)
    repeated = post(client, envelopes, "application/x-ndjson")
    assert repeated.status_code == 409 and "twice in the body" in repeated.get_json()["message"]
    # Once stored, the store answers for them.
    store_landed(engine, tmp_path / "landing", tmp_path / "quarantine", landed=landed)
    assert landed.bytes() == 0 and not landed.claim(["http://example.org/e0"])
    landed.release(["http://example.org/e0"])
    stored = post(client, STREAM, "application/trig")
    assert stored.status_code == 409 and "already stored" in stored.get_json()["message"]


@pytest.mark.parametrize("body", [b"", b"  \n\t\n"])
def test_an_empty_body_says_so_and_how_curl_reads_a_file(client, body):
    answer = post(client, body, "text/turtle")
    assert answer.status_code == 400
    message = answer.get_json()["message"]
    assert "the body is empty" in message and "--data-binary '@" in message, message


@pytest.mark.parametrize("content_type,body", [
    ("text/turtle", b"@prefix ex: <http://example.org/> .\nex:a ex:v 1 ; ex:w ex:b .\n"),
    ("application/n-triples", b"<http://example.org/a> <http://example.org/v> \"1\" .\n"
                              b"<http://example.org/a> <http://example.org/w> <http://example.org/b> .\n"),
    ("application/n-quads", b"<http://example.org/a> <http://example.org/v> \"1\" .\n"),
])
def test_plain_triples_are_one_element_stamped_on_arrival(client, engine, tmp_path, content_type, body):
    # They were refused: "the body holds no stream element", while push() takes them.
    answer = post(client, body, content_type)
    assert answer.status_code == 202, answer.get_json()
    assert answer.get_json()["elements"] == 1
    report = store_landed(engine, tmp_path / "landing", tmp_path / "quarantine")
    assert report.stored == {S_IRI: 1} and report.quarantined == {}
    [element] = report.elements[S_IRI]
    assert element.timestamp == T0 and element.timestamp_literal.value == format_instant(T0)
    assert {(q.subject, q.predicate, q.object) for q in element.quads} == \
        {(t.subject, t.predicate, t.object) for t in ox.parse(body, format=ox.RdfFormat.TURTLE)}
    # Posted again, it is another element (stamped on its own arrival).
    assert post(client, body, content_type).status_code == 202


def test_plain_triples_beside_elements_are_refused_naming_them(client):
    body = STREAM + b"ex:stray ex:v 1 .\n"
    answer = post(client, body, "application/trig")
    assert answer.status_code == 400 and "not timestamps" in answer.get_json()["message"], answer.get_json()
