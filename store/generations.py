"""The Oxigraph store itself, in memory or on disk in generations, and its rebuilds.

On disk the store lives in `path/gen-N`, `path/CURRENT` naming the live one. A rebuild writes
gen-N+1, then switches CURRENT atomically; a crash before the switch leaves the old generation
live, and leftovers are removed on the next open. Every write goes through `write`, so that
writes made while a rebuild copies the store can be replayed onto the copy."""
from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pyoxigraph as ox

from .errors import StoreError
from .landing import replace_text


class Generations:
    def __init__(self, path: str | None):
        self.path = path
        self._generation = 0
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

    def _open(self) -> ox.Store:
        root = Path(self.path)
        root.mkdir(parents=True, exist_ok=True)
        current = root / "CURRENT"
        self._generation = int(current.read_text().strip()) if current.exists() else 1
        for leftover in root.glob("gen-*"):
            if leftover.name != "gen-%d" % self._generation:
                shutil.rmtree(leftover, ignore_errors=True)
        return ox.Store(str(root / ("gen-%d" % self._generation)))

    def write(self, operation: str, *args) -> None:
        """Apply a write and journal it while a rebuild copies."""
        with self._writing:
            try:
                _apply(self.current, operation, args)
            finally:
                self.writes += 1
            if self._journal is not None:
                self._journal.append((operation, args))

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
                root = Path(self.path)
                replace_text(root / "CURRENT", str(generation))
                old_directory = root / ("gen-%d" % self._generation)
                self._generation = generation
            self.current = fresh
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
        with self._writing:
            if isinstance(self.current, ox.Store):
                if self.path:
                    self.current.flush()
                self.current = _Closed()


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


class _Closed:
    def __getattr__(self, name):
        raise StoreError("the store is closed")
