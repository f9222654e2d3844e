"""A query's evaluations in the SPARQL Query Results JSON shape (history, server-sent events,
sinks) and in the compact shape on request: terms written exactly as Oxigraph's own SPARQL
results serializer writes them, read back by real SPARQL JSON parsers (rdflib's, Oxigraph's)."""
import io
import json

import pyoxigraph as ox
import pytest
from rdflib import BNode, Literal, URIRef, Variable
from rdflib.query import Result

from http_app import AUTH, RSPQL, S, STREAM, T0
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.result_shapes import COMPACT, SPARQL_JSON, has_results, shaped_json, sparql_json, term_json
from rspstar.endpoint.engine.runner import EngineConfig, Runner
from rspstar.endpoint.engine.sinks import HttpSink
from rspstar.store.stream_store import StreamStore
from rspstar.store.terms import term_to_ntriples

XSD = "http://www.w3.org/2001/XMLSchema#"
# Every kind of term an evaluation can bind: IRIs, blank nodes, plain, typed, language-tagged
# and directional literals, escapes, and triple terms nested in triple terms.
VALUES = """SELECT * WHERE { VALUES (?iri ?plain ?typed ?lang ?dir ?escaped ?triple ?nested ?unbound) {
  (<http://example.org/a> "plain" "3.5"^^<http://www.w3.org/2001/XMLSchema#decimal> "chat"@fr "hi"@en--rtl
   "tab\\tquote\\"line\\nend \\u00e9 \\U0001F600" <<( <http://example.org/s> <http://example.org/p> "o" )>>
   <<( <http://example.org/s> <http://example.org/p> <<( <http://example.org/x> <http://example.org/y> 1 )>> )>>
   UNDEF) }
  BIND(BNODE("b") AS ?blank) }"""


def test_terms_are_written_as_oxigraphs_own_serializer_writes_them():
    store = ox.Store()
    expected = json.loads(store.query(VALUES).serialize(format=ox.QueryResultsFormat.JSON))
    [solution] = list(store.query(VALUES))
    variables = [v.value for v in store.query(VALUES).variables]
    record = {"time": "2026-03-01T08:00:02Z", "windows": {},
              "bindings": [{name: term_to_ntriples(solution[name]) for name in variables if solution[name] is not None}]}
    assert sparql_json(record, variables)["results"] == expected["results"]
    assert sparql_json(record, variables)["head"] == expected["head"]
    for name in variables:
        if solution[name] is not None:
            assert term_json(solution[name]) == expected["results"]["bindings"][0][name], name


def test_the_shapes_of_select_construct_and_ask_records():
    select = {"time": "2026-03-01T08:00:02Z", "windows": {"http://example.org/w": ["a", "b"]}, "trigger": "close",
              "bindings": [{"o": "<http://example.org/o>", "v": '"1"^^<%sinteger>' % XSD}, {"o": "_:b0"}]}
    shaped = sparql_json(select, ("v", "o"))
    assert list(shaped) == ["time", "trigger", "windows", "head", "results"]      # results last
    assert shaped["head"] == {"vars": ["v", "o"]}
    assert shaped["results"]["bindings"] == [
        {"o": {"type": "uri", "value": "http://example.org/o"}, "v": {"type": "literal", "value": "1", "datatype": XSD + "integer"}},
        {"o": {"type": "bnode", "value": "b0"}}]
    assert sparql_json(select)["head"] == {"vars": ["o", "v"]}                        # SELECT *: sorted
    construct = {"time": "t", "windows": {}, "triples": ['<http://example.org/s> <http://example.org/p> "x"@en .']}
    assert sparql_json(construct) == {"time": "t", "windows": {}, "head": {"vars": ["subject", "predicate", "object"]},
                                      "results": {"bindings": [{"subject": {"type": "uri", "value": "http://example.org/s"},
                                                                "predicate": {"type": "uri", "value": "http://example.org/p"},
                                                                "object": {"type": "literal", "value": "x", "xml:lang": "en"}}]}}
    assert sparql_json({"time": "t", "windows": {}, "boolean": False}) == {"time": "t", "windows": {}, "head": {},
                                                                          "boolean": False}
    assert json.loads(shaped_json(select, COMPACT)) == select
    assert not has_results({"time": "t", "bindings": []}) and has_results({"time": "t", "boolean": False})
    for record in (select, construct, {"time": "t", "windows": {}, "boolean": True}):
        # Oxigraph's parser streams: it reads nothing after the results.
        ox.parse_query_results(shaped_json(record, SPARQL_JSON).encode(), format=ox.QueryResultsFormat.JSON)


def evaluate_twice(client, engine, query=RSPQL, **registration):
    created = client.post("/queries", json={"id": "q1", "query": query, **registration}, headers=AUTH)
    assert created.status_code == 201, created.get_data(as_text=True)
    engine.store.publish("http://example.org/s",
                         engine.store.documents.stage("http://example.org/s", STREAM, ox.RdfFormat.TRIG, "s").staged)
    engine.clock.set(T0 + 4 * S)
    engine.tick()


def test_the_history_is_sparql_json_by_default_and_compact_on_request(client, engine):
    evaluate_twice(client, engine)
    lines = client.get("/queries/q1/results").get_data(as_text=True).splitlines()
    first, second = [json.loads(line) for line in lines]
    assert first["time"] == "2026-03-01T08:00:02Z" and first["head"] == {"vars": ["o", "v"]}
    parsed = Result.parse(io.BytesIO(lines[0].encode()), format="json")
    assert [(row[Variable("o")], row[Variable("v")]) for row in parsed.bindings] == [
        (URIRef("http://example.org/o0"), Literal(1))]
    assert second["results"]["bindings"] == []                    # the element left the window at :04
    compact = client.get("/queries/q1/results", query_string={"format": "compact"}).get_data(as_text=True)
    assert [json.loads(line)["bindings"] for line in compact.splitlines()] == [
        [{"o": "<http://example.org/o0>", "v": '"1"^^<%sinteger>' % XSD}], []]
    refused = client.get("/queries/q1/results", query_string={"format": "csv"})
    assert refused.status_code == 400 and "format takes sparql-json or compact" in refused.get_data(as_text=True)


def test_an_events_payload_is_read_by_a_sparql_json_parser(client, engine):
    client.post("/queries", query_string={"id": "q1"}, data=RSPQL, content_type="application/sparql-query", headers=AUTH)
    payloads = {}
    for shape in ("sparql-json", "compact"):
        response = client.get("/queries/q1/events", query_string={} if shape == "sparql-json" else {"format": shape},
                              buffered=False)
        chunks = iter(response.response)
        assert next(chunks).startswith(b": subscribed")
        payloads[shape] = (response, chunks)
    engine.store.publish("http://example.org/s",
                         engine.store.documents.stage("http://example.org/s", STREAM, ox.RdfFormat.TRIG, "s").staged)
    engine.clock.set(T0 + 2 * S)
    engine.tick()
    data = {}
    for shape, (response, chunks) in payloads.items():
        event = next(chunks).decode()
        assert event.startswith("id: 2026-03-01T08:00:02Z\nevent: result\ndata: ")
        data[shape] = event.split("data: ", 1)[1].rstrip("\n")
        response.close()
    parsed = Result.parse(io.BytesIO(data["sparql-json"].encode()), format="json")
    assert parsed.vars == [Variable("o"), Variable("v")]
    assert [dict(row) for row in parsed.bindings] == [{Variable("o"): URIRef("http://example.org/o0"),
                                                      Variable("v"): Literal(1)}]
    assert json.loads(data["compact"])["bindings"] == [{"o": "<http://example.org/o0>", "v": '"1"^^<%sinteger>' % XSD}]
    assert client.get("/queries/q1/events", query_string={"format": "xml"}).status_code == 400


def test_triple_terms_and_blank_nodes_reach_a_client_as_sparql_12_json(client, engine):
    query = RSPQL.replace("SELECT ?o ?v", "SELECT ?o ?t ?b").replace(
        "?o ex:v ?v } }", "?o ex:v ?v } } BIND(<<( ?o ex:v ?v )>> AS ?t) BIND(BNODE(\"x\") AS ?b)")
    evaluate_twice(client, engine, query)
    # (the first evaluation: limit alone gives the latest)
    line = client.get("/queries/q1/results", query_string={"limit": "1", "since": "2026-03-01T08:00:00Z"}
                      ).get_data(as_text=True)
    results = ox.parse_query_results(line.encode(), format=ox.QueryResultsFormat.JSON)
    [solution] = list(results)
    assert solution["t"] == ox.Triple(ox.NamedNode("http://example.org/o0"), ox.NamedNode("http://example.org/v"),
                                      ox.Literal("1", datatype=ox.NamedNode(XSD + "integer")))
    assert isinstance(solution["b"], ox.BlankNode)
    binding = json.loads(line)["results"]["bindings"][0]
    assert binding["t"]["type"] == "triple" and binding["t"]["value"]["object"]["datatype"] == XSD + "integer"
    parsed = Result.parse(io.BytesIO(json.dumps({**json.loads(line), "results": {"bindings": [
        {"b": binding["b"]}]}}).encode()), format="json")
    assert isinstance(parsed.bindings[0][Variable("b")], BNode)


def test_sinks_get_sparql_json_or_the_compact_shape_and_can_skip_empty_evaluations(tmp_path):
    store = StreamStore()
    posted: dict[str, list] = {}
    engine = Runner(store, VirtualClock(T0), EngineConfig(data_dir=tmp_path, allowed_sinks=["http://receiver.test"]),
                    post=lambda url, body, headers: posted.setdefault(url, []).append(body) or 200)
    engine.register(RSPQL, "all", sinks=["http://receiver.test/all"])
    engine.register(RSPQL, "some", sinks=["http://receiver.test/some"],
                    options={"sink_format": "compact", "sink_empty": "false"})
    store.publish("http://example.org/s", store.documents.stage("http://example.org/s", STREAM, ox.RdfFormat.TRIG,
                                                                 "s").staged)
    for second in (2, 4, 6):
        store.advance_watermark("http://example.org/s", T0 + second * S + 1)
        engine.clock.set(T0 + second * S)
        engine.tick()
    every = [Result.parse(io.BytesIO(body), format="json") for body in posted["http://receiver.test/all"]]
    assert [len(result.bindings) for result in every] == [1, 0, 0]
    [only] = [json.loads(body) for body in posted["http://receiver.test/some"]]
    assert only["time"] == "2026-03-01T08:00:02Z" and only["bindings"] == [
        {"o": "<http://example.org/o0>", "v": '"1"^^<%sinteger>' % XSD}]
    for bad, message in ((("sink_format", "xml"), "sink_format takes sparql-json or compact"),
                         (("sink_empty", "maybe"), "sink_empty takes true or false")):
        with pytest.raises(Exception, match=message):
            engine.register(RSPQL, "bad", sinks=["http://receiver.test/x"], options=dict([bad]))


def test_an_outbox_written_in_the_compact_shape_is_delivered_as_it_was(tmp_path):
    # Records an earlier version put in an outbox go out as they were written.
    old = HttpSink("q", "http://receiver.test/x", tmp_path, shape=COMPACT)
    old.enqueue({"time": "2026-03-01T08:00:02Z", "windows": {}, "bindings": []})
    sent = []
    sink = HttpSink("q", "http://receiver.test/x", tmp_path, post=lambda url, body, headers: sent.append(body) or 200)
    assert sink.deliver(0) == 1 and json.loads(sent[0]) == {"time": "2026-03-01T08:00:02Z", "windows": {}, "bindings": []}
