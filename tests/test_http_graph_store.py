"""The SPARQL 1.1 Graph Store HTTP Protocol over the background data (/store)."""
import pyoxigraph as ox

from http_app import AUTH, STREAM

G = "http://example.org/g"
TURTLE = b"@prefix ex: <http://example.org/> . ex:a ex:b 1 , 2 . ex:a ex:c << ex:x ex:y ex:z >> ."


def triples(response):
    return {str(t) for t in ox.parse(response.data, format=ox.RdfFormat.from_media_type(response.mimetype))}


def test_a_graph_is_created_read_replaced_merged_and_deleted(client, engine):
    created = client.put("/store", query_string={"graph": G}, data=TURTLE, content_type="text/turtle", headers=AUTH)
    assert created.status_code == 201 and "Content-Type" not in created.headers
    read = client.get("/store", query_string={"graph": G}, headers={"Accept": "application/n-triples"})
    # (The reified triple is a reifier and its rdf:reifies triple: four triples.)
    assert read.status_code == 200 and read.mimetype == "application/n-triples" and len(triples(read)) == 4
    assert client.head("/store", query_string={"graph": G}).status_code == 200
    # Queries see it as a background graph at once.
    answer = client.get("/sparql", query_string={"query": "SELECT (COUNT(*) AS ?n) WHERE { GRAPH <%s> { ?s ?p ?o } }" % G},
                        headers={"Accept": "application/sparql-results+json"})
    assert answer.get_json()["results"]["bindings"][0]["n"]["value"] == "4"
    merged = client.post("/store", query_string={"graph": G}, data=b"<http://example.org/a> <http://example.org/d> \"3\" .",
                         content_type="application/n-triples", headers=AUTH)
    assert merged.status_code == 204
    assert len(triples(client.get("/store", query_string={"graph": G}))) == 5
    replaced = client.put("/store", query_string={"graph": G}, data=b'{"@id": "http://example.org/a", '
                          b'"http://example.org/e": "five"}', content_type="application/ld+json", headers=AUTH)
    assert replaced.status_code == 204
    assert triples(client.get("/store", query_string={"graph": G})) == {'<http://example.org/a> <http://example.org/e> "five"'}
    assert client.delete("/store", query_string={"graph": G}, headers=AUTH).status_code == 204
    assert client.get("/store", query_string={"graph": G}).status_code == 404
    assert client.delete("/store", query_string={"graph": G}, headers=AUTH).status_code == 404


def test_the_default_graph_and_what_is_refused(client, engine):
    assert client.get("/store?default", headers={"Accept": "text/turtle"}).status_code == 200
    before = len(triples(client.get("/store?default")))
    assert client.post("/store?default", data=TURTLE, content_type="text/turtle", headers=AUTH).status_code == 204
    assert len(triples(client.get("/store?default"))) == before + 4
    assert client.put("/store", query_string={"graph": G}, data=TURTLE, content_type="text/turtle").status_code == 401
    for bad, status, words in (
            ({"graph": G, "default": ""}, 400, "not both"), ({}, 400, "name the graph"),
            ({"graph": "not an iri"}, 400, "IRIs"), ({"graph": "urn:rspstar:timestamps:x"}, 403, "reserved by the engine")):
        response = client.get("/store", query_string=bad)
        assert response.status_code == status and words in response.get_json()["message"], bad
    engine.store.add_elements(STREAM, [])
    client.post("/streams?stream=%s" % STREAM, data=b'<http://example.org/e1> <http://www.w3.org/ns/prov#generatedAtTime> '
                b'"2026-03-01T08:00:01Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .', content_type="application/n-quads",
                headers=AUTH)
    from http_app import STREAM as _  # noqa: F401
    engine.store.add_elements(STREAM, [__import__("rspstar.store.rdf_input", fromlist=["Element"]).Element(
        "http://example.org/el", 0, ox.Literal("2026-03-01T08:00:00Z", datatype=ox.NamedNode(
            "http://www.w3.org/2001/XMLSchema#dateTime")), [])])
    element = client.put("/store", query_string={"graph": "http://example.org/el"}, data=TURTLE,
                         content_type="text/turtle", headers=AUTH)
    assert element.status_code == 403 and "stream element" in element.get_json()["message"]
    named = client.put("/store", query_string={"graph": G}, data=b"<http://a> <http://b> <http://c> <http://g2> .",
                       content_type="application/n-quads", headers=AUTH)
    assert named.status_code == 400 and "names graphs of its own" in named.get_json()["message"]
    assert client.put("/store", query_string={"graph": G}, data=b"x", content_type="application/pdf",
                      headers=AUTH).status_code == 415
    broken = client.put("/store", query_string={"graph": G}, data=b"<http://a> <http://b> .", content_type="text/turtle",
                        headers=AUTH)
    assert broken.status_code == 400 and broken.get_json()["line"] == 1
    assert client.get("/store", query_string={"graph": G}).status_code == 404      # nothing was written


def test_the_service_description_links_the_graph_store(client):
    description = client.get("/sparql", headers={"Accept": "application/n-triples"}).get_data(as_text=True)
    assert "<http://localhost/store> <http://purl.org/dc/terms/conformsTo> <http://www.w3.org/TR/sparql11-http-rdf-update/>" \
        in description


def test_a_body_in_another_charset_than_utf8_is_refused_with_415_on_every_route(client, engine):
    """RDF and SPARQL are UTF-8: a body labelled otherwise is refused before anything is read
    (docs/http-api.md), on every route that takes a body, the graph store's too."""
    from http_app import RSPQL
    latin = "; charset=iso-8859-1"
    for method, path, media, body in (
            ("PUT", "/store?graph=" + G, "text/turtle", TURTLE),
            ("POST", "/store?default", "text/turtle", TURTLE),
            ("PUT", "/store?graph=" + G, "application/rdf+xml", b'<?xml version="1.0"?><rdf:RDF xmlns:rdf='
             b'"http://www.w3.org/1999/02/22-rdf-syntax-ns#"/>'),
            ("POST", "/queries", "application/sparql-query", RSPQL.encode()),
            ("POST", "/queries", "application/json", b'{"query": "%s"}' % RSPQL.replace("\n", " ").encode()),
            ("POST", "/update", "application/sparql-update", b"CLEAR SILENT GRAPH <http://example.org/x>"),
            ("POST", "/update", "application/x-www-form-urlencoded", b"update=CLEAR+SILENT+DEFAULT"),
            ("POST", "/sparql", "application/sparql-query", b"ASK {}"),
            ("POST", "/streams?stream=http://example.org/s", "application/n-quads", b""),
    ):
        response = client.open(path, method=method, data=body, content_type=media + latin, headers=AUTH)
        assert response.status_code == 415, (method, path, media, response.status_code)
        assert "iso-8859-1" in response.get_json()["message"]
    assert client.get("/store", query_string={"graph": G}).status_code == 404
    assert client.get("/queries").get_json()["queries"] == []


def test_the_reserved_prefix_is_reserved_in_any_case(client, engine):
    """An IRI's scheme is case-insensitive (RFC 3986), and so is a URN's namespace (RFC 8141):
    `URN:RSPSTAR:` is the engine's `urn:rspstar:`, on every route that refuses it."""
    before = sorted(map(str, engine.store.oxigraph))
    for graph in ("URN:RSPSTAR:x", "Urn:RspStar:batches", "urn:RSPSTAR:timestamps:x"):
        put = client.put("/store", query_string={"graph": graph}, data=TURTLE, content_type="text/turtle", headers=AUTH)
        assert put.status_code == 403 and "reserved by the engine" in put.get_json()["message"], graph
        update = client.post("/update", data="INSERT DATA { GRAPH <%s> { <http://a> <http://b> 1 } }" % graph,
                             content_type="application/sparql-update", headers=AUTH)
        assert update.status_code == 400 and "reserved by the engine" in update.get_json()["message"], graph
        envelope = client.post("/streams?stream=http://example.org/s", content_type="application/x-ndjson",
                               data='{"graph": "%s", "time": "2026-03-01T08:00:00Z", "data": "<http://a> <http://b> 1 ."}'
                               % graph, headers=AUTH)
        assert envelope.status_code == 400 and "reserved by the engine" in envelope.get_json()["message"], graph
    trig = client.post("/streams?stream=http://example.org/s", content_type="application/trig", headers=AUTH,
                       data='<Urn:RspStar:batches> { <http://a> <http://b> 1 } <Urn:RspStar:batches> '
                            '<http://www.w3.org/ns/prov#generatedAtTime> "2026-03-01T08:00:00Z"^^'
                            '<http://www.w3.org/2001/XMLSchema#dateTime> .')
    assert trig.status_code == 400 and "reserved by the engine" in trig.get_json()["message"]
    assert sorted(map(str, engine.store.oxigraph)) == before
