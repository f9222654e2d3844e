"""The recordings: every element a source stored, per stream, replayable.

One N-Quads 1.2 file per stream, named by its percent-encoded IRI, each element with its
timestamp triple: whatever the source's format, a recording replays with `rspstar replay` into
the same elements. The recordings share one budget of bytes on disk: a stream's file is rotated
when it reaches an eighth of the budget (the current one becomes `.1.nq`, the older ones move
up a number), and the oldest rotated files, whichever stream they belong to, are deleted while
the total is over it. So the disk they use stops growing once the budget is reached, at any
element rate, and what is kept is the most recent history of every stream.
"""
from __future__ import annotations

import threading
from pathlib import Path
from urllib.parse import quote

from rspstar.config.schema import default

from .codec import CANONICAL, canonical
from .landing import bounded_name
from .rdf_input import Element

# A stream's file is rotated at this fraction of the budget: small enough that deleting the
# oldest file gives back little of the history, large enough that rotations are rare.
FILES_PER_BUDGET = 8


def recording_path(directory: Path, stream: str) -> Path:
    """One file per stream, named by its percent-encoded IRI (distinct streams, distinct
    files; a digest where the name would be too long)."""
    return directory / (bounded_name(quote(stream, safe="")) + CANONICAL.extension)


def rotated_path(path: Path, k: int) -> Path:
    """The k-th older recording of a stream (still an N-Quads file, so it replays as one)."""
    suffix = CANONICAL.extension
    return path.with_name("%s.%d%s" % (path.name[:-len(suffix)], k, suffix))


class Recordings:
    """Appends stored elements to their streams' recordings within `max_bytes` on disk (plus,
    at most, each stream's current file: it is never cut, so no element is half recorded).
    Safe to call from several sources' threads."""

    def __init__(self, directory: Path, max_bytes: int = default("recording.max_bytes")):
        if max_bytes <= 0:
            raise ValueError("the recordings' budget must be a positive number of bytes, got %r" % max_bytes)
        self.directory = directory
        self.max_bytes = max_bytes
        self.file_bytes = max(1, max_bytes // FILES_PER_BUDGET)
        self._lock = threading.Lock()
        # Per stream's current file, when each of its older files was rotated, oldest first
        # (the last is `.1`): the order in which the budget deletes them. Files of earlier runs
        # are ordered by their modification times, new rotations come after all of them.
        self._rotated: dict[Path, list[int]] = {}
        self._total = 0
        self._next = 1
        self._scan()

    def _scan(self) -> None:
        """Read what the folder holds (at the start, and after a failed write: the disk may be
        full, or files removed by hand)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        files = [p for p in self.directory.iterdir() if p.is_file()]
        self._total = sum(p.stat().st_size for p in files)
        self._next = max(self._next, 1 + max((p.stat().st_mtime_ns for p in files), default=0))
        self._rotated = {}
        for path in files:
            self._older(path)
        self._stale = False

    def total_bytes(self) -> int:
        return self._total

    def record(self, elements: dict[str, list[Element] | bytes]) -> None:
        """Append each stream's elements (or their `canonical` N-Quads); OSError when the
        folder cannot be written (the next call reads it afresh)."""
        with self._lock:
            try:
                self._record(elements)
            except OSError:
                self._stale = True
                raise

    def _record(self, elements: dict[str, list[Element]]) -> None:
        if self._stale:
            self._scan()
        for stream, stream_elements in elements.items():
            path = recording_path(self.directory, stream)
            data = stream_elements if isinstance(stream_elements, bytes) else canonical(stream_elements)
            with path.open("ab") as out:
                out.write(data)
                size = out.tell()
            self._total += len(data)
            # Rotated as soon as it is full, so the order of rotations is the order of
            # the files' last elements, which the budget deletes by.
            if size >= self.file_bytes:
                self._rotate(path)
        while self._total > self.max_bytes and self._drop_oldest():
            pass

    def _older(self, path: Path) -> list[int]:
        if path not in self._rotated:
            older = []
            while rotated_path(path, len(older) + 1).exists():
                older.append(rotated_path(path, len(older) + 1).stat().st_mtime_ns)
            self._rotated[path] = older[::-1]
        return self._rotated[path]

    def _rotate(self, path: Path) -> None:
        older = self._older(path)
        for k in range(len(older), 0, -1):
            rotated_path(path, k).replace(rotated_path(path, k + 1))
        path.replace(rotated_path(path, 1))
        older.append(self._next)
        self._next += 1

    def _drop_oldest(self) -> bool:
        """Delete the oldest rotated file of any stream; False when there is none."""
        candidates = [(older[0], current) for current, older in self._rotated.items() if older]
        if not candidates:
            return False
        _, current = min(candidates)
        oldest = rotated_path(current, len(self._rotated[current]))
        self._total -= oldest.stat().st_size
        oldest.unlink()
        self._rotated[current].pop(0)
        return True
