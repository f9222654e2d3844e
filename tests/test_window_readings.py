"""Spec 6.15: RSP-QL as RSP4J, RSP-JS, rsp-rs and Kolibrie users write it. A WINDOW block holding
no GRAPH pattern reads its elements' merged content and their timestamp triples; the readings
and the warnings of queries that could match nothing, through `rspstar check`, the registration
answer (HTTP and the Python API) and the replay."""
import json

import pytest

import rspstar
from http_app import AUTH
from rspstar.endpoint.cli import main
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import EngineConfig, Runner
from rspstar.store.stream_store import StreamStore
from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.validate import compile_query

# RSP-JS's README query (github pbonte/RSP-JS), as rsp-rs's README writes it too.
RSP_JS = """PREFIX : <https://rsp.js/>
REGISTER RStream <output> AS
SELECT *
FROM NAMED WINDOW :w1 ON STREAM :stream1 [RANGE 10 STEP 2]
WHERE{
    WINDOW :w1 { ?s ?p ?o}
}"""
# RSP4J's CityBench q1 (github streamreasoning/rsp4j), shortened: a WINDOW block of plain triples.
CITYBENCH = """PREFIX ses: <http://www.insight-centre.org/dataset/SampleEventService#>
PREFIX ct: <http://www.insight-centre.org/citytraffic#>
PREFIX ssn: <http://purl.oclc.org/NET/ssnx/ssn#>
PREFIX sao: <http://purl.oclc.org/NET/sao/>
REGISTER RSTREAM <http://example.org/q1> AS
SELECT ?obId1 ?v1
FROM NAMED WINDOW <http://example.org/w1> ON ses:AarhusTrafficData182955 [RANGE PT3S STEP PT1S]
FROM <http://citybench/SensorRepository.rdf>
WHERE {
  ?p1 a ct:CongestionLevel .
  WINDOW <http://example.org/w1> { ?obId1 ssn:observedProperty ?p1 ; sao:hasValue ?v1 . }
}"""
STREAM = "http://www.insight-centre.org/dataset/SampleEventService#AarhusTrafficData182955"
OBSERVATIONS = """@prefix ssn: <http://purl.oclc.org/NET/ssnx/ssn#> . @prefix sao: <http://purl.oclc.org/NET/sao/> .
@prefix prov: <http://www.w3.org/ns/prov#> . @prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
@prefix ex: <http://example.org/> .
ex:e1 prov:generatedAtTime "1970-01-01T00:00:01Z"^^xsd:dateTime .
ex:e1 { ex:o1 ssn:observedProperty ex:congestion ; sao:hasValue 12 . }
ex:e2 prov:generatedAtTime "1970-01-01T00:00:02Z"^^xsd:dateTime .
ex:e2 { ex:o2 ssn:observedProperty ex:congestion ; sao:hasValue 30 . }
"""
SENSORS = """@prefix ct: <http://www.insight-centre.org/citytraffic#> . @prefix ex: <http://example.org/> .
<http://citybench/SensorRepository.rdf> { ex:congestion a ct:CongestionLevel . }
"""
READS_CONTENT = "reads its elements' merged content and their timestamp triples (no GRAPH pattern inside the block, " \
                "spec 6.15)"


def _check(write, capsys, text, *extra):
    assert main(["check", str(write("q.rq", text)), *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_rsp_js_forms_are_read_and_named_as_normalised(write, capsys):
    summary = _check(write, capsys, RSP_JS)
    [window] = summary["windows"]
    assert (window["range"], window["step"], window["stream"]) == ("PT0.01S", "PT0.002S", "https://rsp.js/stream1")
    assert summary["r2s"] == "RSTREAM" and summary["output_stream"].endswith("/output")
    assert summary["normalised"] == [
        "2:10: REGISTER RStream read as REGISTER RSTREAM (RSP-JS and rsp-rs spell it so)",
        "4:49: RANGE 10 read as PT0.01S (a bare integer is milliseconds, as RSP-JS and rsp-rs read it)",
        "4:57: STEP 2 read as PT0.002S (a bare integer is milliseconds, as RSP-JS and rsp-rs read it)"]
    assert summary["readings"] == ["6:5: WINDOW <https://rsp.js/w1> " + READS_CONTENT]


def test_check_names_each_blocks_reading_and_why(write, capsys):
    text = CITYBENCH.replace("}\n}", "}\n  WINDOW <http://example.org/w1> { ?g ssn:observedBy ?s . GRAPH ?g { ?x ?y ?z } }\n}")
    summary = _check(write, capsys, text)
    assert summary["readings"] == [
        "11:3: WINDOW <http://example.org/w1> " + READS_CONTENT,
        "12:3: WINDOW <http://example.org/w1> reads its elements as named graphs (GRAPH), its default graph their "
        "timestamp triples (a GRAPH pattern inside the block, spec section 3)"]
    # The block with GRAPH reads ssn:observedBy against timestamp triples: it can never match.
    [warning] = summary["warnings"]
    assert warning.startswith("12:39: <http://purl.oclc.org/NET/ssnx/ssn#observedBy> in WINDOW "
                              "<http://example.org/w1> is read against the window's timestamp triples")
    forced = _check(write, capsys, text, "--option", "window_default_graph=timestamps")
    assert all(r.endswith("(option window_default_graph = timestamps)") for r in forced["readings"])
    assert len(forced["warnings"]) == 3     # ssn:observedProperty and sao:hasValue of the first block too
    merged = _check(write, capsys, text, "--option", "window_default_graph=union")
    assert merged["warnings"] == [] and all("merged content" in r for r in merged["readings"])


def test_check_warns_when_patterns_outside_windows_read_an_empty_background(write, capsys):
    empty = write("empty.trig", "<http://example.org/other> { <http://example.org/a> <http://example.org/b> 1 . }\n")
    [warning] = _check(write, capsys, CITYBENCH, "--background", str(empty))["warnings"]
    assert warning.startswith("10:3: the triple patterns outside every WINDOW read the merge of the FROM graphs "
                              "<http://citybench/SensorRepository.rdf>, which holds no triple")
    assert _check(write, capsys, CITYBENCH, "--background", str(write("s.trig", SENSORS)))["warnings"] == []
    assert _check(write, capsys, CITYBENCH)["warnings"] == []       # no data given: nothing known


def test_a_citybench_query_written_for_rsp4j_answers_its_rows(write, tmp_path):
    # Issue 59: before spec 6.15, RSP4J's CityBench q1 answered nothing at every evaluation.
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(write("q.rq", CITYBENCH)), "--stream", "%s=%s" % (STREAM, write("o.trig", OBSERVATIONS)),
                 "--background", str(write("s.trig", SENSORS)), "--from", "1970-01-01T00:00:00Z",
                 "--to", "1970-01-01T00:00:04Z", "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["time"], sorted(b["v1"][1:3] for b in r["bindings"])) for r in records] == [
        ("1970-01-01T00:00:03Z", ["12", "30"]), ("1970-01-01T00:00:04Z", ["12", "30"])]
    assert main(["replay", str(write("q.rq", CITYBENCH)), "--stream", "%s=%s" % (STREAM, write("o.trig", OBSERVATIONS)),
                 "--background", str(write("s.trig", SENSORS)), "--from", "1970-01-01T00:00:00Z",
                 "--to", "1970-01-01T00:00:04Z", "--out", str(out), "--option", "window_default_graph=timestamps"]) == 0
    assert all(json.loads(line)["bindings"] == [] for line in out.read_text().splitlines())


def test_the_registration_answer_says_what_each_block_reads(client):
    created = client.post("/queries", query_string={"id": "cb"}, data=CITYBENCH,
                          content_type="application/sparql-query", headers=AUTH)
    assert created.status_code == 201
    answer = created.get_json()
    assert answer["readings"] == ["11:3: WINDOW <http://example.org/w1> " + READS_CONTENT]
    # The HTTP tests' background has no graph <http://citybench/SensorRepository.rdf>.
    assert any(w.startswith("10:3: the triple patterns outside every WINDOW read the merge of the FROM graphs")
               for w in answer["warnings"])
    assert client.get("/queries/cb").get_json()["readings"] == answer["readings"]


def test_the_python_api_says_what_each_block_reads_and_warns_of_an_empty_background():
    engine = rspstar.Engine()
    query = engine.register(CITYBENCH, "cb")
    described = query.describe()
    assert described["readings"] == ["11:3: WINDOW <http://example.org/w1> " + READS_CONTENT]
    assert len(described["warnings"]) == 1 and "holds no triple now" in described["warnings"][0]
    engine.load_background(SENSORS)
    assert engine.register(CITYBENCH, "again").describe()["warnings"] == []


def test_a_window_on_a_stream_no_source_feeds_is_warned_about_live():
    runner = Runner(StreamStore(), VirtualClock(0), EngineConfig())
    text = CITYBENCH.replace("FROM <http://citybench/SensorRepository.rdf>\n", "").replace("?p1 a ct:CongestionLevel .", "")
    assert runner.register(text, "unknown").query.warnings == []        # sources not known: no warning
    runner.fed_streams = lambda: {"http://example.org/fed"}
    [warning] = runner.register(text, "live").query.warnings
    assert warning == ("7:19: window <http://example.org/w1> reads stream <%s>, which no configured source feeds and "
                       "which holds no element: it stays empty until elements are posted to it (POST /streams?stream=...) "
                       "or a source feeds it" % STREAM)
    runner.fed_streams = lambda: {STREAM}
    assert runner.register(text, "fed").query.warnings == []
    # A stream another query's output feeds is fed too.
    runner.fed_streams = lambda: set()
    runner.register("PREFIX ex: <http://example.org/> REGISTER RSTREAM <%s> AS CONSTRUCT { ?s ?p ?o } "
                    "FROM NAMED WINDOW ex:x ON ex:in [RANGE PT1S] WHERE { WINDOW ex:x { ?s ?p ?o } }" % STREAM, "out")
    assert runner.register(text, "downstream").query.warnings == []


@pytest.mark.parametrize("text,where,message", [
    ("[RANGE 10s]", (2, 48), "10s is not an xsd:duration; write PT10S"),
    ("[ROWS 5]", (2, 42), "expected a window specification, found 'ROWS'; the forms: [RANGE PT10S STEP PT5S]"),
    ("[RANGE 0 STEP 5]", (2, 48), "RANGE must be positive, got 0"),
])
def test_window_errors_name_the_forms_and_the_position(text, where, message):
    with pytest.raises(QuerySyntaxError) as info:
        compile_query("PREFIX ex: <http://example.org/>\nSELECT * FROM NAMED WINDOW ex:w ON ex:s %s "
                      "WHERE { WINDOW ex:w { ?s ?p ?o } }" % text)
    assert (info.value.line, info.value.column) == where and info.value.message.startswith(message)
    if "forms" in message:
        for form in ("ELEMS", "PARTITION BY", "RANGE UNBOUNDED", "FROM NOW-", "FACTS", "TUMBLING", "START"):
            assert form in info.value.message


def test_kolibries_variable_stream_is_refused_by_name():
    # Kolibrie's tests (github StreamIntelligenceLab/Kolibrie, kolibrie/tests/rsp_engine_test.rs)
    # read a window ON ?stream, any stream the engine is fed.
    with pytest.raises(QuerySyntaxError) as info:
        compile_query("PREFIX : <http://test/>\nREGISTER ISTREAM <http://out/stream> AS SELECT * FROM NAMED WINDOW :w "
                      "ON ?stream [RANGE 3 STEP 1] WHERE { WINDOW :w { ?s a <http://test/IType> . } }")
    assert (info.value.line, info.value.column) == (2, 74)
    assert info.value.message.startswith("a variable as a window's stream (ON ?stream, as Kolibrie writes it) has no "
                                         "equivalent in this engine")


def test_the_background_warnings_name_the_graph_each_pattern_reads():
    from rspstar.translator.warnings import background_warnings
    head = "PREFIX ex: <http://example.org/>\nSELECT * %s FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S]\nWHERE { %s }"
    window = "WINDOW ex:w { ?s ?p ?o }"

    def warned(text, default=False, graphs=(), dialect=None):
        query = compile_query(text, dialect=dialect)
        return background_warnings(query, lambda g: default if g is None else g in graphs, list(graphs))
    assert warned(head % ("", "?s ex:in ?room . " + window), default=True) == []
    [empty] = warned(head % ("", "?s ex:in ?room . " + window))
    assert empty.startswith("3:9: the triple patterns outside every WINDOW read the background default graph")
    # FROM NAMED alone leaves the default graph empty (SPARQL's dataset description) ...
    [named_only] = warned(head % ("FROM NAMED ex:rooms", "?s ex:in ?room . " + window), default=True,
                          graphs=["http://example.org/rooms"])
    assert "an empty default graph (the query names FROM NAMED graphs and no FROM graph)" in named_only
    # ... but not in CQELS-QL, which reads its default dataset whatever it names.
    cqels = ("PREFIX ex: <http://example.org/> SELECT * FROM NAMED ex:rooms WHERE { ?s ex:in ?room . "
             "STREAM ex:s [RANGE 1s] { ?s ?p ?o } }")
    assert warned(cqels, default=True, graphs=["http://example.org/rooms"]) == []
    # GRAPH outside every window: a graph that holds nothing, or no named graph at all.
    [graph] = warned(head % ("", "GRAPH ex:rooms { ?room ex:label ?l } " + window), default=True)
    assert graph.startswith("3:15: GRAPH outside every WINDOW reads <http://example.org/rooms>, which holds no triple")
    [any_graph] = warned(head % ("", "GRAPH ?g { ?room ex:label ?l } " + window))
    assert "reads the background named graphs, which hold no triple now" in any_graph
    assert warned(head % ("", "GRAPH ?g { ?room ex:label ?l } " + window), graphs=["http://example.org/x"]) == []
    # C-SPARQL reads its windows merged with the background: its patterns read the windows too.
    assert warned("PREFIX ex: <http://example.org/> SELECT * FROM STREAM ex:s [RANGE 1s] FROM ex:rooms "
                  "WHERE { ?s ex:in ?room }") == []


def test_an_annotation_read_against_timestamp_triples_is_warned_about():
    query = compile_query("PREFIX ex: <http://example.org/> PREFIX prov: <http://www.w3.org/ns/prov#>\n"
                          "SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S]\n"
                          "WHERE { WINDOW ex:w { ?g prov:generatedAtTime ?t {| ex:by ?who |} . GRAPH ?g { ?a ?b ?c } } }")
    assert [w.split(" in WINDOW")[0] for w in query.warnings] == [
        "3:26: rdf:reifies", "3:53: <http://example.org/by>"]
