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
from typing import Callable, Iterable
from urllib.parse import quote, unquote

from . import formats
from .codec import CANONICAL, canonical_chunks, envelope_of
from .rdf_input import XSD_DATETIME, Element

ENVELOPES = formats.by_name("jsonl")


# A file name has at most 255 bytes; an encoded stream IRI longer than this is named by a
# digest instead, with the IRI in a hidden file beside the data (Spark skips hidden files).
_MAX_ENCODED = 200
_LONG_PREFIX = "~"
_STREAM_FILE = ".stream"
# Where the elements of several streams landed together go: one file of JSON envelopes, each
# naming its stream, instead of a folder and a file (and their fsyncs) per stream. A percent-
# encoded IRI never starts with '+'.
MIXED_FOLDER = "+streams"
# The most one landing file holds (but for one element larger than that, alone in its file):
# Spark's micro-batches are bounded by the bytes of the files they take, at least one file
# each, so a landing file must be small beside that bound ([[sources]] max_batch_bytes).
LANDING_FILE_BYTES = 1 << 20
_COMMIT = ".commit"                # a group's list of hidden files, while they are revealed


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
    if folder == MIXED_FOLDER:
        return default                  # its envelopes name their streams
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

    def __init__(self, max_bytes: int | None = None, max_element_bytes: int | None = None):
        # What may wait at most ([engine] max_landed_bytes), and the largest element a landing
        # file may hold (the landing source's [[sources]] max_batch_bytes); None: no bound.
        self.max_bytes = max_bytes
        self.max_element_bytes = max_element_bytes
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

    def room_for(self, size: int) -> bool:
        """Whether `size` bytes more may wait to be stored: within `max_bytes`, or nothing waits
        (one post alone always fits)."""
        if self.max_bytes is None:
            return True
        waiting = self.bytes()
        return not waiting or waiting + size <= self.max_bytes

    def streams(self) -> set[str]:
        """The streams of the pending files."""
        with self._lock:
            return set(self._streams)

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)


class StreamBound:
    """The bound on how many streams the engine holds ([engine] max_streams; None: none): the
    streams the store holds count, and those of landing files not yet stored (`landed`)."""

    def __init__(self, limit: int | None, stored: Callable[[], Iterable[str]], landed: LandedFiles | None = None):
        self.limit = limit
        self.stored = stored
        self.landed = landed

    def beyond(self, targets: Iterable[str]) -> list[str]:
        """The streams among `targets` that would be new ones past the bound, in order."""
        if self.limit is None:
            return []
        known = set(self.stored())
        if self.landed is not None:
            known |= self.landed.streams()
        new = [t for t in dict.fromkeys(targets) if t not in known]
        return new[max(0, self.limit - len(known)):]

    def reason(self, beyond: list[str]) -> str:
        shown = ", ".join("<%s>" % stream[:200] for stream in beyond[:3])
        more = " and %d more" % (len(beyond) - 3) if len(beyond) > 3 else ""
        return ("%d new stream%s (%s%s) past the %d streams the engine holds at most ([engine] max_streams): send to "
                "streams it holds, or raise the bound" % (len(beyond), "s" * (len(beyond) != 1), shown, more,
                                                          self.limit))


@dataclass(frozen=True)
class _Pending:
    size: int
    streams: tuple[str, ...]
    names: frozenset[int]


@dataclass(frozen=True)
class Landed:
    """One landing file written by `land_elements`."""
    path: Path
    size: int
    streams: tuple[str, ...]
    names: tuple[str, ...]          # its elements' graph names


def land_elements(root: Path, by_stream: dict[str, list[Element]], name: str | None = None, header: bytes = b"",
                  mixed: bool = True, reveal_one=None, file_bytes: int = LANDING_FILE_BYTES,
                  max_element_bytes: int | None = None, oversize=None,
                  admit: Callable[[int], None] | None = None) -> list[Landed]:
    """Land elements durably, all of them or (a crash) none until the next start completes
    them: one stream's as canonical N-Quads in its folder; several streams' (`mixed`) together
    as JSON envelopes in MIXED_FOLDER, one file instead of a folder and a file per stream. Each
    file holds at most `file_bytes` (one larger element alone), headed by `header`.

    An element larger than `max_element_bytes` (what one micro-batch takes) is not landed:
    `oversize(stream, element, size)` hears of it, and may refuse the whole by raising. `admit`
    hears the bytes to be written before anything is, and may refuse them by raising."""
    name = name or uuid.uuid4().hex
    if max_element_bytes is not None:
        file_bytes = min(file_bytes, max_element_bytes)
    parts: list[tuple[str | None, bytes, list[tuple[str, Element]]]] = []
    if mixed and len(by_stream) > 1 and all(e.timestamp_literal.datatype == XSD_DATETIME
                                            for elements in by_stream.values() for e in elements):
        lines = [(envelope_of(stream, element), stream, element)
                 for stream, elements in by_stream.items() for element in elements]
        for chunk in _cut(lines, file_bytes - len(header)):
            parts.append((None, header + b"".join(line for line, _, _ in chunk), [(s, e) for _, s, e in chunk]))
        extension = ENVELOPES.extension
    else:
        for stream, elements in by_stream.items():
            for data, chunk in canonical_chunks(elements, file_bytes - len(header)):
                parts.append((stream, header + data, [(stream, e) for e in chunk]))
        extension = CANONICAL.extension
    if max_element_bytes is not None:
        kept = []
        for part in parts:
            size = len(part[1]) - len(header)
            if len(part[2]) == 1 and size > max_element_bytes:
                oversize(*part[2][0], size)
            else:
                kept.append(part)
        parts = kept
    if admit is not None:
        admit(sum(len(data) for _, data, _ in parts))
    written = []
    try:
        for k, (stream, data, _) in enumerate(parts):
            written.append(write_hidden(root, stream, data,
                                        name + ("-%04d" % k if len(parts) > 1 else "") + extension))
    except BaseException:
        discard(written)
        raise
    reveal_together(root, written, name, reveal_one)
    return [Landed(final, len(data), tuple(dict.fromkeys(s for s, _ in elements)), tuple(e.graph for _, e in elements))
            for (_, final), (_, data, elements) in zip(written, parts)]


def _cut(lines: list, limit: int) -> list[list]:
    """Consecutive lines (their first item bytes) in runs of at most `limit` bytes (a longer
    line alone)."""
    runs, run, size = [], [], 0
    for line in lines:
        if run and size + len(line[0]) > limit:
            runs.append(run)
            run, size = [], 0
        run.append(line)
        size += len(line[0])
    if run:
        runs.append(run)
    return runs


def drop_file(root: Path, stream: str, data: bytes, suffix: str) -> Path:
    """Write `data` for `stream` durably and atomically: a hidden temporary file (Spark ignores
    names starting with '.'), fsync, then rename into place."""
    tmp, final = write_hidden(root, stream, data, uuid.uuid4().hex + suffix)
    reveal(tmp, final)
    return final


def write_hidden(root: Path, stream: str | None, data: bytes, name: str) -> tuple[Path, Path]:
    """The first half of `drop_file`: `data` durably in a hidden file beside where it goes
    (the stream's folder; None: the folder of several streams' envelopes); returns (hidden,
    final). Nothing reads it until `reveal`."""
    folder = root / MIXED_FOLDER if stream is None else landing_folder(root, stream)
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


def reveal_together(root: Path, written: list[tuple[Path, Path]], name: str, reveal_one=None) -> None:
    """Reveal hidden files (`write_hidden`'s pairs) so that all of them appear or, after a
    crash, all of them at the next start (`finish_commits`): with several, a commit list naming
    them is made durable first. `reveal_one` reveals one file (`reveal`)."""
    reveal_one = reveal_one or reveal
    commit = None
    if len(written) > 1:
        commit = root / ("%s-%s" % (_COMMIT, name))
        tmp = commit.with_name("." + commit.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("".join("%s\t%s\n" % (hidden.relative_to(root), final.relative_to(root)) for hidden, final in written))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, commit)
    for hidden, final in written:
        reveal_one(hidden, final)
    if commit is not None:
        commit.unlink()


def discard(written: list[tuple[Path, Path]]) -> None:
    """Hidden files of a landing that did not happen."""
    for hidden, _ in written:
        hidden.unlink(missing_ok=True)


def finish_commits(root: Path) -> int:
    """Complete the groups a crash interrupted while their files were being revealed (all of a
    group's hidden files were durable before its commit list was written), and remove hidden
    files of groups that never reached their commit list. Returns the files revealed."""
    revealed = 0
    if not root.is_dir():
        return 0
    for commit in root.glob(_COMMIT + "-*"):
        for line in commit.read_text(encoding="utf-8").splitlines():
            hidden_name, _, final_name = line.partition("\t")
            hidden, final = root / hidden_name, root / final_name
            if hidden.exists():
                reveal(hidden, final)
                revealed += 1
        commit.unlink()
    for stray in root.glob("*/.*.tmp"):
        stray.unlink(missing_ok=True)
    return revealed


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
