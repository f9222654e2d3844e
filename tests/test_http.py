"""The HTTP endpoint: SPARQL protocol formats and errors, the query API, SSE, health,
metrics and access control, through Flask's client and through a real `requests` client."""
import json
import re
import threading

import pyoxigraph as ox
import pytest
import rdflib
import requests
from werkzeug.serving import make_server

from endpoint.clock import VirtualClock
from endpoint.engine import Engine, EngineConfig
from endpoint.http import HttpSettings, create_app
from store.stream_store import StreamStore
from translator.temporal import parse_instant

T0 = parse_instant("2026-03-01T08:00:00Z")
S = 1_000_000
TOKEN = "s3cret"
AUTH = {"Authorization": "Bearer " + TOKEN}
BACKGROUND = b"""@prefix ex: <http://example.org/> .
ex:s1 ex:room ex:kitchen .
ex:s1 ex:reading 21 {| ex:confidence 0.9 |} .
ex:profile { ex:s1 ex:status ex:active . }
"""
RSPQL = """PREFIX ex: <http://example.org/>
SELECT ?o ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }"""
STREAM = b"""@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> .
ex:e0 prov:generatedAtTime "2026-03-01T08:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
ex:e0 { ex:o0 ex:v 1 . }
"""


@pytest.fixture
def engine(tmp_path):
    store = StreamStore()
    store.load_background(BACKGROUND, ox.RdfFormat.TRIG, "bg.trig")
    return Engine(store, VirtualClock(T0), EngineConfig(data_dir=tmp_path, allowed_sinks=["http://localhost:9"],
                                                      max_delay=0))


@pytest.fixture
def client(engine, tmp_path):
    app = create_app(engine, HttpSettings(token=TOKEN, cors_origins=["http://dash.test"], max_body=4096,
                                          query_timeout=5, landing_dir=tmp_path / "landing"),
                     ingestion_status=lambda: {"landing": {"quarantined": {"http://example.org/s": 2}, "active": True}})
    return app.test_client()


SELECT = "PREFIX ex: <http://example.org/> SELECT ?s ?r WHERE { ?s ex:room ?r }"
TRIPLE_TERM = "PREFIX ex: <http://example.org/> SELECT ?t WHERE { ?r <http://www.w3.org/1999/02/22-rdf-syntax-ns#reifies> ?t }"
CONSTRUCT = "PREFIX ex: <http://example.org/> CONSTRUCT { ?s ex:in ?r } WHERE { ?s ex:room ?r }"


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
    assert "http://example.org/extra" in engine.store.background_graphs()


# Each route with good and bad inputs: (method, path, kwargs, expected status).
ROUTES = [
    ("get", "/sparql", {"query_string": {"query": SELECT}}, 200),
    ("get", "/sparql", {}, 200),
    ("get", "/sparql", {"query_string": {"query": ""}}, 400),
    ("get", "/sparql", {"query_string": {"query": "SELECT * WHERE { ?s ?p }"}}, 400),
    ("get", "/sparql", {"query_string": {"query": SELECT}, "headers": {"Accept": "image/png"}}, 406),
    ("post", "/sparql", {"data": SELECT, "content_type": "application/sparql-query"}, 200),
    ("post", "/sparql", {"data": SELECT, "content_type": "image/png"}, 415),
    ("post", "/sparql", {"data": "x" * 5000, "content_type": "application/sparql-query"}, 413),
    ("post", "/update", {"data": "INSERT DATA { <http://a> <http://b> 1 }", "content_type": "application/sparql-update",
                         "headers": AUTH}, 204),
    ("post", "/update", {"data": "INSERT DATA { <http://a> }", "content_type": "application/sparql-update",
                         "headers": AUTH}, 400),
    ("post", "/update", {"data": "INSERT DATA { <http://a> <http://b> 1 }", "content_type": "application/sparql-update",
                         "headers": {"Authorization": "Bearer wrong"}}, 401),
    ("post", "/queries", {"data": RSPQL, "content_type": "application/sparql-query", "headers": AUTH}, 201),
    ("post", "/queries", {"data": RSPQL, "content_type": "application/sparql-query"}, 401),
    ("post", "/queries", {"data": RSPQL.replace("WINDOW ex:w {", "WINDOW ex:x {"),
                          "content_type": "application/sparql-query", "headers": AUTH}, 400),
    ("post", "/queries", {"json": {"query": RSPQL, "sinks": ["http://evil.test/"]}, "headers": AUTH}, 400),
    ("post", "/queries", {"json": {"nothing": 1}, "headers": AUTH}, 400),
    ("post", "/queries", {"data": RSPQL, "content_type": "image/png", "headers": AUTH}, 415),
    ("get", "/queries", {}, 200),
    ("get", "/queries/nope", {}, 404),
    ("delete", "/queries/nope", {"headers": AUTH}, 404),
    ("get", "/queries/nope/results", {}, 404),
    ("post", "/streams?stream=http://example.org/s", {"data": STREAM, "content_type": "application/trig",
                                                       "headers": AUTH}, 202),
    ("post", "/streams?stream=http://example.org/s", {"data": STREAM, "content_type": "application/trig"}, 401),
    ("post", "/streams", {"data": STREAM, "content_type": "application/trig", "headers": AUTH}, 400),
    ("post", "/streams?stream=http://example.org/s", {"data": b"<http://a> <http://b> .",
                                                       "content_type": "application/n-quads", "headers": AUTH}, 400),
    ("post", "/streams?stream=http://example.org/s", {"data": b'{"data": "<http://a> <http://b> 1 ."}\nnope',
                                                       "content_type": "application/x-ndjson", "headers": AUTH}, 400),
    ("post", "/streams?stream=http://example.org/s", {"data": STREAM, "content_type": "text/csv",
                                                       "headers": AUTH}, 415),
    ("get", "/streams", {}, 200),
    ("get", "/health", {}, 200),
    ("get", "/metrics", {}, 200),
    ("get", "/no-such-route", {}, 404),
    # Each of these answered 500 before.
    ("post", "/queries", {"json": {"query": RSPQL, "id": 5}, "headers": AUTH}, 400),
    ("post", "/queries", {"json": {"query": RSPQL, "id": ["a"]}, "headers": AUTH}, 400),
    ("post", "/queries", {"json": {"query": RSPQL, "sinks": 5}, "headers": AUTH}, 400),
    ("post", "/queries", {"json": {"query": RSPQL, "sinks": [5]}, "headers": AUTH}, 400),
    ("post", "/queries", {"json": {"query": RSPQL, "options": ["h4"]}, "headers": AUTH}, 400),
    ("post", "/queries", {"json": {"query": RSPQL, "options": "h4=false"}, "headers": AUTH}, 400),
    ("post", "/queries", {"json": {"query": RSPQL, "options": {"h4": None}}, "headers": AUTH}, 400),
    ("post", "/queries", {"json": {"query": RSPQL, "options": {"h4": False}}, "headers": AUTH}, 201),
    ("post", "/queries", {"json": {"query": RSPQL, "id": "a\n"}, "headers": AUTH}, 400),
    ("get", "/sparql", {"query_string": {"query": SELECT, "default-graph-uri": "not an iri"}}, 400),
    ("get", "/sparql", {"query_string": {"query": SELECT, "named-graph-uri": "<x>"}}, 400),
    ("get", "/queries/nope/results", {"query_string": {"limit": "²"}}, 404),
]


@pytest.mark.parametrize("method,path,kwargs,status", ROUTES)
def test_routes_answer_good_and_bad_input(client, method, path, kwargs, status):
    response = getattr(client, method)(path, **kwargs)
    assert response.status_code == status, response.get_data(as_text=True)
    if status >= 400:
        body = response.get_json()
        assert body["message"]


def test_query_syntax_error_reports_line_and_column(client):
    response = client.post("/queries", data=RSPQL.replace("[RANGE PT2S]", "[RANGE PT0S]"),
                           content_type="application/sparql-query", headers=AUTH)
    assert response.status_code == 400
    body = response.get_json()
    assert (body["line"], body["column"]) == (2, 52) and "RANGE must be positive" in body["message"]
    response = client.get("/sparql", query_string={"query": "SELECT *\nWHERE { ?s ?p }"})
    assert response.get_json()["line"] == 2


def test_query_lifecycle_results_and_status(client, engine):
    created = client.post("/queries", query_string={"id": "q1"}, data=RSPQL,
                          content_type="application/sparql-query", headers=AUTH)
    assert created.status_code == 201 and created.headers["Location"] == "/queries/q1"
    engine.store.publish("http://example.org/s",
                         engine.store.stage_document("http://example.org/s", STREAM, ox.RdfFormat.TRIG, "s").staged)
    engine.clock.set(T0 + 4 * S)
    engine.tick()
    described = client.get("/queries/q1").get_json()
    assert described["status"]["evaluations"] == 2 and described["windows"][0]["stream"] == "http://example.org/s"
    lines = client.get("/queries/q1/results").get_data(as_text=True).splitlines()
    assert [json.loads(l)["time"] for l in lines] == ["2026-03-01T08:00:02Z", "2026-03-01T08:00:04Z"]
    since = client.get("/queries/q1/results", query_string={"since": "2026-03-01T08:00:02Z", "limit": "5"})
    assert len(since.get_data(as_text=True).splitlines()) == 1
    assert client.get("/queries/q1/results", query_string={"since": "soon"}).status_code == 400
    assert client.get("/queries/q1/results", query_string={"limit": "-1"}).status_code == 400
    assert [q["id"] for q in client.get("/queries").get_json()["queries"]] == ["q1"]
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'rspstar_evaluations_total{query="q1"} 2.0' in metrics
    assert 'rspstar_ingested_elements_total{stream="http://example.org/s"} 1.0' in metrics
    assert client.delete("/queries/q1", headers=AUTH).status_code == 204
    assert client.get("/queries/q1").status_code == 404


def test_server_sent_events_carry_each_record(client, engine):
    client.post("/queries", query_string={"id": "q1"}, data=RSPQL, content_type="application/sparql-query",
                headers=AUTH)
    response = client.get("/queries/q1/events", buffered=False)
    assert response.mimetype == "text/event-stream"
    chunks = iter(response.response)
    assert next(chunks).startswith(b": subscribed")
    engine.clock.set(T0 + 2 * S)
    engine.tick()
    event = next(chunks).decode()
    assert event.startswith("event: result\ndata: ")
    assert json.loads(event.split("data: ", 1)[1])["time"] == "2026-03-01T08:00:02Z"
    response.close()


def test_posted_streams_land_durably_for_spark_and_streams_are_listed(client, engine, tmp_path):
    response = client.post("/streams", query_string={"stream": "http://example.org/s"}, data=STREAM,
                           content_type="application/trig", headers=AUTH)
    assert response.status_code == 202 and response.get_json()["elements"] == 1
    landed = list((tmp_path / "landing").rglob("*"))
    [file] = [p for p in landed if p.is_file()]
    assert file.parent.name == "http%3A%2F%2Fexample.org%2Fs" and file.suffix == ".nq"
    assert response.get_json()["accepted"] == [file.name]
    # Decoded once, here: what lands is the canonical form of the body's elements.
    assert set(ox.parse(file.read_bytes(), format=ox.RdfFormat.N_QUADS)) == \
        set(ox.parse(STREAM, format=ox.RdfFormat.TRIG))
    bad = client.post("/streams", query_string={"stream": "http://example.org/s"},
                      data=b"@prefix ex: <http://example.org/> .\nex:g { ex:a ex:b }",
                      content_type="application/trig", headers=AUTH)
    assert bad.status_code == 400 and bad.get_json()["line"] == 2
    assert len([p for p in (tmp_path / "landing").rglob("*") if p.is_file()]) == 1
    engine.store.publish("http://example.org/s",
                         engine.store.stage_document("http://example.org/s", STREAM, ox.RdfFormat.TRIG, "s").staged)
    listed = client.get("/streams").get_json()["streams"]
    assert listed == [{"stream": "http://example.org/s", "elements": 1, "ingested": 1, "evicted": 0, "late": 0,
                       "quarantined": 2, "watermark": None, "latest": "2026-03-01T08:00:00Z"}]


def test_streams_without_a_landing_source_are_unavailable(engine):
    client = create_app(engine, HttpSettings()).test_client()
    response = client.post("/streams", query_string={"stream": "http://example.org/s"}, data=STREAM,
                           content_type="application/trig")
    assert response.status_code == 503


def test_cors_for_configured_origins_only(client):
    assert client.get("/health", headers={"Origin": "http://dash.test"}).headers["Access-Control-Allow-Origin"] == \
        "http://dash.test"
    assert "Access-Control-Allow-Origin" not in client.get("/health", headers={"Origin": "http://evil.test"}).headers


def test_slow_query_gets_503_with_a_message(engine):
    client = create_app(engine, HttpSettings(query_timeout=0.05)).test_client()
    slow = "SELECT (COUNT(*) AS ?n) WHERE { VALUES ?a { %s } VALUES ?b { %s } VALUES ?c { %s } }" % ((
        " ".join(str(i) for i in range(300)),) * 3)
    response = client.get("/sparql", query_string={"query": slow})
    assert response.status_code == 503
    assert "time limit" in response.get_json()["message"]


def test_a_real_client_over_http(engine):
    app = create_app(engine, HttpSettings(token=TOKEN))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = "http://127.0.0.1:%d" % server.server_port
    try:
        got = requests.get(base + "/sparql", params={"query": SELECT}, headers={"Accept": "text/csv"}, timeout=5)
        assert got.status_code == 200 and got.text.splitlines()[0] == "s,r"
        created = requests.post(base + "/queries", data=RSPQL, headers={**AUTH, "Content-Type": "text/plain"},
                                timeout=5)
        assert created.status_code == 201
        assert requests.get(base + created.headers["Location"], timeout=5).json()["form"] == "SELECT"
        assert requests.post(base + "/queries", data=RSPQL, headers={"Content-Type": "text/plain"},
                             timeout=5).status_code == 401
    finally:
        server.shutdown()


def test_openapi_describes_exactly_the_routes_the_app_serves(client):
    spec = client.get("/openapi.json").get_json()
    documented = {(path, method.upper()) for path, item in spec["paths"].items() for method in item}
    app = client.application
    served = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule.rule).replace("{query_id}", "{id}")
        served |= {(path, m) for m in rule.methods - {"HEAD", "OPTIONS"}}
    assert documented == served


def test_dashboard_and_its_assets_are_served(client):
    page = client.get("/")
    assert page.status_code == 200 and b'<script src="/static/dashboard.js">' in page.data
    assert client.get("/static/dashboard.js").status_code == 200
    assert client.get("/static/dashboard.css").status_code == 200
    plotly = client.get("/static/vendor/plotly.min.js")
    assert plotly.status_code == 200 and plotly.mimetype == "text/javascript" and b"plotly.js v" in plotly.data[:200]
    assert not re.search(rb'src="https?://', page.data)      # nothing from a CDN


@pytest.mark.parametrize("fields,reason", [
    ({"time": 5}, 'field "time": a string is required, got 5'),
    ({"graph": "not an iri"}, 'field "graph": not an IRI'),
    ({"graph": "urn:rspstar:batches"}, "reserved by the engine"),
])
def test_a_poison_envelope_post_is_refused_with_its_line_and_field(client, tmp_path, fields, reason):
    good = json.dumps({"time": "2026-03-01T08:00:01Z", "data": "<http://a> <http://b> <http://c> ."})
    bad = json.dumps(dict({"time": "2026-03-01T08:00:02Z", "data": "<http://a> <http://b> <http://c> ."}, **fields))
    response = client.post("/streams", query_string={"stream": "http://test.example/p"}, data=good + "\n" + bad + "\n",
                           content_type="application/x-ndjson", headers=AUTH)
    assert response.status_code == 400
    body = response.get_json()
    assert reason in body["message"] and body["line"] == 2
    assert not (tmp_path / "landing").exists() or not any((tmp_path / "landing").rglob("*.nq"))


@pytest.mark.parametrize("body,content_type,line", [
    (b"@prefix prov: <http://www.w3.org/ns/prov#> .\n<http://g> prov:generatedAtTime \"yesterday\" .\n"
     b"<http://g> { <http://a> <http://b> <http://c> }", "application/trig", None),
    (b"<http://g> <http://www.w3.org/ns/prov#generatedAtTime> \"2026-03-01T08:00:00Z\" .\n"
     b"<http://a> <http://b> <http://c> <urn:rspstar:timestamps:x> .\n", "application/n-quads", None),
    (b'{"time": "2026-03-01T08:00:01Z", "data": "<http://a> <http://b> ."}\n', "application/x-ndjson", 1),
])
def test_a_body_is_refused_for_what_would_only_be_quarantined_later(client, tmp_path, body, content_type, line):
    # The check at the edge used to be a syntax scan: a timestamp that is no dateTime, a graph
    # the engine reserves or envelope data that does not parse got 202 and then went to
    # quarantine. Now the same decoding as the batch writer's decides.
    response = client.post("/streams", query_string={"stream": "http://example.org/s"}, data=body,
                           content_type=content_type, headers=AUTH)
    assert response.status_code == 400, response.get_json()
    assert response.get_json().get("line") == line
    assert not (tmp_path / "landing").exists() or not any(p.is_file() for p in (tmp_path / "landing").rglob("*"))


def test_envelopes_of_several_streams_land_in_each_streams_folder(client, tmp_path):
    lines = [json.dumps({"stream": "http://example.org/%s" % s, "time": "2026-03-01T08:00:0%dZ" % k,
                         "data": "<http://a> <http://b> %d ." % k}) for k, s in enumerate("aab")]
    response = client.post("/streams", query_string={"stream": "http://example.org/s"}, data="\n".join(lines),
                           content_type="application/x-ndjson", headers=AUTH)
    assert response.status_code == 202 and response.get_json()["elements"] == 3
    folders = sorted(p.parent.name for p in (tmp_path / "landing").rglob("*.nq"))
    assert folders == ["http%3A%2F%2Fexample.org%2Fa", "http%3A%2F%2Fexample.org%2Fb"]


def test_an_update_touching_engine_graphs_is_a_400_and_clear_named_spares_the_streams(client, engine):
    staged = engine.store.stage_document("http://example.org/s", STREAM, ox.RdfFormat.TRIG, "s.trig").staged
    engine.store.publish("http://example.org/s", staged)
    refused = client.post("/update", data="INSERT DATA { GRAPH <urn:rspstar:batches> { <http://a> <http://b> 1 } }",
                          content_type="application/sparql-update", headers=AUTH)
    assert refused.status_code == 400 and "reserved by the engine" in refused.get_json()["message"]
    cleared = client.post("/update", data="CLEAR NAMED", content_type="application/sparql-update", headers=AUTH)
    assert cleared.status_code == 204
    assert engine.store.elements_in("http://example.org/s", T0, T0 + S) == ["http://example.org/e0"]
    assert engine.store.background_graphs() == []


def test_results_parameters_are_checked(client):
    client.post("/queries", query_string={"id": "q1"}, data=RSPQL, content_type="application/sparql-query", headers=AUTH)
    for params in ({"limit": "²"}, {"limit": "9999999999999999999"}, {"since": ""}, {"limit": "-1"}):
        response = client.get("/queries/q1/results", query_string=params)
        assert response.status_code == 400, params
    assert client.get("/queries/q1/results", query_string={"limit": "1000000"}).status_code == 200


def test_a_method_not_allowed_says_which_are():
    response = create_app().test_client().put("/queries")
    assert response.status_code == 405
    assert set(response.headers["Allow"].split(", ")) >= {"GET", "POST"}


def test_cross_origin_writes_are_refused_even_without_a_token(engine):
    # A page on any web site could otherwise drive an engine on localhost through the browser.
    client = create_app(engine, HttpSettings(cors_origins=["http://dash.test"])).test_client()
    evil = {"Origin": "http://evil.example"}
    assert client.post("/update", data={"update": "CLEAR ALL"}, headers=evil).status_code == 403
    assert client.post("/queries", data=RSPQL, content_type="text/plain", headers=evil).status_code == 403
    assert engine.queries() == []
    same = client.post("/queries", data=RSPQL, content_type="text/plain", query_string={"id": "mine"},
                       headers={"Origin": "http://localhost"})
    assert same.status_code == 201
    allowed = client.delete("/queries/mine", headers={"Origin": "http://dash.test"})
    assert allowed.status_code == 204
    assert client.get("/sparql", query_string={"query": SELECT}, headers=evil).status_code == 200   # reads stay open


def test_the_auth_scheme_is_case_insensitive(client):
    update = {"data": "INSERT DATA { <http://a> <http://b> 1 }", "content_type": "application/sparql-update"}
    assert client.post("/update", headers={"Authorization": "bearer " + TOKEN}, **update).status_code == 204
    assert client.post("/update", headers={"Authorization": "BEARER " + TOKEN}, **update).status_code == 204
    assert client.post("/update", headers={"Authorization": "Basic " + TOKEN}, **update).status_code == 401


def test_a_source_that_is_down_makes_health_503_and_shows_in_metrics(engine):
    sources = {"sim": {"active": True, "quarantined": {}}, "landing": {"active": False, "quarantined": {}}}
    client = create_app(engine, HttpSettings(), ingestion_status=lambda: sources).test_client()
    health = client.get("/health")
    assert health.status_code == 503
    assert health.get_json()["status"] == "degraded" and health.get_json()["sources_down"] == ["landing"]
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'rspstar_source_up{source="landing"} 0.0' in metrics and 'rspstar_source_up{source="sim"} 1.0' in metrics
    sources["landing"]["active"] = True
    assert client.get("/health").status_code == 200


def test_stream_iris_and_sink_urls_longer_than_a_file_name_are_fine(engine, tmp_path):
    # Both used to be file names as they were: errno 36, a 500.
    from store.landing import stream_of_landing_file
    client = create_app(engine, HttpSettings(landing_dir=tmp_path / "landing")).test_client()
    stream = "http://example.org/" + "s" * 400
    posted = client.post("/streams", query_string={"stream": stream}, data=STREAM, content_type="application/trig")
    assert posted.status_code == 202
    [dropped] = [p for p in (tmp_path / "landing").rglob("*.nq")]
    assert stream_of_landing_file(tmp_path / "landing", dropped, "default") == stream
    sink = "http://localhost:9/" + "a" * 400
    registered = client.post("/queries", json={"query": RSPQL, "id": "long", "sinks": [sink]})
    assert registered.status_code == 201
    assert engine.get("long").describe()["sink_backlog"] == {sink: 0}
