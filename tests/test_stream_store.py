"""The stream store: element index, retention, background data, reopening, stable names."""
import gc
import time
from pathlib import Path

import pyoxigraph as ox
import pytest

from rspstar.store.errors import DuplicateElementError, RdfInputError, ReservedGraphError
from rspstar.store.rdf_input import Element, instant_literal, read_elements
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import parse_instant
from rspstar.translator.vocabulary import SKOLEM_PREFIX, timestamps_graph

from interrupts import in_child, interrupted_on_waking

T0 = parse_instant("2026-03-01T08:00:00Z")
S = 1_000_000
ANNOTATED = b"""@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
_:g0 prov:generatedAtTime "2026-03-01T08:00:00Z"^^xsd:dateTime .
_:g0 { ex:rut ex:heartRate 60 {| ex:confidence 0.5 |} . }
ex:g1 prov:generatedAtTime "2026-03-01T08:00:01.5Z"^^xsd:dateTime .
ex:g1 { ex:rut ex:heartRate 61 {| ex:confidence 0.6 |} . }
ex:g2 prov:generatedAtTime "2026-03-01T08:00:03Z"^^xsd:dateTime .
ex:g2 { ex:rut ex:heartRate 62 . }
"""


def quads_of(store):
    return sorted(str(q) for q in store.oxigraph)


def masked_quads_of(store):
    """`quads_of` with blank subjects masked: blank node labels differ between loads."""
    return sorted(str(q).replace(str(q.subject), "_:b") if isinstance(q.subject, ox.BlankNode) else str(q)
                  for q in store.oxigraph)


def test_index_selects_half_open_windows():
    store = StreamStore()
    store.add_elements("http://s", read_elements(ANNOTATED, "hr.trig").elements)
    assert store.elements_in("http://s", T0 + 1_500_000, T0 + 3 * S) == ["http://example.org/g1"]
    assert store.elements_in("http://s", T0 + 1_500_001, T0 + 3 * S + 1) == ["http://example.org/g2"]
    assert len(store.elements_in("http://s", T0, T0 + 4 * S)) == 3
    assert store.elements_in("http://other", T0, T0 + 4 * S) == []


def test_blank_graph_names_are_stable_for_the_same_input():
    first = read_elements(ANNOTATED, "hr.trig")
    second = read_elements(ANNOTATED, "hr.trig")
    assert [e.graph for e in first.elements] == [e.graph for e in second.elements]
    assert first.elements[0].graph.startswith(SKOLEM_PREFIX)
    # Same label in another source is another element.
    assert read_elements(ANNOTATED, "other.trig").elements[0].graph != first.elements[0].graph


def test_documents_load_whole_or_element_by_element_with_the_same_content():
    iri_only = ANNOTATED.replace(b"_:g0", b"ex:g0")
    fast, slow = StreamStore(), StreamStore()
    staged = fast.documents.stage("http://s", iri_only, ox.RdfFormat.TRIG, "hr.trig")
    fast.publish("http://s", staged.staged)
    slow.add_elements("http://s", read_elements(iri_only, "hr.trig").elements)
    assert masked_quads_of(fast) == masked_quads_of(slow)
    assert fast.elements_in("http://s", T0, T0 + 10 * S) == slow.elements_in("http://s", T0, T0 + 10 * S)


def test_staged_elements_are_invisible_until_published():
    store = StreamStore()
    result = store.documents.stage("http://s", ANNOTATED, ox.RdfFormat.TRIG, "hr.trig")
    assert len(result.staged) == 3 and result.untimed_graphs == []
    assert store.elements_in("http://s", T0, T0 + 10 * S) == []
    store.publish("http://s", result.staged[:1])
    assert store.elements_in("http://s", T0, T0 + 10 * S) == [result.staged[0].graph]


def test_a_document_reusing_a_graph_name_writes_nothing():
    store = StreamStore()
    store.add_elements("http://s", read_elements(ANNOTATED, "hr.trig").elements)
    before = quads_of(store)
    with pytest.raises(DuplicateElementError):
        store.documents.stage("http://s", ANNOTATED.replace(b"_:g0", b"ex:new"), ox.RdfFormat.TRIG, "again.trig")
    assert quads_of(store) == before


def test_a_graph_name_is_used_once_and_a_refused_batch_writes_nothing():
    store = StreamStore()
    elements = read_elements(ANNOTATED, "hr.trig").elements
    store.add_elements("http://s", elements[:2])
    before = quads_of(store)
    with pytest.raises(DuplicateElementError):
        store.add_elements("http://s", elements[2:] + elements[1:2])
    assert quads_of(store) == before
    assert len(store.elements_in("http://s", T0, T0 + 10 * S)) == 2


@pytest.mark.parametrize("name,message", [
    ("http://example.org/g2", "already a stream element"),          # published
    ("http://example.org/staged", "already a stream element"),
    ("http://example.org/background", "already a stream element or background graph"),
    ("http://example.org/twice", "already a stream element"),       # twice in the same batch
    (timestamps_graph("http://s"), "reserved by the engine"),
])
def test_each_kind_of_taken_graph_name_is_refused_by_name(name, message):
    store = StreamStore()
    store.add_elements("http://s", read_elements(ANNOTATED, "hr.trig").elements)
    store.stage_elements("http://s", [Element("http://example.org/staged", T0, instant_literal(T0))])
    store.background.load(b"<http://a> <http://b> <http://c> <http://example.org/background> .",
                          ox.RdfFormat.N_QUADS, "bg.nq")
    fresh = [Element("http://example.org/f%d" % k, T0, instant_literal(T0)) for k in range(3)]
    extra = [Element("http://example.org/twice", T0, instant_literal(T0))] if name.endswith("twice") else []
    before = quads_of(store)
    with pytest.raises(DuplicateElementError, match="<%s> is %s" % (name, message)):
        store.add_elements("http://s", fresh + [Element(name, T0, instant_literal(T0))] + extra)
    assert quads_of(store) == before


def test_retention_removes_content_timestamps_and_index_entries():
    store = StreamStore()
    store.add_elements("http://s", read_elements(ANNOTATED, "hr.trig").elements)
    assert store.evict_before("http://s", T0 + 2 * S) == 2
    assert store.elements_in("http://s", T0, T0 + 10 * S) == ["http://example.org/g2"]
    graphs = {q.graph_name.value for q in store.oxigraph if isinstance(q.graph_name, ox.NamedNode)}
    assert "http://example.org/g1" not in graphs
    stamps = list(store.oxigraph.quads_for_pattern(None, None, None, ox.NamedNode(timestamps_graph("http://s"))))
    assert [q.subject.value for q in stamps] == ["http://example.org/g2"]
    stats = store.streams()["http://s"]
    assert (stats.elements, stats.evicted, stats.ingested) == (1, 2, 3)


def test_late_element_is_indexed_in_time_order():
    store = StreamStore()
    elements = read_elements(ANNOTATED, "hr.trig").elements
    store.add_elements("http://s", [elements[2]])
    store.add_elements("http://s", [elements[0]])
    assert store.elements_in("http://s", T0, T0 + 10 * S) == [elements[0].graph, elements[2].graph]


def test_reopening_a_store_on_disk_rebuilds_the_index(tmp_path):
    store = StreamStore(str(tmp_path / "db"))
    store.add_elements("http://s", read_elements(ANNOTATED, "hr.trig").elements)
    store.background.load(b"<http://a> <http://b> <http://c> <http://bg> .", ox.RdfFormat.N_QUADS, "bg.nq")
    store.close()
    del store
    reopened = StreamStore(str(tmp_path / "db"))
    assert len(reopened.elements_in("http://s", T0, T0 + 10 * S)) == 3
    assert reopened.background.graphs() == ["http://bg"]


def test_reopening_a_store_on_disk_keeps_the_stream_counters(tmp_path):
    store = StreamStore(str(tmp_path / "db"))
    elements = read_elements(ANNOTATED, "hr.trig").elements
    store.add_elements("http://s", elements[1:])
    store.advance_watermark("http://s", T0 + 5 * S)
    store.add_elements("http://s", elements[:1])          # below the watermark: late
    store.evict_before("http://s", elements[1].timestamp)
    before = store.streams()["http://s"]
    assert (before.ingested, before.evicted, before.late) == (3, 1, 1)
    store.close()
    reopened = StreamStore(str(tmp_path / "db"))
    assert reopened.streams()["http://s"] == before


def test_background_syntax_error_names_source_line_and_column_and_changes_nothing():
    store = StreamStore()
    with pytest.raises(RdfInputError) as info:
        store.background.load(b"<http://a> <http://b> <http://c> .\n<http://a> <http://b> .\n",
                              ox.RdfFormat.TURTLE, "bg.ttl")
    assert (info.value.source, info.value.line) == ("bg.ttl", 2)
    assert str(info.value).startswith("bg.ttl:2:")
    assert quads_of(store) == []


def test_malformed_stream_document_names_file_and_line():
    with pytest.raises(RdfInputError) as info:
        read_elements(b"@prefix ex: <http://example.org/> .\nex:g { ex:a ex:b }\n", "bad.trig")
    assert info.value.source == "bad.trig" and info.value.line == 2


def test_untimed_graphs_are_reported_or_get_processing_time():
    data = b"<http://g> { <http://a> <http://b> <http://c> . }"
    assert read_elements(data, "x.trig").untimed_graphs == ["<http://g>"]
    result = read_elements(data, "x.trig", processing_time=T0)
    assert result.elements[0].timestamp == T0


def test_bad_timestamp_is_an_input_error():
    data = b'<http://g> <http://www.w3.org/ns/prov#generatedAtTime> "soon" . <http://g> { <http://a> <http://b> 1 . }'
    with pytest.raises(RdfInputError, match="timestamp of graph"):
        read_elements(data, "x.trig")


@pytest.mark.parametrize("stamp,message", [('"soon"', 'timestamp of graph <http://g2>: invalid instant'),
                                           ("<http://then>", "timestamp of graph <http://g2> is not a literal")])
def test_a_documents_bad_timestamp_names_its_element(stamp, message):
    ts = "<http://www.w3.org/ns/prov#generatedAtTime>"
    data = ('<http://g1> %s "2026-03-01T08:00:00.5Z" . <http://g1> { <http://a> <http://b> 1 . }\n'
            '<http://g2> %s %s . <http://g2> { <http://a> <http://b> 2 . }' % (ts, ts, stamp)).encode()
    store = StreamStore()
    with pytest.raises(RdfInputError, match=message):
        store.documents.stage("http://s", data, ox.RdfFormat.TRIG, "x.trig")
    assert len(store.oxigraph) == 0


def test_optimistic_document_load_matches_the_careful_one_or_asks_for_a_rebuild():
    from rspstar.store.documents import OptimisticLoadFailed
    iri_only = ANNOTATED.replace(b"_:g0", b"ex:g0")
    optimistic, careful = StreamStore(), StreamStore()
    a = optimistic.documents.stage_optimistically("http://s", iri_only, ox.RdfFormat.TRIG, "hr.trig")
    b = careful.documents.stage("http://s", iri_only, ox.RdfFormat.TRIG, "hr.trig")
    assert a.staged == b.staged
    assert len(optimistic.oxigraph) == len(careful.oxigraph)
    with pytest.raises(OptimisticLoadFailed):  # blank graph name: needs the careful path
        StreamStore().documents.stage_optimistically("http://s", ANNOTATED, ox.RdfFormat.TRIG, "hr.trig")
    with pytest.raises(OptimisticLoadFailed):  # graph name already used
        optimistic.documents.stage_optimistically("http://s", iri_only, ox.RdfFormat.TRIG, "again.trig")
    with pytest.raises(RdfInputError):
        StreamStore().documents.stage_optimistically("http://s", b"<http://g> { <http://a> }", ox.RdfFormat.TRIG, "x")


@pytest.mark.parametrize("part_bytes", [None, 200])
def test_optimistic_staging_checks_each_parts_nesting_once_before_its_write(part_bytes, monkeypatch):
    from rspstar.store import documents, rdf_input
    from rspstar.store.documents import OptimisticLoadFailed
    checked, written = [], []
    check, load = rdf_input.check_rdf_nesting, documents.Documents._load_document
    monkeypatch.setattr(documents, "check_rdf_nesting", lambda data, *a: (checked.append(bytes(data)), check(data, *a)))
    monkeypatch.setattr(rdf_input, "check_rdf_nesting", lambda data, *a: (checked.append(bytes(data)), check(data, *a)))
    monkeypatch.setattr(documents.Documents, "_load_document",
                        lambda self, stream, data, fmt: (written.append(bytes(data)), load(self, stream, data, fmt)))
    data = b"@prefix prov: <http://www.w3.org/ns/prov#> .\n" + b"".join(
        b'<http://g%d> prov:generatedAtTime "2026-03-01T08:00:0%dZ" . <http://g%d> { <http://a> <http://b> %d . }\n'
        % (k, k, k, k) for k in range(6))
    staged = StreamStore().documents.stage_optimistically("http://s", data, ox.RdfFormat.TRIG, "x.trig", part_bytes=part_bytes)
    assert len(staged.staged) == 6
    for element in staged.staged:
        if element.written is not None:
            element.written.wait()
    # Every byte written was checked first, once (the scan beside the write does not check again).
    assert checked == written and (written == [data] if part_bytes is None else len(written) > 1)
    deep = data + b"<http://g9> { <http://a> <http://b> " + b"(" * 200 + b")" * 200 + b" . }\n"
    checked.clear(), written.clear()
    store = StreamStore()
    with pytest.raises(OptimisticLoadFailed, match="nested deeper than 128"):
        store.documents.stage_optimistically("http://s", deep, ox.RdfFormat.TRIG, "x.trig", part_bytes=part_bytes)
    assert checked and not any(b"(((" in part for part in written)


def test_compaction_keeps_live_content_and_frees_the_rest(tmp_path):
    for path in (None, str(tmp_path / "db")):
        store = StreamStore(path, compact_after=2)
        store.background.load(b"<http://a> <http://b> <http://c> .", ox.RdfFormat.N_TRIPLES, "bg.nt")
        store.add_elements("http://s", read_elements(ANNOTATED, "hr.trig").elements)
        assert store.maybe_compact() is None
        store.evict_before("http://s", T0 + 2 * S)
        before = sorted(str(q) for q in store.oxigraph)
        assert store.maybe_compact() is not None
        assert sorted(str(q) for q in store.oxigraph) == before
        assert store.elements_in("http://s", T0, T0 + 10 * S) == ["http://example.org/g2"]
        if path:
            assert sorted(p.name for p in (tmp_path / "db").iterdir()) == ["CURRENT", "gen-2"]
            store.close()
            reopened = StreamStore(path)
            assert reopened.elements_in("http://s", T0, T0 + 10 * S) == ["http://example.org/g2"]
            assert reopened.background.graphs() == []
            reopened.close()


def test_the_store_is_rebuilt_after_ten_thousand_evictions_when_fewer_are_held():
    store = StreamStore()
    for batch in range(101):
        elements = []
        for k in range(batch * 100, (batch + 1) * 100):
            graph = "http://example.org/e%d" % k
            elements.append(Element(graph, T0 + k * S, instant_literal(T0 + k * S), [ox.Quad(
                ox.NamedNode("http://example.org/o"), ox.NamedNode("http://example.org/v"), ox.Literal(k), ox.NamedNode(graph))]))
        store.add_elements("http://s", elements)
        store.evict_before("http://s", T0 + (batch + 1) * 100 * S - 50 * S)     # 50 held
        store.maybe_compact()
        assert len(store.compactions) == (0 if (batch + 1) * 100 - 50 < 10_000 else 1), batch


def test_writes_during_a_rebuild_reach_the_rebuilt_store():
    import threading
    store = StreamStore(compact_after=1)
    filler = "\n".join("<http://example.org/f%d> <http://example.org/p> \"%d\" <http://example.org/fill> ." % (i, i)
                       for i in range(150_000))
    store.background.load(filler.encode(), ox.RdfFormat.N_QUADS, "fill.nq")
    elements = read_elements(ANNOTATED, "hr.trig").elements
    rebuild = threading.Thread(target=store.compact)
    rebuild.start()
    store.add_elements("http://s", elements)          # while the copy runs
    store.evict_before("http://s", T0 + 2 * S)
    rebuild.join()
    assert store.elements_in("http://s", T0, T0 + 10 * S) == ["http://example.org/g2"]
    graphs = {q.graph_name.value for q in store.oxigraph if isinstance(q.graph_name, ox.NamedNode)}
    assert "http://example.org/g2" in graphs and "http://example.org/g1" not in graphs
    assert len(list(store.oxigraph.quads_for_pattern(None, None, None, ox.NamedNode("http://example.org/fill")))) == 150_000
    assert store.compactions and store.compactions[-1] < 1.0


@pytest.mark.parametrize("rebuild", ["compact", "maybe_compact"])
def test_a_rebuild_lets_writers_in_while_it_copies(monkeypatch, rebuild):
    import threading

    import rspstar.store.generations as generations
    store = StreamStore(compact_after=1)
    store.add_elements("http://s", read_elements(ANNOTATED, "hr.trig").elements)
    store.evict_before("http://s", T0 + 10 * S)          # all evicted: a rebuild is due
    later = Element("http://example.org/g3", T0 + 20 * S, instant_literal(T0 + 20 * S), [ox.Quad(
        ox.NamedNode("http://example.org/o"), ox.NamedNode("http://example.org/v"), ox.Literal(3),
        ox.NamedNode("http://example.org/g3"))])
    written_during_copy = []
    real_store = ox.Store

    class Copy:
        """The fresh store a rebuild fills: an element is written while it copies."""

        def __init__(self, *args):
            self.store = real_store(*args)

        def bulk_load(self, *args, **kwargs):
            writer = threading.Thread(target=store.add_elements, args=("http://s", [later]))
            writer.start()
            writer.join(timeout=2)
            written_during_copy.append((writer, not writer.is_alive()))
            self.store.bulk_load(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self.store, name)

    monkeypatch.setattr(generations.ox, "Store", Copy)
    assert getattr(store, rebuild)() is not None
    [(writer, done_during_copy)] = written_during_copy
    writer.join()
    assert done_during_copy
    assert store.elements_in("http://s", T0, T0 + 30 * S) == ["http://example.org/g3"]
    assert len(list(store.oxigraph.quads_for_pattern(None, None, None, ox.NamedNode("http://example.org/g3")))) == 1


def test_background_data_cannot_write_into_a_staged_element():
    store = StreamStore()
    staged = store.documents.stage("http://s", ANNOTATED, ox.RdfFormat.TRIG, "hr.trig").staged
    before = quads_of(store)
    with pytest.raises(RdfInputError, match="stream element"):
        store.background.load(b"<http://a> <http://b> <http://c> <%s> ." % staged[-1].graph.encode(),
                              ox.RdfFormat.N_QUADS, "bg.nq")
    assert quads_of(store) == before


def test_updates_reach_background_data_only():
    store = StreamStore()
    elements = read_elements(ANNOTATED, "hr.trig").elements
    store.add_elements("http://s", elements)
    store.background.load(b"<http://a> <http://b> <http://c> <http://bg> .\n<http://a> <http://b> <http://d> .",
                          ox.RdfFormat.N_QUADS, "bg.nq")
    outside = [q for q in store.oxigraph if not isinstance(q.graph_name, ox.DefaultGraph)
               and q.graph_name.value != "http://bg"]
    store.background.update("CLEAR NAMED")
    store.background.update("DELETE WHERE { GRAPH ?g { ?s ?p ?o } }")
    assert store.background.graphs() == []
    assert sorted(map(str, (q for q in store.oxigraph if not isinstance(q.graph_name, ox.DefaultGraph)))) \
        == sorted(map(str, outside))
    assert len(store.elements_in("http://s", T0, T0 + 10 * S)) == 3
    store.background.update("INSERT DATA { GRAPH <http://bg2> { <http://x> <http://y> 1 } }")
    assert store.background.graphs() == ["http://bg2"]
    before = sorted(map(str, store.oxigraph))
    for update in ("INSERT DATA { GRAPH <%s> { <http://x> <http://y> 2 } }" % elements[0].graph,
                   "INSERT DATA { GRAPH <urn:rspstar:batches> { <http://x> <http://y> 3 } }",
                   "INSERT DATA { GRAPH <http://bg2> { <http://x> <http://y> 4 } "
                   "GRAPH <urn:rspstar:timestamps:x> { <http://x> <http://y> 4 } }"):
        with pytest.raises(ReservedGraphError, match="updates change background data only"):
            store.background.update(update)
    assert sorted(map(str, store.oxigraph)) == before


def churn(store, elements: int, held: int) -> int:
    """Add elements and evict all but the last `held`, as the engine does; the bytes of the
    on-disk store's write-ahead logs afterwards."""
    for i in range(elements):
        graph = "http://example.org/e%d" % i
        quad = ox.Quad(ox.NamedNode("http://example.org/o%d" % i), ox.NamedNode("http://example.org/v"),
                       ox.Literal(str(i)), ox.NamedNode(graph))
        store.add_elements("http://s", [Element(graph, T0 + i * S, instant_literal(T0 + i * S), [quad])])
        if i % 50 == 0:
            store.evict_before("http://s", T0 + (i - held) * S)
            store.maybe_compact()
    return sum(f.stat().st_size for f in Path(store.path).rglob("*.log"))


@pytest.mark.slow
def test_an_on_disk_store_flushes_as_it_evicts_so_its_log_stays_small(tmp_path, monkeypatch):
    flushed = churn(StreamStore(str(tmp_path / "flushed"), compact_after=10**9), 6000, 300)
    monkeypatch.setattr("rspstar.store.stream_store.FLUSH_AFTER_EVICTIONS", 10**9)
    # Nor flushed for the quads written (store/generations.py): the evictions' flushes alone.
    monkeypatch.setattr("rspstar.store.generations.FLUSH_AFTER_QUADS", 10**12)
    unflushed = churn(StreamStore(str(tmp_path / "unflushed"), compact_after=10**9), 6000, 300)
    assert flushed * 2 < unflushed, (flushed, unflushed)


def test_a_compaction_asked_for_while_one_is_under_way_changes_nothing():
    store = StreamStore(compact_after=1)
    store.add_elements("http://s", read_elements(ANNOTATED, "hr.trig").elements)
    store.evict_before("http://s", T0 + 10 * S)
    with store.lock:
        store.generations._journal = []          # a rebuild is copying
        assert store.compact() == 0.0
        store.generations._journal = None
    # The evictions still count towards the next rebuild, which happens.
    assert store.maybe_compact() is not None and store.compactions


@pytest.mark.parametrize("how", ["elements", "document", "reopened"])
def test_eviction_removes_each_elements_timestamp_triple_whatever_its_lexical_form(tmp_path, how):
    # The timestamps are removed as stored, not looked up by a SPARQL update: a literal in
    # another time zone, with trailing zeros, or under another predicate must still go.
    data = b"""@prefix ex: <http://example.org/> .
ex:e1 ex:at "2026-03-01T09:00:01.50+01:00"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
ex:e2 ex:at "2026-03-01T08:00:02Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
ex:e1 { ex:o ex:v 1 . }
ex:e2 { ex:o ex:v 2 . }
"""
    predicate = "http://example.org/at"
    store = StreamStore(str(tmp_path / "store"))
    if how == "elements":
        store.add_elements("http://s", read_elements(data, "s.trig", timestamp_predicate=predicate).elements,
                           timestamp_predicate=predicate)
    else:
        store.publish("http://s", store.documents.stage("http://s", data, ox.RdfFormat.TRIG, "s.trig",
                                                       timestamp_predicate=predicate).staged)
    if how == "reopened":
        store.close()
        store = StreamStore(str(tmp_path / "store"))
    assert store.evict_before("http://s", T0 + 2 * S) == 1
    stamps = list(store.oxigraph.quads_for_pattern(None, None, None, ox.NamedNode(timestamps_graph("http://s"))))
    assert [q.subject.value for q in stamps] == ["http://example.org/e2"]
    assert ox.NamedNode("http://example.org/e1") not in set(store.oxigraph.named_graphs())
    assert store.elements_in("http://s", T0, T0 + 10 * S) == ["http://example.org/e2"]


def test_a_store_that_keeps_evicted_quads_still_shows_them_to_no_window():
    # A replay's store (never rebuilt, so removing quads would free nothing) evicts from the
    # index alone; windows select their elements through the index.
    store = StreamStore(remove_evicted=False)
    store.add_elements("http://s", read_elements(ANNOTATED.replace(b"_:g0", b"ex:g0"), "hr.trig").elements)
    quads = len(store.oxigraph)
    assert len(store.elements_in("http://s", 0, 2**62)) == 3
    assert store.evict_before("http://s", 2**62) == 3
    assert len(store.oxigraph) == quads and store.elements_in("http://s", 0, 2**62) == []


@pytest.mark.parametrize("part_bytes", [None, 600])
@pytest.mark.parametrize("stage", ["stage", "stage_optimistically"])
def test_an_element_keeps_its_timestamp_triple_only_for_a_store_that_removes_it_at_eviction(stage, part_bytes):
    # The stamp is what eviction removes from the timestamps graph; a store that never removes
    # evicted quads (a replay's) keeps none, so it holds no literal per element.
    data = _stream_document(50)
    options = {} if part_bytes is None or stage == "stage" else {"part_bytes": part_bytes}
    removing, keeping = StreamStore(), StreamStore(remove_evicted=False)
    for store in (removing, keeping):
        staged = getattr(store.documents, stage)("http://s", data, ox.RdfFormat.TRIG, "hr.trig", **options).staged
        assert [s.graph for s in staged] == ["http://example.org/g%d" % k for k in range(50)]
        assert [s.timestamp for s in staged] == [T0 + k * S for k in range(50)]
        if store is removing:
            assert {s.stamp for s in staged} == {(ox.NamedNode("http://www.w3.org/ns/prov#generatedAtTime"), ox.Literal(
                "2026-03-01T08:00:%02dZ" % k, datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")))
                for k in range(50)}
        else:
            assert {s.stamp for s in staged} == {None}
        store.publish("http://s", staged)
        assert store.evict_before("http://s", T0 + 10 * S) == 10
    ts_graph = ox.NamedNode(timestamps_graph("http://s"))
    assert len(list(removing.oxigraph.quads_for_pattern(None, None, None, ts_graph))) == 40
    assert len(list(keeping.oxigraph.quads_for_pattern(None, None, None, ts_graph))) == 50
    assert keeping.elements_in("http://s", T0, T0 + 60 * S) == removing.elements_in("http://s", T0, T0 + 60 * S)


def test_select_rows_keep_the_users_variables_in_n_triples_and_leave_out_unbound_ones():
    from rspstar.store.terms import select_rows
    from rspstar.translator.rewrite import INTERNAL_VARIABLE_PREFIX
    store = ox.Store()
    store.add(ox.Quad(ox.NamedNode("http://a"), ox.NamedNode("http://b"), ox.Literal("x", language="en")))
    internal = INTERNAL_VARIABLE_PREFIX + "g"
    result = store.query("SELECT ?s ?%s ?o ?unbound WHERE { ?s ?p ?o BIND(1 AS ?%s) }" % (internal, internal))
    assert select_rows(result) == [{"s": "<http://a>", "o": '"x"@en'}]


def _stream_document(elements: int) -> bytes:
    return (b"@prefix ex: <http://example.org/> .\n@prefix prov: <http://www.w3.org/ns/prov#> .\n"
            b"@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .\n" + b"".join(
                b'ex:g%d prov:generatedAtTime "2026-03-01T08:00:%02dZ"^^xsd:dateTime .\n'
                b"ex:g%d { ex:rut ex:heartRate %d {| ex:confidence 0.5 |} . }\n" % (k, k, k, 60 + k)
                for k in range(elements)))


def test_a_document_written_in_parts_holds_what_it_holds_written_whole():
    data = _stream_document(50)
    in_parts, whole = StreamStore(), StreamStore()
    staged = in_parts.documents.stage_optimistically("http://s", data, ox.RdfFormat.TRIG, "hr.trig", part_bytes=600)
    careful = whole.documents.stage("http://s", data, ox.RdfFormat.TRIG, "hr.trig")
    assert len({e.written for e in staged.staged}) > 5
    assert [e[:3] for e in staged.staged] == [e[:3] for e in careful.staged]
    in_parts.publish("http://s", staged.staged)
    whole.publish("http://s", careful.staged)
    assert masked_quads_of(in_parts) == masked_quads_of(whole)
    assert in_parts.elements_in("http://s", T0, T0 + 60 * S) == whole.elements_in("http://s", T0, T0 + 60 * S)


def _held_writes(store, monkeypatch, fail: bool = False):
    """Make the store's background part writes wait (or fail) from the second part on, until
    the returned event is set."""
    import threading
    release = threading.Event()
    write, calls = store.generations.write, []

    def held(operation, *args):
        calls.append(operation)
        if operation == "load" and len(calls) > 1:
            release.wait()
            if fail:
                raise OSError("disk full")
        write(operation, *args)
    monkeypatch.setattr(store.generations, "write", held)
    return release


def test_publishing_an_element_waits_for_the_part_that_holds_it(monkeypatch):
    import threading
    store = StreamStore()
    release = _held_writes(store, monkeypatch)
    staged = store.documents.stage_optimistically("http://s", _stream_document(50), ox.RdfFormat.TRIG, "hr.trig",
                                                 part_bytes=600).staged
    first = [e for e in staged if e.written is staged[0].written]
    first[0].written.wait()
    assert store.publish("http://s", first) == len(first)      # its part is written: no wait
    publisher = threading.Thread(target=store.publish, args=("http://s", staged[len(first):]))
    publisher.start()
    publisher.join(timeout=0.3)
    assert publisher.is_alive()                  # its parts are not written yet
    assert store.elements_in("http://s", T0, T0 + 60 * S) == ["http://example.org/g%d" % k for k in range(len(first))]
    release.set()
    publisher.join()
    assert len(store.elements_in("http://s", T0, T0 + 60 * S)) == 50
    assert len(list(store.oxigraph.quads_for_pattern(None, None, None, ox.NamedNode("http://example.org/g49")))) == 3   # the triple, its reifier, the annotation


def test_a_part_that_cannot_be_written_fails_the_publishing_of_its_elements(monkeypatch):
    from rspstar.store.errors import StoreError
    store = StreamStore()
    release = _held_writes(store, monkeypatch, fail=True)
    staged = store.documents.stage_optimistically("http://s", _stream_document(50), ox.RdfFormat.TRIG, "hr.trig",
                                                 part_bytes=600).staged
    release.set()
    with pytest.raises(StoreError, match="writing part 2 of hr.trig failed: disk full"):
        store.publish("http://s", staged)
    assert store.elements_in("http://s", T0, T0 + 60 * S) == []


def test_a_write_without_the_store_lock_waits_for_a_rebuild_to_switch_and_lands_in_the_rebuilt_store(monkeypatch):
    # A document written part by part writes without the store's lock; the rebuild's switch
    # must not let such a write land in the store it is replacing.
    import threading

    import rspstar.store.generations as generations
    store = StreamStore(compact_after=1)
    store.add_elements("http://s", read_elements(ANNOTATED, "hr.trig").elements)
    gens = store.generations

    def quad(graph):
        return ox.Quad(ox.NamedNode("http://example.org/a"), ox.NamedNode("http://example.org/b"),
                       ox.NamedNode("http://example.org/c"), ox.NamedNode("http://example.org/" + graph))
    real_apply, real_store, writers = generations._apply, ox.Store, []

    def apply(target, operation, args):
        if target is not gens.current and not writers:       # the journal replayed onto the copy
            writer = threading.Thread(target=gens.write, args=("add", quad("during-switch")))
            writer.start()
            writer.join(timeout=0.3)
            writers.append((writer, writer.is_alive()))
        real_apply(target, operation, args)

    class Copy:
        def __init__(self, *args):
            self.store = real_store(*args)

        def bulk_load(self, *args, **kwargs):
            gens.write("add", quad("during-copy"))            # journaled: the switch replays it
            self.store.bulk_load(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self.store, name)

    monkeypatch.setattr(generations, "_apply", apply)
    monkeypatch.setattr(generations.ox, "Store", Copy)
    assert store.compact() is not None
    [(writer, waited)] = writers
    writer.join()
    assert waited                                            # held until the switch was done
    assert {q.graph_name.value for q in store.oxigraph.quads_for_pattern(None, None, ox.NamedNode("http://example.org/c"))} \
        == {"http://example.org/during-copy", "http://example.org/during-switch"}


def test_a_rebuild_copies_without_holding_pythons_lock():
    # The copy runs in Oxigraph outside Python's lock: the live engine's ingestion and
    # evaluations go on beside it (a copy through Python objects held them back for its whole
    # length, a second or two at every rebuild of a busy store).
    import threading
    store = StreamStore(compact_after=1)
    filler = "\n".join("<http://example.org/f%d> <http://example.org/p> \"%d\" <http://example.org/fill> ." % (i, i)
                       for i in range(300_000))
    store.background.load(filler.encode(), ox.RdfFormat.N_QUADS, "fill.nq")

    def spins(seconds=None, until=None):
        started, n = time.perf_counter(), 0
        while (until is None and time.perf_counter() - started < seconds) or (until is not None and not until.is_set()):
            n += 1
        return n / (time.perf_counter() - started)

    alone = spins(0.3)
    done = threading.Event()
    rebuild = threading.Thread(target=lambda: (store.compact(), done.set()))
    rebuild.start()
    beside = spins(until=done)
    rebuild.join()
    assert beside > 0.2 * alone, (beside, alone)
    assert len(list(store.oxigraph.quads_for_pattern(None, None, None, ox.NamedNode("http://example.org/fill")))) == 300_000


def test_a_rebuild_during_which_background_blank_nodes_change_is_left_for_the_next(monkeypatch):
    # The copy's blank nodes are named afresh: a removal of the old store's blank node, made
    # while the copy runs, would miss it there and the removed triple would come back.
    import rspstar.store.generations as generations
    store = StreamStore(compact_after=1)
    store.background.load(b"_:b <http://example.org/p> \"1\" .", ox.RdfFormat.N_TRIPLES, "bg.nt")
    real_store = ox.Store

    class Copy:
        def __init__(self, *args):
            self.store = real_store(*args)

        def bulk_load(self, *args, **kwargs):
            store.background.update("DELETE WHERE { ?s <http://example.org/p> \"1\" }")
            self.store.bulk_load(*args, **kwargs)

        def __iter__(self):              # the update's own scratch store is one too
            return iter(self.store)

        def __getattr__(self, name):
            return getattr(self.store, name)

    monkeypatch.setattr(generations.ox, "Store", Copy)
    store.compact()
    assert store.compactions == []
    monkeypatch.setattr(generations.ox, "Store", real_store)
    store.compact()
    assert len(store.compactions) == 1
    assert list(store.oxigraph.quads_for_pattern(None, ox.NamedNode("http://example.org/p"), None, None)) == []


def many_elements(count: int, first: int = 0) -> bytes:
    """`count` elements with four distinct timestamps between them, as a live batch has."""
    lines = [b"@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> ."
             b" @prefix xsd: <http://www.w3.org/2001/XMLSchema#> ."]
    for n in range(first, first + count):
        lines.append(b'ex:m%d prov:generatedAtTime "2026-03-01T08:00:%02dZ"^^xsd:dateTime . ex:m%d { ex:o%d ex:v %d . }'
                     % (n, n % 4, n, n, n))
    return b"\n".join(lines)


def collected_objects_added(action) -> int:
    """How many more objects Python's collector tracks after `action` (collected before and after)."""
    gc.collect()
    before = len(gc.get_objects())
    action()
    gc.collect()
    return len(gc.get_objects()) - before


@pytest.mark.parametrize("path", ["elements", "document", "reopened"])
def test_the_index_keeps_no_collected_object_per_element(tmp_path, path):
    """The index holds each element until it is evicted, and every full collection of Python's
    walks each container object kept: one per element made the collector's pauses grow with
    the windows (tens of milliseconds at 80,000 elements)."""
    store = StreamStore(str(tmp_path / "db"))

    def add(data: bytes, name: str) -> None:
        if path == "elements":
            store.add_elements("http://s", read_elements(data, name).elements)
        else:
            store.publish("http://s", store.documents.stage("http://s", data, ox.RdfFormat.TRIG, name).staged)

    add(many_elements(10), "warm.trig")        # first calls may build caches of their own
    if path == "reopened":
        add(many_elements(2000, 10), "many.trig")
        store.close()
        del store
        reopened = []
        added = collected_objects_added(lambda: reopened.append(StreamStore(str(tmp_path / "db"))))
        assert len(reopened[0].elements_in("http://s", T0, T0 + 10 * S)) == 2010
    else:
        added = collected_objects_added(lambda: add(many_elements(2000, 10), "many.trig"))
        assert len(store.elements_in("http://s", T0, T0 + 10 * S)) == 2010
    assert added < 200


def test_a_list_of_graph_names_holds_an_internal_graph_exactly_when_one_of_them_is_one():
    from rspstar.translator.vocabulary import any_internal_graph, is_internal_graph
    names = ["http://example.org/g%d" % k for k in range(1000)]
    cases = [[], names, names + ["urn:rspstar:timestamps:x"], ["URN:RSPSTAR:timestamps:x"] + names, ["URN:RSPSTAR:Timestamps:x"],
             names + ["urn:rspstar:other"], names + ["urn:RSPSTAR:batches"], names + ["urn:rspstar:batches-not"],
             names + ["http://example.org/urn:rspstar:timestamps:x"], ["Urn:Rspstar:closure:q"],
             ["x\nurn:rspstar:facts:q:w"]]
    assert [any_internal_graph(c) for c in cases] == [any(map(is_internal_graph, c)) for c in cases] == [
        False, False, True, True, False, False, True, False, False, True, False]


@pytest.mark.parametrize("how", ["stage", "stage_optimistically", "read_elements"])
def test_a_graph_with_two_timestamps_is_refused_naming_it_and_both(how):
    data = _stream_document(3) + (b'ex:g1 prov:generatedAtTime "2026-03-01T09:00:00Z"^^xsd:dateTime .\n')
    message = ('graph <http://example.org/g1> has two timestamps \\("2026-03-01T08:00:01Z"\\^\\^<[^>]*dateTime> and '
               '"2026-03-01T09:00:00Z"')
    store = StreamStore(remove_evicted=False)
    with pytest.raises(RdfInputError, match=message):
        if how == "read_elements":
            read_elements(data, "x.trig")
        else:
            getattr(store.documents, how)("http://s", data, ox.RdfFormat.TRIG, "x.trig")
    # The same timestamp twice is one timestamp.
    again = _stream_document(3) + b'ex:g1 prov:generatedAtTime "2026-03-01T08:00:01Z"^^xsd:dateTime .\n'
    assert len(store.documents.stage("http://s", again, ox.RdfFormat.TRIG, "x.trig").staged) == 3


def test_an_interrupt_while_a_reader_takes_the_background_lock_back_leaves_the_writer_holding_it():
    # An evaluation on the main thread (the Python API's) waits for a background change to
    # finish; Ctrl-C may come as the change ends and wakes it, while it takes the lock back from
    # the writer. The interrupt is the caller's: the writer keeps its lock and ends its change,
    # and the background can be read and changed after.
    in_child("test_stream_store", "reader_interrupted_on_waking")


def reader_interrupted_on_waking():
    access = StreamStore().background._access
    with access._condition:
        access._writing = True              # a change under way: the reader below waits

    def change_ends():                      # as `writing` ends a change
        access._writing = False
        access._condition.notify_all()

    def read():
        with access.reading():
            pass
    assert interrupted_on_waking(access._condition, change_ends, read) == []
    assert (access._readers, access._writing, getattr(access._local, "depth", 0)) == (0, False, 0)
    with access.writing():
        pass
    with access.reading():
        assert access._readers == 1
