"""The clients a user already has, each with its default settings, against the real server
(waitress, in a process of its own, as `rspstar serve` runs it): SPARQLWrapper, rdflib's
SPARQLStore and result parser, pyoxigraph's parser, curl, and a raw socket cut for server-sent
events."""
import io
import json
import shutil
import socket
import subprocess
import time
import urllib.parse

import pyoxigraph as ox
import pytest
import rdflib
import requests
import rdflib.plugins.stores.sparqlstore
from rdflib.query import Result
from SPARQLWrapper import SPARQLWrapper

import rspstar
import served
from http_app import S, T0, TOKEN

SELECT = "PREFIX ex: <http://example.org/> SELECT ?s ?r WHERE { ?s ex:room ?r }"
ASK = "PREFIX ex: <http://example.org/> ASK { ?s ex:room ex:kitchen }"
CONSTRUCT = "PREFIX ex: <http://example.org/> CONSTRUCT { ?s ex:in ?r } WHERE { ?s ex:room ?r }"
KITCHEN = (rdflib.URIRef("http://example.org/s1"), rdflib.URIRef("http://example.org/kitchen"))


@pytest.fixture(scope="module")
def server():
    process, base, port = served.start(token="t", max_event_streams=8, event_keepalive=0.5, threads=16)
    yield base, port
    process.kill()
    process.wait()


# -- SPARQLWrapper: it adds format=, output= and results= to every query --------------------------
def test_sparqlwrapper_with_its_default_settings_reads_select_ask_and_construct(server):
    base, _ = server
    select = SPARQLWrapper(base + "/sparql")
    select.setQuery(SELECT)
    dom = select.query().convert()                       # XML by default, as a DOM
    assert [u.firstChild.data for u in dom.getElementsByTagName("uri")] == [str(t) for t in KITCHEN]
    ask = SPARQLWrapper(base + "/sparql")
    ask.setQuery(ASK)
    assert ask.query().convert().getElementsByTagName("boolean")[0].firstChild.data == "true"
    construct = SPARQLWrapper(base + "/sparql")
    construct.setQuery(CONSTRUCT)
    graph = construct.query().convert()                  # RDF/XML, parsed by rdflib
    assert set(graph) == {(KITCHEN[0], rdflib.URIRef("http://example.org/in"), KITCHEN[1])}


@pytest.mark.parametrize("form,expected", [("json", {"application/sparql-results+json"}),
                                           ("csv", {"text/csv"}), ("tsv", {"text/tab-separated-values"}),
                                           ("xml", {"application/sparql-results+xml"})])
def test_sparqlwrapper_in_each_results_format_and_over_post(server, form, expected):
    base, _ = server
    for method in ("GET", "POST"):
        client = SPARQLWrapper(base + "/sparql", returnFormat=form)
        client.setMethod(method)
        client.setQuery(SELECT)
        answer = client.query()
        assert answer.info()["content-type"].split(";")[0] in expected
        converted = answer.convert()
        if form == "json":
            assert converted["results"]["bindings"][0]["r"]["value"] == str(KITCHEN[1])
        elif form in ("csv", "tsv"):
            assert str(KITCHEN[1]).encode() in converted


@pytest.mark.parametrize("form,media", [("turtle", "text/turtle"), ("json-ld", "application/ld+json"),
                                        ("n3", "text/turtle"), ("rdf+xml", "application/rdf+xml")])
def test_sparqlwrapper_construct_in_each_graph_format(server, form, media):
    base, _ = server
    client = SPARQLWrapper(base + "/sparql", returnFormat=form)
    client.setQuery(CONSTRUCT)
    answer = client.query()
    assert answer.info()["content-type"].split(";")[0] == media
    body = answer.response.read()
    graph = rdflib.Graph().parse(data=body, format={"text/turtle": "turtle", "application/ld+json": "json-ld",
                                                    "application/rdf+xml": "xml"}[media])
    assert (KITCHEN[0], rdflib.URIRef("http://example.org/in"), KITCHEN[1]) in graph


def test_the_format_parameter_replaces_the_accept_header_and_an_unknown_one_is_a_400(server):
    base, _ = server
    for name, media in (("json", "application/sparql-results+json"), ("xml", "application/sparql-results+xml"),
                        ("csv", "text/csv"), ("tsv", "text/tab-separated-values"),
                        ("text/csv", "text/csv"), ("application/sparql-results+json", "application/sparql-results+json")):
        for parameter in ("format", "output"):
            got = requests.get(base + "/sparql", params={"query": SELECT, parameter: name},
                               headers={"Accept": "application/sparql-results+xml"}, timeout=10)
            assert got.status_code == 200 and got.headers["Content-Type"].split(";")[0] == media, (parameter, name)
    graph = requests.get(base + "/sparql", params={"query": CONSTRUCT, "format": "json"}, timeout=10)
    assert graph.status_code == 200 and graph.headers["Content-Type"].startswith("application/ld+json")
    unknown = requests.get(base + "/sparql", params={"query": SELECT, "format": "yaml"}, timeout=10)
    assert unknown.status_code == 400
    assert "'yaml'" in unknown.json()["message"] and "json, xml, csv, tsv" in unknown.json()["message"]
    not_a_graph = requests.get(base + "/sparql", params={"query": CONSTRUCT, "format": "csv"}, timeout=10)
    assert not_a_graph.status_code == 406 and "graphs are served as" in not_a_graph.json()["message"]
    description = requests.get(base + "/sparql", params={"format": "json-ld"}, timeout=10)
    assert description.status_code == 200 and description.headers["Content-Type"].startswith("application/ld+json")


# -- server-sent events --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def live():
    """A server whose query `q` (a 1 s window) is evaluated every second, live."""
    process, base, port = served.start(token="t", scheduler=True, max_delay=200_000, event_keepalive=0.5, threads=16)
    yield base, port
    process.kill()
    process.wait()


def open_streams(base) -> int:
    return requests.get(base + "/health", timeout=5).json()["event_streams"]


def raw_subscription(port: int, path: str = "/queries/q/events", headers: str = "") -> socket.socket:
    """A socket that asked for an event stream and has read its first bytes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (path, headers)).encode())
    assert b"200 OK" in sock.recv(4096)
    return sock


def events_of(response, count: int) -> list[dict]:
    """The first `count` events of a stream (comments left out), each as its fields."""
    found, event = [], {}
    for line in response.iter_lines(decode_unicode=True):
        if line == "":
            if "event" in event:
                found.append(event)
                if len(found) == count:
                    return found
            event = {}
        elif not line.startswith(":") and ": " in line:
            name, value = line.split(": ", 1)
            event[name] = json.loads(value) if name == "data" else value
    return found


def test_a_client_that_drops_gives_its_slot_back_within_a_second(live):
    base, port = live
    assert open_streams(base) == 0
    for _ in range(12):          # more than the 8 slots: each cut must have given its slot back
        sock = raw_subscription(port)
        assert open_streams(base) == 1
        sock.close()             # the client is gone, without a word
        wait_until_closed(base)


def test_head_takes_no_slot(live):
    base, _ = live
    for _ in range(10):
        head = requests.head(base + "/queries/q/events", timeout=5)
        assert head.status_code == 200 and head.headers["Content-Type"].startswith("text/event-stream")
    assert open_streams(base) == 0
    assert requests.head(base + "/queries/nothing/events", timeout=5).status_code == 404
    streams = [requests.get(base + "/queries/q/events", stream=True, timeout=10) for _ in range(4)]
    assert [s.status_code for s in streams] == [200] * 4
    for s in streams:
        s.close()
    wait_until_closed(base)


def wait_until_closed(base):
    closed = time.monotonic()
    while open_streams(base) and time.monotonic() - closed < 5:
        time.sleep(0.05)
    assert open_streams(base) == 0 and time.monotonic() - closed < 1.0


def test_curl_a_dashboard_and_their_retries_all_get_a_stream(live):
    # The README's `curl -N`, the dashboard's EventSource and a reconnection of each, from one
    # client address, with the default per-client limit.
    base, _ = live
    assert open_streams(base) == 0
    curl = subprocess.Popen(["curl", "-sN", base + "/queries/q/events"], stdout=subprocess.PIPE)
    try:
        assert curl.stdout.readline().startswith(b": subscribed")
        dashboard = requests.get(base + "/queries/q/events?format=compact", stream=True, timeout=10)
        curl_again = requests.get(base + "/queries/q/events", stream=True, timeout=10)
        dashboard_again = requests.get(base + "/queries/q/events?format=compact", stream=True, timeout=10)
        assert [r.status_code for r in (dashboard, curl_again, dashboard_again)] == [200, 200, 200]
        for r in (dashboard, curl_again, dashboard_again):
            r.close()
    finally:
        curl.kill()
        curl.wait()
    wait_until_closed(base)


def test_every_event_has_an_id_and_a_reconnection_with_last_event_id_resumes_without_gap_or_repeat(live):
    base, _ = live
    first = requests.get(base + "/queries/q/events", stream=True, timeout=10)
    got = events_of(first, 2)
    first.close()
    wait_until_closed(base)
    assert [e["event"] for e in got] == ["result", "result"] and all(e["id"] == e["data"]["time"] for e in got)
    time.sleep(2.5)              # evaluations go on meanwhile
    again = requests.get(base + "/queries/q/events", stream=True, timeout=10, headers={"Last-Event-ID": got[0]["id"]})
    resumed = events_of(again, 4)
    again.close()
    times = [e["id"] for e in resumed]
    assert times[0] == got[1]["id"]            # the one after the last it had, from the history
    stamps = [ox.Literal(t, datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")) for t in times]
    seconds = [int(s.value[17:19]) for s in stamps]
    assert all((b - a) % 60 == 1 for a, b in zip(seconds, seconds[1:])), times    # one a second, none missed
    since = requests.get(base + "/queries/q/events", params={"since": got[1]["id"]}, stream=True, timeout=10)
    assert events_of(since, 1)[0]["id"] == times[1]
    since.close()
    bad = requests.get(base + "/queries/q/events", headers={"Last-Event-ID": "yesterday"}, timeout=10)
    assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["message"]


# -- rdflib and pyoxigraph reading what the server gives -------------------------------------------
TRIPLE_TERM = ("PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> "
               "SELECT ?r ?t WHERE { ?r rdf:reifies ?t }")
ANNOTATED = "@prefix ex: <http://example.org/> . ex:a ex:c << ex:x ex:y ex:z >> ."
XYZ = ox.Triple(*(ox.NamedNode("http://example.org/" + n) for n in "xyz"))


@pytest.fixture(scope="module")
def annotated(server):
    base, _ = server
    added = requests.post(base + "/store?default", data=ANNOTATED,
                          headers={"Content-Type": "text/turtle", "Authorization": "Bearer t"}, timeout=10)
    assert added.status_code in (201, 204)
    return base


def test_rdflib_sparqlstore_reads_select_ask_and_construct(server):
    base, _ = server
    for form in ("xml", "json", "csv", "tsv"):
        store = rdflib.plugins.stores.sparqlstore.SPARQLStore(base + "/sparql", returnFormat=form)
        rows = [tuple(row) for row in store.query(SELECT)]
        assert rows == [KITCHEN], form
    store = rdflib.plugins.stores.sparqlstore.SPARQLStore(base + "/sparql")
    assert store.query(ASK).askAnswer is True
    graph = store.query(CONSTRUCT).graph
    assert set(graph) == {(KITCHEN[0], rdflib.URIRef("http://example.org/in"), KITCHEN[1])}


def test_rdflib_cannot_read_a_triple_term_and_reads_it_as_an_iri_with_triple_terms_iri(annotated):
    base = annotated
    store = rdflib.plugins.stores.sparqlstore.SPARQLStore(base + "/sparql", returnFormat="json")
    with pytest.raises(NotImplementedError, match="json term type 'triple'"):
        list(store.query(TRIPLE_TERM))            # what the README says rdflib 7 does
    for form in ("json", "xml"):
        store = rdflib.plugins.stores.sparqlstore.SPARQLStore(base + "/sparql", returnFormat=form,
                                                             params={"triple_terms": "iri"})
        [(reifier, term)] = [tuple(row) for row in store.query(TRIPLE_TERM)]
        assert isinstance(reifier, rdflib.BNode) and isinstance(term, rdflib.URIRef)
        assert str(term).startswith("urn:rspstar:triple:")
        text = urllib.parse.unquote(str(term)[len("urn:rspstar:triple:"):])
        assert text == "<<( <http://example.org/x> <http://example.org/y> <http://example.org/z> )>>"
        assert list(ox.parse(("<http://a> <http://b> %s ." % text).encode(), format=ox.RdfFormat.N_TRIPLES))[0].object == XYZ


def test_pyoxigraph_reads_triple_terms_in_json_and_xml(annotated):
    base = annotated
    for media, form in (("application/sparql-results+json", ox.QueryResultsFormat.JSON),
                        ("application/sparql-results+xml", ox.QueryResultsFormat.XML)):
        body = requests.get(base + "/sparql", params={"query": TRIPLE_TERM}, headers={"Accept": media}, timeout=10).content
        [solution] = list(ox.parse_query_results(body, format=form))
        assert solution["t"] == XYZ


def test_continuous_results_with_a_triple_term_as_each_reader_reads_them(client, engine):
    # A query whose rows bind a triple term: pyoxigraph reads its lines as they are; rdflib only
    # with triple_terms=iri; both on the history and the events.
    query = ("PREFIX ex: <http://example.org/> PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>\n"
             "SELECT ?t ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S]\n"
             "WHERE { WINDOW ex:w { GRAPH ?g { ?r rdf:reifies ?t . ?o ex:v ?v } } }")
    assert client.post("/queries", query_string={"id": "star"}, data=query, content_type="application/sparql-query",
                       headers={"Authorization": "Bearer " + TOKEN}).status_code == 201
    element = (b"@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> .\n"
               b'ex:e1 prov:generatedAtTime "2026-03-01T08:00:01Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
               b"ex:e1 { ex:o1 ex:v 1 {| ex:by ex:sensor |} . }\n")
    engine.store.publish("http://example.org/s",
                         engine.store.documents.stage("http://example.org/s", element, ox.RdfFormat.TRIG, "e").staged)
    engine.clock.set(T0 + 2 * S)
    engine.tick()
    line = client.get("/queries/star/results").get_data()
    solutions = ox.parse_query_results(line, format=ox.QueryResultsFormat.JSON)
    assert [s["t"] for s in solutions] == [ox.Triple(ox.NamedNode("http://example.org/o1"),
                                                     ox.NamedNode("http://example.org/v"), ox.Literal(1))]
    with pytest.raises(NotImplementedError):
        Result.parse(io.BytesIO(line), format="json")
    for path in ("/queries/star/results?triple_terms=iri", "/queries/star/events?triple_terms=iri&since=2026-03-01T08:00:00Z"):
        response = client.get(path, buffered=False)
        body = next(iter(response.response)) if "events" not in path else next(
            chunk for chunk in response.response if b"event: result" in chunk)
        data = body if "events" not in path else body.split(b"data: ", 1)[1]
        response.close()
        [(term, value)] = [tuple(row) for row in Result.parse(io.BytesIO(data), format="json")]
        assert str(term).startswith("urn:rspstar:triple:") and value == rdflib.Literal(1)
    assert client.get("/queries/star/results?triple_terms=text").status_code == 400


# -- rspstar.Client, the Python client of a running server ---------------------------------------
def test_the_client_registers_pushes_reads_and_follows_a_query_live(live):
    base, _ = live
    server = rspstar.Client(base, token="t")
    query = server.register("PREFIX ex: <http://example.org/>\nSELECT (COUNT(*) AS ?n) "
                            "FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S]\n"
                            "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }", id="count")
    assert query.id == "count" and query.describe()["windows"][0]["stream"] == "http://example.org/s"
    followed = query.follow()
    first, second = next(followed), next(followed)
    assert first["bindings"] == [{"n": '"0"^^<http://www.w3.org/2001/XMLSchema#integer>'}]
    assert second["time"] > first["time"] and "latency_ms" not in first
    history = query.results(since=first["time"])
    assert history.records[0] == second and history.rows()[0]["n"] == 0
    assert len(query.results(limit=1)) == 1
    posted = server.push("http://example.org/s", {"time": "2026-03-01T08:00:01Z",
                                                  "data": "<http://example.org/o> <http://example.org/v> 1 ."})
    assert posted["elements"] == 1 and posted["stream"] == "http://example.org/s"
    with pytest.raises(rspstar.StreamNameError, match="'temp' is not an absolute IRI"):
        server.push("temp", "<http://example.org/o> <http://example.org/v> 1 .")
    with pytest.raises(rspstar.ServerError) as refused:
        server.register("SELECT * WHERE { ?s ?p }", id="bad")
    assert refused.value.status == 400 and refused.value.line == 1
    with pytest.raises(rspstar.ServerError) as unauthorized:
        rspstar.Client(base).remove("count")
    assert unauthorized.value.status == 401
    query.remove()
    started = time.monotonic()
    rest = list(followed)                    # what came meanwhile; then the stream ends with the query
    assert all(r["time"] > second["time"] for r in rest) and time.monotonic() - started < 5
    assert "count" not in [q.id for q in server.queries()]


def test_follow_resumes_after_its_stream_ends_without_gap_or_repeat(tmp_path):
    process, base, _ = served.start(token="t", scheduler=True, max_delay=200_000, event_stream_seconds=1.5,
                                    event_keepalive=0.5)
    try:
        records = []
        for record in rspstar.Client(base).follow("q"):
            records.append(record)
            if len(records) == 6:            # the stream is cut every 1.5 s: it was reopened
                break
        seconds = [int(r["time"][17:19]) for r in records]
        assert all((b - a) % 60 == 1 for a, b in zip(seconds, seconds[1:])), seconds
    finally:
        process.kill()
        process.wait()
