"""Background graphs that refresh themselves (spec §6.14, `[[background.graphs]]`): each is read
from a file or an allowed HTTP(S) URL and loaded again every `refresh`.

A reload fetches and reads its source holding nothing that /health, /metrics or evaluations need
(the graphs' statuses are locked only to be read or updated), and within bounds: `[background]
reload_seconds` for fetching and reading it in all (a source that sends slowly or not at all
fails there, whatever each read's `timeout`), `max_bytes` for the document, `max_triples` for its
triples. A source that gives what it gave last time writes nothing; otherwise only the triples
that changed are written (`Background.replace`), at once for evaluations: a reload waits for the
evaluations reading the background, and none sees half of it.

A reload that fails (the file unreadable, the server down, slow or answering an error, a document
that does not parse or is too large) keeps what the graph held; its error shows in /health,
/metrics and the dashboard until a reload succeeds, and the next attempt comes `refresh` later as
usual. A reload that takes longer than its period does not pile up: the reloads it ran past are
skipped, counted, and its status says so; one run of reloads at a time (a call meanwhile returns
at once).

Time is the engine's clock for when graphs are due: `run_due` reloads what is due at
`clock.now()` (the live scheduler asks every second; tests move a virtual clock). A graph is due
at once when the engine starts. A reload's own bound is in real time (`monotonic`).
"""
from __future__ import annotations

import hashlib
import http.client
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pyoxigraph as ox

from rspstar.config.schema import default
from rspstar.store.background import read_graph
from rspstar.store.errors import StoreError
from rspstar.store.stream_store import StreamStore
from rspstar.translator.federation import origin_allowed
from rspstar.translator.temporal import format_instant

from .clock import Clock
from .exchange import ExchangeExpired, ExchangeTooLarge, exchange

log = logging.getLogger(__name__)

FORMATS = {"turtle": ox.RdfFormat.TURTLE, "ntriples": ox.RdfFormat.N_TRIPLES, "rdfxml": ox.RdfFormat.RDF_XML,
           "jsonld": ox.RdfFormat.JSON_LD}


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
    triples: int | None = None        # what the graph holds from it
    reloads: int = 0                  # successful reloads (unchanged ones included)
    unchanged: int = 0                # of them, those that found the source as it was: nothing written
    changed: int | None = None        # triples the last successful reload added and removed
    failures: int = 0
    last_error: str | None = None     # set while the last attempt failed
    failed_at: int | None = None
    skipped: int = 0                  # reloads not run: the one before ran past them
    note: str | None = None           # why the latest were skipped
    reloading_since: int | None = None  # the clock's instant a reload under way began
    seconds: float | None = None      # how long the last reload took (real time)
    next_at: int | None = None        # when it is reloaded next (None: never again)

    def describe(self) -> dict:
        def instant(value):
            return None if value is None else format_instant(value)
        return {"graph": self.graph, "source": self.source, "loaded_at": instant(self.loaded_at),
                "triples": self.triples, "reloads": self.reloads, "unchanged": self.unchanged,
                "changed": self.changed, "failures": self.failures, "last_error": self.last_error,
                "failed_at": instant(self.failed_at), "skipped": self.skipped, "note": self.note,
                "reloading_since": instant(self.reloading_since),
                "seconds": None if self.seconds is None else round(self.seconds, 3), "next_at": instant(self.next_at)}


@dataclass
class BackgroundRefresh:
    """The refreshed background graphs of one engine."""

    store: StreamStore
    graphs: list[RefreshedGraph]
    clock: Clock
    allowed: list[str] = field(default_factory=list)     # [background] allowed
    max_bytes: int = default("background.max_bytes")
    timeout: float = default("background.timeout")
    on_change: Callable[[], None] = lambda: None         # a graph was replaced (partitioned queries hear of it)
    max_triples: int = default("background.max_triples")
    reload_seconds: float = default("background.reload_seconds")
    monotonic: Callable[[], float] = time.monotonic

    def __post_init__(self):
        self._status = {g.graph: GraphStatus(g.graph, g.source, next_at=self.clock.now()) for g in self.graphs}
        self._lock = threading.Lock()         # the statuses: held only to read or update them
        self._running = threading.Lock()      # one run of reloads at a time
        # Per graph: the digest of the document last written and the background's version after
        # it; the same document again, nothing else changed since, writes nothing.
        self._written: dict[str, tuple[bytes, int]] = {}

    def run_due(self) -> int:
        """Reload every graph due now; how many were replaced (unchanged ones included). A call
        while a run is under way returns 0 at once."""
        if not self._running.acquire(blocking=False):
            return 0
        replaced = 0
        try:
            for graph in self.graphs:
                with self._lock:
                    started_at = self.clock.now()
                    status = self._status[graph.graph]
                    if status.next_at is None or status.next_at > started_at:
                        continue
                    status.reloading_since = started_at
                started = self.monotonic()
                triples = changed = error = None
                try:
                    triples, changed = self._reload(graph, started + self.reload_seconds)
                except (RefreshError, StoreError) as e:
                    error = str(e)
                with self._lock:
                    self._finish(graph, status, started_at, self.monotonic() - started, error, triples, changed)
                if error is None:
                    replaced += 1
        finally:
            self._running.release()
        if replaced:
            self.on_change()
        return replaced

    def _finish(self, graph: RefreshedGraph, status: GraphStatus, started_at: int, seconds: float,
                error: str | None, triples: int | None, changed: int | None) -> None:
        ended_at = self.clock.now()
        status.reloading_since = None
        status.seconds = seconds
        if error is not None:
            status.failures += 1
            status.last_error = error
            status.failed_at = started_at
            log.error("background graph <%s>: reload from %s failed, keeping what it held: %s",
                      graph.graph, graph.source, error)
        else:
            if triples is not None:
                status.triples = triples
            status.loaded_at, status.last_error, status.failed_at = started_at, None, None
            status.reloads += 1
            status.changed = changed
            if changed is None:
                status.unchanged += 1
            log.info("background graph <%s>: %d triples from %s (%s)", graph.graph, status.triples or 0,
                     graph.source, "unchanged" if changed is None else "%d changed" % changed)
        if not graph.refresh:
            status.next_at = None
            return
        status.next_at = started_at + graph.refresh
        if status.next_at <= ended_at:
            # It ran past its next reload(s): those are skipped, not run back to back.
            missed = (ended_at - started_at) // graph.refresh
            status.next_at = started_at + (missed + 1) * graph.refresh
            status.skipped += missed
            status.note = ("the reload at %s took %.1f s, longer than its period (refresh): %d reload(s) skipped"
                           % (format_instant(started_at), seconds, missed))
            log.warning("background graph <%s>: %s", graph.graph, status.note)

    def _reload(self, graph: RefreshedGraph, deadline: float) -> tuple[int | None, int | None]:
        """Fetch, read and write one graph; its triples and how many changed, or (None, None):
        the source gave what it gave last time, and nothing was written."""
        data, fmt = self._read(graph, deadline)
        digest = hashlib.blake2b(data + fmt.media_type.encode(), digest_size=16).digest()
        written = self._written.get(graph.graph)
        if written is not None and written == (digest, self.store.background.version):
            return None, None
        document = read_graph(data, fmt, graph.source, self.max_triples, deadline, self.monotonic)
        del data
        replaced = self.store.background.replace(graph.graph, document)
        self._written[graph.graph] = (digest, replaced.version)
        return replaced.triples, replaced.added + replaced.removed

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
    def _read(self, graph: RefreshedGraph, deadline: float) -> tuple[bytes, ox.RdfFormat]:
        if graph.is_url:
            return self._fetch(graph, deadline)
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

    def _fetch(self, graph: RefreshedGraph, deadline: float) -> tuple[bytes, ox.RdfFormat]:
        """GET the source within the reload's deadline (exchange.py: each wait for the server at
        most `timeout`, and a server sending a byte now and then cannot hold it). Checked against
        the allow-list at each fetch, not only when the configuration is read; a redirect is not
        followed (it could lead off the allow-list)."""
        if not origin_allowed(graph.source, self.allowed):
            raise RefreshError("%s is not under [background] allowed (%s)"
                               % (graph.source, ", ".join(self.allowed) or "empty"))
        try:
            answer = exchange("GET", graph.source, deadline, self.timeout, headers={
                "Accept": ", ".join(f.media_type for f in FORMATS.values()), "Accept-Encoding": "identity",
                "User-Agent": "rspstar"}, max_bytes=self.max_bytes, monotonic=self.monotonic)
        except ExchangeExpired:
            raise RefreshError(self._too_long(graph)) from None
        except ExchangeTooLarge:
            raise RefreshError("%s gave more than [background] max_bytes (%d bytes)"
                               % (graph.source, self.max_bytes)) from None
        except (OSError, http.client.HTTPException) as e:
            raise RefreshError("%s: %s" % (graph.source, str(e) or type(e).__name__)) from None
        if answer.status != 200:
            raise RefreshError("%s answered HTTP %d" % (graph.source, answer.status))
        media_type = (answer.header("Content-Type") or "").split(";")[0].strip().lower()
        fmt = FORMATS[graph.format] if graph.format else ox.RdfFormat.from_media_type(media_type) if media_type else None
        if fmt is None:
            raise RefreshError("cannot tell the format of %s from its Content-Type %r: set format (%s)"
                               % (graph.source, media_type, ", ".join(FORMATS)))
        return answer.body, fmt

    def _too_long(self, graph: RefreshedGraph) -> str:
        return ("%s did not give its whole document within [background] reload_seconds (%g s)"
                % (graph.source, self.reload_seconds))
