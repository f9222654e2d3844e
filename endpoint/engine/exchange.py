"""One HTTP exchange bounded in time as a whole, whatever the other side does: each wait for it
at most `timeout`, and the exchange (connecting, sending, the status and headers, the body)
cut at `deadline` by shutting its socket from a timer, so that a server answering a byte now
and then cannot hold the thread that asked (a background reload, a sink's delivery). Redirects
are not followed: they could lead off an allow-list."""
from __future__ import annotations

import http.client
import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlsplit

_CHUNK = 64 * 1024


class ExchangeExpired(Exception):
    """The exchange did not end by its deadline (what came is not the whole answer)."""


class ExchangeTooLarge(Exception):
    """The answer's body is larger than the caller takes."""


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


def exchange(method: str, url: str, deadline: float, timeout: float, body: bytes | None = None,
             headers: dict | None = None, max_bytes: int | None = None, read_body: bool = True,
             monotonic: Callable[[], float] = time.monotonic) -> Answer:
    """`method` `url` (http or https) answered by `deadline` (a `monotonic` time): the status,
    headers and, with `read_body`, the body (ExchangeTooLarge past `max_bytes`). OSError and
    http.client.HTTPException for what the network or the server did, ExchangeExpired when the
    deadline cut it."""
    parts = urlsplit(url)
    target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
    left = deadline - monotonic()
    if left <= 0:
        raise ExchangeExpired("no time was left for %s" % url)
    kind = http.client.HTTPSConnection if parts.scheme.lower() == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=max(0.001, min(timeout, left)))
    expired = threading.Event()
    # The socket, kept apart: the connection lets go of it once a response that closes the
    # connection is under way (the response reads it on).
    sockets: list[socket.socket] = []

    def expire() -> None:
        expired.set()
        for sock in sockets:
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass
    watchdog = threading.Timer(left, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        connection.connect()
        sockets.append(connection.sock)
        if expired.is_set():
            raise ExchangeExpired(url)
        connection.request(method, target, body=body, headers=dict(headers or {}))
        response = connection.getresponse()
        chunks: list[bytes] = []
        if read_body:
            declared = response.getheader("Content-Length")
            if max_bytes is not None and declared and declared.isdigit() and int(declared) > max_bytes:
                raise ExchangeTooLarge(url)
            size = 0
            while True:
                chunk = response.read1(_CHUNK)
                if not chunk:
                    break
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise ExchangeTooLarge(url)
                chunks.append(chunk)
        answer = Answer(response.status, response.headers, b"".join(chunks))
    except (OSError, http.client.HTTPException):
        if expired.is_set():
            raise ExchangeExpired(url) from None
        raise
    finally:
        watchdog.cancel()
        connection.close()
    if expired.is_set():        # cut at the deadline: what came is not the whole answer
        raise ExchangeExpired(url)
    return answer
