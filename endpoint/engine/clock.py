"""Time as a parameter: the live engine reads a wall clock, tests and replays a virtual one,
so nothing ever sleeps to wait for a window."""
from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> int:
        """Microseconds since the Unix epoch."""


class WallClock:
    def now(self) -> int:
        return time.time_ns() // 1000


class VirtualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: int = 0):
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> int:
        # (Read without the lock: reading one attribute is atomic, and every query asks at
        # every close; moving the clock takes the lock for its check.)
        return self._now

    def set(self, instant: int) -> None:
        with self._lock:
            if instant < self._now:
                raise ValueError("a virtual clock does not go backwards")
            self._now = instant

    def advance(self, micros: int) -> int:
        with self._lock:
            self._now += micros
            return self._now
