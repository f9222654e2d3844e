"""What every blueprint shares: the settings, the services the factory attaches to the app,
and the guard of every write."""
from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from flask import current_app, request

from rspstar.config.schema import default
from rspstar.store.stream_store import StreamStore

from ..adhoc import AdhocQueries
from ..engine import Engine
from ..http_errors import Forbidden, Unauthorized

STATIC = Path(__file__).resolve().parent.parent / "static"


@dataclass
class HttpSettings:
    # Defaults are the settings' of [http] (rspstar.config.schema, docs/configuration.md).
    token: str | None = None                      # bearer token for writes; None: writes open
    cors_origins: list[str] = field(default_factory=list)
    query_timeout: float = default("http.query_timeout")     # seconds for /sparql
    query_workers: int = default("http.query_workers")       # /sparql queries evaluated at once
    max_body: int = default("http.max_body")                 # bytes
    landing_dir: Path | None = None               # where POST /streams drops data for Spark


@dataclass
class Services:
    engine: Engine
    store: StreamStore
    settings: HttpSettings
    adhoc: AdhocQueries
    ingestion_status: Callable[[], dict]


def services() -> Services:
    """The services of the app handling the current request."""
    return current_app.extensions["rspstar"]


def require_write() -> None:
    """Every write: refused from a web page of another origin (unless CORS allows it), and
    without the token when one is set."""
    settings = services().settings
    origin = request.headers.get("Origin")
    if origin and origin.rstrip("/") != request.host_url.rstrip("/") and origin not in settings.cors_origins:
        raise Forbidden("writes from pages of another origin (%s) are refused; list it in [http] cors_origins "
                        "to allow it" % origin[:120])
    if settings.token is None:
        return
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    if not (scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode(), settings.token.encode())):
        raise Unauthorized("this request needs 'Authorization: Bearer <token>'")


