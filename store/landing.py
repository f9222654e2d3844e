"""Files: the landing directory of a files source (where files are dropped for Spark to pick
up), what of it is acknowledged and not yet stored, and the small helpers every file the engine
writes goes through."""
from __future__ import annotations

import hashlib
import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable
from urllib.parse import quote, unquote


# A file name has at most 255 bytes; an encoded stream IRI longer than this is named by a
# digest instead, with the IRI in a hidden file beside the data (Spark skips hidden files).
_MAX_ENCODED = 200
_LONG_PREFIX = "~"
_STREAM_FILE = ".stream"


def landing_folder(root: Path, stream: str) -> Path:
    """Where files for `stream` go: a subfolder named by the percent-encoded stream IRI, or by
    its digest when that is too long for a file name (files directly in the root belong to the
    source's own stream)."""
    encoded = quote(stream, safe="")
    if len(encoded) <= _MAX_ENCODED:
        return root / encoded
    return root / (_LONG_PREFIX + hashlib.sha256(stream.encode("utf-8")).hexdigest()[:40])


def stream_of_landing_file(root: Path, path: Path, default: str) -> str:
    try:
        relative = path.resolve().relative_to(root.resolve())
    except ValueError:
        return default
    if len(relative.parts) < 2:
        return default
    folder = relative.parts[0]
    if folder.startswith(_LONG_PREFIX):
        return (root / folder / _STREAM_FILE).read_text(encoding="utf-8")
    return unquote(folder)


class LandedFiles:
    """Landing files acknowledged (a post answered 202, an MQTT message acknowledged) and not
    yet stored by the batch writer: storing them takes disk later, which the disk's floor keeps
    room for (store.disk), and the graph names and streams they hold are taken already, though
    the store does not hold them yet (a post naming them again is answered as a duplicate, a
    stream counts against the bound on streams). Counted from the engine's start: files landed
    before a restart are stored by the first micro-batches after it."""

    def __init__(self):
        self._pending: dict[str, _Pending] = {}
        # The graph names of the pending files, as hashes: a set of small ints costs a fraction
        # of the names' strings, and a false match (two names of one hash) is one refused post
        # in billions, which says why.
        self._names: set[int] = set()
        self._streams: dict[str, int] = {}       # stream -> pending files holding it
        self._lock = threading.Lock()

    @staticmethod
    def _key(path) -> str:
        return os.path.realpath(path)

    def claim(self, names: Iterable[str]) -> list[str]:
        """Take these graph names for a landing under way, unless one is pending already: then
        nothing is taken and those are returned."""
        names = list(names)
        hashes = [hash(name) for name in names]
        with self._lock:
            taken = [name for name, h in zip(names, hashes) if h in self._names]
            if not taken:
                self._names.update(hashes)
            return taken

    def release(self, names: Iterable[str]) -> None:
        """Names claimed for a landing that did not happen."""
        with self._lock:
            self._names.difference_update(hash(name) for name in names)

    def landed(self, path: Path, size: int, streams: Iterable[str] = (), names: Iterable[str] = ()) -> None:
        """`path` is acknowledged: `size` bytes to store, holding elements of `streams`, and
        the claimed `names`, which are let go once it is stored."""
        pending = _Pending(size, tuple(dict.fromkeys(streams)), frozenset(hash(name) for name in names))
        with self._lock:
            self._forget(self._key(path))
            self._pending[self._key(path)] = pending
            for stream in pending.streams:
                self._streams[stream] = self._streams.get(stream, 0) + 1

    def stored(self, origins: Iterable[str]) -> None:
        """The files a micro-batch read (its rows' origins) are stored."""
        keys = {self._key(origin) for origin in origins}
        with self._lock:
            for key in keys:
                self._forget(key)

    def _forget(self, key: str) -> None:
        pending = self._pending.pop(key, None)
        if pending is None:
            return
        self._names.difference_update(pending.names)
        for stream in pending.streams:
            left = self._streams[stream] - 1
            if left:
                self._streams[stream] = left
            else:
                del self._streams[stream]

    def bytes(self) -> int:
        with self._lock:
            return sum(p.size for p in self._pending.values())

    def streams(self) -> set[str]:
        """The streams of the pending files."""
        with self._lock:
            return set(self._streams)

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)


@dataclass(frozen=True)
class _Pending:
    size: int
    streams: tuple[str, ...]
    names: frozenset[int]


def drop_file(root: Path, stream: str, data: bytes, suffix: str) -> Path:
    """Write `data` for `stream` durably and atomically: a hidden temporary file (Spark ignores
    names starting with '.'), fsync, then rename into place."""
    tmp, final = write_hidden(root, stream, data, uuid.uuid4().hex + suffix)
    reveal(tmp, final)
    return final


def write_hidden(root: Path, stream: str, data: bytes, name: str) -> tuple[Path, Path]:
    """The first half of `drop_file`: `data` durably in a hidden file beside where it goes;
    returns (hidden, final). Nothing reads it until `reveal`."""
    folder = landing_folder(root, stream)
    folder.mkdir(parents=True, exist_ok=True)
    if folder.name.startswith(_LONG_PREFIX) and not (folder / _STREAM_FILE).exists():
        replace_text(folder / _STREAM_FILE, stream)
    tmp = folder / ("." + name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)         # a failed write leaves nothing behind
        raise
    return tmp, folder / name


def reveal(hidden: Path, final: Path) -> None:
    """The second half of `drop_file`: rename into place, durably."""
    os.replace(hidden, final)
    directory = os.open(final.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def replace_text(path: Path, text: str) -> None:
    """Replace a small bookkeeping file whole: readers see the old content or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def file_safe(text: str) -> str:
    """`text` as a file name: other characters than letters, digits, '-', '_' and '.' become
    '_'; a long name is cut and keeps a digest of the whole, so names stay distinct."""
    return bounded_name("".join(c if c.isalnum() or c in "-_." else "_" for c in text), text, 100)


def bounded_name(name: str, whole: str | None = None, limit: int = _MAX_ENCODED) -> str:
    """`name` if it has at most `limit` characters, else its first part and a digest of
    `whole` (the name itself by default), which keeps names distinct."""
    if len(name) <= limit:
        return name
    return name[:limit - 20] + "-" + hashlib.blake2b((whole or name).encode(), digest_size=8).hexdigest()
