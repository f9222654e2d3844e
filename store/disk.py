"""The disk the data directory is on: how much is free, a floor below which writes are refused
before the store or a landing file fails half-way, and the one error a full disk is.

The floor keeps room for what was acknowledged as well: a landing file is stored later, by the
batch writer, and storing takes several times its size on disk (the store's write-ahead log
holds every index's copy of each quad until a flush, and the stream's recording holds it again):
INGEST_FACTOR times the landing files not yet stored is reserved beside `min_free`
(bench/out/NOTES.md#landing-reserve). A write straight to the store (the graph store's) is
counted the same way, by its triples as N-Quads, not by its body: Turtle's prefixes make a body
several times smaller than what the store writes of it."""
from __future__ import annotations

import errno
import shutil
from pathlib import Path

from .errors import DiskFull
from .landing import LandedFiles

INGEST_FACTOR = 10


class DiskGuard:
    """Writes go ahead while the data directory's disk has at least `min_free` bytes free
    beyond what storing the acknowledged landing files (`landed`) will take, and the store takes
    writes (`store`: its generations, read-only after a full disk until it has room again)."""

    def __init__(self, path: Path, min_free: int, landed: LandedFiles | None = None, store=None):
        self.path = path
        self.min_free = min_free
        self.landed = landed if landed is not None else LandedFiles()
        self.store = store

    def free(self) -> int:
        return shutil.disk_usage(self.path).free

    def reserved(self) -> int:
        """Bytes that storing the landing files acknowledged and not yet stored will take."""
        return INGEST_FACTOR * self.landed.bytes()

    @property
    def ok(self) -> bool:
        return self.free() - self.reserved() >= self.min_free

    def check(self, what: str, incoming: int = 0) -> None:
        """DiskFull when the disk is below the floor: `what` is refused before it starts.
        `incoming`: bytes `what` would land or store, as N-Quads, whose storing takes room too
        (INGEST_FACTOR times). A floor of 0 checks nothing (writes go on until one meets the full
        disk). A read-only store (it met a full disk) refuses every write, saying what it needs."""
        refusal = self.store.refusal() if self.store is not None else None
        if refusal is not None:
            raise DiskFull("%s refused: %s" % (what, refusal))
        if not self.min_free:
            return
        free, reserved = self.free(), self.reserved() + INGEST_FACTOR * incoming
        if free - reserved < self.min_free:
            if reserved:
                raise DiskFull(
                    "%s refused: the data directory's disk has %d bytes free, %d of them reserved for storing what "
                    "was acknowledged and not yet stored (%d bytes landed, this request's included, times %d), "
                    "leaving less than the %d the engine keeps ([engine] min_free_disk); free some space or wait "
                    "for ingestion" % (what, free, reserved, reserved // INGEST_FACTOR, INGEST_FACTOR, self.min_free))
            raise DiskFull("%s refused: the data directory's disk has %d bytes free, below the %d the engine keeps "
                           "([engine] min_free_disk); free some space" % (what, free, self.min_free))

    def describe(self) -> dict:
        free, reserved = self.free(), self.reserved()
        described = {"path": str(self.path), "free_bytes": free, "reserved_bytes": reserved,
                     "min_free_bytes": self.min_free, "ok": free - reserved >= self.min_free}
        if self.store is not None:
            refusal = self.store.refusal(retry=False)
            described["store"] = {"writable": refusal is None, "needs_bytes": self.store.needs(),
                                  "message": refusal}
            described["ok"] = described["ok"] and refusal is None
        return described


def is_disk_full(error: OSError) -> bool:
    """Whether an OSError is the want of space: by its number, or by its words (Oxigraph's
    errors carry no number: "IO error: No space left on device: ...")."""
    return error.errno in (errno.ENOSPC, errno.EDQUOT) or any(
        words in str(error) for words in ("No space left on device", "Disk quota exceeded"))


def raise_if_full(error: OSError, what: str) -> None:
    """A write that failed for want of space is a DiskFull naming it; any other OSError is left."""
    if is_disk_full(error):
        raise DiskFull("%s failed: no space left on the data directory's disk" % what) from error
