"""Publishing a query's results to an MQTT topic (a sink URL `mqtt://host:port/topic`): one
connected client per broker, QoS 1, each record confirmed by the broker before the outbox moves
on, so the outbox's order and its retry after an outage hold as for HTTP sinks."""
from __future__ import annotations

import logging
import threading
import uuid
from urllib.parse import unquote, urlsplit

from rspstar.store.mqtt import Broker, MqttSettingsError, paho, parse_broker

from .errors import EndpointError

log = logging.getLogger(__name__)
PUBLISH_TIMEOUT = 5.0                  # seconds the broker has to confirm a record
FIRST_CONNECT_SECONDS = 2.0


class DeliveryError(EndpointError):
    """A record that did not reach its sink this time (it stays in the outbox)."""


def topic_of(url: str) -> str:
    """The topic of an MQTT sink URL: its path, without wildcards. DeliveryError otherwise."""
    parts = urlsplit(url)
    topic = unquote(parts.path[1:])
    if not topic or "#" in url or parts.query or "+" in topic or "\x00" in topic or len(topic.encode("utf-8")) > 65535:
        raise DeliveryError("MQTT sink %r: the path is the topic results go to, e.g. mqtt://host:1883/results "
                            "(no '+' or '#', no query)" % url)
    return topic


def broker_of(url: str) -> Broker:
    parts = urlsplit(url)
    try:
        return parse_broker("%s://%s" % (parts.scheme, parts.netloc))
    except MqttSettingsError as e:
        raise DeliveryError(str(e)) from None


class Publisher:
    """One connection to one broker, kept up in the background (reconnecting with back-off)."""

    def __init__(self, broker: Broker):
        self.broker = broker
        mqtt = paho()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="rspstar-sink-" + uuid.uuid4().hex[:12])
        if broker.tls:
            self.client.tls_set()
        self.client.reconnect_delay_set(1, 60)
        self.last_error: str | None = None
        connected = threading.Event()
        self.client.on_connect = lambda client, userdata, flags, reason, properties: connected.set()
        self.client.on_connect_fail = lambda client, userdata: self._failed("cannot reach the broker")
        self.client.on_disconnect = lambda client, userdata, flags, reason, properties: self._failed(
            "disconnected: %s" % reason)
        self.client.connect_async(broker.host, broker.port, keepalive=30)
        self.client.loop_start()
        # The first record need not wait for a retry: give the connection a moment.
        connected.wait(FIRST_CONNECT_SECONDS)

    def _failed(self, why: str) -> None:
        self.last_error = why

    def publish(self, topic: str, body: bytes) -> None:
        if not self.client.is_connected():
            raise DeliveryError("not connected to the broker at %s%s" % (
                self.broker.origin, " (%s)" % self.last_error if self.last_error else ""))
        info = self.client.publish(topic, body, qos=1)
        try:
            info.wait_for_publish(PUBLISH_TIMEOUT)
        except (RuntimeError, ValueError) as e:
            raise DeliveryError("%s: %s" % (self.broker.origin, e)) from None
        if not info.is_published():
            raise DeliveryError("the broker at %s did not confirm within %g s" % (self.broker.origin, PUBLISH_TIMEOUT))

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


class MqttPublishers:
    """An engine's connections to the brokers its MQTT sinks publish to (sinks.MqttSink), one
    per broker, made when its first record comes."""

    def __init__(self):
        self._publishers: dict[str, Publisher] = {}
        self._lock = threading.Lock()

    def publish(self, url: str, body: bytes) -> None:
        """Publish `body` to the topic of a sink URL `mqtt://host:port/topic` (DeliveryError
        when the broker did not confirm it)."""
        broker = broker_of(url)
        topic = topic_of(url)
        with self._lock:
            publisher = self._publishers.get(broker.origin)
            if publisher is None:
                publisher = self._publishers[broker.origin] = Publisher(broker)
        publisher.publish(topic, body)

    def close(self) -> None:
        with self._lock:
            publishers, self._publishers = list(self._publishers.values()), {}
        for publisher in publishers:
            publisher.close()
