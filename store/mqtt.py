"""The MQTT source: messages from a broker's topics, landed durably before they are acknowledged.

A subscriber (paho-mqtt, QoS 1, a persistent session, manual acknowledgement) receives each
message; a committer thread decodes it with the codec every input goes through (topic names in
the quarantine records of what does not parse), writes the elements as canonical N-Quads into
the source's landing directory, fsyncs, and only then sends the PUBACK. From there the landing
directory is a files source: Spark reads each file exactly once into the store. So a message the
broker saw acknowledged is on disk, and a message not yet acknowledged is sent again by the
broker after a crash or a reconnection.

Sent again, it must not be stored twice: each landing file starts with a comment line naming the
messages it holds (packet id and a digest of topic and payload), and a message the broker
marks as a redelivery (DUP) whose id and digest were landed recently is acknowledged without
being landed again. The names of the recently landed messages are read back from the newest
landing files at start.

Messages are committed in groups (all that arrived while the previous group was written), so
one fsync serves many messages, and acknowledged in the order they arrived, as MQTT asks.
"""
from __future__ import annotations

import collections
import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable
from urllib.parse import urlsplit

from . import formats
from .codec import CANONICAL, Payload, canonical, decode
from .errors import StoreError
from .landing import LandedFiles, StreamBound, finish_commits, land_elements, reveal  # noqa: F401 (finish_commits: the source's own)
from .rdf_input import Element


def paho():
    """paho's MQTT client module, imported where an MQTT source or sink is made: an engine with
    neither (a replay, the Python API) starts without it."""
    import paho.mqtt.client as mqtt
    return mqtt

log = logging.getLogger(__name__)

# Each scheme's port when a URL writes none: a broker's here, an MQTT sink's too (the sink kinds'
# table, endpoint/engine/sinks.py, reads it from here).
DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}
HEADER = "# rspstar mqtt landed:"
# Landed messages remembered to recognise a redelivery: fewer than the 65,535 packet ids a
# broker cycles through, so an id seen here was not reused since.
JOURNAL_SIZE = 8192
_JOURNAL_FILES = 2000              # landing files read back at start at most
# Messages received and not yet committed, at most (bytes): beyond it the network thread waits,
# and the broker holds what is not yet sent.
MAX_PENDING_BYTES = 64 * 1024 * 1024
MAX_PENDING_MESSAGES = 100_000     # and messages (a flood of tiny QoS 0 ones costs memory per message)
# The largest message read (the default of [http] max_body, the largest posted body); a larger
# one is set aside with its first QUARANTINED_PREFIX bytes.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
QUARANTINED_PREFIX = 64 * 1024
RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 60.0


class MqttSettingsError(StoreError):
    """An MQTT source's settings that cannot work (a broker URL, a topic filter)."""


@dataclass(frozen=True)
class Broker:
    host: str
    port: int
    tls: bool

    @property
    def origin(self) -> str:
        return "%s://%s:%d" % ("mqtts" if self.tls else "mqtt", self.host, self.port)


def parse_broker(url: str) -> Broker:
    """mqtt://host[:port] or mqtts://host[:port] (1883 and 8883 by default)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise MqttSettingsError("broker %r: %s" % (url, e)) from None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise MqttSettingsError("broker %r: use mqtt://host:port, or mqtts://host:port for TLS" % url)
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise MqttSettingsError("broker %r: the broker is scheme://host:port only; topics go in `topic`" % url)
    return Broker(parts.hostname, port or DEFAULT_PORTS[parts.scheme], parts.scheme == "mqtts")


def check_filter(topic_filter: str) -> None:
    """MqttSettingsError unless `topic_filter` is a valid MQTT subscription filter."""
    if not topic_filter or len(topic_filter.encode("utf-8")) > 65535 or "\x00" in topic_filter:
        raise MqttSettingsError("topic filter %r: 1 to 65,535 bytes, no NUL" % topic_filter)
    levels = topic_filter.split("/")
    for k, level in enumerate(levels):
        if ("#" in level and (level != "#" or k != len(levels) - 1)) or ("+" in level and level != "+"):
            raise MqttSettingsError("topic filter %r: '+' is a whole level and '#' the whole last level" % topic_filter)


@dataclass
class _Received:
    topic: str
    payload: bytes
    mid: int
    qos: int
    dup: bool
    retain: bool
    arrived: int                    # µs

    @property
    def key(self) -> str:
        digest = hashlib.blake2b(self.topic.encode("utf-8") + b"\x00" + self.payload, digest_size=12).hexdigest()
        return "%d:%s" % (self.mid, digest)


@dataclass
class MqttStatus:
    connected: bool = False
    subscribed: bool = False        # the broker confirmed the subscriptions of this connection
    received: int = 0               # messages
    landed: int = 0                 # messages written to the landing directory and acknowledged
    elements: int = 0
    redelivered: int = 0            # redeliveries of landed messages, acknowledged and not landed again
    retained_ignored: int = 0
    quarantined: int = 0            # messages with at least one part set aside
    connects: int = 0
    last_error: str | None = None
    pending: int = 0
    waiting: bool = False           # for Spark to store what was landed before ([engine] max_landed_bytes)

    def describe(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


class Journal:
    """The keys (packet id and digest) of the most recently landed messages."""

    def __init__(self, size: int = JOURNAL_SIZE):
        self._keys: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._size = size

    def add(self, keys) -> None:
        for key in keys:
            self._keys[key] = None
            self._keys.move_to_end(key)
        while len(self._keys) > self._size:
            self._keys.popitem(last=False)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    @classmethod
    def read_back(cls, root: Path, size: int = JOURNAL_SIZE) -> "Journal":
        """The keys in the headers of the newest landing files under `root`."""
        journal = cls(size)
        files = sorted((f for f in root.glob("*/*" + CANONICAL.extension) if not f.name.startswith(".")),
                       key=lambda f: f.name, reverse=True)[:_JOURNAL_FILES]
        for landed in reversed(files):
            try:
                with landed.open("rb") as f:
                    first = f.readline(1 << 20).decode("utf-8", "replace")
            except OSError:
                continue
            if first.startswith(HEADER):
                journal.add(first[len(HEADER):].split())
        return journal


Quarantine = Callable[[Payload, str, int | None], None]


class MqttSource:
    """One MQTT source: subscribe, land, acknowledge. `routes` maps topic filters to stream
    IRIs (the first filter that matches a message's topic decides; a JSON envelope's own
    "stream" wins); `quarantine(payload, reason, line)` keeps what does not parse."""

    def __init__(self, name: str, broker: str, routes: dict[str, str], fmt: str, landing: Path,
                 quarantine: Quarantine, client_id: str | None = None, username: str | None = None,
                 password: str | None = None, ca_file: str | None = None, retained: bool = False,
                 now: Callable[[], int] = lambda: time.time_ns() // 1000, landed: LandedFiles | None = None,
                 max_streams: int | None = None, stored_streams: Callable[[], Iterable[str]] = tuple,
                 max_element_bytes: int | None = None):
        self.name = name
        self.max_element_bytes = max_element_bytes     # a larger element is set aside: no micro-batch takes it
        self.landed = landed            # what it acknowledged and Spark has not stored yet
        # Elements naming new streams past the bound are set aside before they land (no folder
        # made for them); `stored_streams`: the streams the store holds.
        self.streams = StreamBound(max_streams, stored_streams, landed)
        self.broker = parse_broker(broker)
        if not routes:
            raise MqttSettingsError("source %s: no topic to subscribe to" % name)
        for topic_filter in routes:
            check_filter(topic_filter)
        self.routes = dict(routes)
        self.format = formats.by_name(fmt)
        self.landing = landing
        self.quarantine = quarantine
        self.retained = retained
        self.now = now
        self.status = MqttStatus()
        self._pending: list[_Received] = []
        self._pending_bytes = 0
        self._changed = threading.Condition()
        self._stopping = False
        self._refused = False
        self._committer: threading.Thread | None = None
        self._sequence = 0
        finish_commits(landing)
        self.journal = Journal.read_back(landing)
        mqtt = paho()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id or "rspstar-%s" % name,
                                  clean_session=False, manual_ack=True)
        if username is not None:
            self.client.username_pw_set(username, password)
        if self.broker.tls:
            self.client.tls_set(ca_certs=ca_file)
        self.client.reconnect_delay_set(int(RETRY_FIRST_SECONDS), int(RETRY_MAX_SECONDS))
        self.client.on_connect = self._on_connect
        self.client.on_connect_fail = self._on_connect_fail
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe

    # -- the network thread ---------------------------------------------------------------------
    def start(self) -> None:
        self._committer = threading.Thread(target=self._commit_loop, name="mqtt-" + self.name, daemon=True)
        self._committer.start()
        self.client.connect_async(self.broker.host, self.broker.port, keepalive=30)
        self.client.loop_start()
        log.info("source %s: connecting to %s for %s", self.name, self.broker.origin, ", ".join(self.routes))

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            self._refused = True
            self.status.last_error = "the broker refused the connection: %s" % reason_code
            log.error("source %s: %s", self.name, self.status.last_error)
            return
        self._refused = False
        self.status.connected = True
        self.status.connects += 1
        # The session is kept by the broker, subscriptions with it; subscribing again is harmless
        # and covers a broker that lost its state.
        client.subscribe([(topic_filter, 1) for topic_filter in self.routes])
        log.info("source %s: connected to %s%s", self.name, self.broker.origin,
                 " (session resumed)" if flags.session_present else "")

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        refused = [str(code) for code in reason_codes if code.is_failure]
        if refused:
            self.status.last_error = "the broker refused the subscription: %s" % ", ".join(refused)
            log.error("source %s: %s", self.name, self.status.last_error)
        else:
            self.status.subscribed = True

    def _on_connect_fail(self, client, userdata) -> None:
        self.status.connected = False
        self.status.last_error = "cannot reach the broker at %s" % self.broker.origin

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        self.status.connected = self.status.subscribed = False
        if not self._stopping and not self._refused:      # a refusal says more than the disconnection after it
            self.status.last_error = "disconnected from %s: %s" % (self.broker.origin, reason_code)
            log.warning("source %s: %s; reconnecting", self.name, self.status.last_error)

    def _on_message(self, client, userdata, message) -> None:
        received = _Received(message.topic, bytes(message.payload), message.mid, message.qos, bool(message.dup),
                             bool(message.retain), self.now())
        with self._changed:
            # Back-pressure: the network thread waits while too much is uncommitted (the broker
            # keeps the rest; a QoS 1 message not yet acknowledged is sent again).
            self._changed.wait_for(lambda: (self._pending_bytes < MAX_PENDING_BYTES
                                            and len(self._pending) < MAX_PENDING_MESSAGES) or self._stopping)
            self._pending.append(received)
            self._pending_bytes += len(received.payload)
            self.status.received += 1
            self.status.pending = len(self._pending)
            self._changed.notify_all()

    # -- the committer --------------------------------------------------------------------------
    def _commit_loop(self) -> None:
        backoff = RETRY_FIRST_SECONDS
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._pending or self._stopping, timeout=1.0)
                group = list(self._pending)
                if not group and self._stopping:
                    return
            if not group:
                continue
            if self.landed is not None and not self.landed.room_for(sum(len(r.payload) for r in group)):
                # What was acknowledged before waits to be stored ([engine] max_landed_bytes): this
                # group waits unacknowledged (the broker keeps what comes meanwhile).
                self.status.waiting = True
                with self._changed:
                    self._changed.wait_for(lambda: self._stopping, timeout=0.2)
                if not self._stopping:
                    continue
            self.status.waiting = False
            try:
                self.commit(group)
            except OSError as e:     # a full disk: nothing is acknowledged, the group is tried again
                self.status.last_error = "landing failed: %s" % e
                log.error("source %s: %s; retrying in %g s", self.name, self.status.last_error, backoff)
                with self._changed:
                    self._changed.wait_for(lambda: self._stopping, timeout=backoff)
                    if self._stopping:
                        return
                backoff = min(2 * backoff, RETRY_MAX_SECONDS)
                continue
            backoff = RETRY_FIRST_SECONDS
            with self._changed:
                del self._pending[:len(group)]
                self._pending_bytes -= sum(len(r.payload) for r in group)
                self.status.pending = len(self._pending)
                self._changed.notify_all()

    def commit(self, group: list[_Received]) -> None:
        """Land a group of messages durably, then acknowledge each in arrival order."""
        by_stream: dict[str, list[Element]] = {}
        landed_keys = []
        in_group: set[str] = set()
        for received in group:
            key = received.key
            if received.retain and not self.retained:
                self.status.retained_ignored += 1
                continue
            if received.dup and (key in self.journal or key in in_group):
                self.status.redelivered += 1
                continue
            in_group.add(key)
            landed_keys.append(key)
            for stream, elements in self._decode(received).items():
                by_stream.setdefault(stream, []).extend(elements)
        beyond = self.streams.beyond(by_stream)
        for stream in beyond:
            self.quarantine(Payload(stream, CANONICAL.name, "mqtt", canonical(by_stream.pop(stream)), self.now()),
                            self.streams.reason([stream]), None)
        if beyond:
            self.status.quarantined += 1
        if by_stream:
            # A group with nothing to store (all set aside or redelivered) leaves no file: a
            # set-aside message sent again is set aside again, under the same name.
            self._land(by_stream, landed_keys)
        self.journal.add(landed_keys)
        for received in group:
            self.client.ack(received.mid, received.qos)
        self.status.landed += len(landed_keys)
        self.status.elements += sum(len(e) for e in by_stream.values())

    def _decode(self, received: _Received) -> dict[str, list[Element]]:
        stream = self._stream_of(received.topic)
        origin = "mqtt:%s" % received.topic
        if len(received.payload) > MAX_MESSAGE_BYTES:
            # Read into elements a message costs about ten times its size: one this large is set
            # aside (its beginning kept) rather than read.
            return self._set_aside(received, stream, received.payload[:QUARANTINED_PREFIX],
                                   "a message of %d bytes, larger than the %d an MQTT message may have (cut to its "
                                   "first %d bytes here); limit it at the broker (mosquitto: message_size_limit)"
                                   % (len(received.payload), MAX_MESSAGE_BYTES, QUARANTINED_PREFIX))
        # A message's own name for elements that carry none (envelopes without "graph"):
        # unique per message, so equal readings sent twice are two elements.
        payload = Payload(stream, self.format.name, "%s#%d.%d" % (origin, received.arrived, received.mid),
                          received.payload, received.arrived, line=1 if self.format.line_based else None)
        try:
            decoded = decode(payload)
        except Exception as e:  # no message may stop the source: set it aside, go on
            log.exception("source %s: unexpected failure reading a message on %s", self.name, received.topic)
            return self._set_aside(received, stream, received.payload, "unexpected: %s: %s" % (type(e).__name__, e))
        for rejected in decoded.rejected:
            self.quarantine(Payload(rejected.payload.stream, rejected.payload.format, origin, rejected.payload.text,
                                    received.arrived), rejected.reason, rejected.line)
        elements = {}
        for target, found in decoded.elements.items():
            if target:
                elements[target] = found
            else:
                self.quarantine(Payload("", self.format.name, origin, received.payload, received.arrived),
                                "no stream for topic %r: map its filter to a stream IRI, or name the stream in "
                                "the envelope" % received.topic, None)
        if decoded.rejected or len(elements) < len(decoded.elements):
            self.status.quarantined += 1
        return elements

    def _set_aside(self, received: _Received, stream: str, kept: bytes, reason: str) -> dict[str, list[Element]]:
        """A whole message set aside unread: no elements from it."""
        self.quarantine(Payload(stream, self.format.name, "mqtt:%s" % received.topic, kept, received.arrived), reason,
                        None)
        self.status.quarantined += 1
        return {}

    def _stream_of(self, topic: str) -> str:
        for topic_filter, stream in self.routes.items():
            if paho().topic_matches_sub(topic_filter, topic):
                return stream
        return ""

    def _land(self, by_stream: dict[str, list[Element]], keys: list[str]) -> None:
        """Files per stream, each headed by the keys of the group's messages (and each small
        beside a micro-batch's bound: store.landing); with several files, a commit list makes
        them appear together, even across a crash."""
        self._sequence += 1
        name = "%020d-%06d-%s" % (time.time_ns(), self._sequence % 1_000_000, self.name)
        header = (HEADER + " " + " ".join(keys) + "\n").encode("utf-8")
        # `reveal` looked up now: a test stands a crash in for it.
        files = land_elements(self.landing, by_stream, name, header, mixed=False,
                              reveal_one=lambda hidden, final: reveal(hidden, final),
                              max_element_bytes=self.max_element_bytes, oversize=self._oversize)
        if self.landed is not None:
            for file in files:
                self.landed.landed(file.path, file.size, file.streams)

    def _oversize(self, stream: str, element: Element, size: int) -> None:
        self.quarantine(Payload(stream, CANONICAL.name, "mqtt", canonical([element])[:QUARANTINED_PREFIX], self.now()),
                        "graph <%s> is %d bytes as N-Quads, more than the %d one micro-batch takes ([[sources]] "
                        "max_batch_bytes; its first %d bytes kept here)" % (element.graph, size, self.max_element_bytes,
                                                                           QUARANTINED_PREFIX), None)
        self.status.quarantined += 1

    # -- stopping -----------------------------------------------------------------------------
    def stop(self, timeout: float = 10.0) -> None:
        """Commit and acknowledge what was received, then disconnect (the broker keeps the
        session: what comes meanwhile waits there)."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._committer is not None:
            self._committer.join(timeout)
        self.client.disconnect()
        self.client.loop_stop()
        self.status.connected = False

    def describe(self) -> dict:
        return {"broker": self.broker.origin, "topics": list(self.routes), **self.status.describe()}


def routes_of(name: str, topic, stream: str | None, fmt: str) -> dict[str, str]:
    """Topic filters and their streams from a source's `topic` and `stream` settings."""
    if isinstance(topic, dict):
        routes = dict(topic)
    elif topic:
        routes = {topic: stream or ""}
    else:
        raise MqttSettingsError("source %s: mqtt needs topic, a topic filter such as \"sensors/#\"" % name)
    for topic_filter in routes:
        check_filter(topic_filter)
    if fmt != "jsonl" and not all(routes.values()):
        raise MqttSettingsError("source %s: mqtt needs stream (the stream IRI its messages feed), or topic as a "
                                "table of filters and stream IRIs; only JSON envelopes name their own stream" % name)
    return routes


def from_settings(source, quarantine: Quarantine, environ=os.environ, landed: LandedFiles | None = None,
                  max_streams: int | None = None, stored_streams: Callable[[], Iterable[str]] = tuple) -> MqttSource:
    """The MQTT source of one [[sources]] entry (kind "mqtt"), its landing directory `path`;
    MqttSettingsError naming what is wrong."""
    password = source.password
    if source.password_env:
        if source.password_env not in environ:
            raise MqttSettingsError("source %s: password_env names %s, which is not set"
                                    % (source.name, source.password_env))
        password = environ[source.password_env]
    if password is not None and source.username is None:
        raise MqttSettingsError("source %s: a password needs a username" % source.name)
    if source.ca_file and not Path(source.ca_file).is_file():
        raise MqttSettingsError("source %s: ca_file %s is not a file" % (source.name, source.ca_file))
    return MqttSource(source.name, source.broker, routes_of(source.name, source.topic, source.stream, source.format),
                      source.format, Path(source.path), quarantine, source.client_id, source.username, password,
                      source.ca_file, source.retained, landed=landed, max_streams=max_streams,
                      stored_streams=stored_streams, max_element_bytes=source.max_batch_bytes)
