"""The HTTP app: its routes and their answers to good and bad input, the OpenAPI document,
CORS, access control, and a real client over a socket."""
import re
import threading

import pytest
import requests
from werkzeug.serving import make_server

from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import EngineConfig, Runner
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.store.stream_store import StreamStore
from http_app import AUTH, RSPQL, SELECT, STREAM, T0, TOKEN


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


def test_cors_for_configured_origins_only(client):
    assert client.get("/health", headers={"Origin": "http://dash.test"}).headers["Access-Control-Allow-Origin"] == \
        "http://dash.test"
    assert "Access-Control-Allow-Origin" not in client.get("/health", headers={"Origin": "http://evil.test"}).headers


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


def test_the_openapi_registration_example_is_one_the_server_takes_with_its_own_allow_list(tmp_path):
    """Every sink the document offers for a registration is one the server's [sinks] allowed
    takes: none by default (the allow-list is empty), one under an origin it allows."""
    for allowed in ([], ["http://localhost:9"], ["mqtt://broker.example:1883"]):
        engine = Runner(StreamStore(), VirtualClock(T0), EngineConfig(data_dir=tmp_path / str(len(allowed)),
                                                                     allowed_sinks=allowed))
        client = create_app(engine, HttpSettings(token=None)).test_client()
        sinks = client.get("/openapi.json").get_json()["components"]["schemas"]["Registration"]["properties"]["sinks"]
        offered = sinks["items"].get("enum", [])
        assert len(offered) == len(allowed) and sinks.get("maxItems", 1) == min(len(allowed), 1), sinks
        for k, sink in enumerate(offered):
            created = client.post("/queries", json={"id": "q%d" % k, "query": RSPQL, "sinks": [sink]})
            assert created.status_code == 201, (sink, created.get_json())


def test_the_openapi_options_are_the_option_table_and_every_value_offered_registers(tmp_path):
    """The document's query options come from translator/options.py's table: every option that
    any query takes is offered with its help, and each value it offers registers with each of the
    document's example queries (a fuzzer sends them, and a request the document calls valid
    must be accepted); the others are named in the description."""
    from rspstar.translator.options import OPTIONS
    engine = Runner(StreamStore(), VirtualClock(T0), EngineConfig(data_dir=tmp_path / "e"))
    client = create_app(engine, HttpSettings(token=None)).test_client()
    registration = client.get("/openapi.json").get_json()["components"]["schemas"]["Registration"]["properties"]
    offered = registration["options"]["properties"]
    assert {name: option["description"] for name, option in offered.items()} == \
        {o.name: o.help for o in OPTIONS if o.any_query}
    assert all(o.name in registration["options"]["description"] for o in OPTIONS if not o.any_query)
    registered = 0
    for name, option in offered.items():
        for value in option["enum"]:
            for text in registration["query"]["enum"]:
                created = client.post("/queries", json={"query": text, "options": {name: value}})
                assert created.status_code == 201, (name, value, text, created.get_json())
                assert client.delete(created.headers["Location"]).status_code == 204
                registered += 1
    assert registered > 2 * len(offered)


def test_the_api_page_names_every_error_status_the_server_answers_and_no_other():
    """docs/http-api.md's paragraph of errors and endpoint/http/errors.py, where every status is
    chosen, name the same statuses (with Flask's own: an unknown route, a method not allowed),
    and the OpenAPI document promises none beyond them."""
    from conftest import REPO
    from rspstar.endpoint.http import errors
    from rspstar.endpoint.http.openapi import document
    page = (REPO / "docs" / "http-api.md").read_text(encoding="utf-8")
    paragraph = page.split("Errors are JSON", 1)[1].split("\n\n", 1)[0]
    documented = {int(s) for s in re.findall(r"\b([45]\d\d)\b", paragraph)}
    chosen = {status for _, status in errors._STATUSES} | {404, 405, 406}
    # A failure of the server itself (500, 501) is no client's error: not a promise of the page.
    assert documented == chosen - {500, 501}, (documented ^ (chosen - {500, 501}))
    promised = {int(status) for item in document(["http://localhost:9"])["paths"].values() for operation in item.values()
                for status in operation["responses"] if status[0] in "45"}
    assert promised <= documented, promised - documented
