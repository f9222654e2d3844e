"""Where a continuous query's results go. Every destination is a `Sink`: it `accept`s each
evaluation's `Result` and lets go of what it holds when its query is removed (`discard`). A
query's sinks are its history for polling (`ResultHistory`), its feed for server-sent events
(`EventFeed`), one outbox sink per sink URL, and for a CONSTRUCT query with an output stream,
that stream (`OutputStream`).

The outbox sinks lose nothing they can keep: `HttpSink` POSTs to a URL, `MqttSink` publishes
to a topic (`mqtt://host:port/topic`, through the engine's connections of mqtt_publish.py);
each kind is a class in SINK_KINDS ("Adding a sink kind" in docs/design.md).

An outbox sink writes each record to a durable outbox on disk (a file per record) before any attempt to
deliver it, and removes it once delivered; delivery goes in order, one record at a time, with
exponential backoff (in clock time, so tests never sleep) while the receiver refuses. Records
survive a receiver outage and an engine restart, within the outbox's bound (`[engine]
outbox_bytes`): past it the oldest waiting records are dropped and counted. Each POST carries an
`Idempotency-Key` (query id and evaluation instant): after a crash between a successful POST
and the record's removal a receiver can recognise the one record sent twice.
"""
from __future__ import annotations

import collections
import http.client
import itertools
import json
import logging
import os
import queue
import re
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol
from urllib.parse import quote, urlsplit

import pyoxigraph as ox

from rspstar.config.schema import default
from rspstar.store.landing import bounded_name, replace_text
from rspstar.store.mqtt import DEFAULT_PORTS as MQTT_PORTS
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore
from rspstar.translator.errors import TemporalValueError
from rspstar.translator.temporal import parse_instant

from .errors import EndpointError
from .exchange import ExchangeExpired, exchange
from .mqtt_publish import DeliveryError, MqttPublishers, topic_of
from .result_shapes import SPARQL_JSON, has_results, shaped_json

log = logging.getLogger(__name__)

INITIAL_BACKOFF = 500_000        # µs
MAX_BACKOFF = 60_000_000


class SinkNotAllowed(EndpointError):
    """A sink URL outside the configured allow-list."""


@dataclass(frozen=True)
class Result:
    """One evaluation on its way to its query's sinks: its instant, its record (the conformance
    JSON line, tests/conformance/README.md, with what made it due and its latency), the triples
    a CONSTRUCT emitted, and the query's next instant (nothing earlier can follow it)."""

    instant: int
    record: dict
    triples: list
    next_close: int | None


class Sink(Protocol):
    def accept(self, result: Result) -> None: ...

    def discard(self) -> None: ...


# Seconds one delivery may take in all, and one wait for the receiver: past either it failed,
# and the record waits in the outbox for the next attempt. A receiver that answers a byte now
# and then would otherwise hold the delivery thread, and every sink behind it, for as long as
# it likes.
DELIVERY_SECONDS = 30.0
DELIVERY_WAIT_SECONDS = 5.0


def post_bounded(url: str, body: bytes, headers: dict, seconds: float = DELIVERY_SECONDS) -> int:
    """POST `body` to `url`, the whole exchange within `seconds` (exchange.py); the status. A
    redirect is not followed (it could lead off the allow-list): its 3xx status counts as not
    delivered, and the record waits in the outbox."""
    try:
        return exchange("POST", url, time.monotonic() + seconds, DELIVERY_WAIT_SECONDS, body=body,
                        headers=headers, read_body=False).status
    except ExchangeExpired:
        raise DeliveryError("%s did not answer within %g s" % (url, seconds)) from None
    except http.client.HTTPException as e:
        raise DeliveryError("%s: %s" % (url, str(e) or type(e).__name__)) from None


Poster = Callable[[str, bytes, dict], int]


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


def check_sinks_allowed(urls, allowed: list[str]) -> None:
    """Each sink allowed (check_sink_allowed), and none named twice: a query would post each
    record to it twice."""
    seen = set()
    for url in urls:
        check_sink_allowed(url, allowed)
        if url in seen:
            raise SinkNotAllowed("sink %s is named twice: name each sink once" % url)
        seen.add(url)


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
    with many results).

    A file that cannot be written (a full disk) loses nothing the history keeps: the records
    stay in memory, the failure is logged once and counted (`write_failures`, `write_error`
    while it lasts, in the query's status), and the next record that can be written writes the
    file again whole, from memory, saying so in the log. Never a failure of the evaluation that
    brought the record (an engine on a full disk logged a traceback at every evaluation)."""

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
        self.write_failures = 0                 # records the file could not take
        self.write_error: str | None = None     # why, while it cannot (None: it is written)
        # While it cannot, the file is tried again after 1, 2, 4 ... 64 records (each try writes
        # the kept records whole, up to `max_bytes`, into what room the disk has).
        self._retry_after = 0
        self._retry_in = 0
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

    def accept(self, result: Result) -> None:
        self.append(result.instant, result.record)

    def append(self, time: int, record: dict) -> None:
        if self._limit == 0:
            return
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._lock:
            self._keep(time, line)
            if self._path is None:
                return
            if self.write_error is not None and self._retry_in > 0:
                self._retry_in -= 1
                self.write_failures += 1
                return
            try:
                if self.write_error is not None or self._file_lines + 1 >= 2 * self._limit or \
                        self._file_bytes + len(line) >= 2 * self._max_bytes:
                    # Written again whole: after a failure the file may lack records, or end
                    # in half of one.
                    replace_text(self._path, "".join(kept for _, kept in self._lines))
                    self._file_lines, self._file_bytes = len(self._lines), self._bytes
                else:
                    with self._path.open("a", encoding="utf-8") as out:
                        out.write(line)
                    self._file_lines += 1
                    self._file_bytes += len(line)
            except OSError as e:
                self.write_failures += 1
                if self.write_error is None:        # once, not at every evaluation
                    log.error("the result history %s cannot be written (%s): its records are kept in memory, and "
                              "written again once it can be", self._path, e)
                self.write_error = "%s: %s" % (type(e).__name__, e)
                self._retry_after = min(64, 2 * self._retry_after or 1)
                self._retry_in = self._retry_after
                return
            if self.write_error is not None:
                self.write_error = None
                self._retry_after = 0
                log.warning("the result history %s is written again (%d records could not be written meanwhile)",
                            self._path, self.write_failures)

    def describe(self) -> dict:
        """What the query's status says of its history's file."""
        return {"history_write_failures": self.write_failures, "history_write_error": self.write_error}

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
    """The records published to one subscriber, at most `backlog` of them waiting and `max_bytes`
    of their JSON (0: no bound, for a consumer in the same process that drains it): a subscriber
    that does not keep up loses its oldest records (the newest is always kept), counted in
    `dropped`, and never blocks the engine nor makes it hold more than that for it."""

    def __init__(self, backlog: int, max_bytes: int = 0):
        self.backlog = backlog
        self.max_bytes = max_bytes
        self.dropped = 0
        self.closed = False
        self.held_bytes = 0
        self._records: collections.deque[tuple[dict, int]] = collections.deque()
        # (Its own reentrant lock, not a plain one: a wait takes an RLock back in one call that
        # no signal interrupts, where a plain lock is taken back in Python, so that Ctrl-C on a
        # subscriber waiting in the main thread left it without the lock and its `with` released
        # the publisher's.)
        self._changed = threading.Condition()

    def put(self, record: dict, size: int = 0) -> None:
        """Add `record` (`size`: its JSON's length, what `max_bytes` counts)."""
        with self._changed:
            self._records.append((record, size))
            self.held_bytes += size
            while len(self._records) > 1 and ((self.backlog and len(self._records) > self.backlog) or
                                              (self.max_bytes and self.held_bytes > self.max_bytes)):
                self.held_bytes -= self._records.popleft()[1]
                self.dropped += 1
            self._changed.notify()

    def close(self) -> None:
        with self._changed:
            self.closed = True
            self._changed.notify_all()

    def _take(self) -> dict:
        record, size = self._records.popleft()
        self.held_bytes -= size
        return record

    def get(self, timeout: float | None = None) -> dict:
        """The next record; queue.Empty after `timeout` seconds without one, FeedClosed once
        the feed is closed and every record has been read."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._records or self.closed, timeout):
                raise queue.Empty
            if self._records:
                return self._take()
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
            return self._take()

    def drain(self) -> list[dict]:
        """Every record waiting, taken at once (nothing waits: an empty list)."""
        with self._changed:
            records = [record for record, _ in self._records]
            self._records.clear()
            self.held_bytes = 0
            return records

    def empty(self) -> bool:
        with self._changed:
            return not self._records


class EventFeed:
    """Fan-out of records to live subscribers (server-sent events, a replay's reader, the Python
    API); closed when its query is removed. A record is measured (its JSON's length) once, and
    only when a subscriber bounds its bytes."""

    def __init__(self, backlog: int = 1000):
        self._subscribers: set[Subscription] = set()
        self._lock = threading.Lock()
        self._backlog = backlog
        self.closed = False

    def subscribe(self, backlog: int | None = None, max_bytes: int = 0) -> Subscription:
        """The records published from now on, at most `backlog` waiting (default: the feed's;
        0: no bound) and `max_bytes` of their JSON (0: no bound)."""
        subscription = Subscription(self._backlog if backlog is None else backlog, max_bytes)
        with self._lock:
            if self.closed:
                subscription.close()
            else:
                self._subscribers.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscribers.discard(subscription)

    def accept(self, result: Result) -> None:
        self.publish(result.record)

    def publish(self, record: dict) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        size = len(json.dumps(record)) if any(s.max_bytes for s in subscribers) else 0
        for subscription in subscribers:
            subscription.put(record, size)

    def discard(self) -> None:
        """Its query is gone."""
        self.close()

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
    pending: int = 0            # records waiting in the outbox
    pending_bytes: int = 0      # the disk they take (each record a file: at least one block)
    dropped: int = 0            # records dropped undelivered to keep the outbox within its bound
    dropped_bytes: int = 0
    failures: int = 0
    next_attempt: int = 0
    backoff: int = INITIAL_BACKOFF
    last_error: str | None = None
    last_dropped: str | None = None     # the evaluation instant of the latest record dropped


# A record is a file of its own, and a file takes whole blocks of disk: a record is counted
# against the outbox's bound as the blocks it takes, so that many small records cannot take
# many times the bound.
BLOCK = 4096
_RECORD = re.compile(r"^(\d{12})\.json$")


def _disk_cost(size: int) -> int:
    return max(1, -(-size // BLOCK)) * BLOCK


def _write_durably(path: Path, data: bytes) -> None:
    """`data` as the file `path`, whole or not at all, on disk before this returns (written to a
    temporary name, synced, renamed, and the folder synced)."""
    tmp = path.with_name("." + path.name + ".tmp")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


class OutboxSink:
    """Deliver each record of one query to `url`, in order, from a durable outbox: in `shape`
    (result_shapes.py; `variables` the query's SELECT clause), and with `send_empty` False
    only the evaluations that gave results. A kind of sink says how one record is sent (`_send`).

    The outbox is a folder holding one file per record waiting (`<sequence>.json`): a record is
    written there, synced, before anything tries to deliver it, and its file is removed as soon
    as the receiver took it, so the outbox holds what is undelivered and nothing else. Memory
    holds only each waiting record's number and size; a record is read from its file when it is
    sent.

    The outbox holds at most `max_bytes` of records (counted as the disk blocks they take): a
    record that would pass it drops the oldest waiting records first (the newest is always
    kept), each counted in `state.dropped`, and the latest dropped instant is remembered. An
    unattended engine keeps its newest results flowing once a receiver comes back, rather than
    stopping the query or refusing fresh results in favour of old ones; the query's history
    keeps the latest for polling either way. `fresh`: a new registration, which starts with an
    empty outbox whatever an earlier query of that id left (`discard` removes the outbox with
    its query)."""

    def __init__(self, query_id: str, url: str, directory: Path, shape: str = SPARQL_JSON,
                 variables: tuple[str, ...] | None = None, send_empty: bool = True,
                 max_bytes: int = default("engine.outbox_bytes"), fresh: bool = False):
        self.query_id = query_id
        self.url = url
        self.shape = shape
        self.variables = variables
        self.send_empty = send_empty
        self.max_bytes = max_bytes
        name = bounded_name(quote(query_id, safe="") + "-" + quote(url, safe=""))
        self.outbox = directory / name
        # What an earlier version kept: every record in one JSON-lines file, and the count of
        # those delivered beside it. Its undelivered records move into the folder at the start.
        self._legacy = (directory / (name + ".jsonl"), directory / (name + ".cursor"))
        # `_lock` guards the waiting records and the state, never held while a record is sent
        # (an evaluation adding its record does not wait for a slow receiver); `_sending` lets
        # one delivery run at a time.
        self._lock = threading.Lock()
        self._sending = threading.Lock()
        self.state = DeliveryState()
        # (sequence, disk cost, evaluation instant or None when not read yet), oldest first
        self._waiting: collections.deque[tuple[int, int, str | None]] = collections.deque()
        self._sequence = 0
        self._in_flight: int | None = None
        self._discarded = False
        if fresh:
            self._remove_files()
        self.outbox.mkdir(parents=True, exist_ok=True)
        if not fresh:
            self._read_outbox()

    def _path(self, sequence: int) -> Path:
        return self.outbox / ("%012d.json" % sequence)

    def _remove_files(self) -> None:
        shutil.rmtree(self.outbox, ignore_errors=True)
        for legacy in self._legacy:
            legacy.unlink(missing_ok=True)

    def _read_outbox(self) -> None:
        found = []
        for entry in os.scandir(self.outbox):
            m = _RECORD.match(entry.name)
            if m:
                found.append((int(m.group(1)), entry.stat().st_size))
            elif entry.name.endswith(".tmp"):
                os.unlink(entry.path)       # a record cut short by a crash: never acknowledged as written
        found.sort()
        self._sequence = found[-1][0] + 1 if found else 0
        for sequence, size in found:
            self._waiting.append((sequence, _disk_cost(size), None))
            self.state.pending += 1
            self.state.pending_bytes += _disk_cost(size)
        self._migrate()

    def _migrate(self) -> None:
        outbox, cursor = self._legacy
        if not outbox.exists():
            cursor.unlink(missing_ok=True)
            return
        delivered = int(cursor.read_text() or 0) if cursor.exists() else 0
        with outbox.open("rb") as f:
            data = f.read()
        # A line cut short by a crash was never acknowledged as written: dropped.
        lines = [line for line in data[:data.rfind(b"\n") + 1].split(b"\n") if line][delivered:]
        for line in lines:
            self._keep(line + b"\n", None)
        outbox.unlink()
        cursor.unlink(missing_ok=True)

    def _send(self, body: bytes, headers: dict) -> str | None:
        """Send one record: None once its receiver took it, else why not (or DeliveryError, or
        an OSError)."""
        raise NotImplementedError

    def accept(self, result: Result) -> None:
        self.enqueue(result.record)

    def enqueue(self, record: dict) -> None:
        if not self.send_empty and not has_results(record):
            return
        line = shaped_json(record, self.shape, self.variables) + "\n"
        self._keep(line.encode("utf-8"), record.get("time"))

    def _keep(self, data: bytes, instant: str | None) -> None:
        cost = _disk_cost(len(data))
        with self._lock:
            if self._discarded:
                return
            sequence = self._sequence
            self._sequence += 1
        # Written and synced outside the lock: a delivery and a status read do not wait for the disk.
        path = self._path(sequence)
        _write_durably(path, data)
        with self._lock:
            if self._discarded:             # removed with its query meanwhile
                path.unlink(missing_ok=True)
                return
            self._waiting.append((sequence, cost, instant))
            self.state.pending += 1
            self.state.pending_bytes += cost
            self._bound()

    def _bound(self) -> None:
        """Drop the oldest waiting records (not the one being sent, nor the newest) while the
        outbox is past its bound."""
        while self.state.pending_bytes > self.max_bytes:
            k = 1 if self._waiting and self._waiting[0][0] == self._in_flight else 0
            if k >= len(self._waiting) - 1:
                break
            sequence, cost, instant = self._waiting[k]
            del self._waiting[k]
            path = self._path(sequence)
            if instant is None:             # a record kept from before a restart
                try:
                    instant = _record_time(path.read_bytes())
                except OSError:
                    pass
            path.unlink(missing_ok=True)
            self.state.pending -= 1
            self.state.pending_bytes -= cost
            self.state.dropped += 1
            self.state.dropped_bytes += cost
            self.state.last_dropped = instant or self.state.last_dropped
            if self.state.dropped == 1 or self.state.dropped % 1000 == 0:
                log.warning("sink %s of query %s: its outbox is full ([engine] outbox_bytes, %d bytes): the oldest "
                            "waiting records are dropped (%d so far)", self.url, self.query_id, self.max_bytes,
                            self.state.dropped)

    def discard(self) -> None:
        """The query is gone: its outbox and what waits there are removed (a delivery under way
        stops after the record it is sending)."""
        with self._lock:
            self._discarded = True
            self._waiting.clear()
            self.state.pending = self.state.pending_bytes = 0
            self._remove_files()

    def describe(self) -> dict:
        with self._lock:
            state = self.state
            return {"url": self.url, "pending": state.pending, "pending_bytes": state.pending_bytes,
                    "max_bytes": self.max_bytes, "delivered": state.delivered, "dropped": state.dropped,
                    "last_dropped": state.last_dropped, "failures": state.failures, "last_error": state.last_error}

    def deliver(self, now: int) -> int:
        """Deliver waiting records in order until one is refused; returns how many went. The
        record is sent without the outbox's lock held: an evaluation's record is added meanwhile."""
        if not self._sending.acquire(blocking=False):
            return 0                     # another delivery of this sink is under way
        sent = 0
        try:
            while True:
                with self._lock:
                    if self._discarded or not self._waiting or now < self.state.next_attempt:
                        break
                    sequence = self._in_flight = self._waiting[0][0]
                try:
                    body = self._path(sequence).read_bytes()
                except FileNotFoundError:     # removed with its query meanwhile
                    break
                instant = _record_time(body)
                headers = {"Content-Type": "application/json",
                           "Idempotency-Key": "%s@%s" % (self.query_id, instant)}
                try:
                    error = self._send(body.rstrip(b"\n"), headers)
                except DeliveryError as e:
                    error = str(e)
                except OSError as e:          # the network's (refused, reset, unreachable)
                    error = "%s: %s" % (type(e).__name__, e)
                with self._lock:
                    self._in_flight = None
                    if error is not None:
                        self.state.failures += 1
                        self.state.last_error = error
                        self.state.next_attempt = now + self.state.backoff
                        self.state.backoff = min(self.state.backoff * 2, MAX_BACKOFF)
                        log.warning("sink %s refused %s's record %s (%s); retrying in %.1f s", self.url,
                                    self.query_id, instant, error, self.state.backoff / 2e6)
                        break
                    if self._discarded:
                        break
                    _, cost, _ = self._waiting.popleft()
                    self._path(sequence).unlink(missing_ok=True)
                    self.state.delivered += 1
                    self.state.pending -= 1
                    self.state.pending_bytes -= cost
                    self.state.backoff = INITIAL_BACKOFF
                    self.state.next_attempt = 0
                    sent += 1
        finally:
            self._sending.release()
        return sent


def _record_time(data: bytes) -> str | None:
    try:
        return json.loads(data).get("time")
    except (ValueError, AttributeError):
        return None


class HttpSink(OutboxSink):
    """POSTs each record to its URL (`post`: post_bounded, or what the engine was given instead),
    with an `Idempotency-Key` (query id and evaluation instant)."""

    def __init__(self, query_id: str, url: str, directory: Path, post: Poster = post_bounded, **outbox):
        self.post = post
        super().__init__(query_id, url, directory, **outbox)

    def _send(self, body: bytes, headers: dict) -> str | None:
        status = self.post(self.url, body, headers)
        return None if 200 <= status < 300 else "HTTP %d" % status


class MqttSink(OutboxSink):
    """Publishes each record to the topic of its URL (`mqtt://host:port/topic`) through the
    engine's connection to that broker (`publishers`), QoS 1: a record the broker has not
    confirmed stays in the outbox."""

    def __init__(self, query_id: str, url: str, directory: Path, publishers: MqttPublishers, **outbox):
        self.publishers = publishers
        super().__init__(query_id, url, directory, **outbox)

    def _send(self, body: bytes, headers: dict) -> str | None:
        self.publishers.publish(self.url, body)
        return None


class OutputStream:
    """A CONSTRUCT query's output stream (REGISTER STREAM <out>): an evaluation that constructs
    triples becomes one element of it (timestamp = the evaluation instant), which other queries
    can window over. An evaluation with no triples adds no element (an empty named graph is no
    graph in RDF), but still moves the stream's watermark."""

    def __init__(self, store: StreamStore, stream: str):
        self.store = store
        self.stream = stream

    def accept(self, result: Result) -> None:
        stream, instant = self.stream, result.instant
        if result.triples:
            graph = "urn:rspstar:output:%s:%d" % (quote(stream, safe=""), instant)
            name = ox.NamedNode(graph)
            quads = [ox.Quad(t.subject, t.predicate, t.object, name) for t in result.triples]
            self.store.add_elements(stream, [Element(graph, instant, instant_literal(instant), quads)])
        # Nothing earlier than the query's next instant can appear in its output any more.
        self.store.advance_watermark(stream, result.next_close if result.next_close is not None else instant + 1)

    def discard(self) -> None:
        pass


@dataclass(frozen=True)
class SinkKind:
    """One kind of outbox sink: the URL schemes it takes with each one's port when a URL writes
    none, its class, what makes the transport its sinks share (one per engine, closed with the
    engine when it has `close`), and a check of a URL's rest at registration (raising
    DeliveryError)."""

    ports: dict[str, int]
    sink: type[OutboxSink]
    transport: Callable[[], object]
    check: Callable[[str], object] = lambda url: None


# The place to add a kind of sink (docs/design.md, "Adding a sink kind").
SINK_KINDS: dict[str, SinkKind] = {
    "http": SinkKind({"http": 80, "https": 443}, HttpSink, lambda: post_bounded),
    "mqtt": SinkKind(MQTT_PORTS, MqttSink, MqttPublishers, check=topic_of),
}
_KIND_OF_SCHEME = {scheme: name for name, kind in SINK_KINDS.items() for scheme in kind.ports}
SINK_PORTS = {scheme: port for kind in SINK_KINDS.values() for scheme, port in kind.ports.items()}


class Transports:
    """What an engine's outbox sinks deliver through: each kind's transport, made once and let
    go of with `close` (MQTT's connections to its brokers). `made` replaces a kind's (a test's
    receiver as the HTTP poster)."""

    def __init__(self, made: dict[str, object] | None = None):
        self._made = {name: (made or {}).get(name) or kind.transport() for name, kind in SINK_KINDS.items()}

    def sink(self, query_id: str, url: str, directory: Path, **outbox) -> OutboxSink:
        """The outbox sink of `url`'s kind (its URL checked at registration: check_sink_allowed)."""
        name = _KIND_OF_SCHEME[urlsplit(url).scheme]
        return SINK_KINDS[name].sink(query_id, url, directory, self._made[name], **outbox)

    def close(self) -> None:
        for transport in self._made.values():
            close = getattr(transport, "close", None)
            if close is not None:
                close()
