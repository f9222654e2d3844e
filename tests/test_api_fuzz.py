"""Schemathesis against the API's own OpenAPI document: generated requests (valid and not)
to every route must get no server error and only the statuses, media types and bodies the
document declares. Bounded: a fixed number of examples per route, derandomized."""
import tempfile
from pathlib import Path

import hypothesis
import pyoxigraph as ox
import pytest
import schemathesis
from schemathesis.checks import (
    content_type_conformance, not_a_server_error, response_schema_conformance, status_code_conformance,
)

from rspstar.endpoint.clock import VirtualClock
from rspstar.endpoint.engine import Engine, EngineConfig
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import parse_instant

pytestmark = pytest.mark.slow


@schemathesis.serializer("application/sparql-query", "application/sparql-update", "application/trig",
                         "application/n-quads", "application/x-ndjson", "application/jsonl")
def text_body(ctx, value):
    """Bodies the document describes as strings go as their UTF-8 text (anything else as its
    string form), so the generated text reaches the parsers."""
    return (value if isinstance(value, str) else str(value)).encode("utf-8")


def build_app():
    store = StreamStore()
    store.background.load(b'<http://example.org/s> <http://example.org/p> "1" .', ox.RdfFormat.N_TRIPLES, "bg.nt")
    data = Path(tempfile.mkdtemp(prefix="rspstar-fuzz-"))
    engine = Engine(store, VirtualClock(parse_instant("2026-03-01T08:00:00Z")),
                    EngineConfig(data_dir=data / "engine", allowed_sinks=["http://localhost:9"]))
    engine.register("PREFIX ex: <http://example.org/>\nSELECT ?o FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S] "
                    "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }", "q1")
    return create_app(engine, HttpSettings(query_timeout=5, max_body=65536, landing_dir=data / "landing"))


schema = schemathesis.openapi.from_wsgi("/openapi.json", build_app())
# The event stream never ends by design: it is tested on its own in test_http.
schema = schema.exclude(path_regex=r"/events$")


@schema.parametrize()
@hypothesis.settings(max_examples=30, deadline=None, derandomize=True, database=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
def test_the_api_answers_every_request_as_its_document_says(case):
    case.call_and_validate(checks=[not_a_server_error, status_code_conformance, content_type_conformance,
                                   response_schema_conformance])
