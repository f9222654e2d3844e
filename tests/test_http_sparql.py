"""The SPARQL 1.1 Protocol blueprint: results and graph formats, the service description, dataset
parameters, updates confined to background data, errors with positions and time limits."""

import pyoxigraph as ox
import pytest
import rdflib

from rspstar.endpoint.http import HttpSettings, create_app
from http_app import AUTH, CONSTRUCT, RSPQL, S, SELECT, STREAM, T0, TRIPLE_TERM




@pytest.mark.parametrize("accept,media,fragment", [
    (None, "application/sparql-results+json", '"value":"http://example.org/kitchen"'),
    ("application/sparql-results+json", "application/sparql-results+json", '"type":"uri"'),
    ("application/sparql-results+xml", "application/sparql-results+xml", "<uri>http://example.org/kitchen</uri>"),
    ("text/csv", "text/csv", "http://example.org/s1,http://example.org/kitchen"),
    ("text/tab-separated-values", "text/tab-separated-values", "<http://example.org/s1>\t<http://example.org/kitchen>"),
])
def test_select_in_every_results_format(client, accept, media, fragment):
    response = client.get("/sparql", query_string={"query": SELECT}, headers={"Accept": accept} if accept else {})
    assert response.status_code == 200
    assert response.mimetype == media
    assert fragment in response.get_data(as_text=True)


@pytest.mark.parametrize("accept,media,fragment", [
    (None, "text/turtle", "<http://example.org/s1> <http://example.org/in> <http://example.org/kitchen>"),
    ("application/n-triples", "application/n-triples", "<http://example.org/in>"),
    ("application/trig", "application/trig", "<http://example.org/in>"),
    ("application/n-quads", "application/n-quads", "<http://example.org/in>"),
    ("application/rdf+xml", "application/rdf+xml", 'rdf:about="http://example.org/s1"'),
    ("application/ld+json", "application/ld+json", '"@id":"http://example.org/s1"'),
])
def test_construct_in_every_graph_format(client, accept, media, fragment):
    response = client.post("/sparql", data=CONSTRUCT, content_type="application/sparql-query",
                           headers={"Accept": accept} if accept else {})
    assert response.status_code == 200 and response.mimetype == media
    assert fragment in response.get_data(as_text=True)


@pytest.mark.parametrize("media,rdflib_format", [("application/rdf+xml", "xml"), ("application/ld+json", "json-ld")])
def test_construct_as_sparqlwrapper_asks_for_it_reads_in_another_parser(client, media, rdflib_format):
    # SPARQLWrapper asks for RDF/XML by default and parses it with rdflib.
    response = client.post("/sparql", data={"query": CONSTRUCT}, headers={"Accept": media + ", */*;q=0.1"})
    assert response.status_code == 200 and response.mimetype == media
    graph = rdflib.Graph().parse(data=response.get_data(as_text=True), format=rdflib_format)
    assert set(graph) == {(rdflib.URIRef("http://example.org/s1"), rdflib.URIRef("http://example.org/in"),
                           rdflib.URIRef("http://example.org/kitchen"))}


def test_triple_terms_go_to_the_next_graph_format_json_ld_cannot_carry_them(client):
    query = "CONSTRUCT { ?r ex:about ?t } WHERE { ?r rdf:reifies ?t }"
    query = ("PREFIX ex: <http://example.org/> PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> " + query)
    only = client.post("/sparql", data={"query": query}, headers={"Accept": "application/ld+json"})
    assert only.status_code == 406 and "triple terms" in only.get_json()["message"]
    fallback = client.post("/sparql", data={"query": query}, headers={"Accept": "application/ld+json, text/turtle;q=0.5"})
    assert fallback.status_code == 200 and fallback.mimetype == "text/turtle"
    assert "<<(" in fallback.get_data(as_text=True)


SD = rdflib.Namespace("http://www.w3.org/ns/sparql-service-description#")


@pytest.mark.parametrize("accept,media,rdflib_format", [
    (None, "text/turtle", "turtle"), ("application/ld+json", "application/ld+json", "json-ld"),
])
def test_a_bare_get_answers_with_the_service_description(client, accept, media, rdflib_format):
    response = client.get("/sparql", headers={"Accept": accept} if accept else {})
    assert response.status_code == 200 and response.mimetype == media
    graph = rdflib.Graph().parse(data=response.get_data(as_text=True), format=rdflib_format)
    service = rdflib.URIRef("http://localhost/sparql")
    assert (service, SD.endpoint, service) in graph
    assert (service, SD.supportedLanguage, SD.SPARQL11Query) in graph
    assert (rdflib.URIRef("http://localhost/update"), SD.supportedLanguage, SD.SPARQL11Update) in graph
    formats = {str(o).rsplit("/", 1)[1] for o in graph.objects(service, SD.resultFormat)}
    assert {"SPARQL_Results_JSON", "SPARQL_Results_XML", "Turtle", "RDF_XML", "JSON-LD"} <= formats
    functions = {str(o) for o in graph.objects(service, SD.extensionFunction)}
    assert functions == {"http://w3id.org/rsp/rspu#" + n for n in ("add", "subtract", "greaterThan", "lessThan", "between")}


def test_triple_terms_in_json_results(client):
    body = client.post("/sparql", data={"query": TRIPLE_TERM}).get_json()
    term = body["results"]["bindings"][0]["t"]
    assert term["type"] == "triple"
    assert term["value"]["subject"]["value"] == "http://example.org/s1"


def test_protocol_dataset_parameters(client):
    query = "SELECT ?s WHERE { ?s ?p ?o }"
    got = client.get("/sparql", query_string={"query": query, "default-graph-uri": "http://example.org/profile"})
    assert [b["s"]["value"] for b in got.get_json()["results"]["bindings"]] == ["http://example.org/s1"]
    got = client.get("/sparql", query_string={"query": "SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } }",
                                              "named-graph-uri": "http://example.org/nothing"})
    assert got.get_json()["results"]["bindings"] == []


def test_update_changes_background_data_with_a_token(client, engine):
    update = 'PREFIX ex: <http://example.org/> INSERT DATA { GRAPH ex:extra { ex:s2 ex:room ex:hall } }'
    assert client.post("/update", data=update, content_type="application/sparql-update").status_code == 401
    assert client.post("/update", data=update, content_type="application/sparql-update", headers=AUTH).status_code == 204
    assert "http://example.org/extra" in engine.store.background.graphs()


def test_query_syntax_error_reports_line_and_column(client):
    response = client.post("/queries", data=RSPQL.replace("[RANGE PT2S]", "[RANGE PT0S]"),
                           content_type="application/sparql-query", headers=AUTH)
    assert response.status_code == 400
    body = response.get_json()
    assert (body["line"], body["column"]) == (2, 52) and "RANGE must be positive" in body["message"]
    response = client.get("/sparql", query_string={"query": "SELECT *\nWHERE { ?s ?p }"})
    assert response.get_json()["line"] == 2


def test_slow_query_gets_503_with_a_message(engine):
    client = create_app(engine, HttpSettings(query_timeout=0.05)).test_client()
    slow = "SELECT (COUNT(*) AS ?n) WHERE { VALUES ?a { %s } VALUES ?b { %s } VALUES ?c { %s } }" % ((
        " ".join(str(i) for i in range(300)),) * 3)
    response = client.get("/sparql", query_string={"query": slow})
    assert response.status_code == 503
    assert "time limit" in response.get_json()["message"]


def test_an_update_touching_engine_graphs_is_a_400_and_clear_named_spares_the_streams(client, engine):
    staged = engine.store.documents.stage("http://example.org/s", STREAM, ox.RdfFormat.TRIG, "s.trig").staged
    engine.store.publish("http://example.org/s", staged)
    refused = client.post("/update", data="INSERT DATA { GRAPH <urn:rspstar:batches> { <http://a> <http://b> 1 } }",
                          content_type="application/sparql-update", headers=AUTH)
    assert refused.status_code == 400 and "reserved by the engine" in refused.get_json()["message"]
    cleared = client.post("/update", data="CLEAR NAMED", content_type="application/sparql-update", headers=AUTH)
    assert cleared.status_code == 204
    assert engine.store.elements_in("http://example.org/s", T0, T0 + S) == ["http://example.org/e0"]
    assert engine.store.background.graphs() == []


def test_errors_name_what_is_wrong_where_the_client_wrote_it(client):
    unknown = client.get("/sparql", query_string={"query": "PREFIX rspu: <http://w3id.org/rsp/rspu#>\n"
                                                           "SELECT (rspu:nosuch(1) AS ?x) WHERE {}"})
    assert unknown.status_code == 400
    assert unknown.get_json()["message"].startswith("unknown function <http://w3id.org/rsp/rspu#nosuch>")
    assert (unknown.get_json()["line"], unknown.get_json()["column"]) == (2, 9)
    syntax = client.get("/sparql", query_string={"query": "SELECT * WHERE { ?s ?p }"})
    assert syntax.status_code == 400
    assert syntax.get_json() == {"error": "SparqlSyntaxError", "message": "expected an RDF term, found '}'",
                                 "line": 1, "column": 24}
    update = client.post("/update", data="INSERT DATA { <http://a> <http://b> }", headers=AUTH,
                         content_type="application/sparql-update")
    assert update.status_code == 400 and "near '}'" in update.get_json()["message"]
    nowhere = client.get("/nowhere")
    assert nowhere.status_code == 404 and nowhere.is_json and "/openapi.json" in nowhere.get_json()["message"]
    wrong = client.delete("/sparql")
    assert wrong.status_code == 405 and "DELETE is not a method of /sparql" in wrong.get_json()["message"]


@pytest.mark.parametrize("operation, status", [
    ("DROP GRAPH <http://example.org/nothing>", 404),
    ("CLEAR GRAPH <http://example.org/nothing>", 404),
    ("MOVE <http://example.org/nothing> TO <http://example.org/other>", 404),
    ("CREATE GRAPH <http://example.org/profile>", 409),
])
def test_an_update_naming_a_graph_that_is_not_there_is_the_clients_error_and_silent_succeeds(
        client, engine, operation, status):
    """SPARQL 1.1 Update: DROP, CLEAR, MOVE of a graph that does not exist (CREATE of one that
    does) fail, unless SILENT; a failure the client's text causes is a 4xx naming the graph."""
    before = sorted(map(str, engine.store.oxigraph))
    failed = client.post("/update", data=operation, content_type="application/sparql-update", headers=AUTH)
    assert failed.status_code == status, failed.get_data()
    assert failed.is_json and "<http://example.org/" in failed.get_json()["message"]
    assert sorted(map(str, engine.store.oxigraph)) == before
    silent = operation.replace(" ", " SILENT ", 1)
    assert client.post("/update", data=silent, content_type="application/sparql-update",
                       headers=AUTH).status_code == 204
    assert sorted(map(str, engine.store.oxigraph)) == before


def test_a_call_with_the_wrong_number_of_arguments_is_refused_at_the_call_as_at_registration(client):
    query = "PREFIX rspu: <http://w3id.org/rsp/rspu#>\nSELECT * WHERE { ?s ?p ?o FILTER(rspu:add(?o) > 1) }"
    refused = client.get("/sparql", query_string={"query": query})
    assert refused.status_code == 400, refused.get_data()
    body = refused.get_json()
    assert "rspu:add takes 2 arguments" in body["message"] and (body["line"], body["column"]) == (2, 34)
    described = client.get("/sparql", query_string={"query": "DESCRIBE <http://example.org/s1>"})
    assert described.status_code == 200
