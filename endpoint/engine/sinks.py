"""Where a continuous query's results go: a bounded history for polling, a feed for
server-sent events, and sinks that lose nothing: HTTP POST to a URL, or MQTT publication to a
topic (`mqtt://host:port/topic`, endpoint/mqtt_publish.py).

A sink writes each record to a durable outbox on disk before any attempt to deliver
it, and keeps the count of delivered records beside it; delivery goes in order, one record at
a time, with exponential backoff (in clock time, so tests never sleep) while the receiver
refuses. Records survive a receiver outage and an engine restart. Each POST carries an
`Idempotency-Key` (query id and evaluation instant): after a crash between a successful POST
and the cursor update a receiver can recognise the one record sent twice.
"""
from __future__ import annotations

import collections
import itertools
import json
import logging
import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import quote, urlsplit

from rspstar.config.schema import default
from rspstar.store.landing import bounded_name, replace_text
from rspstar.translator.errors import TemporalValueError
from rspstar.translator.temporal import parse_instant

from .errors import EndpointError
from .mqtt_publish import DeliveryError, MqttPoster, topic_of
from .result_shapes import SPARQL_JSON, has_results, shaped_json

log = logging.getLogger(__name__)

INITIAL_BACKOFF = 500_000        # µs
MAX_BACKOFF = 60_000_000


class SinkNotAllowed(EndpointError):
    """A sink URL outside the configured allow-list."""


def post_with_requests(url: str, body: bytes, headers: dict) -> int:
    # requests is imported where a sink first posts: a replay and the Python API never do, and
    # start without it. A redirect is not followed (it could lead off the allow-list): its 3xx
    # status counts as not delivered, and the record waits in the outbox.
    import requests
    return requests.post(url, data=body, headers=headers, timeout=5, allow_redirects=False).status_code


Poster = Callable[[str, bytes, dict], int]


@dataclass(frozen=True)
class SinkKind:
    """One kind of sink: the URL schemes it takes with each one's port when a URL writes none,
    what makes its poster (one per engine, closed with the engine when it has `close`), and a
    check of a URL's rest at registration (raising DeliveryError)."""

    ports: dict[str, int]
    poster: Callable[[], Poster]
    check: Callable[[str], object] = lambda url: None


# The place to add a kind of sink (docs/design.md, "Adding a source or sink kind").
SINK_KINDS: dict[str, SinkKind] = {
    "http": SinkKind({"http": 80, "https": 443}, lambda: post_with_requests),
    "mqtt": SinkKind({"mqtt": 1883, "mqtts": 8883}, MqttPoster, check=topic_of),
}
_KIND_OF_SCHEME = {scheme: name for name, kind in SINK_KINDS.items() for scheme in kind.ports}
SINK_PORTS = {scheme: port for kind in SINK_KINDS.values() for scheme, port in kind.ports.items()}


def sink_origin(url: str) -> str | None:
    """scheme://host:port of a sink URL (the scheme's port when none is written), None for a
    URL of no sink kind's scheme."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in SINK_PORTS or not parts.hostname:
        return None
    host = "[%s]" % parts.hostname if ":" in parts.hostname else parts.hostname
    return "%s://%s:%d" % (parts.scheme, host, port or SINK_PORTS[parts.scheme])


def check_sink_allowed(url: str, allowed: list[str]) -> None:
    """Sinks may only point at the origins (scheme://host:port) listed in the configuration."""
    origin = sink_origin(url)
    if origin is None:
        raise SinkNotAllowed("sink %r is not a URL of a sink kind (%s)" % (url, ", ".join(
            "%s://" % scheme for scheme in SINK_PORTS)))
    if origin not in {sink_origin(a.rstrip("/")) for a in allowed}:
        raise SinkNotAllowed("sink %s is not in the allow-list (sinks.allowed in the configuration: %s)"
                             % (origin, ", ".join(allowed) or "empty"))
    try:
        SINK_KINDS[_KIND_OF_SCHEME[urlsplit(url).scheme]].check(url)
    except DeliveryError as e:
        raise SinkNotAllowed(str(e)) from None


class ResultHistory:
    """The latest records of a query, for polling (`since` an instant, at most `limit`): at
    most `limit` records and `max_bytes` of their JSON, the oldest dropped first (the newest
    is always kept). A record's size grows with its window's content, so a count alone let a
    history at a high element rate hold hundreds of MiB.

    Records are kept as their JSON lines (written once, served as they are). With a `path`,
    they are appended to that JSON-lines file as they come and the latest are read back from
    it, so a restart keeps what users look at; the file is cut back to what is kept whenever
    it reaches twice the limit of records or of bytes. A limit of 0 keeps nothing (a replay's:
    its records go to its output, and encoding them for a history cost a quarter of a replay
    with many results)."""

    def __init__(self, limit: int = default("engine.history"), path: Path | None = None,
                 max_bytes: int = default("engine.history_bytes")):
        self._lines: collections.deque[tuple[int, str]] = collections.deque()
        self._limit = limit
        self._max_bytes = max_bytes
        self._bytes = 0
        self._lock = threading.Lock()
        self._path = path
        self._file_lines = 0
        self._file_bytes = 0
        if path is not None and path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                self._file_lines += 1
                self._file_bytes += len(line) + 1
                try:
                    self._keep(parse_instant(json.loads(line)["time"]), line + "\n")
                except (ValueError, KeyError, TypeError, TemporalValueError):
                    continue   # a line cut short by a crash
        elif path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def _keep(self, time: int, line: str) -> None:
        self._lines.append((time, line))
        self._bytes += len(line)
        while len(self._lines) > 1 and (len(self._lines) > self._limit or self._bytes > self._max_bytes):
            self._bytes -= len(self._lines.popleft()[1])

    def append(self, time: int, record: dict) -> None:
        if self._limit == 0:
            return
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._lock:
            self._keep(time, line)
            if self._path is None:
                return
            if self._file_lines + 1 >= 2 * self._limit or self._file_bytes + len(line) >= 2 * self._max_bytes:
                replace_text(self._path, "".join(kept for _, kept in self._lines))
                self._file_lines, self._file_bytes = len(self._lines), self._bytes
            else:
                with self._path.open("a", encoding="utf-8") as out:
                    out.write(line)
                self._file_lines += 1
                self._file_bytes += len(line)

    def discard(self) -> None:
        """Forget the records and their file (the query is gone)."""
        with self._lock:
            self._lines.clear()
            self._bytes = 0
            if self._path is not None:
                self._path.unlink(missing_ok=True)

    def lines(self, instant: int | None = None, limit: int | None = None) -> list[str]:
        """The records after `instant` (exclusive), oldest first, as JSON lines: at most `limit`
        of them, the first after `instant` (a reader going on from the last instant it has
        misses none), or without `instant` the latest."""
        with self._lock:
            if instant is None:
                kept = len(self._lines) if limit is None else min(limit, len(self._lines))
                return [line for _, line in itertools.islice(self._lines, len(self._lines) - kept, None)]
            lines = [line for t, line in self._lines if t > instant]
        return lines[:limit] if limit is not None else lines

    def since(self, instant: int | None = None, limit: int | None = None) -> list[dict]:
        return [json.loads(line) for line in self.lines(instant, limit)]


class FeedClosed(Exception):
    """The feed's query was removed: no record will come any more."""


class Subscription:
    """The records published to one subscriber, at most `backlog` of them waiting (0: no
    bound, for a consumer in the same process that drains it): a subscriber that does not keep
    up loses its oldest records, counted in `dropped`, and never blocks the engine."""

    def __init__(self, backlog: int):
        self.backlog = backlog
        self.dropped = 0
        self.closed = False
        self._records: collections.deque = collections.deque()
        self._changed = threading.Condition()

    def put(self, record: dict) -> None:
        with self._changed:
            if self.backlog and len(self._records) >= self.backlog:
                self._records.popleft()
                self.dropped += 1
            self._records.append(record)
            self._changed.notify()

    def close(self) -> None:
        with self._changed:
            self.closed = True
            self._changed.notify_all()

    def get(self, timeout: float | None = None) -> dict:
        """The next record; queue.Empty after `timeout` seconds without one, FeedClosed once
        the feed is closed and every record has been read."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._records or self.closed, timeout):
                raise queue.Empty
            if self._records:
                return self._records.popleft()
            raise FeedClosed

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until a record is there to read (True), or `timeout` seconds, or the feed closed
        with nothing left to read (False); nothing is taken."""
        with self._changed:
            self._changed.wait_for(lambda: self._records or self.closed, timeout)
            return bool(self._records)

    def get_nowait(self) -> dict:
        with self._changed:
            if not self._records:
                raise queue.Empty
            return self._records.popleft()

    def empty(self) -> bool:
        with self._changed:
            return not self._records


class EventFeed:
    """Fan-out of records to live subscribers (server-sent events, a replay's reader, the Python
    API); closed when its query is removed."""

    def __init__(self, backlog: int = 1000):
        self._subscribers: set[Subscription] = set()
        self._lock = threading.Lock()
        self._backlog = backlog
        self.closed = False

    def subscribe(self, backlog: int | None = None) -> Subscription:
        """The records published from now on, at most `backlog` waiting (default: the feed's;
        0: no bound)."""
        subscription = Subscription(self._backlog if backlog is None else backlog)
        with self._lock:
            if self.closed:
                subscription.close()
            else:
                self._subscribers.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscribers.discard(subscription)

    def publish(self, record: dict) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for subscription in subscribers:
            subscription.put(record)

    def close(self) -> None:
        """No record will come any more: every subscriber is told, after what it has not read."""
        with self._lock:
            self.closed = True
            subscribers, self._subscribers = list(self._subscribers), set()
        for subscription in subscribers:
            subscription.close()


@dataclass
class DeliveryState:
    delivered: int = 0
    pending: int = 0
    failures: int = 0
    next_attempt: int = 0
    backoff: int = INITIAL_BACKOFF
    last_error: str | None = None


class Delivery:
    """The engine's `Poster`: each sink URL delivered by the poster of its kind (SINK_KINDS:
    HTTP(S) through requests, MQTT through one publisher per broker), each made once and let
    go of with `close`."""

    def __init__(self):
        self._posters = {name: kind.poster() for name, kind in SINK_KINDS.items()}

    def __call__(self, url: str, body: bytes, headers: dict) -> int:
        return self._posters[_KIND_OF_SCHEME[urlsplit(url).scheme]](url, body, headers)

    def close(self) -> None:
        for poster in self._posters.values():
            close = getattr(poster, "close", None)
            if close is not None:
                close()


class HttpSink:
    """POST each record of one query to `url`, in order, from a durable outbox: in `shape`
    (result_shapes.py; `variables` the query's SELECT clause), and with `send_empty` False
    only the evaluations that gave results."""

    def __init__(self, query_id: str, url: str, directory: Path, post: Poster = post_with_requests,
                 shape: str = SPARQL_JSON, variables: tuple[str, ...] | None = None, send_empty: bool = True):
        self.query_id = query_id
        self.url = url
        self.post = post
        self.shape = shape
        self.variables = variables
        self.send_empty = send_empty
        directory.mkdir(parents=True, exist_ok=True)
        name = bounded_name(quote(query_id, safe="") + "-" + quote(url, safe=""))
        self.outbox = directory / (name + ".jsonl")
        self.cursor = directory / (name + ".cursor")
        self._lock = threading.Lock()
        self.state = DeliveryState()
        self._lines = self._read_outbox()
        self.state.delivered = int(self.cursor.read_text()) if self.cursor.exists() else 0
        self.state.pending = len(self._lines) - self.state.delivered

    def _read_outbox(self) -> list[str]:
        if not self.outbox.exists():
            return []
        with self.outbox.open("rb") as f:
            data = f.read()
        if data and not data.endswith(b"\n"):
            # A write cut short by a crash: drop the partial record (it was never acknowledged
            # as written, so the evaluation that produced it had not completed).
            data = data[:data.rfind(b"\n") + 1]
            with self.outbox.open("wb") as f:
                f.write(data)
        return [line for line in data.decode("utf-8").splitlines() if line]

    def enqueue(self, record: dict) -> None:
        if not self.send_empty and not has_results(record):
            return
        line = shaped_json(record, self.shape, self.variables)
        with self._lock:
            with self.outbox.open("a", encoding="utf-8") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())
            self._lines.append(line)
            self.state.pending += 1

    def _save_cursor(self) -> None:
        replace_text(self.cursor, str(self.state.delivered))

    def deliver(self, now: int) -> int:
        """Deliver pending records in order until one is refused; returns how many went."""
        sent = 0
        with self._lock:
            while self.state.delivered < len(self._lines):
                if now < self.state.next_attempt:
                    break
                line = self._lines[self.state.delivered]
                record = json.loads(line)
                headers = {"Content-Type": "application/json",
                           "Idempotency-Key": "%s@%s" % (self.query_id, record.get("time"))}
                try:
                    status = self.post(self.url, line.encode("utf-8"), headers)
                    error = None if 200 <= status < 300 else "HTTP %d" % status
                except DeliveryError as e:
                    error = str(e)
                except OSError as e:          # requests' errors (RequestException) are OSErrors
                    error = "%s: %s" % (type(e).__name__, e)
                if error is not None:
                    self.state.failures += 1
                    self.state.last_error = error
                    self.state.next_attempt = now + self.state.backoff
                    self.state.backoff = min(self.state.backoff * 2, MAX_BACKOFF)
                    log.warning("sink %s refused %s's record %s (%s); retrying in %.1f s", self.url,
                                self.query_id, record.get("time"), error, self.state.backoff / 2e6)
                    break
                self.state.delivered += 1
                self.state.pending -= 1
                self.state.backoff = INITIAL_BACKOFF
                self.state.next_attempt = 0
                self._save_cursor()
                sent += 1
        return sent
