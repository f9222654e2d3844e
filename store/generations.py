"""The Oxigraph store itself, in memory or on disk in generations, and its rebuilds.

On disk the store lives in `path/gen-N`, `path/CURRENT` naming the live one. A rebuild writes
gen-N+1, then switches CURRENT atomically; a crash before the switch leaves the old generation
live, and leftovers are removed on the next open. Every write goes through `write`, so that
writes made while a rebuild copies the store can be replayed onto the copy.

A full disk: Oxigraph refuses every write after one failed for want of space, space or not,
until the store is opened again, and opening it for writing writes too (it cannot be opened on a
full disk). So a store that met a full disk, or could not be opened for writing at all, is open
read-only (queries answer from what it holds; nothing it held is lost: a failed write is one
transaction that left nothing), and is opened for writing again, in place, at a write once the
disk has the room that takes: little beside a rebuild's copy of everything."""
from __future__ import annotations

import errno
import gc
import logging
import shutil
import threading
import time
import weakref
from pathlib import Path

import pyoxigraph as ox

from .disk import is_disk_full
from .errors import StoreError
from .landing import replace_text

log = logging.getLogger(__name__)
# A read-only store is tried for writing again at most this often (a write, or the disk's
# check of every write request, asks).
REOPEN_SECONDS = 1.0
# Room opening a store for writing takes beyond its write-ahead log (written again as tables
# at the open, before the log is let go): a new manifest and options files. An open that does
# not fit leaves its tables half-written behind, so it is not tried with less
# (bench/out/NOTES.md#store-reopen).
OPEN_BYTES = 4 << 20
# Quads written (added or removed) since the last flush past which an on-disk store is flushed
# again after a change of its background (flush_soon), on a thread of its own: a read-only view (what a worker process reads through: every
# /sparql query, every isolated evaluation) replays the write-ahead log past the last flush
# when it opens, in time growing with every quad written, and only a flush cuts it: a large
# write and its removal made every read through a view take seconds
# (bench/out/NOTES.md#unflushed-writes).
FLUSH_AFTER_QUADS = 10_000
# What a quad weighs as N-Quads, about: a load of that many bytes counts as one quad written.
LOADED_BYTES_PER_QUAD = 100


class Generations:
    def __init__(self, path: str | None):
        self.path = path
        self._generation = 0
        # Why the store is open read-only (None: it takes writes), and when it was last tried
        # for writing again.
        self.read_only: str | None = None
        self._tried = 0.0
        self.current = self._open() if path else ox.Store()
        self._journal: list | None = None         # writes made while a rebuild copies
        # Writes applied so far: a read-only view opened after the nth write holds all n
        # (store/isolation.py keeps a view while this stays the same).
        self.writes = 0
        # Held by every write and by a rebuild's snapshot and switch: a write that runs without
        # its owner's lock (a replay writing a document part by part) still lands in the store
        # a rebuild copies, or in its journal.
        self._writing = threading.Lock()
        self.compactions: list[float] = []       # seconds each rebuild held the store
        # Quads written since the last flush (an estimate: see _weight), the flushes made because
        # of them, and the thread that makes them (started at the first).
        self.unflushed = 0
        self.flushes = 0
        self._flusher: _Flusher | None = None

    def _open(self) -> ox.Store:
        root = Path(self.path)
        root.mkdir(parents=True, exist_ok=True)
        current = root / "CURRENT"
        self._generation = int(current.read_text().strip()) if current.exists() else 1
        for leftover in root.glob("gen-*"):
            if leftover.name != "gen-%d" % self._generation:
                shutil.rmtree(leftover, ignore_errors=True)
        location = str(root / ("gen-%d" % self._generation))
        try:
            return ox.Store(location)
        except OSError as e:
            if not is_disk_full(e):
                raise
            # The engine starts all the same: it answers from what the store holds, and says
            # what it needs (the disk's check, /health).
            store = ox.Store.read_only(location)
            self._refuse_writes(e, "could not be opened for writing")
            return store

    def _refuse_writes(self, error: OSError, what: str) -> None:
        self.read_only = ("the store (%s) %s: %s; it is open read-only: queries answer from what it holds, and "
                          "writes are refused until the disk it is on has about %d bytes free; free space there and "
                          "writes resume by themselves" % (self.location(), what, _first_line(error), self.needs()))
        log.error(self.read_only)

    def needs(self) -> int:
        """About the free space opening the store for writing takes."""
        if self.path is None:
            return 0
        directory = Path(self.location())
        logs = sum(f.stat().st_size for f in directory.glob("*.log") if f.is_file()) if directory.is_dir() else 0
        return logs + OPEN_BYTES

    def free(self) -> int:
        return shutil.disk_usage(self.path).free if self.path is not None else 0

    def refusal(self, retry: bool = True) -> str | None:
        """Why writes are refused now (None: they are taken); with `retry`, a read-only store is
        tried for writing again first when the disk has the room (which replays its log: not
        for a mere look, such as /health's)."""
        if self.read_only is None or not retry:
            return self.read_only
        with self._writing:
            self._reopen()
            return self.read_only

    def write(self, operation: str, *args) -> None:
        """Apply a write and journal it while a rebuild copies."""
        with self._writing:
            if self.read_only is not None and self._reopen() is not True:
                raise OSError(errno.ENOSPC, self.read_only)
            full = None
            try:
                _apply(self.current, operation, args)
            except OSError as e:
                if self.path is None or not is_disk_full(e):
                    raise
                full = OSError(errno.ENOSPC, _first_line(e))
            finally:
                self.writes += 1
            if full is not None:
                # Raised anew, outside the handler: the failure's traceback holds the instance
                # that failed (a frame's argument), and whoever keeps the exception (Spark's
                # foreachBatch keeps the last) would keep its lock, and the store read-only.
                self._after_full_disk(full)
                raise full
            if self._journal is not None:
                self._journal.append((operation, args))
            if self.path is not None:
                self.unflushed += _weight(operation, args)

    def flush_soon(self) -> None:
        """Have the flush thread flush the store once FLUSH_AFTER_QUADS quads were written since
        its last flush. Asked after a change of the background (a graph store write, an update,
        a reload), not after a stream's writes: a flush makes Oxigraph compact its files
        sooner, and a compaction removes files a worker's read-only view may be reading, which
        a stream's micro-batches, flushed as they came, did every few seconds."""
        with self._writing:
            if self.path is None or self.unflushed < FLUSH_AFTER_QUADS:
                return
            if self._flusher is None:
                self._flusher = _Flusher(self)
        self._flusher.wake()

    def flush(self) -> bool:
        """Flush an on-disk store's writes (what a read-only view then reads without replaying
        them); whether it did. Called off the writers' threads (_Flusher), holding the lock
        writers take, so that no rebuild switches the store and removes its directory while it
        is flushed (a writer waits for the flush, which writes what one memory table holds; no
        reader waits). A store open read-only is left as it is."""
        with self._writing:
            store, unflushed = self.current, self.unflushed
            if self.path is None or self.read_only is not None or not isinstance(store, ox.Store) or not unflushed:
                return False
            self.unflushed = 0
            try:
                store.flush()
            except OSError as e:
                # A full disk, say: tried again after the next writes (a write that meets it
                # opens the store read-only, as any does).
                self.unflushed += unflushed
                log.warning("the store's writes could not be flushed: %s", _first_line(e))
                return False
        self.flushes += 1
        return True

    def _after_full_disk(self, error: OSError) -> None:
        """A write failed for want of space: Oxigraph refuses every later one until the store is
        opened again. Read-only meanwhile, which lets go of the instance that holds its lock."""
        self._refuse_writes(error, "met a full disk")
        try:
            self.current = ox.Store.read_only(self.location())
        except OSError as e:     # reads go on through the instance that failed
            log.error("the store could not be opened read-only either (%s)", _first_line(e))
        self._tried = time.monotonic()

    def _reopen(self):
        """Open a read-only store for writing again, in place, when the disk has the room (at
        most every REOPEN_SECONDS): True once it takes writes, False while it cannot, "held"
        when something of this process still holds the instance that failed (its lock)."""
        now = time.monotonic()
        if now - self._tried < REOPEN_SECONDS:
            return False
        self._tried = now
        if self.free() < self.needs():
            return False
        gc.collect()       # an instance nothing refers to any more lets go of the lock now
        try:
            store = ox.Store(self.location())
        except OSError as e:
            if is_disk_full(e):
                return False
            log.warning("the store cannot be opened for writing yet: %s", _first_line(e))
            return "held"
        self.current = store
        self.read_only = None
        log.warning("the store takes writes again")
        return True

    def recover(self, lock: threading.RLock) -> bool:
        """After a failed write: a read-only store opened for writing again in place (little
        room), else (another failure, or an instance still held) rebuilt into a new generation,
        as before. Whether writes are taken again."""
        if self.path is not None:
            with lock, self._writing:
                if self.read_only is not None:
                    self._tried = 0.0
                    reopened = self._reopen()
                    if reopened != "held":
                        return reopened
        if self.rebuild(lock) is None:
            return False
        return True

    def rebuild(self, lock: threading.RLock) -> float | None:
        """Rebuild the store from its live content: an in-memory store never gives back the
        memory of removed quads and an on-disk one's logs grow until reopened, so under steady
        insert/evict churn this is what keeps memory and disk bounded.

        The copy reads a snapshot without holding `lock`; writes made meanwhile are journaled
        and replayed onto the copy, so writers and readers only wait for that replay and the
        switch. Returns the seconds `lock` was held for them, or None when a rebuild was
        already under way (this one is not done)."""
        with lock, self._writing:
            if self._journal is not None:
                return None
            # Serialised and parsed again by Oxigraph outside Python's lock: a copy through
            # Python objects held every other thread back for its whole length. Only the
            # serialising holds `lock` (the copy is the store as the journal starts).
            snapshot = self.current.dump(format=ox.RdfFormat.N_QUADS)
            if self.path is None:
                fresh = ox.Store()
            else:
                generation = self._generation + 1
                try:
                    fresh = ox.Store(str(Path(self.path) / ("gen-%d" % generation)))
                except OSError:     # no room for even an empty store: nothing started, nothing left
                    shutil.rmtree(Path(self.path) / ("gen-%d" % generation), ignore_errors=True)
                    raise
            # Set once the copy exists: a failure before it left no journal behind (which
            # would have kept every later write journaled and every later rebuild refused).
            self._journal = []
        try:
            fresh.bulk_load(snapshot, format=ox.RdfFormat.N_QUADS)
        except BaseException:
            with lock, self._writing:
                self._journal = None
            if self.path is not None:       # a copy that did not fit (a full disk) gives its space back
                fresh = None
                shutil.rmtree(Path(self.path) / ("gen-%d" % generation), ignore_errors=True)
            raise
        del snapshot
        with lock, self._writing:
            if any(_names_blank_node(args) for operation, args in self._journal if operation in ("add", "remove")):
                # The copy's blank nodes are new ones (a parse names them afresh): a write of
                # the old store's blank nodes would miss them there. Not rebuilt this time.
                self._journal = None
                return None
            started = time.perf_counter()
            for operation, args in self._journal:
                _apply(fresh, operation, args)
            self._journal = None
            if self.path is not None:
                fresh.flush()
                self.unflushed = 0
                root = Path(self.path)
                replace_text(root / "CURRENT", str(generation))
                old_directory = root / ("gen-%d" % self._generation)
                self._generation = generation
            self.current = fresh
            self.read_only = None
            if self.path is not None:
                shutil.rmtree(old_directory, ignore_errors=True)
            held = time.perf_counter() - started
            self.compactions.append(held)
            return held

    def location(self) -> str | None:
        """Where the live generation is on disk (None in memory): another process may open it
        read-only there."""
        return None if self.path is None else str(Path(self.path) / ("gen-%d" % self._generation))

    def disk_bytes(self) -> int:
        if self.path is None:
            return 0
        return sum(f.stat().st_size for f in Path(self.path).rglob("*") if f.is_file())

    def close(self) -> None:
        """Flush and release the store (an on-disk store's lock goes with it); anything that
        still uses it afterwards gets StoreError."""
        if self._flusher is not None:
            self._flusher.stop()
        with self._writing:
            if isinstance(self.current, ox.Store):
                if self.path and self.read_only is None:
                    self.current.flush()
                self.current = _Closed()


class _Flusher:
    """The thread that flushes a store once its writes since the last flush pass
    FLUSH_AFTER_QUADS: off the writer's thread (a request, a micro-batch), which never waits for
    it. Wakes coming while it flushes make one flush more at most."""

    def __init__(self, generations: Generations):
        self._wanted = threading.Event()
        # Not held by the thread: a store nobody holds any more is let go (its lock with it), and
        # the thread ends.
        self._generations = weakref.ref(generations, lambda _: self._wanted.set())
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="store-flush", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wanted.set()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            if self._stopping:
                return
            self._wanted.clear()
            generations = self._generations()
            if generations is None:
                return
            try:
                generations.flush()
            except Exception:      # the thread outlives any failure: the next writes wake it again
                log.exception("the store's flush failed")
            del generations

    def stop(self) -> None:
        self._stopping = True
        self._wanted.set()
        self._thread.join()


def _weight(operation: str, args: tuple) -> int:
    """About how many quads a write adds or removes: what it leaves in the write-ahead log."""
    if operation == "extend":
        return len(args[0]) if hasattr(args[0], "__len__") else 1
    if operation == "load":
        return max(1, len(args[0]) // LOADED_BYTES_PER_QUAD)
    return 1


def _names_blank_node(args: tuple) -> bool:
    quad = args[0]
    terms = [quad.subject, quad.object]
    while terms:
        term = terms.pop()
        if isinstance(term, ox.BlankNode):
            return True
        if isinstance(term, ox.Triple):
            terms += [term.subject, term.object]
    return isinstance(quad.graph_name, ox.BlankNode)


def _apply(store: ox.Store, operation: str, args: tuple) -> None:
    if operation == "load":
        data, fmt, to_graph = args
        store.load(data, fmt, to_graph=to_graph)
    else:
        getattr(store, operation)(*args)


def _first_line(error: OSError) -> str:
    return str(error).split("\n")[0][:300]


class _Closed:
    def __getattr__(self, name):
        raise StoreError("the store is closed")
