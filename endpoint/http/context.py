"""What every blueprint shares: the settings, the services the factory attaches to the app,
and the guard of every write."""
from __future__ import annotations

import hmac
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from flask import current_app, request

from rspstar.config.schema import default, settings_class
from rspstar.store.disk import DiskGuard
from rspstar.store.stream_store import StreamStore

from ..adhoc import AdhocQueries
from ..engine.runner import Runner
from .errors import Forbidden, Starting, Unauthorized
from .bodies import BodyBudget

STATIC = Path(__file__).resolve().parent.parent / "static"


# The app's settings: every [http] setting as config/schema.py declares it (a new one is
# declared there alone), the token as serve decided it (None: writes open), and where
# POST /streams drops data for Spark.
HttpSettings = settings_class("http", "HttpSettings", extra=(
    ("token", str | None, field(default=None)),
    ("landing_dir", Path | None, field(default=None)),
))


class Readiness:
    """Whether the engine takes writes yet: `rspstar serve` answers HTTP at once, before Spark
    has started (seconds), and writes wait until ingestion is up."""

    def __init__(self, ready: bool = True):
        self._ready = threading.Event()
        if ready:
            self._ready.set()

    def set(self) -> None:
        self._ready.set()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()


class EventStreams:
    """The server-sent event streams open now, at most `limit` (each holds a worker thread), and
    at most `per_client` of them held by one client address."""

    def __init__(self, limit: int, per_client: int | None = None):
        self.limit = limit
        self.per_client = limit if per_client is None else per_client
        self._open = 0
        self._by_client: dict[str, int] = {}
        self._lock = threading.Lock()
        self.refused = 0

    def open(self, client: str = "") -> str | None:
        """Take a slot for `client`: None, or the setting that refuses it."""
        with self._lock:
            held = self._by_client.get(client, 0)
            full = "max_event_streams" if self._open >= self.limit else \
                "max_event_streams_per_client" if held >= self.per_client else None
            if full is not None:
                self.refused += 1
                return full
            self._open += 1
            self._by_client[client] = held + 1
            return None

    def close(self, client: str = "") -> None:
        with self._lock:
            self._open -= 1
            held = self._by_client.get(client, 0) - 1
            if held > 0:
                self._by_client[client] = held
            else:
                self._by_client.pop(client, None)

    @property
    def count(self) -> int:
        with self._lock:
            return self._open


@dataclass
class Services:
    engine: Runner
    store: StreamStore
    settings: HttpSettings
    adhoc: AdhocQueries
    ingestion_status: Callable[[], dict]
    readiness: Readiness
    event_streams: EventStreams
    disk: DiskGuard | None = None        # the data directory's disk (None: no data directory)
    body_budget: BodyBudget = field(default_factory=lambda: BodyBudget(default("http.body_budget")))


def services() -> Services:
    """The services of the app handling the current request."""
    return current_app.extensions["rspstar"]


def base_iri() -> str:
    """The IRI relative IRIs of a request's query or update resolve against (before any BASE
    of its own): [http] base_iri, else the URL it was sent to (/sparql, /update, /queries; the
    SPARQL protocol suggests it)."""
    return services().settings.base_iri or request.host_url.rstrip("/") + request.path


def require_write() -> None:
    """Every write: refused from a web page of another origin (unless CORS allows it), and
    without the token when one is set."""
    settings = services().settings
    if not services().readiness.ready:
        raise Starting("the engine is starting (ingestion is not up yet): retry in a few seconds")
    origin = request.headers.get("Origin")
    if origin and origin.rstrip("/") != request.host_url.rstrip("/") and origin not in settings.cors_origins:
        raise Forbidden("writes from pages of another origin (%s) are refused; list it in [http] cors_origins "
                        "to allow it" % origin[:120])
    if settings.token is not None:
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        if not (scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode(),
                                                                   settings.token.encode())):
            raise Unauthorized("this request needs 'Authorization: Bearer <token>'")
    if services().disk is not None:
        services().disk.check("%s %s" % (request.method, request.path))


