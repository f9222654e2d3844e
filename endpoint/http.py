"""The HTTP face of the engine: SPARQL 1.1 Protocol (with SPARQL-star) over the store, the
continuous-query API, server-sent events, health and metrics.

`create_app` builds everything it needs (store, engine) unless given them, so there is no
global state and tests run several apps side by side.
"""
from __future__ import annotations

import hmac
import importlib.resources
import json
import queue
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pyoxigraph as ox
from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from store.errors import StoreError
from store.landing import drop_file
from store.rdf_input import read_envelope, scan_document
from store.stream_store import StreamStore
from translator.errors import TemporalValueError, TranslatorError
from translator.federation import check_federation
from translator.nesting import check_nesting
from translator.temporal import format_instant, parse_instant
from translator.validate import oxigraph_syntax_error

from .adhoc import GRAPH_TYPES, RESULT_TYPES, AdhocQueries, Job, QueryRefused, negotiate, serialize_graph
from .clock import Clock, WallClock
from .engine import Engine, EngineConfig
from .errors import EndpointError
from .service_description import service_description
from .http_errors import (
    BadRequest, Forbidden, NotAcceptable, ServiceUnavailable, Unauthorized, UnsupportedMediaType, error_body, status_for,
)

STATIC = Path(__file__).resolve().parent / "static"
PLOTLY_JS = importlib.resources.files("plotly") / "package_data" / "plotly.min.js"
SSE_HEARTBEAT_SECONDS = 15.0
MAX_RESULTS_LIMIT = 1_000_000


class SparqlSyntaxError(BadRequest):
    """A SPARQL query or update Oxigraph cannot parse, with its position."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


def _sparql_syntax_error(e: SyntaxError) -> SparqlSyntaxError:
    return SparqlSyntaxError(*oxigraph_syntax_error(str(e)))


@dataclass
class HttpSettings:
    token: str | None = None                      # bearer token for writes; None: writes open
    cors_origins: list[str] = field(default_factory=list)
    query_timeout: float = 30.0                   # seconds for /sparql
    query_workers: int = 2                        # /sparql queries evaluated at once
    max_body: int = 16 * 1024 * 1024              # bytes
    landing_dir: Path | None = None               # where POST /streams drops data for Spark


STREAM_TYPES = {
    "application/trig": (".trig", ox.RdfFormat.TRIG),
    "application/n-quads": (".nq", ox.RdfFormat.N_QUADS),
    "application/x-ndjson": (".jsonl", None),
    "application/jsonl": (".jsonl", None),
}


@dataclass
class Services:
    engine: Engine
    store: StreamStore
    settings: HttpSettings
    adhoc: AdhocQueries
    ingestion_status: Callable[[], dict]


def create_app(engine: Engine | None = None, settings: HttpSettings | None = None, *,
               store: StreamStore | None = None, clock: Clock | None = None,
               config: EngineConfig | None = None,
               ingestion_status: Callable[[], dict] = dict) -> Flask:
    settings = settings or HttpSettings()
    if engine is None:
        engine = Engine(store or StreamStore(), clock or WallClock(), config or EngineConfig())
    services = Services(engine, engine.store, settings,
                        AdhocQueries(engine.store, settings.query_timeout, settings.query_workers), ingestion_status)
    app = Flask("rspstar", static_folder=str(STATIC), static_url_path="/static")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body
    app.extensions["rspstar"] = services

    @app.errorhandler(EndpointError)
    @app.errorhandler(TranslatorError)
    @app.errorhandler(StoreError)
    def engine_error(error):
        status = status_for(error)
        response = Response(json.dumps(error_body(error)), status=status, mimetype="application/json")
        if status == 401:
            response.headers["WWW-Authenticate"] = 'Bearer realm="rspstar"'
        return response

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException):
        body = {"error": error.name, "message": error.description}
        response = Response(json.dumps(body), status=error.code, mimetype="application/json")
        if getattr(error, "valid_methods", None):
            response.headers["Allow"] = ", ".join(error.valid_methods)
        return response

    @app.after_request
    def cors(response: Response) -> Response:
        origin = request.headers.get("Origin")
        if origin and ("*" in settings.cors_origins or origin in settings.cors_origins):
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Vary"] = "Origin"
            response.headers["Access-Control-Allow-Headers"] = "Authorization, Content-Type"
            response.headers["Access-Control-Allow-Methods"] = "GET, POST, DELETE, OPTIONS"
        return response

    def require_token() -> None:
        """Every write: refused from a web page of another origin (unless CORS allows it),
        and without the token when one is set."""
        origin = request.headers.get("Origin")
        if origin and origin.rstrip("/") != request.host_url.rstrip("/") and origin not in settings.cors_origins:
            raise Forbidden("writes from pages of another origin (%s) are refused; list it in [http] cors_origins "
                            "to allow it" % origin[:120])
        if settings.token is None:
            return
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        if not (scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode(), settings.token.encode())):
            raise Unauthorized("this request needs 'Authorization: Bearer <token>'")

    # -- SPARQL protocol -----------------------------------------------------------------------
    @app.route("/sparql", methods=["GET", "POST"])
    def sparql():
        if request.method == "GET":
            text = request.args.get("query")
            default_graphs = request.args.getlist("default-graph-uri")
            named_graphs = request.args.getlist("named-graph-uri")
        else:
            mimetype = request.mimetype
            if mimetype == "application/sparql-query":
                text = request.get_data(as_text=True)
            elif mimetype == "application/x-www-form-urlencoded":
                text = request.form.get("query")
            else:
                raise UnsupportedMediaType("POST /sparql takes application/sparql-query or a form, not %r" % mimetype)
            default_graphs = request.args.getlist("default-graph-uri") + request.form.getlist("default-graph-uri")
            named_graphs = request.args.getlist("named-graph-uri") + request.form.getlist("named-graph-uri")
        if not text and request.method == "GET" and not request.args:
            return describe_service()
        if not text:
            raise BadRequest("missing the query (parameter 'query')")
        check_nesting(text)
        check_federation(text, services.engine.config.federation_allowed)
        for graph in default_graphs + named_graphs:
            try:
                ox.NamedNode(graph)
            except ValueError:
                raise BadRequest("default-graph-uri and named-graph-uri take IRIs, got %r" % graph[:120]) from None
        job = Job(text, tuple(default_graphs), tuple(named_graphs), negotiate(request.accept_mimetypes))
        try:
            body, media = services.adhoc.run(job)
        except QueryRefused as e:
            raise (SparqlSyntaxError(e.message, e.line, e.column) if e.kind == "syntax" else NotAcceptable(e.message))
        return Response(body, mimetype=media)

    def describe_service() -> Response:
        base = request.host_url.rstrip("/")
        triples = service_description(base + "/sparql", base + "/update", list(RESULT_TYPES.keys() - {"application/json"})
                                      + list(GRAPH_TYPES))
        try:
            body, media = serialize_graph(triples, negotiate(request.accept_mimetypes).graphs)
        except QueryRefused as e:
            raise NotAcceptable(e.message) from None
        return Response(body, mimetype=media)

    @app.route("/update", methods=["POST"])
    def update():
        require_token()
        if request.mimetype == "application/sparql-update":
            text = request.get_data(as_text=True)
        elif request.mimetype == "application/x-www-form-urlencoded":
            text = request.form.get("update")
        else:
            raise UnsupportedMediaType("POST /update takes application/sparql-update or a form")
        if not text:
            raise BadRequest("missing the update (parameter 'update')")
        check_nesting(text)
        check_federation(text, services.engine.config.federation_allowed)
        try:
            services.store.update_background(text)
        except SyntaxError as e:
            raise _sparql_syntax_error(e) from None
        return Response(status=204)

    # -- continuous queries ---------------------------------------------------------------------
    @app.route("/queries", methods=["POST"])
    def register_query():
        require_token()
        if request.mimetype == "application/json":
            body = request.get_json(silent=True)
            if not isinstance(body, dict) or not isinstance(body.get("query"), str):
                raise BadRequest('a JSON body needs {"query": "..."} (optional: id, sinks, options)')
            text, query_id = body["query"], body.get("id")
            sinks, options = body.get("sinks", []), body.get("options", {})
            if query_id is not None and not isinstance(query_id, str):
                raise BadRequest('"id" must be a string, got %s' % json.dumps(query_id)[:80])
            if not isinstance(sinks, list) or not all(isinstance(s, str) for s in sinks):
                raise BadRequest('"sinks" must be a list of URL strings')
            if not isinstance(options, dict) or not all(isinstance(v, (str, bool, int, float))
                                                        for v in options.values()):
                raise BadRequest('"options" must be an object of KEY: value (a string, number or boolean)')
            options = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()}
        elif request.mimetype in ("application/sparql-query", "text/plain", "application/rsp-ql"):
            text, query_id = request.get_data(as_text=True), request.args.get("id")
            sinks = request.args.getlist("sink")
            options = dict(_option(o) for o in request.args.getlist("option"))
        else:
            raise UnsupportedMediaType("POST /queries takes the RSP-QL* text (application/sparql-query or "
                                       "text/plain) or JSON, not %r" % request.mimetype)
        registered = services.engine.register(text, query_id, sinks, options)
        response = Response(json.dumps(registered.describe()), status=201, mimetype="application/json")
        response.headers["Location"] = "/queries/%s" % registered.id
        return response

    @app.route("/queries", methods=["GET"])
    def list_queries():
        return {"queries": [q.describe() for q in services.engine.queries()]}

    @app.route("/queries/<query_id>", methods=["GET"])
    def get_query(query_id):
        return services.engine.get(query_id).describe()

    @app.route("/queries/<query_id>", methods=["DELETE"])
    def delete_query(query_id):
        require_token()
        services.engine.remove(query_id)
        return Response(status=204)

    @app.route("/queries/<query_id>/results", methods=["GET"])
    def query_results(query_id):
        registered = services.engine.get(query_id)
        since = request.args.get("since")
        try:
            instant = parse_instant(since) if since is not None else None
        except TemporalValueError as e:
            raise BadRequest("since: %s" % e) from None
        limit = request.args.get("limit")
        if limit is not None and not (limit.isascii() and limit.isdigit() and int(limit) <= MAX_RESULTS_LIMIT):
            raise BadRequest("limit must be an integer from 0 to %d, got %r" % (MAX_RESULTS_LIMIT, limit[:40]))
        records = registered.history.since(instant, int(limit) if limit is not None else None)
        return Response("".join(json.dumps(r, sort_keys=True) + "\n" for r in records),
                        mimetype="application/x-ndjson")

    @app.route("/queries/<query_id>/events", methods=["GET"])
    def query_events(query_id):
        feed = services.engine.get(query_id).feed
        subscription = feed.subscribe()

        def stream():
            try:
                yield ": subscribed to %s\n\n" % query_id
                while True:
                    try:
                        record = subscription.get(timeout=SSE_HEARTBEAT_SECONDS)
                    except queue.Empty:
                        yield ": heartbeat\n\n"
                        continue
                    yield "event: result\ndata: %s\n\n" % json.dumps(record, sort_keys=True)
            finally:
                feed.unsubscribe(subscription)

        return Response(stream(), mimetype="text/event-stream",
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    # -- streams ---------------------------------------------------------------------------------
    @app.route("/streams", methods=["POST"])
    def post_stream():
        require_token()
        if settings.landing_dir is None:
            raise ServiceUnavailable("no files source is configured to take posted streams")
        stream = request.args.get("stream")
        if not stream or not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|^`\\]*$", stream):
            raise BadRequest("POST /streams needs ?stream=IRI")
        if request.mimetype not in STREAM_TYPES:
            raise UnsupportedMediaType("POST /streams takes %s, not %r" % (", ".join(STREAM_TYPES), request.mimetype))
        suffix, fmt = STREAM_TYPES[request.mimetype]
        data = request.get_data()
        check_stream_body(data, fmt)
        path = drop_file(settings.landing_dir, stream, data, suffix)
        return Response(json.dumps({"stream": stream, "accepted": path.name}), status=202, mimetype="application/json")

    @app.route("/streams", methods=["GET"])
    def list_streams():
        quarantined: dict[str, int] = {}
        for source in services.ingestion_status().values():
            for stream, count in source.get("quarantined", {}).items():
                quarantined[stream] = quarantined.get(stream, 0) + count
        streams = []
        for stream, stats in sorted(services.store.streams().items()):
            streams.append({"stream": stream, "elements": stats.elements, "ingested": stats.ingested,
                            "evicted": stats.evicted, "late": stats.late, "quarantined": quarantined.get(stream, 0),
                            "watermark": None if stats.watermark is None else format_instant(stats.watermark),
                            "latest": None if stats.latest is None else format_instant(stats.latest)})
        return {"streams": streams, "sources": services.ingestion_status()}

    # -- dashboard and description ------------------------------------------------------------
    @app.route("/", methods=["GET"])
    def dashboard():
        return app.send_static_file("index.html")

    @app.route("/static/vendor/plotly.min.js", methods=["GET"])
    def plotly_js():
        # The charting library comes from the installed plotly package, never from a CDN.
        response = Response(PLOTLY_JS.read_bytes(), mimetype="text/javascript")
        response.headers["Cache-Control"] = "public, max-age=86400"
        return response

    @app.route("/openapi.json", methods=["GET"])
    def openapi():
        return Response((STATIC / "openapi.json").read_bytes(), mimetype="application/json")

    # -- health and metrics ---------------------------------------------------------------------
    @app.route("/health", methods=["GET"])
    def health():
        # A source that stopped ingesting makes the engine unhealthy (503): its data is lost
        # to every query until it runs again.
        queries = services.engine.queries()
        down = sorted(name for name, source in services.ingestion_status().items() if not source.get("active"))
        body = {"status": "degraded" if down else "ok", "queries": len(queries),
                "failed_queries": [q.id for q in queries if q.status.state == "failed"],
                "sources_down": down, "streams": len(services.store.streams())}
        return Response(json.dumps(body), status=503 if down else 200, mimetype="application/json")

    @app.route("/metrics", methods=["GET"])
    def metrics():
        return Response(prometheus_text(services.engine, services.ingestion_status()),
                        mimetype="text/plain; version=0.0.4")

    return app


def check_stream_body(data: bytes, fmt) -> None:
    """Refuse a posted stream body that would only be quarantined later: RDF must parse and
    every JSON line must be a well-formed envelope (the store's own check, naming the field)."""
    if fmt is not None:
        scan_document(data, fmt, "request body")
        return
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if line.strip():
            read_envelope(line, "request body", number)


def _option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise BadRequest("option must be KEY=VALUE, got %r" % text)
    return key, value


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_text(engine: Engine, sources: dict) -> str:
    lines = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[dict, float]]) -> None:
        lines.append("# HELP %s %s" % (name, help_text))
        lines.append("# TYPE %s %s" % (name, kind))
        for labels, value in samples:
            label_text = ",".join('%s="%s"' % (k, _label(v)) for k, v in sorted(labels.items()))
            lines.append("%s{%s} %s" % (name, label_text, repr(float(value))) if label_text
                         else "%s %s" % (name, repr(float(value))))

    streams = engine.store.streams()
    metric("rspstar_ingested_elements_total", "counter", "Stream elements published to the store.",
           [({"stream": s}, st.ingested) for s, st in streams.items()])
    metric("rspstar_late_elements_total", "counter", "Elements that arrived below their stream's watermark.",
           [({"stream": s}, st.late) for s, st in streams.items()])
    metric("rspstar_stored_elements", "gauge", "Elements held in the store now.",
           [({"stream": s}, st.elements) for s, st in streams.items()])
    queries = engine.queries()
    metric("rspstar_evaluations_total", "counter", "Evaluations run.",
           [({"query": q.id}, q.status.evaluations) for q in queries])
    metric("rspstar_evaluation_failures_total", "counter", "Evaluations that raised.",
           [({"query": q.id}, q.status.failures) for q in queries])
    latency = [({"query": q.id, "quantile": str(quantile)}, seconds)
               for q in queries for quantile, seconds in q.status.percentiles().items()]
    metric("rspstar_evaluation_seconds", "summary", "Evaluation time.", latency)
    metric("rspstar_sink_backlog", "gauge", "Records waiting in HTTP sink outboxes.",
           [({"query": q.id, "sink": s.url}, s.state.pending) for q in queries for s in q.http_sinks])
    metric("rspstar_source_up", "gauge", "1 while a source's streaming query runs, 0 when it has stopped.",
           [({"source": name}, 1 if source.get("active") else 0) for name, source in sorted(sources.items())])
    return "\n".join(lines) + "\n"
