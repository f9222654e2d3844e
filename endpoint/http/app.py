"""The app factory: it builds what it is not given (store, engine) and the ad-hoc query
workers, attaches them as services, and registers the blueprints, so there is no global
state and tests run several apps side by side."""
from __future__ import annotations

import json
from typing import Callable

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from rspstar.store.disk import DiskGuard, raise_if_full
from rspstar.store.errors import DiskFull, StoreError
from rspstar.store.stream_store import StreamStore
from rspstar.translator.errors import TranslatorError

from ..adhoc import AdhocQueries
from ..engine.clock import Clock, WallClock
from ..engine.runner import Runner, EngineConfig
from ..engine.errors import EndpointError
from .errors import BadRequest, error_body, status_for
from . import bodies, dashboard, graph_store, operations, queries, sparql, streams
from .bodies import BodyBudget
from .context import STATIC, EventStreams, HttpSettings, Readiness, Services, services


def create_app(engine: Runner | None = None, settings: HttpSettings | None = None, *,
               store: StreamStore | None = None, clock: Clock | None = None,
               config: EngineConfig | None = None,
               ingestion_status: Callable[[], dict] = dict, readiness: Readiness | None = None,
               disk: DiskGuard | None = None) -> Flask:
    settings = settings or HttpSettings()
    if engine is None:
        engine = Runner(store or StreamStore(), clock or WallClock(), config or EngineConfig())
    app = Flask("rspstar", static_folder=str(STATIC), static_url_path="/static")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body
    app.extensions["rspstar"] = Services(engine, engine.store, settings,
                                         AdhocQueries(engine.store, settings.query_timeout, settings.query_workers,
                                                      settings.query_backlog, settings.query_max_bytes,
                                                      engine.config.worker_memory, settings.update_max_changes),
                                         ingestion_status, readiness or Readiness(),
                                         EventStreams(settings.max_event_streams,
                                                      settings.max_event_streams_per_client), disk,
                                         BodyBudget(settings.body_budget))
    bodies.attach(app)
    app.register_error_handler(EndpointError, _engine_error)
    app.register_error_handler(TranslatorError, _engine_error)
    app.register_error_handler(StoreError, _engine_error)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(RecursionError, _too_deep)
    app.register_error_handler(OSError, _os_error)
    app.after_request(_cors)
    app.after_request(_security_headers)
    for module in (sparql, graph_store, queries, streams, operations, dashboard):
        app.register_blueprint(module.blueprint)
    return app


def _engine_error(error):
    status = status_for(error)
    response = Response(json.dumps(error_body(error)), status=status, mimetype="application/json")
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="rspstar"'
    if getattr(error, "retry_after", None):
        response.headers["Retry-After"] = str(error.retry_after)
    return response


def _os_error(error: OSError):
    """A write that failed for want of space (507, naming it); any other failure of the system
    is the server's (500), in JSON like every error."""
    try:
        raise_if_full(error, "%s %s" % (request.method, request.path))
    except DiskFull as full:
        return _engine_error(full)
    return _engine_error(StoreError("the server could not complete %s %s: %s" % (
        request.method, request.path, getattr(error, "strerror", None) or error)))


def _too_deep(error: RecursionError):
    """A text nested deeper than a recursive reader follows (the nesting check bounds every known
    one: this is the last guard), a client's error."""
    return _engine_error(BadRequest("the request is nested too deeply to be read"))


def _http_error(error: HTTPException):
    body = {"error": error.name, "message": error.description}
    if error.code == 404:
        body["message"] = "no route %s %s: the API's routes are described at /openapi.json" % (
            request.method, request.path[:200])
    elif error.code == 405:
        body["message"] = "%s is not a method of %s (%s are): see /openapi.json" % (
            request.method, request.path[:200], ", ".join(getattr(error, "valid_methods", None) or []))
    response = Response(json.dumps(body), status=error.code, mimetype="application/json")
    if getattr(error, "valid_methods", None):
        response.headers["Allow"] = ", ".join(error.valid_methods)
    return response


# The dashboard loads its own scripts and styles only (plotly.js sets inline styles on what it
# draws); no other site may frame it, and nothing may sniff types or learn where a visitor
# came from.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
                               "frame-ancestors 'self'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "SAMEORIGIN",
    "Referrer-Policy": "no-referrer",
}


def _security_headers(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if response.status_code == 204 or (response.status_code == 201 and not response.is_streamed
                                       and not response.get_data()):
        response.headers.pop("Content-Type", None)     # no content, so no type
    return response


def _cors(response: Response) -> Response:
    origin = request.headers.get("Origin")
    allowed = services().settings.cors_origins
    if origin and ("*" in allowed or origin in allowed):
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Vary"] = "Origin"
        response.headers["Access-Control-Allow-Headers"] = "Authorization, Content-Type"
        response.headers["Access-Control-Allow-Methods"] = "GET, POST, DELETE, OPTIONS"
    return response
