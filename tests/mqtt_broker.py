"""A real MQTT broker for the tests: Debian's mosquitto on a free loopback port, its session
state kept on disk so that it can be stopped and started again mid-test."""
from __future__ import annotations

import getpass
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt


def mosquitto() -> str:
    found = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None)
    assert found, "the MQTT tests need Debian's mosquitto: tools/system-setup test installs it"
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    def __init__(self, directory: Path, port: int | None = None, settings: str = "", tls: bool = False):
        """`settings`: more lines of mosquitto.conf (for the listener: a password file, TLS)."""
        self.directory = directory
        self.port = port or free_port()
        self.tls = tls
        self.process: subprocess.Popen | None = None
        directory.mkdir(parents=True, exist_ok=True)
        self.config = directory / "mosquitto.conf"
        # No limit on the messages queued for a client that is away: the tests count every one.
        # As root, mosquitto would switch to its own user, who cannot write the test's folder.
        self.config.write_text("listener %d 127.0.0.1\npersistence true\n"
                               "persistence_location %s/\nmax_queued_messages 0\nautosave_interval 1\nuser %s\n%s\n"
                               % (self.port, directory, getpass.getuser(),
                                  settings or "allow_anonymous true"))

    @property
    def url(self) -> str:
        return "%s://127.0.0.1:%d" % ("mqtts" if self.tls else "mqtt", self.port)

    def start(self) -> "Broker":
        self.process = subprocess.Popen([mosquitto(), "-c", str(self.config)], stdout=subprocess.DEVNULL,
                                        stderr=open(self.directory / "mosquitto.log", "ab"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()   # TLS or not: it listens
                return self
            except OSError:
                assert self.process.poll() is None, (self.directory / "mosquitto.log").read_text()
                time.sleep(0.05)
        raise AssertionError("mosquitto did not listen on %d" % self.port)

    def stop(self) -> None:
        """Stop as an operator does (SIGTERM: the broker saves its sessions first)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(10)
        self.process = None


def client(broker: Broker, client_id: str = "", on_message=None, clean: bool = True,
           subscribe: str | None = None) -> mqtt.Client:
    """A connected paho client (its network loop running), subscribed to `subscribe` at QoS 1
    again at every connection."""
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean if client_id else True)
    if on_message is not None:
        c.on_message = on_message
    c.subscribed = threading.Event()        # set once the broker confirmed the subscription
    if subscribe is not None:
        c.on_connect = lambda c, userdata, flags, reason, properties: c.subscribe(subscribe, qos=1)
        c.on_subscribe = lambda c, userdata, mid, reasons, properties: c.subscribed.set()
    c.connect("127.0.0.1", broker.port, keepalive=30)
    c.loop_start()
    return c


def publish_all(c: mqtt.Client, topic: str, payloads: list[bytes], timeout: float = 60.0) -> None:
    """Publish at QoS 1 and wait until the broker acknowledged each."""
    infos = [c.publish(topic, payload, qos=1) for payload in payloads]
    deadline = time.monotonic() + timeout
    for info in infos:
        info.wait_for_publish(max(0.1, deadline - time.monotonic()))
        assert info.is_published(), "the broker did not acknowledge a publication"


def certificates(directory: Path) -> dict[str, Path]:
    """A test CA and a server certificate it signs for 127.0.0.1 (made with openssl)."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {name: directory / name for name in ("ca.crt", "ca.key", "server.key", "server.csr", "server.crt", "san")}
    files["san"].write_text("subjectAltName=IP:127.0.0.1\n")
    for command in (
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", files["ca.key"], "-out", files["ca.crt"],
             "-days", "1", "-subj", "/CN=rspstar test CA"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", files["server.key"], "-out", files["server.csr"],
             "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", files["server.csr"], "-CA", files["ca.crt"], "-CAkey", files["ca.key"],
             "-CAcreateserial", "-out", files["server.crt"], "-days", "1", "-extfile", files["san"]]):
        subprocess.run(["openssl", *map(str, command)], check=True, capture_output=True)
    return files


def password_file(directory: Path, user: str, password: str) -> Path:
    path = directory / "passwords"
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mosquitto_passwd", "-c", "-b", str(path), user, password], check=True, capture_output=True)
    return path
