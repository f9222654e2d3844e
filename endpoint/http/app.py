"""The app factory: it builds what it is not given (store, engine) and the ad-hoc query
workers, attaches them as services, and registers the blueprints, so there is no global
state and tests run several apps side by side."""
from __future__ import annotations

import json
from typing import Callable

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from rspstar.store.errors import StoreError
from rspstar.store.stream_store import StreamStore
from rspstar.translator.errors import TranslatorError

from ..adhoc import AdhocQueries
from ..clock import Clock, WallClock
from ..engine import Engine, EngineConfig
from ..errors import EndpointError
from ..http_errors import BadRequest, error_body, status_for
from . import dashboard, operations, queries, sparql, streams
from .context import STATIC, HttpSettings, Services, services


def create_app(engine: Engine | None = None, settings: HttpSettings | None = None, *,
               store: StreamStore | None = None, clock: Clock | None = None,
               config: EngineConfig | None = None,
               ingestion_status: Callable[[], dict] = dict) -> Flask:
    settings = settings or HttpSettings()
    if engine is None:
        engine = Engine(store or StreamStore(), clock or WallClock(), config or EngineConfig())
    app = Flask("rspstar", static_folder=str(STATIC), static_url_path="/static")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body
    app.extensions["rspstar"] = Services(engine, engine.store, settings,
                                         AdhocQueries(engine.store, settings.query_timeout, settings.query_workers),
                                         ingestion_status)
    app.register_error_handler(EndpointError, _engine_error)
    app.register_error_handler(TranslatorError, _engine_error)
    app.register_error_handler(StoreError, _engine_error)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(RecursionError, _too_deep)
    app.after_request(_cors)
    for module in (sparql, queries, streams, operations, dashboard):
        app.register_blueprint(module.blueprint)
    return app


def _engine_error(error):
    status = status_for(error)
    response = Response(json.dumps(error_body(error)), status=status, mimetype="application/json")
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="rspstar"'
    return response


def _too_deep(error: RecursionError):
    """A text nested deeper than a recursive reader follows (the nesting check bounds every known
    one: this is the last guard), a client's error."""
    return _engine_error(BadRequest("the request is nested too deeply to be read"))


def _http_error(error: HTTPException):
    body = {"error": error.name, "message": error.description}
    response = Response(json.dumps(body), status=error.code, mimetype="application/json")
    if getattr(error, "valid_methods", None):
        response.headers["Allow"] = ", ".join(error.valid_methods)
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
