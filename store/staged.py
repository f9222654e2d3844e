"""An element written to the store and not yet published, and the background write of a
document part that may still hold it."""
from __future__ import annotations

import itertools
import operator
import threading
from typing import Iterable, NamedTuple

import pyoxigraph as ox

from .errors import StoreError


class StagedElement(NamedTuple):
    """An element written to the store and not yet published to its stream's index."""

    graph: str
    timestamp: int
    # The predicate and literal of its timestamp triple as stored, to remove it with the element.
    # The triple itself is built again then: building one per element on the way in cost more
    # than the rest of reading a document's timestamps (bench/replay_throughput.py).
    stamp: tuple[ox.NamedNode, ox.Literal]
    # The part of a document still being written that holds it (the last one, when the
    # element is in several), or None when it is written already.
    written: "PartWrite | None" = None


class StagedColumns(NamedTuple):
    """Staged elements as columns, in time order (ties in the order they were read): what
    StagedElement holds, one list per field. A replay holds every element of its files from
    staging until the clock reaches it, and Python's full collections walk every staged
    element object held (a tuple subclass is never untracked), not a list of strings or
    numbers (bench/out/NOTES.md#replay-collections)."""

    graphs: list[str]
    timestamps: list[int]
    stamps: list
    writes: list

    @classmethod
    def of(cls, elements: Iterable[StagedElement]) -> "StagedColumns":
        """The columns of staged elements, in the order given."""
        columns = tuple(map(list, zip(*elements)))
        return cls(*columns) if columns else cls([], [], [], [])

    @classmethod
    def merged(cls, parts: list["StagedColumns"]) -> "StagedColumns":
        """Several documents' columns as one, in time order (ties in the order of `parts`)."""
        if len(parts) == 1:
            return parts[0]
        merged = cls(*(list(itertools.chain.from_iterable(column)) for column in zip(*parts))) if parts \
            else cls([], [], [], [])
        return merged.in_time_order()

    def in_time_order(self) -> "StagedColumns":
        """These columns sorted by timestamp (a stable sort; themselves when they already are)."""
        timestamps = self.timestamps
        if all(map(operator.le, timestamps, timestamps[1:])):
            return self
        order = sorted(range(len(timestamps)), key=timestamps.__getitem__)
        return StagedColumns(*(list(map(column.__getitem__, order)) for column in self))

    def elements(self, start: int = 0, end: int | None = None) -> list[StagedElement]:
        """The staged elements from `start` to `end` (all of them by default)."""
        return list(map(tuple.__new__, itertools.repeat(StagedElement),
                        zip(*(column[start:end] for column in self))))


class Stamps:
    """Elements' stamps, one (predicate, literal) pair per distinct timestamp triple. The index
    keeps each element's stamp until the element is evicted, and Python's full collections walk
    every container object it keeps alive: shared within a batch, whose elements have few
    distinct timestamps, the stamps are a few objects per batch instead of two per element
    (bench/out/NOTES.md#shared-stamps). Kept for one batch or document only."""

    def __init__(self):
        self._seen: dict[tuple, tuple[ox.NamedNode, ox.Literal]] = {}

    def __call__(self, predicate: ox.NamedNode, literal: ox.Literal) -> tuple[ox.NamedNode, ox.Literal]:
        stamp = (predicate, literal)
        return self._seen.setdefault(stamp, stamp)

    def of_text(self, predicate: str, value: str, kind: str) -> tuple[ox.NamedNode, ox.Literal]:
        """The stamp of a timestamp triple given as text (its predicate's IRI, its literal's
        value and `kind`, as literal_of takes them), built once per distinct text."""
        stamp = self._seen.get((predicate, value, kind))
        if stamp is None:
            stamp = self._seen[(predicate, value, kind)] = (ox.NamedNode(predicate), literal_of(value, kind))
        return stamp


def literal_of(value: str, kind: str) -> ox.Literal:
    """A literal from its value and `kind`: its datatype's IRI, or "@" and its language tag."""
    if kind.startswith("@"):
        return ox.Literal(value, language=kind[1:])
    return ox.Literal(value, datatype=ox.NamedNode(kind))


class PartWrite:
    """One part of a document written in the background: publishing an element it holds
    waits for it."""

    def __init__(self):
        self._done = threading.Event()
        self._error: StoreError | None = None

    def finish(self, error: StoreError | None = None) -> None:
        self._error = error
        self._done.set()

    def wait(self) -> None:
        self._done.wait()
        if self._error is not None:
            raise StoreError(str(self._error))
