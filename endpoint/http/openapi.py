"""The API's OpenAPI 3.1 document, exact enough to be fuzzed: every route and method the app
serves, each parameter as strict as the route reads it (a request the document calls valid is
accepted, one it calls invalid is refused), bodies of every media type a route takes with
examples of each, every status a route answers and the links from a registration to the query
it made (so a stateful client reaches /queries/{id}). A test keeps it equal to the routes, and
schemathesis runs it in every phase.

Languages (SPARQL, RSP-QL*, TriG, N-Quads) cannot be written as JSON schemas: their bodies and
parameters are given as the set of example texts the fuzzer draws valid requests from; anything
else is refused by the parsers, with its line and column."""
from __future__ import annotations

import json

from rspstar.translator.dialects import DIALECTS
from rspstar.translator.options import OPTIONS as QUERY_OPTIONS, Flag

from ..adhoc import GRAPH_TYPES, RESULT_TYPES
from ..engine.result_shapes import SHAPES, TRIPLE_TERMS
from .sparql import FORMAT_NAMES, FORMAT_PARAMETERS

ERROR = {"$ref": "#/components/schemas/Error"}
XSD = "http://www.w3.org/2001/XMLSchema#"
PROV = "http://www.w3.org/ns/prov#generatedAtTime"

SPARQL_QUERIES = ["ASK {}", "SELECT * WHERE { ?s ?p ?o } LIMIT 5",
                  "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }",
                  "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o } LIMIT 5",
                  "PREFIX rspu: <http://w3id.org/rsp/rspu#> SELECT (rspu:greaterThan(\"N(0.2, 0.01)\"^^rspu:distribution, 0.1)"
                  " AS ?p) WHERE {}"]
UPDATES = ["INSERT DATA { GRAPH <http://example.org/profile> { <http://example.org/p1> <http://example.org/status> "
           "<http://example.org/active> } }",
           "DELETE WHERE { GRAPH <http://example.org/profile> { ?s <http://example.org/status> ?o } }",
           "CLEAR SILENT GRAPH <http://example.org/scratch>"]
CONTINUOUS = ["PREFIX ex: <http://example.org/>\nSELECT ?o ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S]\n"
              "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }",
              "PREFIX ex: <http://example.org/>\nSELECT (COUNT(*) AS ?n) FROM NAMED WINDOW ex:w ON ex:s "
              "[RANGE PT4S STEP PT2S]\nWHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }",
              "PREFIX ex: <http://example.org/>\nSELECT ?t ?v FROM STREAM <http://example.org/s> [RANGE 4s STEP 2s]\n"
              "WHERE { ?t ex:v ?v }"]
STREAM_IRIS = ["http://example.org/s", "http://example.org/stream/oxygen"]
GRAPH_IRIS = ["http://example.org/profile", "http://example.org/g1", "http://example.org/g2"]
QUERY_ID = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"}
INSTANT = {"type": "string", "pattern": "^20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):"
                                        "[0-5][0-9]:[0-5][0-9]Z$", "examples": ["2026-03-01T08:00:00Z"]}
def _option_values(kind) -> list:
    """The values a JSON body may give an option of this kind: its examples, and for a flag each
    spelling it reads and JSON's true and false (the route takes a JSON boolean as its word)."""
    if isinstance(kind, Flag):
        return list(kind.accepted) + [True, False]
    return list(kind.examples)


# The query options (translator/options.py's table): each that every query takes with the
# values of its kind's examples (a policy or an IRI is a language too); dialect and partition,
# which a query's text may refuse, are named in the description.
OPTIONS = {"type": "object", "additionalProperties": False,
           "description": "the query's options (docs/query-options.md); also %s, whose values depend on the query"
                          % " and ".join(o.name for o in QUERY_OPTIONS if not o.any_query),
           "properties": {o.name: {"enum": _option_values(o.kind), "description": o.help}
                          for o in QUERY_OPTIONS if o.any_query and o.kind.examples}}


def _trig(second: int) -> str:
    return ("@prefix ex: <http://example.org/> .\nex:e%d <%s> \"2026-03-01T08:00:%02dZ\"^^<%sdateTime> .\n"
            "ex:e%d { ex:o%d ex:v %d . }\n" % (second, PROV, second, XSD, second, second, second))


def _nquads(second: int) -> str:
    graph = "<http://example.org/n%d>" % second
    return ('%s <%s> "2026-03-01T08:00:%02dZ"^^<%sdateTime> .\n<http://example.org/o%d> <http://example.org/v> '
            '"%d"^^<%sinteger> %s .\n' % (graph, PROV, second, XSD, second, second, XSD, graph))


def _envelope(second: int) -> str:
    return json.dumps({"time": "2026-03-01T08:00:%02dZ" % second,
                       "data": "<http://example.org/j%d> <http://example.org/v> %d ." % (second, second)}) + "\n"


def _text(examples: list[str]) -> dict:
    return {"schema": {"type": "string", "enum": examples}, "examples": {
        "e%d" % k: {"value": value} for k, value in enumerate(examples)}}


def _errors(*statuses: int) -> dict:
    described = {400: "a request the route cannot read: what and where (line, column)", 401: "no or a wrong token",
                 403: "refused: a write from another origin, or a graph that is not the route's to change",
                 404: "no such query or graph (an update: DROP, CLEAR or MOVE of a graph that is not there, "
                      "without SILENT)", 406: "no representation the client accepts",
                 409: "already exists (an update: CREATE of a graph that is there, without SILENT)", 413: "the body is larger than [http] max_body (/sparql: the answer larger than [http] "
                      "query_max_bytes; /update: more quads changed than [http] update_max_changes)",
                 507: "the data directory's disk is full, or below [engine] min_free_disk",
                 415: "a media type or charset the route does not take",
                 503: "not now: starting, past the query time limit or [engine] worker_memory, every "
                      "/sparql worker busy with [http] query_backlog waiting, every event-stream slot taken, the "
                      "bodies processed at once past [http] body_budget, or (registration) the engine at "
                      "[engine] max_queries or max_load"}
    answers = {}
    for status in statuses:
        answers[str(status)] = {"description": described[status], "content": {"application/json": {"schema": ERROR}}}
        if status == 503:
            answers["503"]["headers"] = {"Retry-After": {"schema": {"type": "string"}}}
    return answers


def _op(summary: str, responses: dict, *, parameters=(), body=None, write=False, **extra) -> dict:
    operation = {"summary": summary, "responses": responses}
    if parameters:
        operation["parameters"] = list(parameters)
    if body is not None:
        operation["requestBody"] = {"required": True, "content": body}
    if write:
        operation["security"] = [{"bearer": []}]
    operation.update(extra)
    return operation


def _param(name: str, where: str, schema: dict, required: bool = False, description: str = "") -> dict:
    found = {"name": name, "in": where, "required": required, "schema": schema}
    if description:
        found["description"] = description
    return found


RESULT_FORMAT = _param("format", "query", {"type": "string", "enum": list(SHAPES)},
                       description="each evaluation as SPARQL Query Results JSON (the default) or compact "
                                   "(the conformance format)")


TRIPLE_TERMS_PARAM = _param("triple_terms", "query", {"type": "string", "enum": list(TRIPLE_TERMS)},
                            description="how a triple term is written in SPARQL Query Results JSON (and /sparql's XML): as SPARQL 1.2 "
                                        "does (triple, the default), or as an IRI urn:rspstar:triple: followed by its "
                                        "N-Triples text percent-encoded (iri), for SPARQL 1.1 readers such as rdflib 7")


def _formats() -> list[dict]:
    """/sparql's format parameters, aliases of the Accept header (SPARQLWrapper sends all three).
    The schema lists the names that fit every query form (a SELECT and a CONSTRUCT alike); the
    others are taken for the form they fit, and a 406 answers one that fits none of the query's."""
    return [_param(name, "query", {"type": "string", "enum": ["json", "xml"]},
                   description="the results' or graph's format instead of an Accept header: json (SPARQL JSON, or "
                               "JSON-LD for a graph), xml (SPARQL XML, or RDF/XML); also taken, for the query form "
                               "they fit: %s, or a media type" % ", ".join(n for n in FORMAT_NAMES if n not in
                                                                           ("json", "xml")))
            for name in FORMAT_PARAMETERS]


def _iris(name: str, examples: list[str]) -> dict:
    return _param(name, "query", {"type": "array", "items": {"type": "string", "enum": examples}},
                  description="IRIs (repeatable)") | {"style": "form", "explode": True}


GRAPH_CONTENT = {media: {} for media in GRAPH_TYPES}
RESULT_CONTENT = {media: {} for media in list(RESULT_TYPES) + list(GRAPH_TYPES) if media != "application/json"}


def _sinks(allowed: list[str]) -> dict:
    """The sinks a registration may name, one under each origin the server's [sinks] allowed
    lists (none when it lists none, as by default)."""
    examples = [origin.rstrip("/") + ("/results" if origin.startswith("http") else "/rspstar/results")
                for origin in allowed]
    if not examples:
        return {"type": "array", "maxItems": 0, "items": {"type": "string"},
                "description": "no sink is allowed: [sinks] allowed is empty"}
    return {"type": "array", "maxItems": 1, "items": {"type": "string", "enum": examples},
            "description": "under the origins of [sinks] allowed"}


def document(allowed_sinks: list[str] = ()) -> dict:
    """The API's OpenAPI document; the sinks a registration may name are those the server's
    allow-list takes."""
    query_id = _param("id", "path", QUERY_ID, required=True)
    queries_item = {"operationId": "getQuery", "parameters": {"id": "$response.body#/id"}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "rspstar", "version": "0.1.0",
                 "description": "RSP-QL* stream processing engine: the SPARQL 1.1 Protocol (with SPARQL-star) and "
                                "Graph Store Protocol over the store, continuous queries, streams. Errors are JSON "
                                "{error, message, line?, column?}. Writes need 'Authorization: Bearer <token>'."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "needed for writes when the server has a token"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error", "message"], "properties": {
                    "error": {"type": "string"}, "message": {"type": "string"}, "line": {"type": "integer"},
                    "column": {"type": "integer"}, "source": {"type": "string"}}},
                "Query": {"type": "object", "required": ["id", "query", "form", "r2s", "windows", "status"], "properties": {
                    "id": {"type": "string"}, "query": {"type": "string"}, "form": {"type": "string"},
                    "r2s": {"type": "string"}, "output_stream": {"type": ["string", "null"]},
                    "sinks": {"type": "array", "items": {"type": "string"}}, "options": {"type": "object"},
                    "windows": {"type": "array", "items": {"type": "object"}}, "status": {"type": "object"},
                    "sink_backlog": {"type": "object"},
                    "sink_outboxes": {"type": "array", "items": {"type": "object"},
                                      "description": "per sink: records waiting (pending, pending_bytes), delivered, "
                                                     "dropped to keep the outbox within [engine] outbox_bytes "
                                                     "(dropped, last_dropped), failures, last_error"},
                    "report": {"type": "string", "description": "the report policy, in words (spec 6.3, 6.6)"},
                    "policy": {"type": "string", "description": "the report policy as the report option writes it"},
                    "normalised": {"type": "array", "items": {"type": "string"},
                                   "description": "community window forms read as the dialect's own (spec 6.7)"},
                    "readings": {"type": "array", "items": {"type": "string"},
                                 "description": "what each WINDOW block reads and why, at line:column (spec 6.15)"},
                    "warnings": {"type": "array", "items": {"type": "string"},
                                 "description": "valid but surely not meant, at line:column; the query runs as written"},
                    "dialect": {"type": "string", "enum": list(DIALECTS)},
                    "translation": {"type": ["string", "null"]}}},
                "Registration": {"type": "object", "required": ["query"], "additionalProperties": False, "properties": {
                    "query": {"type": "string", "enum": CONTINUOUS}, "id": {"anyOf": [QUERY_ID, {"type": "null"}]},
                    "sinks": _sinks(list(allowed_sinks)),
                    "options": OPTIONS}},
                # PUT's body: the id is the URL's (a body naming another is refused)
                "Replacement": {"type": "object", "required": ["query"], "additionalProperties": False,
                                "properties": {"query": {"type": "string", "enum": CONTINUOUS},
                                               "sinks": _sinks(list(allowed_sinks)), "options": OPTIONS}},
            },
        },
        "paths": {
            "/sparql": {
                "get": _op("SPARQL query; with no parameter, the SPARQL 1.1 Service Description", {
                    "200": {"description": "results, or the service description (content negotiation)",
                            "content": RESULT_CONTENT}, **_errors(400, 406, 413, 503)},
                    parameters=[_param("query", "query", {"type": "string", "enum": SPARQL_QUERIES},
                                       description="a SPARQL 1.1/1.2 query; without any parameter a GET answers with "
                                                   "the service description"),
                                _iris("default-graph-uri", GRAPH_IRIS), _iris("named-graph-uri", GRAPH_IRIS),
                                *_formats(), TRIPLE_TERMS_PARAM]),
                "post": _op("SPARQL query, posted as a form or directly", {
                    "200": {"description": "results (content negotiation)", "content": RESULT_CONTENT},
                    **_errors(400, 406, 413, 415, 503)},
                    parameters=[_iris("default-graph-uri", GRAPH_IRIS), _iris("named-graph-uri", GRAPH_IRIS),
                                *_formats(), TRIPLE_TERMS_PARAM],
                    body={"application/sparql-query": _text(SPARQL_QUERIES),
                          "application/x-www-form-urlencoded": {"schema": {
                              "type": "object", "required": ["query"], "additionalProperties": False,
                              "properties": {"query": {"type": "string", "enum": SPARQL_QUERIES}}}}}),
            },
            "/update": {
                "post": _op("SPARQL Update of the background data", {
                    "204": {"description": "done"}, **_errors(400, 401, 403, 404, 409, 413, 415, 503, 507)},
                    parameters=[_iris("using-graph-uri", GRAPH_IRIS), _iris("using-named-graph-uri", GRAPH_IRIS)],
                    body={"application/sparql-update": _text(UPDATES),
                          "application/x-www-form-urlencoded": {"schema": {
                              "type": "object", "required": ["update"], "additionalProperties": False,
                              "properties": {"update": {"type": "string", "enum": UPDATES}}}}},
                    write=True),
            },
            "/store": {
                **{method: _op("Graph Store Protocol: read a background graph (or ?default)", {
                    "200": {"description": "the graph (content negotiation)", "content": GRAPH_CONTENT},
                    **_errors(400, 403, 404, 406)},
                    parameters=[_param("graph", "query", {"type": "string", "enum": GRAPH_IRIS}, required=True,
                                       description="the graph's IRI; /store?default names the default graph")])
                   for method in ("get",)},
                **{method: _op("Graph Store Protocol: %s a background graph (or ?default)" % verb, {
                    "201": {"description": "the graph was created"}, "204": {"description": "done"},
                    **_errors(400, 401, 403, 413, 415, 503, 507)},
                    parameters=[_param("graph", "query", {"type": "string", "enum": GRAPH_IRIS}, required=True)],
                    body={"text/turtle": _text([
                        "@prefix ex: <http://example.org/> . ex:a ex:b 1 , 2 .",
                        "@prefix ex: <http://example.org/> . ex:a ex:c << ex:x ex:y ex:z >> ."]),
                        "application/n-triples": _text(['<http://example.org/a> <http://example.org/b> "1" .'])},
                    write=True) for method, verb in (("put", "replace"), ("post", "add to"))},
                "delete": _op("Graph Store Protocol: remove a background graph (?default: empty it)", {
                    "204": {"description": "done"}, **_errors(400, 401, 403, 404, 503, 507)},
                    parameters=[_param("graph", "query", {"type": "string", "enum": GRAPH_IRIS}, required=True)],
                    write=True),
            },
            "/queries": {
                "get": _op("the registered queries", {"200": {"description": "every query, described", "content": {
                    "application/json": {"schema": {"type": "object", "required": ["queries"], "properties": {
                        "queries": {"type": "array", "items": {"$ref": "#/components/schemas/Query"}}}}}}}}),
                "post": _op("register a continuous query (RSP-QL* or a dialect)", {
                    "201": {"description": "registered", "headers": {"Location": {"schema": {"type": "string"}}},
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Query"}}},
                            "links": {"GetQuery": queries_item,
                                      "GetResults": {"operationId": "getResults", "parameters": {"id": "$response.body#/id"}},
                                      "GetEvents": {"operationId": "getEvents", "parameters": {"id": "$response.body#/id"}},
                                      "DeleteQuery": {"operationId": "deleteQuery",
                                                      "parameters": {"id": "$response.body#/id"}}}},
                    **_errors(400, 401, 403, 409, 413, 415, 503, 507)},
                    parameters=[_param("id", "query", QUERY_ID, description="the query's id (a text body)")],
                    body={"application/json": {"schema": {"$ref": "#/components/schemas/Registration"}},
                          "application/sparql-query": _text(CONTINUOUS), "text/plain": _text(CONTINUOUS)},
                    write=True, operationId="registerQuery"),
            },
            "/queries/{id}": {
                "get": _op("one query: windows, policy, status, sink backlog", {
                    "200": {"description": "the query", "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Query"}}}},
                    **_errors(404)}, parameters=[query_id], operationId="getQuery"),
                "put": _op("register the query under this id, or replace the one registered (the same text, sinks "
                           "and options: left as it runs); a JSON body's id, if any, is the URL's", {
                    "200": {"description": "replaced, or left as it was", "headers": {"Location": {"schema": {
                        "type": "string"}}}, "content": {"application/json": {"schema": {
                            "$ref": "#/components/schemas/Query"}}}},
                    "201": {"description": "registered", "headers": {"Location": {"schema": {"type": "string"}}},
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Query"}}}},
                    **_errors(400, 401, 403, 413, 415, 503, 507)}, parameters=[query_id],
                    body={"application/json": {"schema": {"$ref": "#/components/schemas/Replacement"}},
                          "application/sparql-query": _text(CONTINUOUS), "text/plain": _text(CONTINUOUS)},
                    write=True, operationId="putQuery"),
                "delete": _op("remove a query (its event streams get a 'closed' event)", {
                    "204": {"description": "removed"}, **_errors(401, 403, 404, 503, 507)}, parameters=[query_id],
                    write=True, operationId="deleteQuery"),
            },
            "/queries/{id}/results": {
                "get": _op("the result history, a JSON line per evaluation: SPARQL Query Results JSON (head, results "
                           "or boolean) with time and windows, or with format=compact the conformance format", {
                    "200": {"description": "one JSON line per evaluation", "content": {"application/x-ndjson": {
                        "schema": {"type": "string"}}}}, **_errors(400, 404)},
                    parameters=[query_id, _param("since", "query", INSTANT,
                                                 description="the evaluations after this instant (exclusive)"),
                                _param("limit", "query", {"type": "integer", "minimum": 0, "maximum": 1_000_000},
                                       description="at most this many: the latest, or with since the first after it"),
                                RESULT_FORMAT, TRIPLE_TERMS_PARAM],
                    operationId="getResults"),
            },
            "/queries/{id}/events": {
                "get": _op("server-sent events: result, dropped, closed; ends after [http] event_stream_seconds, or "
                           "event_idle_seconds without a record; at most max_event_streams_per_client for one client",
                           {"200": {"description": "an event stream", "content": {"text/event-stream": {
                               "schema": {"type": "object", "required": ["event", "data"], "properties": {
                                   "id": {"type": "string", "description": "the evaluation's instant"},
                                   "event": {"type": "string", "enum": ["result", "dropped", "closed"]},
                                   "data": {"type": "string"}}}}}}, **_errors(400, 404, 503)},
                           parameters=[query_id, RESULT_FORMAT, TRIPLE_TERMS_PARAM,
                                       _param("since", "query", INSTANT, description="resume after this instant: "
                                              "the history's records after it come first (a reconnecting client's "
                                              "Last-Event-ID header, the id of the last event it had, does the same)")],
                           operationId="getEvents"),
            },
            "/streams": {
                "get": _op("what each stream and source holds", {"200": {"description": "streams and sources", "content": {
                    "application/json": {"schema": {"type": "object", "required": ["streams", "sources"]}}}}}),
                "post": _op("post stream elements: decoded, then landed durably for Spark to ingest", {
                    "202": {"description": "accepted", "content": {"application/json": {"schema": {
                        "type": "object", "required": ["stream", "accepted", "elements"]}}}},
                    **_errors(400, 401, 403, 409, 413, 415, 503, 507)},
                    parameters=[_param("stream", "query", {"type": "string", "enum": STREAM_IRIS}, required=True,
                                       description="the stream the elements belong to")],
                    body={"application/trig": _text([_trig(1), _trig(2)]),
                          "application/n-quads": _text([_nquads(3), _nquads(4)]),
                          "application/x-ndjson": _text([_envelope(5), _envelope(6)])},
                    write=True),
            },
            "/health": {"get": _op("ok, starting or degraded (sources down, a background graph not reloaded), with counts", {
                "200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}},
                "503": {"description": "starting or degraded", "headers": {"Retry-After": {"schema": {"type": "string"}}},
                        "content": {"application/json": {"schema": {"type": "object"}}}}})},
            "/metrics": {"get": _op("Prometheus metrics", {"200": {"description": "text exposition format", "content": {
                "text/plain": {"schema": {"type": "string"}}}}})},
            "/": {"get": _op("the dashboard", {"200": {"description": "HTML", "content": {"text/html": {}}},
                                               **_errors(400)}, parameters=[
                _param("refresh", "query", {"type": "string", "enum": ["poll", "events"]}),
                _param("query", "query", QUERY_ID, description="the query to open")])},
            "/openapi.json": {"get": _op("this document", {"200": {"description": "OpenAPI 3.1", "content": {
                "application/json": {}}}})},
            "/static/vendor/plotly.min.js": {"get": _op("plotly.js, served from the installed package", {
                "200": {"description": "JavaScript", "content": {"text/javascript": {}}}, **_errors(404)})},
        },
    }
