"""Background graphs that refresh themselves (spec §6.14, `[[background.graphs]]`): each is read
from a file or an allowed HTTP(S) URL and loaded again every `refresh`.

A reload replaces its graph at once, between evaluations (`Background.replace`: evaluations hold
the background while they read it), so no evaluation sees half of it. A reload that fails (the
file unreadable, the server down or answering an error, a document that does not parse or is too
large) keeps what the graph held; its error shows in /health, /metrics and the dashboard until a
reload succeeds, and the next attempt comes `refresh` later as usual.

Time is the engine's clock: `run_due` reloads what is due at `clock.now()` (the live scheduler
asks every second; tests move a virtual clock). A graph is due at once when the engine starts.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pyoxigraph as ox

from rspstar.store.errors import StoreError
from rspstar.store.stream_store import StreamStore
from rspstar.translator.federation import origin_allowed
from rspstar.translator.temporal import format_instant

from .clock import Clock

log = logging.getLogger(__name__)

FORMATS = {"turtle": ox.RdfFormat.TURTLE, "ntriples": ox.RdfFormat.N_TRIPLES, "rdfxml": ox.RdfFormat.RDF_XML,
           "jsonld": ox.RdfFormat.JSON_LD}
_CHUNK = 64 * 1024


class RefreshError(Exception):
    """A reload that did not happen, and why."""


@dataclass
class RefreshedGraph:
    """One `[[background.graphs]]` entry: a file path or an http(s) URL, its format (None: from
    the file's extension or the response's Content-Type) and how often it is reloaded (None:
    once, when the engine starts)."""

    graph: str
    source: str
    format: str | None = None
    refresh: int | None = None

    @property
    def is_url(self) -> bool:
        return self.source.lower().startswith(("http://", "https://"))


@dataclass
class GraphStatus:
    """What the last reloads of one graph did."""

    graph: str
    source: str
    loaded_at: int | None = None      # the clock's instant of the last successful reload
    triples: int | None = None        # what it loaded
    reloads: int = 0
    failures: int = 0
    last_error: str | None = None     # set while the last attempt failed
    failed_at: int | None = None
    next_at: int | None = None        # when it is reloaded next (None: never again)

    def describe(self) -> dict:
        def instant(value):
            return None if value is None else format_instant(value)
        return {"graph": self.graph, "source": self.source, "loaded_at": instant(self.loaded_at),
                "triples": self.triples, "reloads": self.reloads, "failures": self.failures,
                "last_error": self.last_error, "failed_at": instant(self.failed_at), "next_at": instant(self.next_at)}


@dataclass
class BackgroundRefresh:
    """The refreshed background graphs of one engine."""

    store: StreamStore
    graphs: list[RefreshedGraph]
    clock: Clock
    allowed: list[str] = field(default_factory=list)     # [background] allowed
    max_bytes: int = 64 * 1024 * 1024
    timeout: float = 10.0
    on_change: Callable[[], None] = lambda: None         # a graph was replaced (partitioned queries hear of it)
    # The HTTP client (a test may count its calls); requests.get, imported at the first fetch of
    # a URL: an engine without such graphs starts without it.
    get: Callable | None = None

    def _http_get(self) -> Callable:
        if self.get is None:
            import requests
            self.get = requests.get
        return self.get

    def __post_init__(self):
        self._status = {g.graph: GraphStatus(g.graph, g.source, next_at=self.clock.now()) for g in self.graphs}
        self._lock = threading.Lock()         # one run at a time (the scheduler's job does not overlap anyway)

    def run_due(self) -> int:
        """Reload every graph due now; how many were replaced."""
        replaced = 0
        with self._lock:
            now = self.clock.now()
            for graph in self.graphs:
                status = self._status[graph.graph]
                if status.next_at is None or status.next_at > now:
                    continue
                status.next_at = now + graph.refresh if graph.refresh else None
                try:
                    data, fmt = self._read(graph)
                    triples = self.store.background.replace(graph.graph, data, fmt, graph.source)
                except (RefreshError, StoreError) as e:
                    status.failures += 1
                    status.last_error = str(e)
                    status.failed_at = now
                    log.error("background graph <%s>: reload from %s failed, keeping what it held: %s",
                              graph.graph, graph.source, e)
                    continue
                status.loaded_at, status.triples, status.last_error, status.failed_at = now, triples, None, None
                status.reloads += 1
                replaced += 1
                log.info("background graph <%s>: %d triples from %s", graph.graph, triples, graph.source)
        if replaced:
            self.on_change()
        return replaced

    def next_due(self) -> int | None:
        with self._lock:
            pending = [s.next_at for s in self._status.values() if s.next_at is not None]
        return min(pending) if pending else None

    def statuses(self) -> list[GraphStatus]:
        with self._lock:
            return [GraphStatus(**vars(s)) for s in self._status.values()]

    def failing(self) -> dict[str, str]:
        """The graphs whose last reload failed, with its error."""
        return {s.graph: s.last_error for s in self.statuses() if s.last_error is not None}

    # -- reading a source -------------------------------------------------------------------------
    def _read(self, graph: RefreshedGraph) -> tuple[bytes, ox.RdfFormat]:
        if graph.is_url:
            return self._fetch(graph)
        path = Path(graph.source)
        try:
            size = path.stat().st_size
            if size > self.max_bytes:
                raise RefreshError("%s holds %d bytes, more than [background] max_bytes (%d)"
                                   % (path, size, self.max_bytes))
            data = path.read_bytes()
        except OSError as e:
            raise RefreshError("cannot read %s: %s" % (path, e.strerror or e)) from None
        fmt = FORMATS[graph.format] if graph.format else ox.RdfFormat.from_extension(path.suffix.lstrip(".") or "-")
        if fmt is None:
            raise RefreshError("cannot tell the format of %s from its extension: set format (%s)"
                               % (path, ", ".join(FORMATS)))
        return data, fmt

    def _fetch(self, graph: RefreshedGraph) -> tuple[bytes, ox.RdfFormat]:
        # Checked at each fetch, not only when the configuration is read; a redirect is not
        # followed (it could lead off the allow-list).
        if not origin_allowed(graph.source, self.allowed):
            raise RefreshError("%s is not under [background] allowed (%s)"
                               % (graph.source, ", ".join(self.allowed) or "empty"))
        accept = ", ".join(f.media_type for f in FORMATS.values())
        try:
            with self._http_get()(graph.source, timeout=self.timeout, allow_redirects=False, stream=True,
                          headers={"Accept": accept}) as response:
                if response.status_code != 200:
                    raise RefreshError("%s answered HTTP %d" % (graph.source, response.status_code))
                chunks, size = [], 0
                for chunk in response.iter_content(_CHUNK):
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise RefreshError("%s gave more than [background] max_bytes (%d bytes)"
                                           % (graph.source, self.max_bytes))
                    chunks.append(chunk)
                media_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        except OSError as e:          # requests' errors (RequestException) are OSErrors
            raise RefreshError("%s: %s" % (graph.source, e)) from None
        fmt = FORMATS[graph.format] if graph.format else ox.RdfFormat.from_media_type(media_type) if media_type else None
        if fmt is None:
            raise RefreshError("cannot tell the format of %s from its Content-Type %r: set format (%s)"
                               % (graph.source, media_type, ", ".join(FORMATS)))
        return b"".join(chunks), fmt
