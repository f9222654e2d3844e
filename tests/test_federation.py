"""SERVICE and LOAD reach only allowed origins: refused with a position otherwise, on every
way in (the SPARQL endpoint, updates, registration), and a canary server sees no request."""
import http.server
import threading
import time

import pytest

from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import Runner, EngineConfig
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.endpoint.engine.mqtt_publish import DeliveryError
from rspstar.endpoint.engine.sinks import post_bounded
from rspstar.store.stream_store import StreamStore
from rspstar.translator.federation import FederationNotAllowed, check_federation
from rspstar.translator.temporal import parse_instant


@pytest.fixture
def canary():
    """A local HTTP server that counts every request it gets."""
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(500)
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % server.server_port, hits
    server.shutdown()


@pytest.mark.parametrize("text,column", [
    ("SELECT * WHERE { SERVICE <http://127.0.0.1:1/sparql> { ?s ?p ?o } }", 26),
    ("PREFIX x: <http://127.0.0.1:1/>\nSELECT * WHERE { SERVICE SILENT x:sparql { ?s ?p ?o } }", 33),
    ("SELECT * WHERE { SERVICE ?where { ?s ?p ?o } }", 26),
    ("LOAD <file:///etc/passwd>", 6),
    # Written in any case and against any neighbour: the look for the keyword before the
    # tokens are read must find each.
    ("SELECT * WHERE {sErViCe<http://127.0.0.1:1/sparql>{ ?s ?p ?o } }", 24),
    ("SELECT * WHERE { ?s ?p ?o .}\nload<file:///etc/passwd>", 5),
    ("SELECT * WHERE { ?s ?p ?o }#\rSERVICE\nSELECT * { Service <http://127.0.0.1:1/> {} }", 20),
])
def test_service_and_load_are_off_by_default(text, column):
    with pytest.raises(FederationNotAllowed) as caught:
        check_federation(text, [])
    assert caught.value.column == column


def test_an_allowed_origin_may_be_reached_and_no_other():
    check_federation("SELECT * WHERE { SERVICE <http://kb.example:8080/sparql> { ?s ?p ?o } }", ["http://kb.example:8080"])
    with pytest.raises(FederationNotAllowed, match="allow-list"):
        check_federation("SELECT * WHERE { SERVICE <http://kb.example:8081/sparql> { ?s ?p ?o } }",
                         ["http://kb.example:8080"])
    check_federation('SELECT * WHERE { ?s ?p "SERVICE <http://x/>" }', [])   # in a string: not a call


def test_no_way_in_reaches_the_canary(canary):
    address, hits = canary
    engine = Runner(StreamStore(), VirtualClock(parse_instant("2026-03-01T08:00:00Z")), EngineConfig())
    client = create_app(engine, HttpSettings()).test_client()
    select = "SELECT * WHERE { SERVICE <%s/sparql> { ?s ?p ?o } }" % address
    assert client.get("/sparql", query_string={"query": select}).status_code == 400
    load = client.post("/update", data="LOAD <%s/data.ttl>" % address, content_type="application/sparql-update")
    assert load.status_code == 400 and load.get_json()["column"] == 6
    registration = ("PREFIX ex: <http://example.org/>\nSELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S]\n"
                    "WHERE { WINDOW ex:w { GRAPH ?g { ?s ?p ?o } } SERVICE <%s/sparql> { ?s ?p ?o } }" % address)
    response = client.post("/queries", data=registration, content_type="application/sparql-query")
    assert response.status_code == 400 and response.get_json()["line"] == 3
    assert hits == []


def test_an_allowed_service_does_reach_out(canary):
    address, hits = canary
    engine = Runner(StreamStore(), VirtualClock(parse_instant("2026-03-01T08:00:00Z")),
                    EngineConfig(federation_allowed=[address]))
    client = create_app(engine, HttpSettings()).test_client()
    client.get("/sparql", query_string={"query": "SELECT * WHERE { SERVICE <%s/sparql> { ?s ?p ?o } }" % address})
    assert hits


def test_sink_delivery_does_not_follow_a_redirect(canary):
    target, hits = canary

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.send_response(307)
            self.send_header("Location", target + "/stolen")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        status = post_bounded("http://127.0.0.1:%d/alerts" % server.server_port, b"{}", {})
    finally:
        server.shutdown()
    assert status == 307 and hits == []


@pytest.mark.parametrize("drips", ["status line", "headers"])
def test_a_sink_receiver_that_drips_its_answer_is_cut_at_the_delivery_bound(drips):
    # A byte every 0.2 s keeps each wait for the receiver short: only a bound on the whole
    # exchange lets the delivery thread go (the record then waits in the outbox for a retry).
    stopped = threading.Event()

    class Dripping(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            text = b"HTTP/1.1 200 OK\r\n" if drips == "status line" else b"HTTP/1.1 200 OK\r\nX-Slow: "
            self.wfile.write(text[:-1] if drips == "status line" else text)
            self.wfile.flush()
            while not stopped.wait(0.2):
                self.wfile.write(b"x")
                self.wfile.flush()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Dripping)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    started = time.monotonic()
    try:
        with pytest.raises(DeliveryError, match="did not answer within 1 s"):
            post_bounded("http://127.0.0.1:%d/alerts" % server.server_port, b"{}", {}, seconds=1)
        assert time.monotonic() - started < 5
    finally:
        stopped.set()
        server.shutdown()
        server.server_close()
