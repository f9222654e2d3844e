import json

import pyoxigraph as ox

from rspstar.store.codec import Payload, canonical, decode
from rspstar.store.rdf_input import read_elements
from rspstar.translator.temporal import parse_instant

T0 = parse_instant("2026-03-01T08:00:00Z")
STREAM = "http://example.org/s"
TS = "<http://www.w3.org/ns/prov#generatedAtTime>"
DT = "<http://www.w3.org/2001/XMLSchema#dateTime>"


def nquads(k: int) -> str:
    return ('<http://example.org/e%d> %s "2026-03-01T08:00:0%dZ"^^%s .\n'
            '<http://example.org/o> <http://example.org/v> "%d" <http://example.org/e%d> .' % (k, TS, k, DT, k, k))


def test_a_bad_line_is_set_aside_with_its_line_in_the_source_and_the_others_are_read():
    text = "\n".join([nquads(1), "<http://a> <http://b> .", nquads(2)])
    decoded = decode(Payload(STREAM, "nquads", "in.nq", text, T0, line=10))
    assert [e.graph for e in decoded.elements[STREAM]] == ["http://example.org/e1", "http://example.org/e2"]
    [rejected] = decoded.rejected
    assert rejected.line == 12 and rejected.payload.text == "<http://a> <http://b> ."
    assert str(rejected.error()).startswith("in.nq:12")


def test_a_document_with_an_error_is_rejected_whole_with_line_and_column():
    text = "@prefix ex: <http://example.org/> .\nex:g { ex:a ex:b }"
    decoded = decode(Payload(STREAM, "trig", "in.trig", text, T0))
    assert decoded.elements == {}
    [rejected] = decoded.rejected
    assert (rejected.line, rejected.column is not None) == (2, True)


def test_envelopes_go_to_their_own_streams_and_bad_ones_are_rejected_by_line():
    lines = [json.dumps({"stream": "http://example.org/a", "time": "2026-03-01T08:00:01Z",
                         "data": "<http://a> <http://b> 1 ."}),
             json.dumps({"time": 5, "data": "<http://a> <http://b> 2 ."}),
             json.dumps({"data": "<http://a> <http://b> 3 ."})]
    decoded = decode(Payload(STREAM, "jsonl", "in.jsonl", "\n".join(lines), T0, line=1))
    assert {s: [e.timestamp for e in es] for s, es in decoded.elements.items()} == \
        {"http://example.org/a": [T0 + 1_000_000], STREAM: [T0]}
    [rejected] = decoded.rejected
    assert rejected.line == 2 and 'field "time"' in rejected.reason


def test_graphs_the_engine_reserves_are_rejected():
    text = '<urn:rspstar:batches> %s "2026-03-01T08:00:00Z"^^%s .\n<http://a> <http://b> \"1\" <urn:rspstar:batches> .' % (
        TS, DT)
    decoded = decode(Payload(STREAM, "nquads", "in.nq", text, T0, line=1))
    assert decoded.elements == {}
    assert "reserved by the engine" in decoded.rejected[0].reason


def test_an_unknown_format_is_a_reject_not_an_exception():
    decoded = decode(Payload(STREAM, "csv", "in.csv", "a,b", T0))
    assert "unknown format" in decoded.rejected[0].reason


def test_the_canonical_form_reads_back_into_the_same_elements():
    trig = ('@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> .\n'
            'ex:e1 prov:generatedAtTime "2026-03-01T08:00:01.5+01:00"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
            'ex:e1 { ex:o ex:v 1 {| ex:confidence 0.9 |} . }\n'
            '_:untimed { ex:o ex:v 2 . }\n')
    first = decode(Payload(STREAM, "trig", "in.trig", trig, T0)).elements[STREAM]
    again = read_elements(canonical(first), "again.nq", ox.RdfFormat.N_QUADS).elements
    assert [(e.graph, e.timestamp, e.timestamp_literal) for e in again] == \
        [(e.graph, e.timestamp, e.timestamp_literal) for e in first]
    assert [len(e.quads) for e in again] == [len(e.quads) for e in first] == [3, 1]


def test_bytes_that_are_not_utf8_are_set_aside_with_their_line_never_replaced():
    lines = [b'<http://example.org/e1> <http://www.w3.org/ns/prov#generatedAtTime> '
             b'"2026-03-01T08:00:01Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .',
             b'<http://example.org/o1> <http://example.org/v> "caf\xe9" <http://example.org/e1> .',
             b'<http://example.org/o1> <http://example.org/w> "caf\xc3\xa9" <http://example.org/e1> .']
    decoded = decode(Payload(STREAM, "nquads", "in.nq", b"\n".join(lines), T0, line=1))
    [rejected] = decoded.rejected
    assert (rejected.line, rejected.reason) == (2, "not UTF-8: byte 0xE9 at byte 52 of the line")
    [element] = decoded.elements[STREAM]
    assert [q.object.value for q in element.quads] == ["caf\u00e9"]           # the good line, whole
    whole = decode(Payload(STREAM, "trig", "in.trig", b"\n".join(lines), T0))
    assert not whole.elements and whole.rejected[0].line == 2 and "not UTF-8" in whole.rejected[0].reason


def test_an_envelope_nested_too_deep_for_the_json_reader_is_set_aside_with_its_line():
    from rspstar.store.codec import decode_all
    good = '{"time": "2026-03-01T08:00:00Z", "data": "<http://a> <http://b> 1 ."}'
    deep = '{"time": "2026-03-01T08:00:00Z", "data": "<http://a> <http://b> 1 .", "x": %s}' % ("[" * 100_000 + "]" * 100_000)
    decoded = decode_all([Payload("http://s", "jsonl", "mqtt topic", good + "\n" + deep, 0, line=1)])
    assert len(decoded.elements["http://s"]) == 1
    [rejected] = decoded.rejected
    assert rejected.line == 2 and "nested too deeply" in rejected.reason, rejected.reason
