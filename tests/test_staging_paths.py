"""A replay stages its stream files optimistically (Documents.stage_optimistically: scanned and
written at once, part by part when large) and falls back on the careful path (Documents.stage)
when that raises OptimisticLoadFailed (endpoint/engine/replay.py Replay._stage). Held here, over
drawn TriG stream documents cut into many small parts: the fast path stages what the careful
one stages, into the same quads, or asks for the careful path; it never refuses a document the
careful path takes as it is, and it never fails in a way the replay would not retry unless the
careful path fails too."""
import pyoxigraph as ox
from hypothesis import event, given, settings
from hypothesis import strategies as st

from rspstar.store.document_parts import document_parts
from rspstar.store.documents import OptimisticLoadFailed
from rspstar.store.errors import StoreError
from rspstar.store.stream_store import StreamStore
from rspstar.translator.vocabulary import SKOLEM_PREFIX

STREAM, SOURCE, TRIG = "http://s", "drawn.trig", ox.RdfFormat.TRIG
# Graph names are written with `eg:` (never redefined) or in full; content uses `ex:` and
# relative IRIs, whose prefix and base the documents redefine between elements.
HEADER = ("@prefix eg: <http://example.org/> .\n@prefix ex: <http://example.org/c/> .\n"
          "@prefix prov: <http://www.w3.org/ns/prov#> .\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
          "@base <http://base.example/> .\n")

CONTENT = [
    'ex:s%d ex:p "a } # { \\" value" .',
    "ex:s ex:q <rel/%d> .",
    "ex:s ex:r ex:o%d {| ex:confidence 0.5 |} .",
    "<< ex:a ex:b ex:c%d >> ex:d 1 .",
    "ex:s ex:r ex:o%d {| ex:c 1 |}\n.",                        # a line ending in `|}`
    "# a comment } {\nex:s ex:u %d .",
    "ex:s ex:u [ ex:v %d ] .",
]
NOISE = [
    "@prefix ex: <http://example.org/v%d/> .\n",
    "PREFIX ex: <http://example.org/w%d/>\n",
    "BASE <http://base.example/%d/>\n",
    "@base <sub%d/> .\n",                                     # relative to the base before it
    "# a comment ending in a brace %d }\n",
    'VERSION "1.2"  \n',
]
# Where a document can no longer be cut (the rest of it is one part), or not at all.
STOPPERS = [
    'ex:s ex:t """long } {\n "q" \'\'\' %d\n}\n""" .',     # a newline (and a `}` line) in a string
    "_:x%d ex:p ex:o .",                                      # a blank node label: left whole
    'ex:s ex:w "the prefix and base of %d" .',                # directive words in a literal
    "PREFIX eg: <http://example.org/>  # %d\n",               # a directive with a comment
]
# What must send a document to the careful path, or make both paths refuse it.
TROUBLE = ["default triple", "default block", "syntax error", "blank stamp", "blank name []",
           "blank name _:", "untimed", "two timestamps", "reused name", "reserved name", "bad timestamp"]


def fill(template: str, k: int) -> str:
    return template % k if "%" in template else template


def stamp(name: str, second: int, form: int = 0) -> str:
    value = "2026-03-01T08:00:%02d%sZ" % (second % 60, ".5" if second >= 60 else "")
    literal = ['"%s"^^xsd:dateTime' % value, '"%s"^^<http://www.w3.org/2001/XMLSchema#dateTime>' % value,
               '"soon"'][form]
    return "%s prov:generatedAtTime %s .\n" % (name, literal)


@st.composite
def stream_documents(draw):
    """A TriG stream document: elements (a graph block and its timestamp triple) and noise
    statements between them, each with an order key; a detached timestamp is moved a few
    statements on. At most one element has trouble, at most one a cut stopper."""
    n = draw(st.integers(1, 30))
    trouble_at, stopper_at = draw(st.integers(0, 2 * n)), draw(st.integers(0, 3 * n))
    statements: list[tuple[int, str]] = []
    names: list[tuple[str, int]] = []
    for k in range(n):
        trouble = draw(st.sampled_from(TROUBLE)) if k == trouble_at else None
        for _ in range(draw(st.integers(0, 2))):
            statements.append((10 * len(statements), fill(draw(st.sampled_from(NOISE)), k)))
        if k == stopper_at and draw(st.booleans()):
            statements.append((10 * len(statements), fill(draw(st.sampled_from(STOPPERS[-1:])), k)))
        if trouble in ("default triple", "syntax error", "default block", "blank stamp"):
            statements.append((10 * len(statements), fill({
                "default triple": "ex:x ex:y ex:z%d .\n", "default block": "{ ex:default%d ex:p ex:o }\n",
                "syntax error": "eg:broken%d { ex:a }\n",
                "blank stamp": '[] prov:generatedAtTime "2026-03-01T08:00:%02dZ"^^xsd:dateTime .\n'}[trouble], k)))
        second = draw(st.integers(0, 80))
        name = draw(st.sampled_from(["eg:g%d", "<http://example.org/g%d>"])) % k
        if trouble == "reused name" and names:
            name, earlier = draw(st.sampled_from(names))
            second = draw(st.sampled_from([earlier, second]))      # the same timestamp: one element
        elif trouble == "blank name []":
            name = "[]"
        elif trouble == "blank name _:":
            name = "_:b%d" % k
        elif trouble == "reserved name":
            name = "<urn:rspstar:x%d>" % k
        names.append((name, second))
        content = [fill(draw(st.sampled_from(CONTENT)), 100 * k + j) for j in range(draw(st.integers(0, 3)))]
        if k == stopper_at:
            content.append(fill(draw(st.sampled_from(STOPPERS[:-1])), 100 * k))
        if draw(st.booleans()):
            block = "%s { %s }\n" % (name, " ".join(content))
        else:
            block = "GRAPH %s {\n  %s\n}\n" % (name, "\n  ".join(content))
        where = draw(st.sampled_from(["before", "after", "detached", "in a default block", "no block"]))
        if trouble == "untimed":
            where = "untimed"
        timestamp = stamp(name, second, 2 if trouble == "bad timestamp" else draw(st.integers(0, 1)))
        if where == "in a default block":
            timestamp = "{ %s }\n" % timestamp.rstrip(" .\n")
        order = 10 * len(statements)
        if where in ("before", "in a default block", "no block"):
            statements.append((order, timestamp))
        if where != "no block":
            statements.append((order + 1, block))
        if where == "after":
            statements.append((order + 2, timestamp))
        elif where == "detached":
            statements.append((order + 10 * draw(st.integers(1, 8)) + 5, timestamp))
        if trouble == "two timestamps":
            statements.append((order + 10 * draw(st.integers(0, 8)) + 3, stamp(name, second + 1)))
    statements.sort(key=lambda statement: statement[0])
    return (HEADER + "".join(text for _, text in statements)).encode()


def store_with(prelude: int | None) -> StreamStore:
    """A fresh store, holding one earlier element (graph eg:g<prelude>) when asked."""
    store = StreamStore()
    if prelude is not None:
        earlier = ('<http://example.org/g%d> <http://www.w3.org/ns/prov#generatedAtTime> '
                   '"2026-03-01T07:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
                   '<http://example.org/g%d> { <http://e/a> <http://e/b> <http://e/c> }\n' % (prelude, prelude))
        store.documents.stage(STREAM, earlier.encode(), TRIG, "earlier.trig")
    return store


def canonical_quads(store: StreamStore) -> list[str]:
    """Every quad of the store, blank nodes canonicalised (reifiers are fresh in every load)."""
    dataset = ox.Dataset(store.oxigraph.quads_for_pattern(None, None, None, None))
    dataset.canonicalize(ox.CanonicalizationAlgorithm.UNSTABLE)
    return sorted(str(quad) for quad in dataset)


def stage(store: StreamStore, optimistic: bool, data: bytes, part_bytes: int):
    """The result, or the typed error; any other exception fails the test."""
    try:
        if optimistic:
            return store.documents.stage_optimistically(STREAM, data, TRIG, SOURCE, part_bytes=part_bytes)
        return store.documents.stage(STREAM, data, TRIG, SOURCE)
    except StoreError as e:
        return e


@settings(max_examples=150, deadline=None)
@given(stream_documents(), st.integers(min_value=16, max_value=400),
       st.one_of(st.none(), st.integers(0, 60)))
def test_optimistic_staging_stages_what_careful_staging_does_or_asks_for_it(data, part_bytes, prelude):
    fast_store, careful_store = store_with(prelude), store_with(prelude)
    fast = stage(fast_store, True, data, part_bytes)
    careful = stage(careful_store, False, data, part_bytes)
    event("optimistic: %s, %s parts" % (type(fast).__name__ if isinstance(fast, StoreError) else "staged",
                                         "1" if document_parts(data, TRIG, part_bytes) is None else "2+"))
    if isinstance(fast, OptimisticLoadFailed):
        # The replay starts again on the careful path. That path may refuse the document or
        # rewrite it, but a document it takes as it is should not have been sent there.
        if not isinstance(careful, StoreError):
            assert (careful.untimed_graphs or careful.ignored_default_triples
                    or any(e.graph.startswith(SKOLEM_PREFIX) for e in careful.staged)), (
                "the optimistic path refused a document the careful path takes as it is: %s" % fast)
        return
    if isinstance(fast, StoreError):
        # Not retried by the replay: the careful path must refuse the document too.
        assert isinstance(careful, StoreError), "only the optimistic path refused it: %r" % fast
        return
    assert not isinstance(careful, StoreError), "only the careful path refused it: %r" % careful
    assert (fast.untimed_graphs, fast.ignored_default_triples) == ([], 0)
    assert (careful.untimed_graphs, careful.ignored_default_triples) == ([], 0)
    assert [(e.graph, e.timestamp, e.stamp) for e in fast.staged] == \
        [(e.graph, e.timestamp, e.stamp) for e in careful.staged]
    # Publishing waits for the parts still being written.
    assert fast_store.publish(STREAM, fast.staged) == careful_store.publish(STREAM, careful.staged)
    assert canonical_quads(fast_store) == canonical_quads(careful_store)


@settings(max_examples=150, deadline=None)
@given(stream_documents(), st.integers(min_value=16, max_value=400))
def test_each_element_waits_for_the_last_part_that_holds_any_of_it(data, part_bytes):
    # The optimistic path takes an element to be held by the part its timestamp is first in,
    # and overrides that for the elements a later part holds too (content continued there, a
    # timestamp repeated): publishing one must wait for the last part with any of its quads.
    import rspstar.store.documents as documents
    from rspstar.store.staged import PartWrite

    parts = document_parts(data, TRIG, part_bytes)
    made: list[PartWrite] = []

    class Recorded(PartWrite):
        def __init__(self):
            super().__init__()
            made.append(self)

    original = documents.PartWrite
    documents.PartWrite = Recorded
    try:
        fast = stage(StreamStore(), True, data, part_bytes)
    finally:
        documents.PartWrite = original
    if isinstance(fast, StoreError):
        return
    if parts is None:
        assert all(e.written is None for e in fast.staged)
        return
    last: dict[str, int] = {}
    for k, part in enumerate(parts):
        for quad in ox.parse(part, format=TRIG):
            graph = quad.subject if isinstance(quad.graph_name, ox.DefaultGraph) else quad.graph_name
            if isinstance(graph, ox.NamedNode):
                last[graph.value] = k
    held = {e.graph: made.index(e.written) for e in fast.staged}
    event("an element in several parts" if any(
        sum(1 for part in parts if e.graph.encode() in part) > 1 for e in fast.staged) else "each element in one part")
    assert held == {graph: last[graph] for graph in held}


def test_an_element_repeated_in_a_later_part_waits_for_that_part(monkeypatch):
    import rspstar.store.documents as documents
    from rspstar.store.staged import PartWrite
    made: list[PartWrite] = []

    class Recorded(PartWrite):
        def __init__(self):
            super().__init__()
            made.append(self)

    monkeypatch.setattr(documents, "PartWrite", Recorded)
    elements = "".join('eg:g%d prov:generatedAtTime "2026-03-01T08:00:%02dZ" .\neg:g%d { ex:a ex:b %d }\n' % (k, k, k, k)
                       for k in range(8))
    # g1 again at the end, its timestamp repeated (g2's content continued, its timestamp not).
    data = (HEADER + elements + 'eg:g1 prov:generatedAtTime "2026-03-01T08:00:01Z" .\neg:g1 { ex:a ex:c 99 }\n'
            'eg:g2 { ex:a ex:c 98 }\n').encode()
    staged = StreamStore().documents.stage_optimistically(STREAM, data, TRIG, SOURCE, part_bytes=100).staged
    held = {e.graph.rsplit("/", 1)[1]: made.index(e.written) for e in staged}
    assert len(made) >= 4 and held["g1"] == held["g2"] == len(made) - 1
    assert held["g0"] == 0 and held["g0"] < held["g3"] < held["g1"]
