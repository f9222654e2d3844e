"""The request bodies processed at once, bounded by their bytes, and the memory they took given
back once processed.

A body costs several times its size while it is read into stream elements or updates (text,
lines, quads as Python objects; bench/out/NOTES.md#figures-from-comments). The budget
(`[http] body_budget`) bounds the bytes of bodies processed at once, so the memory they take
is bounded whatever the number of clients: a body that does not fit waits a moment for others
to finish and is then answered 503 with Retry-After. A body alone always fits, up to
`max_body`, so a budget smaller than `max_body` slows large posts but never refuses them all.

The C allocator keeps memory freed for the process to reuse rather than giving it back to the
system: after a large body it is asked to give back what is free (`rspstar.endpoint.allocator`),
so the resident size returns to about where it was.
"""
from __future__ import annotations

import threading
from typing import Callable

from flask import Flask, current_app, g, request

from .errors import BodiesInFlight
from ..allocator import trimmer

# A body from this size on is worth giving memory back after: the allocator's trim costs
# milliseconds, a small body's memory is reused by the next request anyway.
TRIM_FROM_BYTES = 1 << 20
# How long a body waits for room in the budget before it is answered 503: long enough for a
# large body before it to finish, short enough not to hold a worker thread.
WAIT_SECONDS = 2.0


class BodyBudget:
    """At most `limit` bytes of bodies processed at once (one body alone always is)."""

    def __init__(self, limit: int, wait: float = WAIT_SECONDS, trim: Callable[[], object] | None = None):
        self.limit = limit
        self._wait = wait
        self._trim = trim or trimmer()
        self._in_use = 0
        self._room = threading.Condition()
        self.refused = 0

    def take(self, size: int) -> None:
        with self._room:
            fits = self._room.wait_for(lambda: self._in_use == 0 or self._in_use + size <= self.limit, self._wait)
            if not fits:
                self.refused += 1
                raise BodiesInFlight("%d bytes of request bodies are being processed, the most this server takes "
                                     "at once ([http] body_budget = %d): retry in a few seconds"
                                     % (self._in_use, self.limit))
            self._in_use += size

    def give_back(self, size: int) -> None:
        with self._room:
            self._in_use -= size
            self._room.notify_all()
        if size >= TRIM_FROM_BYTES:
            self._trim()

    @property
    def in_use(self) -> int:
        with self._room:
            return self._in_use


def body() -> bytes:
    """The request's body, its bytes taken from the app's budget until the request is answered
    (once per request, however often it is read)."""
    size = request.content_length or 0
    if size and "body_bytes" not in g:
        current_app.extensions["rspstar"].body_budget.take(size)
        g.body_bytes = size
    return request.get_data()


def attach(app: Flask) -> None:
    """A request that read its body gives its bytes back to the budget once answered (its
    response sent, or failed)."""

    @app.teardown_request
    def _give_back(_error):
        size = g.pop("body_bytes", 0)
        if size:
            app.extensions["rspstar"].body_budget.give_back(size)
