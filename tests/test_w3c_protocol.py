"""The W3C SPARQL 1.1 Protocol test suite (tests/w3c/protocol, copied from w3c/rdf-tests), every
test of its manifest run against the engine's HTTP API: queries go to /sparql, updates to
/update (the manifest allows an endpoint to split them), each test on a fresh engine holding the
test's graph data as background graphs."""
import json
from pathlib import Path

import pytest
from rdflib import Graph, Namespace
from rdflib.collection import Collection
from rdflib.namespace import RDF, RDFS

from http_app import AUTH, TOKEN
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import Runner, EngineConfig
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.store.stream_store import StreamStore

import pyoxigraph as ox

SUITE = Path(__file__).resolve().parent / "w3c" / "protocol"
MANIFEST = SUITE / "manifest.ttl"
BASE = "http://www.w3.org/2009/sparql/docs/tests/data-sparql11/protocol/manifest.ttl"
MF = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#")
HT = Namespace("http://www.w3.org/2011/http#")
CNT = Namespace("http://www.w3.org/2011/content#")
UT = Namespace("http://www.w3.org/2009/sparql/tests/test-update#")
STATUS = "http://www.w3.org/2011/http-statusCodes#StatusCode"


def _manifest() -> Graph:
    graph = Graph()
    graph.parse(MANIFEST, format="turtle", publicID=BASE)
    return graph


GRAPH = _manifest()


def _tests():
    manifest = next(GRAPH.subjects(RDF.type, MF.Manifest))
    entries = Collection(GRAPH, GRAPH.value(manifest, MF.entries))
    return [pytest.param(test, id=str(test).rsplit("#", 1)[-1]) for test in entries]


def _requests(test):
    action = GRAPH.value(test, MF.action)
    for request in Collection(GRAPH, GRAPH.value(action, HT.requests)):
        headers = {}
        header_list = GRAPH.value(request, HT.headers)
        if header_list is not None:
            for header in Collection(GRAPH, header_list):
                headers[str(GRAPH.value(header, HT.fieldName))] = str(GRAPH.value(header, HT.fieldValue))
        body = GRAPH.value(request, HT.body)
        data = None
        if body is not None:
            encoding = str(GRAPH.value(body, CNT.characterEncoding) or "UTF-8")
            data = str(GRAPH.value(body, CNT.chars)).encode(encoding)
        response = GRAPH.value(request, HT.resp)
        yield {
            "method": str(GRAPH.value(request, HT.methodName)),
            "path": str(GRAPH.value(request, HT.absolutePath)),
            "headers": headers, "data": data,
            "statuses": {str(s)[len(STATUS):] for s in GRAPH.objects(response, MF.expectedStatus)},
            "format": GRAPH.value(response, MF.expectedFormat),
            "boolean": GRAPH.value(response, MF.expectedBoolean),
        }


def _client(test):
    store = StreamStore()
    for data in GRAPH.objects(test, UT.graphData):
        file = Path(str(GRAPH.value(data, UT.graph)).rsplit("/", 1)[-1])
        label = str(GRAPH.value(data, RDFS.label))
        store.background.load((SUITE / file).read_bytes(), ox.RdfFormat.N_TRIPLES, str(file))
        quads = [ox.Quad(q.subject, q.predicate, q.object, ox.NamedNode(label))
                 for q in ox.parse((SUITE / file).read_bytes(), format=ox.RdfFormat.N_TRIPLES)]
        store.background.load(ox.serialize(quads, format=ox.RdfFormat.N_QUADS), ox.RdfFormat.N_QUADS, label)
    engine = Runner(store, VirtualClock(0), EngineConfig())
    return create_app(engine, HttpSettings(token=TOKEN)).test_client()


def _is_update(request) -> bool:
    content_type = request["headers"].get("content-type", "")
    query_string = request["path"].partition("?")[2]
    body = (request["data"] or b"").decode("latin-1")
    return content_type.startswith("application/sparql-update") or "update=" in query_string or \
        (content_type.startswith("application/x-www-form-urlencoded") and body.startswith("update="))


def _check_format(response, expected, boolean):
    media = response.mimetype
    if expected == "boolean":
        assert media in ("application/sparql-results+json", "application/sparql-results+xml"), media
        value = response.get_json()["boolean"] if media.endswith("json") else \
            "<boolean>true</boolean>" in response.get_data(as_text=True)
        if boolean is not None:
            assert value == bool(boolean.toPython())
    elif expected == "tabular":
        assert media.startswith("application/sparql-results+") or media in ("text/csv", "text/tab-separated-values")
    elif expected == "RDF":
        assert media in ("application/rdf+xml", "text/turtle", "application/n-triples", "application/ld+json",
                         "application/n-quads", "application/trig"), media


@pytest.mark.parametrize("test", _tests())
def test_the_w3c_protocol_suite(test):
    client = _client(test)
    for request in _requests(test):
        path, _, query = request["path"].partition("?")
        assert path == "/sparql/"
        route = "/update" if _is_update(request) else "/sparql"
        headers = dict(request["headers"], **AUTH)
        response = client.open(route + ("?" + query if query else ""), method=request["method"], headers=headers,
                               data=request["data"])
        assert "%dxx" % (response.status_code // 100) in request["statuses"], \
            (response.status_code, response.get_data(as_text=True)[:300])
        if request["format"] is not None and response.status_code < 300:
            _check_format(response, str(request["format"]), request["boolean"])
        if response.status_code == 204:
            assert "Content-Type" not in response.headers


def test_the_suite_is_all_there():
    assert len(_tests()) == 34 and json.dumps(sorted(p.name for p in SUITE.iterdir())) == \
        '["data1.nt", "data2.nt", "data3.nt", "manifest.ttl"]'
