"""The disk the data directory is on: how much is free, a floor below which writes are refused
before the store or a landing file fails half-way, and the one error a full disk is."""
from __future__ import annotations

import errno
import shutil
from pathlib import Path

from .errors import DiskFull


class DiskGuard:
    """Writes go ahead while the data directory's disk has at least `min_free` bytes free."""

    def __init__(self, path: Path, min_free: int):
        self.path = path
        self.min_free = min_free

    def free(self) -> int:
        return shutil.disk_usage(self.path).free

    @property
    def ok(self) -> bool:
        return self.free() >= self.min_free

    def check(self, what: str) -> None:
        """DiskFull when the disk is below the floor: `what` is refused before it starts."""
        free = self.free()
        if free < self.min_free:
            raise DiskFull("%s refused: the data directory's disk has %d bytes free, below the %d the engine keeps "
                           "([engine] min_free_disk); free some space" % (what, free, self.min_free))

    def describe(self) -> dict:
        free = self.free()
        return {"path": str(self.path), "free_bytes": free, "min_free_bytes": self.min_free,
                "ok": free >= self.min_free}


def raise_if_full(error: OSError, what: str) -> None:
    """A write that failed for want of space is a DiskFull naming it; any other OSError is left."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        raise DiskFull("%s failed: no space left on the data directory's disk" % what) from error
