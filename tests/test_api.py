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


def test_the_readmes_python_block_runs_as_written_from_any_directory(tmp_path, monkeypatch):
    # (test_install.py runs it again against the installed wheel.)
    readme = (REPO / "README.md").read_text()
    [block] = re.findall(r"```python\n(.*?)```", readme, re.S)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert [(r["time"].second, r["room"], r["t"]) for r in namespace["rows"]] == [
        (5, "http://example.org/kitchen", 31), (10, "http://example.org/kitchen", 31), (10, "http://example.org/hall", 33),
        (15, "http://example.org/hall", 33)]
    assert [(r["time"].second, r["room"]) for r in namespace["replayed"].rows()] == [
        (5, "http://example.org/kitchen"), (10, "http://example.org/kitchen")]


# -- every form of input is taken or refused with a TypeError; nothing is dropped silently ----
PLAIN = "<http://example.org/t9> <http://example.org/value> 40 ."
NT_40 = '"40"^^<http://www.w3.org/2001/XMLSchema#integer>'


@pytest.mark.parametrize("time,second", [(None, 0), ("2026-03-01T08:00:01Z", 1), (T0 + timedelta(seconds=1.5), 1.5)])
def test_plain_triples_are_one_element_at_the_given_time_or_the_clocks(time, second):
    engine = rspstar.Engine(start=T0)
    query = engine.register(QUERY)
    assert engine.push(TEMP, PLAIN, time=time) == 1
    assert engine.push(TEMP, "@prefix ex: <http://example.org/> . ex:t8 ex:value 30 .", format="turtle",
                       time=time) == 1
    assert engine.push(TEMP, PLAIN.replace("40", NT_40).encode(), format="ntriples", time=time) == 1
    # (TriG's default graph written as a block is plain triples too, not JSON.)
    assert engine.push(TEMP, "{ %s }" % PLAIN.replace("40", "41").rstrip(" ."), format="trig", time=time) == 1
    engine.advance("2026-03-01T08:00:02Z")
    [record] = query.records
    assert sorted(r["v"] for r in query.rows()) == [30, 40, 40, 41]
    assert record["windows"]["http://example.org/w"] == ["2026-03-01T07:59:58Z", "2026-03-01T08:00:02Z"]
    times = {stats.latest for stats in engine.store.streams().values()}
    assert times == {int((T0 + timedelta(seconds=second)).timestamp() * 1_000_000)}


def test_default_graph_triples_beside_elements_are_refused_not_dropped():
    engine = rspstar.Engine(start=T0)
    with pytest.raises(RdfInputError, match="1 triple that is not timestamps"):
        engine.push(TEMP, TRIG + "ex:t9 ex:value 40 .\n")
    assert engine.store.streams() == {} or all(s.elements == 0 for s in engine.store.streams().values())


def test_lists_of_envelopes_paths_open_files_and_rdflib_graphs(tmp_path):
    rdflib = pytest.importorskip("rdflib")
    engine = rspstar.Engine(start=T0)
    query = engine.register(QUERY)
    envelopes = [{"time": T0 + timedelta(seconds=1), "data": "<http://example.org/a> <http://example.org/value> 31 ."},
                 {"time": "2026-03-01T08:00:01Z", "data": "<http://example.org/b> <http://example.org/value> 32 ."}]
    assert engine.push(TEMP, envelopes) == 2
    (tmp_path / "elements.trig").write_text(TRIG)
    assert engine.push(TEMP, tmp_path / "elements.trig") == 2
    (tmp_path / "plain.nt").write_text(PLAIN.replace("40", NT_40.replace("40", "33")))
    with open(tmp_path / "plain.nt", "rb") as f:
        assert engine.push(TEMP, f, format="ntriples", time="2026-03-01T08:00:01Z") == 1
    graph = rdflib.Graph()
    graph.add((rdflib.URIRef("http://example.org/c"), rdflib.URIRef("http://example.org/value"), rdflib.Literal(34)))
    assert engine.push(TEMP, graph, time="2026-03-01T08:00:01Z") == 1
    dataset = rdflib.Dataset()
    element = rdflib.URIRef("http://example.org/e9")
    dataset.add((element, rdflib.URIRef("http://www.w3.org/ns/prov#generatedAtTime"),
                 rdflib.Literal("2026-03-01T08:00:01Z", datatype=rdflib.XSD.dateTime)))
    dataset.graph(element).add((rdflib.URIRef("http://example.org/d"), rdflib.URIRef("http://example.org/value"),
                                rdflib.Literal(35)))
    assert engine.push(TEMP, dataset) == 1
    engine.advance("2026-03-01T08:00:02Z")
    assert sorted(r["v"] for r in query.rows()) == [31, 32, 33, 34, 35]


@pytest.mark.parametrize("data", [3, 2.5, None, object(), [{"data": PLAIN}, "not an envelope"]])
def test_push_of_anything_else_is_a_type_error_naming_the_accepted_forms(data):
    engine = rspstar.Engine(start=T0)
    with pytest.raises(TypeError, match="envelope"):
        engine.push(TEMP, data)


def test_a_str_is_text_and_a_path_is_a_file_in_every_function(tmp_path):
    # One rule: load_background, register, push and replay read a str as the text itself, a
    # pathlib.Path as a file; a str that can only be a file name is refused, never parsed.
    background = tmp_path / "background.ttl"
    background.write_text("<http://example.org/t2> <http://example.org/label> \"two\" .")
    query_file = tmp_path / "warm.rq"
    query_file.write_text(QUERY)
    stream_file = tmp_path / "temp.trig"
    stream_file.write_text(TRIG)
    engine = rspstar.Engine(start=T0)
    assert engine.load_background(background) == 1
    assert engine.load_background(background.read_text(), format="turtle") == 1
    assert engine.register(query_file).describe()["windows"][0]["range"] == "PT4S"
    for call in (lambda: engine.load_background(str(background)), lambda: engine.register(str(query_file)),
                 lambda: engine.push(TEMP, str(stream_file)),
                 lambda: rspstar.replay(QUERY, {TEMP: "temp.trig"}, T0, T0 + timedelta(seconds=4))):
        with pytest.raises(TypeError, match=r"pass pathlib\.Path\("):
            call()
    by_path = rspstar.replay(query_file, {TEMP: stream_file}, T0, T0 + timedelta(seconds=4), background=background)
    by_text = rspstar.replay(QUERY, {TEMP: TRIG}, T0, T0 + timedelta(seconds=4), background=background.read_text())
    assert by_path.records == by_text.records and [r["v"] for r in by_text.rows()] == [25]


def test_a_replay_of_a_failing_query_raises_a_typed_error():
    # The window's elements above 21 joined to a SERVICE nobody answers: 08:00:02 (no such
    # element) evaluates, 08:00:04 (t2) fails.
    failing = QUERY.replace("} } }", "} } SERVICE <http://127.0.0.1:9/sparql> { ?x ?y ?z } }")
    with pytest.raises(rspstar.QueryFailed, match="query failed at 2026-03-01T08:00:04Z"):
        rspstar.replay(failing, {TEMP: TRIG}, T0, T0 + timedelta(seconds=4))


def test_the_errors_are_importable_from_rspstar_and_dir_lists_the_api():
    names = dir(rspstar)
    for name in ("Engine", "Query", "Results", "replay", "QuerySyntaxError", "RdfInputError", "QueryOverLimits",
                 "UnknownQuery", "DuplicateQuery", "EngineAtCapacity", "TranslatorError", "StoreError",
                 "EndpointError", "QueryFailed"):
        assert name in names and getattr(rspstar, name) is not None, name
    from rspstar.translator.errors import QuerySyntaxError
    assert rspstar.QuerySyntaxError is QuerySyntaxError and rspstar.RdfInputError is RdfInputError
    engine = rspstar.Engine(start=T0)
    with pytest.raises(rspstar.QuerySyntaxError) as bad:
        engine.register(QUERY.replace("WHERE {", "WHERE"))
    assert bad.value.line == 4
    engine.register(QUERY, id="warm")
    with pytest.raises(rspstar.DuplicateQuery):
        engine.register(QUERY, id="warm")
    with pytest.raises(rspstar.UnknownQuery):
        engine.remove("cold")


def test_query_and_results_show_what_they_hold():
    engine = rspstar.Engine(start=T0)
    query = engine.register(QUERY, id="warm")
    assert repr(query) == ("<Query 'warm': RSTREAM SELECT over <http://example.org/w> [RANGE PT4S STEP PT2S], "
                           "running; no evaluations yet>")
    engine.push(TEMP, TRIG)
    engine.advance("2026-03-01T08:00:04Z")
    assert repr(query).endswith("; 2 evaluations, 1 row, 2026-03-01T08:00:02Z to 2026-03-01T08:00:04Z>")
    page = query._repr_html_()
    assert "<th>t</th><th>v</th>" in page and "<td>http://example.org/t2</td><td>25</td>" in page
    replayed = rspstar.replay(QUERY, {TEMP: TRIG}, T0, T0 + timedelta(seconds=4))
    assert repr(replayed) == "<Results: 2 evaluations, 1 row, 2026-03-01T08:00:02Z to 2026-03-01T08:00:04Z>"
    assert "&lt;script&gt;" in rspstar.Results([{"time": "2026-03-01T08:00:02Z", "windows": {}, "bindings": [
        {"x": '"<script>"'}]}])._repr_html_()


def test_a_query_without_a_window_is_refused_and_a_versioned_one_runs():
    engine = rspstar.Engine(start=T0)
    with pytest.raises(rspstar.QueryNeverEvaluated, match="no window"):
        engine.register("SELECT * WHERE { ?s ?p ?o }")
    query = engine.register('VERSION "1.2"\n' + QUERY)
    engine.push(TEMP, TRIG)
    engine.advance("2026-03-01T08:00:04Z")
    assert [r["v"] for r in query.rows()] == [25]


def test_a_query_read_from_a_file_resolves_its_relative_iris_against_the_file_in_every_function(tmp_path):
    from datetime import datetime, timezone
    folder = tmp_path / "queries"
    folder.mkdir()
    path = folder / "relative.rq"
    path.write_text("PREFIX ex: <http://example.org/>\nSELECT ?o FROM NAMED WINDOW ex:w ON <s> [RANGE PT2S]\n"
                    "WHERE { WINDOW ex:w { GRAPH ?g { ?o ?p ?v } } }")
    start = datetime(2026, 3, 1, 8, 0, tzinfo=timezone.utc)
    engine = rspstar.Engine(start=start)
    registered = engine.register(path)
    assert [w["stream"] for w in registered.describe()["windows"]] == [(folder / "s").as_uri()]
    assert engine.register(path, id="elsewhere", base="http://example.org/q/").describe()["windows"][0]["stream"] \
        == "http://example.org/q/s"
    element = "<http://example.org/o> <http://example.org/p> 1 ."
    replayed = rspstar.replay(path, {(folder / "s").as_uri(): "@prefix prov: <http://www.w3.org/ns/prov#> . "
                                     "<http://example.org/g> prov:generatedAtTime \"2026-03-01T08:00:01Z\""
                                     "^^<http://www.w3.org/2001/XMLSchema#dateTime> . <http://example.org/g> { %s }"
                                     % element}, start, "2026-03-01T08:00:02Z")
    assert [row["o"] for row in replayed.rows()] == ["http://example.org/o"]
