"""Micro-batches into the store: exactly once, quarantine, envelopes, watermarks, late data."""
import gc
import json
import os
import re
import time

import pytest

from rspstar.translator.temporal import format_instant

import pyarrow as pa
import pyoxigraph as ox

from rspstar.store.batches import BatchWriter
from rspstar.store.codec import EncodeBatches, Payload, canonical
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import parse_instant

S = 1_000_000
T0 = parse_instant("2026-03-01T08:00:00Z")
STREAM = "http://example.org/s"
PROV = "http://www.w3.org/ns/prov#generatedAtTime"


def trig(*seconds, annotated=True) -> str:
    lines = ["@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> ."]
    for s in seconds:
        body = "ex:o%d ex:v %d" % (s, s) + (" {| ex:confidence 0.9 |}" if annotated else "")
        lines.append('ex:e%d prov:generatedAtTime "2026-03-01T08:00:%02dZ"^^<http://www.w3.org/2001/XMLSchema#dateTime> .'
                     " ex:e%d { %s . }" % (s, s, s, body))
    return "\n".join(lines)


def nquad(second: int) -> list[str]:
    g = "<http://example.org/n%d>" % second
    return ['%s <http://www.w3.org/ns/prov#generatedAtTime> "2026-03-01T08:00:%02dZ"^^<http://www.w3.org/2001/XMLSchema#dateTime> .'
            % (g, second), '<http://example.org/x%d> <http://example.org/v> "%d"^^<http://www.w3.org/2001/XMLSchema#integer> %s .'
            % (second, second, g)]


class ExecutorDecoding(BatchWriter):
    """A writer of a source decoded on the executors: handed what they hand the driver, the
    payloads encoded (codec.EncodeBatches) and carried through Arrow."""

    def write(self, batch_id, payloads):
        return self.write_encoded(batch_id, encoded_rows(list(payloads), self.timestamp_predicate))


def encoded_rows(payloads, timestamp_predicate=PROV):
    batches = EncodeBatches(lambda rows: payloads, timestamp_predicate)([pa.RecordBatch.from_pylist([{"row": 1}])])
    return [row for batch in batches for row in batch.to_pylist()]


@pytest.fixture(params=["driver", "executors"])
def writer(request):
    """Every behaviour below holds wherever a source's input is decoded."""
    kind = BatchWriter if request.param == "driver" else ExecutorDecoding

    def make(tmp_path, store=None, lateness=0):
        return kind(store or StreamStore(), "files", tmp_path / "quarantine", allowed_lateness=lateness)

    return make


def test_a_batch_lands_once_even_when_replayed(tmp_path, writer):
    w = writer(tmp_path)
    batch = [Payload(STREAM, "trig", "a.trig", trig(0, 1, 2), T0)]
    report = w.write(7, batch)
    assert report.stored == {STREAM: 3} and not report.skipped
    before = len(w.store.oxigraph)
    again = w.write(7, batch)               # Spark replays batch 7 after a crash
    assert again.skipped and len(w.store.oxigraph) == before
    reifiers = list(w.store.oxigraph.quads_for_pattern(
        None, ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#reifies"), None, None))
    assert len(reifiers) == 3
    assert w.store.watermark(STREAM) == T0 + 2 * S
    assert len(w.store.elements_in(STREAM, T0, T0 + 10 * S)) == 3


def test_bad_input_is_quarantined_and_the_rest_of_the_batch_lands(tmp_path, writer):
    w = writer(tmp_path)
    lines = nquad(0) + ["<http://example.org/broken> <http://example.org/v> ."] + nquad(1)
    payloads = [Payload(STREAM, "trig", "good.trig", trig(5), T0),
                Payload(STREAM, "trig", "bad.trig", "@prefix ex: <http://example.org/> .\nex:g { ex:a ex:b }", T0)]
    payloads += [Payload(STREAM, "nquads", "socket:9999", line, T0, line=k + 1) for k, line in enumerate(lines)]
    report = w.write(1, payloads)
    assert report.stored == {STREAM: 3}
    assert report.quarantined == {STREAM: 2}
    reasons = sorted((json.loads(p.read_text())["origin"], json.loads(p.read_text())["line"])
                     for p in (tmp_path / "quarantine").glob("*.reason.json"))
    assert reasons == [("bad.trig", 2), ("socket:9999", 3)]
    data = [p.read_text() for p in (tmp_path / "quarantine").glob("*.data")]
    assert "<http://example.org/broken> <http://example.org/v> ." in data
    assert w.quarantined == {STREAM: 2}
    # A restarted writer counts what its source's quarantine already holds (another source's not).
    assert writer(tmp_path).quarantined == {STREAM: 2}
    assert BatchWriter(StreamStore(), "socket", tmp_path / "quarantine").quarantined == {}


def test_quarantine_keeps_its_budget_on_disk_and_its_counts(tmp_path):
    # Input that never parses would otherwise fill the disk at the rate it arrives.
    folder = tmp_path / "quarantine"
    w = BatchWriter(StreamStore(), "files", folder, quarantine_max_bytes=16_000)
    other = BatchWriter(StreamStore(), "socket", folder, quarantine_max_bytes=16_000)
    bad = "<http://example.org/broken> <http://example.org/v> . # %04d " + "x" * 900
    started, stamped = time.time_ns(), set()
    for k in range(60):
        (w if k % 3 else other).write(k, [Payload(STREAM, "nquads", "bad-%d.nq" % k, bad % k, T0, line=1)])
        for path in set(folder.glob("*-*")) - stamped:     # distinct times even on a coarse clock
            os.utime(path, ns=(started + k, started + k))
            stamped.add(path)
        held = sum(p.stat().st_size for p in folder.glob("*") if not p.name.endswith(".counts.json"))
        assert held <= 16_000 + 16_000 // 16 + 2_000, k           # the budget, checked every 16th of it
    kept = sorted(int(p.read_text().split("# ")[1][:4]) for p in folder.glob("*.data"))
    assert kept == list(range(60 - len(kept), 60)) and len(kept) >= 10     # the newest, of both sources
    assert (w.quarantined, other.quarantined) == ({STREAM: 40}, {STREAM: 20})
    assert BatchWriter(StreamStore(), "files", folder).quarantined == {STREAM: 40}    # after a restart too


def test_quarantine_keeps_at_most_so_many_payloads(tmp_path, monkeypatch, writer):
    import rspstar.store.batches as batches
    monkeypatch.setattr(batches, "QUARANTINE_MAX_PAYLOADS", 32)     # checked every 2
    w = writer(tmp_path)
    lines = ["<http://example.org/broken%d> ." % k for k in range(100)]
    w.write(1, [Payload(STREAM, "nquads", "bad.nq", line, T0, line=k + 1) for k, line in enumerate(lines)])
    assert 30 <= len(list((tmp_path / "quarantine").glob("*.data"))) <= 33
    assert w.quarantined == {STREAM: 100}


def test_a_quarantine_that_cannot_be_written_still_lets_the_batch_land(tmp_path, caplog):
    blocked = tmp_path / "quarantine"
    blocked.write_text("a file where the folder should be")      # as a full or read-only disk would
    w = BatchWriter(StreamStore(), "files", blocked)
    report = w.write(1, [Payload(STREAM, "trig", "good.trig", trig(5), T0),
                         Payload(STREAM, "nquads", "bad.nq", "<http://example.org/broken> .", T0, line=1)])
    assert report.stored == {STREAM: 1} and report.quarantined == {STREAM: 1} and w.quarantined == {STREAM: 1}
    assert "could not keep quarantined bad.nq" in caplog.text


def test_json_envelopes(tmp_path, writer):
    w = writer(tmp_path)
    good = json.dumps({"stream": "http://example.org/other", "time": "2026-03-01T08:00:03Z",
                       "data": "<http://example.org/a> <http://example.org/v> 1 {| <http://example.org/c> 0.5 |} ."})
    named = json.dumps({"time": "2026-03-01T08:00:04Z", "graph": "http://example.org/g4",
                        "data": "<http://example.org/a> <http://example.org/v> 2 ."})
    bad_json = '{"time": "2026-03-01T08:00:05Z", "data": '
    bad_time = json.dumps({"time": "soon", "data": "<http://a> <http://b> <http://c> ."})
    bad_data = json.dumps({"time": "2026-03-01T08:00:06Z", "data": "<http://a> <http://b> ."})
    rows = [Payload(STREAM, "jsonl", "in.jsonl", text, T0, line=k + 1)
            for k, text in enumerate([good, named, bad_json, bad_time, bad_data])]
    report = w.write(1, rows)
    assert report.stored == {"http://example.org/other": 1, STREAM: 1}
    assert report.quarantined == {STREAM: 3}
    assert w.store.elements_in(STREAM, T0, T0 + 10 * S) == ["http://example.org/g4"]
    minted = w.store.elements_in("http://example.org/other", T0, T0 + 10 * S)
    assert minted[0].startswith("urn:rspstar:element:")
    # The same envelope read again (a replay of the source) mints the same graph name.
    assert writer(tmp_path / "again").write(1, rows[:1]).stored == {"http://example.org/other": 1}
    assert writer(tmp_path / "again2").store.is_taken(minted[0]) is False


POISON_ENVELOPES = [
    ({"time": 5}, 'field "time": a string is required, got 5'),
    ({"time": ["2026-03-01T08:00:00Z"]}, 'field "time": a string is required'),
    ({"graph": "not an iri"}, 'field "graph": not an IRI'),
    ({"graph": 5}, 'field "graph": a string is required'),
    ({"stream": 5}, 'field "stream": a string is required'),
    ({"graph": "urn:rspstar:batches"}, 'field "graph": names under urn:rspstar: are reserved'),
    ({"graph": "urn:rspstar:timestamps:x"}, 'field "graph": names under urn:rspstar: are reserved'),
    ({"data": 7}, 'field "data"'),
]


@pytest.mark.parametrize("fields,reason", POISON_ENVELOPES)
def test_a_poison_envelope_is_quarantined_with_its_field_and_the_rest_of_the_batch_lands(tmp_path, fields, reason, writer):
    w = writer(tmp_path)
    envelope = {"time": "2026-03-01T08:00:01Z", "data": "<http://a> <http://b> <http://c> ."}
    envelope.update(fields)
    good = json.dumps({"time": "2026-03-01T08:00:02Z", "graph": "http://example.org/ok",
                       "data": "<http://a> <http://b> <http://c> ."})
    rows = [Payload(STREAM, "jsonl", "in.jsonl", text, T0, line=k + 1) for k, text in enumerate([json.dumps(envelope), good])]
    report = w.write(1, rows)
    assert report.stored == {STREAM: 1} and sum(report.quarantined.values()) == 1
    reasons = [json.loads(p.read_text()) for p in (tmp_path / "quarantine").glob("*.reason.json")]
    assert len(reasons) == 1 and reason in reasons[0]["reason"] and reasons[0]["line"] == 1
    assert w.store.elements_in(STREAM, T0, T0 + 10 * S) == ["http://example.org/ok"]


@pytest.mark.parametrize("graph", ["urn:rspstar:batches", "urn:rspstar:timestamps:x"])
def test_a_document_naming_an_engine_graph_is_quarantined_and_the_rest_lands(tmp_path, graph, writer):
    w = writer(tmp_path)
    poison = ('<%s> <http://www.w3.org/ns/prov#generatedAtTime> "2026-03-01T08:00:01Z"^^'
              '<http://www.w3.org/2001/XMLSchema#dateTime> .\n<%s> { <http://a> <http://b> <http://c> . }\n' % (graph, graph))
    report = w.write(1, [Payload(STREAM, "trig", "poison.trig", poison, T0), Payload(STREAM, "trig", "good.trig", trig(2), T0)])
    assert report.stored == {STREAM: 1} and report.quarantined == {STREAM: 1}
    [reason] = [json.loads(p.read_text()) for p in (tmp_path / "quarantine").glob("*.reason.json")]
    assert reason["reason"] == "graph <%s> is reserved by the engine" % graph


def test_an_unexpected_failure_on_one_payload_quarantines_it_and_the_rest_lands(tmp_path, monkeypatch, writer):
    import rspstar.store.codec as codec
    w = writer(tmp_path)
    real = codec.decode

    def flaky(payload, timestamp_predicate):
        if payload.origin == "bad.trig":
            raise RuntimeError("something nobody foresaw")
        return real(payload, timestamp_predicate)

    monkeypatch.setattr(codec, "decode", flaky)
    report = w.write(1, [Payload(STREAM, "trig", "bad.trig", trig(1), T0), Payload(STREAM, "trig", "good.trig", trig(2), T0)])
    assert report.stored == {STREAM: 1} and report.quarantined == {STREAM: 1}
    [reason] = [json.loads(p.read_text()) for p in (tmp_path / "quarantine").glob("*.reason.json")]
    assert reason["reason"] == "unexpected: RuntimeError: something nobody foresaw"


def test_late_elements_are_stored_counted_and_reported(tmp_path, writer, caplog):
    w = writer(tmp_path, lateness=S)
    w.write(1, [Payload(STREAM, "trig", "a.trig", trig(10), T0)])
    assert w.store.watermark(STREAM) == T0 + 9 * S
    report = w.write(2, [Payload(STREAM, "trig", "b.trig", trig(5, 9, 11), T0)])
    assert report.late == {STREAM: 1}
    # The log names the watermark as an instant, not as microseconds.
    [line] = [r.getMessage() for r in caplog.records if "late element" in r.getMessage()]
    assert "(below its watermark, %s)" % format_instant(T0 + 9 * S) in line and str(T0 + 9 * S) not in line
    assert w.store.streams()[STREAM].late == 1
    assert len(w.store.elements_in(STREAM, T0, T0 + 20 * S)) == 4


def test_an_element_sent_twice_is_quarantined_not_merged(tmp_path, writer):
    w = writer(tmp_path)
    w.write(1, [Payload(STREAM, "trig", "a.trig", trig(1), T0)])
    report = w.write(2, [Payload(STREAM, "trig", "a-again.trig", trig(1, 2), T0)])
    assert report.stored == {STREAM: 1} and report.quarantined == {STREAM: 1}


def test_a_graph_repeated_within_one_batch_is_quarantined_not_fatal(tmp_path, writer):
    w = writer(tmp_path)
    report = w.write(1, [Payload(STREAM, "trig", "a.trig", trig(1, 2), T0), Payload(STREAM, "trig", "b.trig", trig(2, 3), T0)])
    assert report.stored == {STREAM: 3} and report.quarantined == {STREAM: 1}


def test_untimed_graphs_get_processing_time(tmp_path, writer):
    w = writer(tmp_path)
    w.write(1, [Payload(STREAM, "trig", "u.trig", "<http://example.org/u> { <http://a> <http://b> 1 . }", T0 + 42 * S)])
    assert w.store.elements_in(STREAM, T0 + 42 * S, T0 + 43 * S) == ["http://example.org/u"]


def test_the_watermark_reaches_a_batchs_oldest_element_before_the_batch_is_stored(tmp_path, writer):
    # Windows closing by then need none of the batch, so they may run while it is written.
    w = writer(tmp_path, lateness=S)
    seen = []
    w.store.subscribe(lambda event: seen.append((event.watermark, len(w.store.elements_in(event.stream, T0, T0 + 60 * S)))))
    w.write(1, [Payload(STREAM, "trig", "a.trig", trig(0, 1), T0)])
    w.write(2, [Payload(STREAM, "trig", "b.trig", trig(5, 7), T0)])
    assert seen == [(T0 - S, 0), (T0, 2), (T0 + 4 * S, 2), (T0 + 6 * S, 4)]


def anonymous(text: bytes) -> bytes:
    """N-Quads with blank node labels numbered by first appearance (a parse picks fresh ones)."""
    labels: dict[bytes, bytes] = {}
    return re.sub(rb"_:[A-Za-z0-9]+", lambda m: labels.setdefault(m.group(), b"_:b%d" % len(labels)), text)


def content(store: StreamStore) -> list[str]:
    return sorted(re.sub(r"_:[A-Za-z0-9]+", "_:b", str(quad)) for quad in store.oxigraph)


def test_decoding_on_the_executors_stores_and_records_what_the_driver_does(tmp_path):
    envelope = json.dumps({"time": "2026-03-01T08:00:07Z", "data": "<http://example.org/a> <http://example.org/v> 7 ."})
    payloads = [Payload(STREAM, "trig", "a.trig", trig(0, 1, 2), T0),
                Payload(STREAM, "trig", "blank.trig", "_:g { <http://example.org/a> <http://example.org/v> 3 . }", T0 + 3 * S),
                Payload("http://example.org/t", "nquads", "n.nq", "\n".join(nquad(4) + ["<http://broken> ."] + nquad(5)),
                        T0, line=1),
                Payload(STREAM, "jsonl", "e.jsonl", envelope, T0, line=1)]
    driver = BatchWriter(StreamStore(), "files", tmp_path / "q1")
    executors = ExecutorDecoding(StreamStore(), "files", tmp_path / "q2")
    a, b = driver.write(1, payloads), executors.write(1, payloads)
    assert a.stored == b.stored == {STREAM: 5, "http://example.org/t": 2}
    assert a.quarantined == b.quarantined == {"http://example.org/t": 1}
    assert content(driver.store) == content(executors.store)
    for stream in a.stored:
        assert driver.store.elements_in(stream, T0, T0 + 60 * S) == executors.store.elements_in(stream, T0, T0 + 60 * S)
        assert driver.store.watermark(stream) == executors.store.watermark(stream)
    recorded = {stream: anonymous(canonical(elements)) for stream, elements in a.canonical().items()}
    assert recorded == {stream: anonymous(text) for stream, text in b.canonical().items()}
    assert b"_:b0" in recorded[STREAM]          # the annotations' reifiers are there, renamed alike


def test_a_stream_decoded_on_the_executors_is_one_write_with_the_batch_marker(tmp_path):
    # One transaction: the elements of every stream and the marker, or none of them.
    store = StreamStore()
    writes = []
    real = store.write
    store.write = lambda operation, *args: (writes.append(operation), real(operation, *args))
    w = ExecutorDecoding(store, "files", tmp_path / "q")
    w.write(1, [Payload(STREAM, "trig", "a.trig", trig(0, 1), T0),
                Payload("http://example.org/t", "nquads", "n.nq", "\n".join(nquad(4)), T0, line=1)])
    assert writes == ["load"]
    assert w.marker(1) in store.oxigraph and w.write(1, []).skipped


def test_a_written_batch_leaves_no_collected_object_per_element(tmp_path, writer):
    """Wherever a batch was decoded, its elements' stamps are shared in the index (see
    test_stream_store: every full collection of Python's walks what the index keeps)."""
    w = writer(tmp_path)

    def batch(first: int, count: int) -> list[Payload]:
        """`count` elements with four distinct timestamps between them, as a live batch has."""
        lines = ['<http://example.org/m%d> <%s> "2026-03-01T08:00:%02dZ"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
                 '<http://example.org/y%d> <http://example.org/v> "%d"^^<http://www.w3.org/2001/XMLSchema#integer> '
                 '<http://example.org/m%d> .' % (n, PROV, n % 4, n, n, n) for n in range(first, first + count)]
        return [Payload(STREAM, "nquads", "b%d.nq" % first, "\n".join(lines), T0)]

    w.write(0, batch(0, 10))                  # first calls may build caches of their own
    gc.collect()
    before = len(gc.get_objects())
    # The report is the caller's to keep or drop (it may hold the decoded elements).
    stored = w.write(1, batch(10, 2000)).stored
    gc.collect()
    assert stored == {STREAM: 2000}
    assert len(gc.get_objects()) - before < 200
