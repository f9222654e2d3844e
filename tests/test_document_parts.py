"""A document cut into parts (store/document_parts.py) must mean, part by part, what it means
whole: each part loaded alone, together they hold the whole document's quads."""
import re
from collections import Counter

import pyoxigraph as ox
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rspstar.store.document_parts import document_parts

HEADER = ("@prefix ex: <http://example.org/> .\n@prefix prov: <http://www.w3.org/ns/prov#> .\n"
          "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n@base <http://base.example/> .\n")
_BLANK = re.compile(r"_:[0-9A-Za-z]+")


def shape(data: bytes, fmt=ox.RdfFormat.TRIG, parts: list[bytes] | None = None) -> Counter:
    """The quads of `data` (or of its parts, each loaded alone), blank nodes masked: reifiers
    are fresh blank nodes in every load."""
    store = ox.Store()
    for part in parts or [data]:
        store.load(part, fmt)
    return Counter(_BLANK.sub("_:b", str(q)) for q in store)


def graph_block(k: int, lines: int) -> str:
    body = ['ex:s%d ex:p "a } # { \\" value" ;' % k, "ex:q <relative/%d> ;" % k,
            "ex:r ex:o%d {| ex:confidence 0.%d |}" % (k, k % 10), ". << ex:a ex:b ex:c%d >> ex:d %d ." % (k, k)]
    if lines == 1:
        return "ex:g%d { %s }\n" % (k, " ".join(body))
    return "GRAPH ex:g%d {\n  %s\n}\n" % (k, "\n  ".join(body))


STATEMENTS = st.one_of(
    st.builds(lambda k, lines: graph_block(k, lines), st.integers(0, 999), st.sampled_from([1, 3])),
    st.builds(lambda k: 'ex:g%d prov:generatedAtTime "2026-03-01T08:00:%02dZ"^^xsd:dateTime .\n' % (k, k % 60),
              st.integers(0, 999)),
    st.builds(lambda k: "@prefix ex: <http://example.org/v%d/> .\n" % k, st.integers(0, 9)),
    st.builds(lambda k: "PREFIX ex: <http://example.org/w%d/>\n" % k, st.integers(0, 9)),
    st.builds(lambda k: "BASE <http://base.example/%d/>\n" % k, st.integers(0, 9)),
    st.builds(lambda k: "# a comment ending in a brace %d }\n" % k, st.integers(0, 9)),
    st.builds(lambda k: "{ ex:default%d ex:p ex:o }\n" % k, st.integers(0, 9)),
    st.builds(lambda k: "ex:g%d { ex:s ex:p ex:o {| ex:c %d |}\n}\n" % (k, k), st.integers(0, 9)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(STATEMENTS, min_size=1, max_size=60), st.integers(min_value=16, max_value=400))
def test_a_trig_document_in_parts_holds_what_it_holds_whole(statements, part_bytes):
    data = (HEADER + "".join(statements)).encode()
    parts = document_parts(data, ox.RdfFormat.TRIG, part_bytes)
    if parts is not None:
        assert len(parts) >= 2
        assert shape(data, parts=parts) == shape(data)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 999), min_size=1, max_size=60), st.integers(min_value=16, max_value=400))
def test_an_nquads_document_in_parts_holds_what_it_holds_whole(keys, part_bytes):
    data = "".join('<http://e/s%d> <http://e/p> "x } %d" <http://e/g%d> . # }\n' % (k, k, k % 7)
                   for k in keys).encode()
    parts = document_parts(data, ox.RdfFormat.N_QUADS, part_bytes)
    if parts is not None:
        assert shape(data, ox.RdfFormat.N_QUADS, parts) == shape(data, ox.RdfFormat.N_QUADS)


def test_a_stream_document_is_cut_after_graph_blocks_and_each_part_repeats_the_directives():
    data = (HEADER + "".join(graph_block(k, 1 + 2 * (k % 2)) for k in range(40))
            + "@prefix ex: <http://example.org/later/> .\n"
            + "".join(graph_block(k, 3) for k in range(40, 80))).encode()
    parts = document_parts(data, ox.RdfFormat.TRIG, 1000)
    assert parts is not None and len(parts) >= 5
    assert b"".join(parts).count(b"ex:g") == data.count(b"ex:g")      # no statement lost or repeated
    assert all(part.startswith(HEADER.encode()) for part in parts[1:])
    assert all(b"http://example.org/later/" in part for part in parts[-2:])
    assert shape(data, parts=parts) == shape(data)


@pytest.mark.parametrize("why,text", [
    ("a long string can hold a newline", 'ex:g { ex:s ex:p """a\n}\n""" }\n'),
    ("a directive keyword inside a literal", 'ex:g { ex:s ex:p "the base of it" }\n'),
    ("a directive sharing its line with data", "@prefix ex: <http://e/> . ex:a ex:b ex:c .\n"),
    ("two directives on one line", "@prefix a: <http://a/> . @prefix b: <http://b/> .\n"),
])
def test_cutting_stops_where_a_cut_could_change_the_meaning(why, text):
    blocks = "".join(graph_block(k, 3) for k in range(30))
    data = (HEADER + blocks + text + blocks).encode()
    parts = document_parts(data, ox.RdfFormat.TRIG, 500)
    assert parts is not None and len(parts) > 3, why          # cut before it
    assert text.encode() in parts[-1], why                    # not after it: the rest is one part
    assert shape(data, parts=parts) == shape(data)


def test_a_document_with_a_blank_node_label_is_left_whole():
    # Oxigraph renames blank node labels per load: `_:x` in two parts would be two nodes.
    data = (HEADER + "".join(graph_block(k, 3) for k in range(30)) + "ex:g { _:x ex:p ex:o }\n").encode()
    assert document_parts(data, ox.RdfFormat.TRIG, 500) is None


def test_small_documents_and_formats_without_safe_boundaries_are_left_whole():
    data = (HEADER + "".join(graph_block(k, 1) for k in range(30))).encode()
    assert document_parts(data, ox.RdfFormat.TRIG, len(data)) is None
    assert document_parts(data, ox.RdfFormat.TURTLE, 100) is None
    # Lines ending in an annotation's `|}` or with a comment are no boundary.
    unsafe = (HEADER + "ex:g { ex:s ex:p ex:o {| ex:c 1 |}\n. }  # }\n" * 50).encode()
    assert document_parts(unsafe, ox.RdfFormat.TRIG, 200) is None
