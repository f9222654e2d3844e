"""The Python API (`import rspstar`): an engine over an in-memory store driven by `advance`,
elements pushed as TriG, N-Quads or JSON envelopes with datetime times, results as records,
rows and DataFrames, and replays of recordings; and the README's Python block, run as written."""
import json
import re
from datetime import datetime, timedelta, timezone

import pytest

import rspstar
from conftest import CONFORMANCE, REPO, compare_lines
from rspstar.endpoint.api import python_value
from rspstar.store.errors import RdfInputError

T0 = datetime(2026, 3, 1, 8, tzinfo=timezone.utc)
QUERY = """PREFIX ex: <http://example.org/>
SELECT ?t ?v
FROM NAMED WINDOW ex:w ON ex:temp [RANGE PT4S STEP PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?t ex:value ?v FILTER(?v > 21) } } }"""
TRIG = """@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:e1 prov:generatedAtTime "2026-03-01T08:00:01Z"^^xsd:dateTime . ex:e1 { ex:t1 ex:value 20 . }
ex:e2 prov:generatedAtTime "2026-03-01T08:00:03Z"^^xsd:dateTime . ex:e2 { ex:t2 ex:value 25 . }
"""
TEMP = "http://example.org/temp"


def test_push_advance_and_read_rows_and_a_dataframe():
    engine = rspstar.Engine(start=T0)
    query = engine.register(QUERY, id="warm")
    assert engine.push(TEMP, TRIG) == 2
    assert engine.push(TEMP, {"time": T0 + timedelta(seconds=5), "data": "<http://example.org/t3> <http://example.org/value> 22.5 ."}) == 1
    assert engine.advance(T0 + timedelta(seconds=6)) == 3            # closes at :02, :04, :06
    assert [(r["time"].second, r["t"], r["v"]) for r in query.rows()] == [
        (4, "http://example.org/t2", 25), (6, "http://example.org/t2", 25), (6, "http://example.org/t3", 22.5)]
    assert [r["time"] for r in query.records] == ["2026-03-01T08:00:02Z", "2026-03-01T08:00:04Z", "2026-03-01T08:00:06Z"]
    frame = query.dataframe()
    assert list(frame.columns) == ["time", "t", "v"] and len(frame) == 3 and frame["v"].sum() == 72.5
    # Later evaluations add to the same query's results; the clock does not go back.
    engine.advance("2026-03-01T08:00:08Z")
    assert len(query.records) == 4
    with pytest.raises(ValueError, match="does not go back"):
        engine.advance(T0)
    assert query.describe()["windows"][0]["range"] == "PT4S" and engine.now == T0 + timedelta(seconds=8)


def test_elements_as_n_quads_and_json_lines_and_bad_input_named_by_line():
    engine = rspstar.Engine(start=T0)
    query = engine.register(QUERY)
    nquads = ('<http://example.org/e0> <http://www.w3.org/ns/prov#generatedAtTime> '
              '"2026-03-01T08:00:01Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
              '<http://example.org/t1> <http://example.org/value> "30"^^<http://www.w3.org/2001/XMLSchema#integer> '
              '<http://example.org/e0> .\n')
    assert engine.push(TEMP, nquads, format="nquads") == 1
    lines = "\n".join(json.dumps({"time": "2026-03-01T08:00:0%dZ" % s, "data": "<http://example.org/t%d> "
                                  "<http://example.org/value> %d ." % (s, 20 + s)}) for s in (2, 3))
    assert engine.push(TEMP, lines) == 2
    with pytest.raises(RdfInputError) as bad:
        engine.push(TEMP, TRIG.replace("ex:value 25", "ex:value 25 ]"))
    assert bad.value.line == 4
    engine.advance("2026-03-01T08:00:04Z")
    assert sorted(r["v"] for r in query.rows()) == [22, 23, 30, 30]   # :02 holds t1; :04 t1, t2, t3


def test_the_api_gives_what_a_replay_of_the_same_input_gives():
    case = CONFORMANCE / "cases" / "seed001-example10-policy-per-window"
    manifest = json.loads((case / "manifest.json").read_text())
    text = (case / manifest["query"]).read_text()
    expected = [json.loads(line) for line in (case / manifest["expected"]).read_text().splitlines()]
    engine = rspstar.Engine(start=manifest["from"])
    engine.load_background(case / manifest["background"])
    query = engine.register(text, **manifest["options"])
    for stream, file in manifest["streams"].items():
        engine.push(stream, (case / file).read_text())
    engine.advance(manifest["to"])
    assert not compare_lines(expected, query.records, ordered=False)
    replayed = rspstar.replay(text, {s: case / f for s, f in manifest["streams"].items()}, manifest["from"],
                              manifest["to"], background=case / manifest["background"], **manifest["options"])
    assert not compare_lines(expected, replayed.records, ordered=False)
    assert replayed.dataframe()["shopper"].tolist() == ["http://example.org/carl", "http://example.org/eve",
                                                        "http://example.org/diana"] or \
        sorted(replayed.dataframe()["shopper"]) == ["http://example.org/carl", "http://example.org/diana",
                                                    "http://example.org/eve"]


def test_construct_and_ask_results_as_rows():
    engine = rspstar.Engine(start=T0)
    construct = engine.register(QUERY.replace("SELECT ?t ?v", "CONSTRUCT { ?t <http://example.org/warm> ?v }"))
    ask = engine.register(QUERY.replace("SELECT ?t ?v", "ASK"))
    engine.push(TEMP, TRIG)
    engine.advance("2026-03-01T08:00:04Z")
    assert construct.rows()[-1]["predicate"] == "http://example.org/warm" and construct.rows()[-1]["object"] == 25
    assert [r["boolean"] for r in ask.rows()] == [False, True]


@pytest.mark.parametrize("term,value", [
    ("<http://example.org/a>", "http://example.org/a"), ("_:b1", "_:b1"),
    ('"3"^^<http://www.w3.org/2001/XMLSchema#integer>', 3), ('"0.5"^^<http://www.w3.org/2001/XMLSchema#decimal>', 0.5),
    ('"true"^^<http://www.w3.org/2001/XMLSchema#boolean>', True),
    ('"2026-03-01T08:00:01.5Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>', T0 + timedelta(seconds=1.5)),
    ('"a \\"quoted\\" line\\n\\u00e9"', 'a "quoted" line\n\u00e9'), ('"chat"@fr', "chat"),
    ('"N(0.2, 1e-4)"^^<http://w3id.org/rsp/rspu#distribution>', "N(0.2, 1e-4)"),
    ('"x"^^<http://www.w3.org/2001/XMLSchema#integer>', "x"),
    ("<<( <http://a> <http://b> <http://c> )>>", "<<( <http://a> <http://b> <http://c> )>>"),
])
def test_terms_become_python_values(term, value):
    assert python_value(term) == value


def test_the_readmes_python_block_runs_as_written(tmp_path, monkeypatch):
    readme = (REPO / "README.md").read_text()
    [block] = re.findall(r"```python\n(.*?)```", readme, re.S)
    monkeypatch.chdir(REPO)
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["rows"], "the block's example shows results"
