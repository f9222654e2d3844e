"""A stream's elements by the values of key predicates, for partitioned windows (spec §6.9).

An element's keys for predicates p1..pk are the tuples of the objects of its asserted triples
`?s p_i ?o` (one value per predicate, every combination): an element with several values for a
predicate belongs to each partition, one with no value for some p_i to none. Plain Python, kept
by the stream store beside its element index (under the store's lock) and fed as elements are
published, so that a window's content is a bisection per key, whatever the stream's length."""
from __future__ import annotations

import bisect
import itertools

from rspstar.translator.model import CountContent

Entry = tuple[int, int, str]     # (τ, arrival, graph): sorted in stream order


def _insert(entries: list[Entry], entry: Entry) -> None:
    if not entries or entries[-1] <= entry:
        entries.append(entry)
    else:
        bisect.insort(entries, entry)


def element_keys(values: list[list[str]]) -> list[tuple[str, ...]]:
    """An element's keys from the values it has for each key predicate, in order."""
    if not all(values):
        return []
    return list(itertools.product(*(sorted(set(v)) for v in values)))


class KeyedElements:
    def __init__(self, keys: tuple[str, ...]):
        self.keys = keys
        self.by_key: dict[tuple[str, ...], list[Entry]] = {}
        self.keyed: list[Entry] = []          # every element with a key, once
        self._arrivals = 0

    def add(self, timestamp: int, graph: str, keys: list[tuple[str, ...]]) -> None:
        """One element in arrival order, with its keys (none: it never enters)."""
        self._arrivals += 1
        if not keys:
            return
        entry = (timestamp, self._arrivals, graph)
        _insert(self.keyed, entry)
        for key in keys:
            _insert(self.by_key.setdefault(key, []), entry)

    def window(self, through: int, size: int) -> CountContent | None:
        """For every key, its last `size` elements with τ <= through, each element once."""
        held: set[Entry] = set()
        bound = (through + 1,)
        for entries in self.by_key.values():
            end = bisect.bisect_left(entries, bound)
            held.update(entries[max(0, end - size):end])
        if not held:
            return None
        ordered = sorted(held)
        return CountContent([entry[2] for entry in ordered], ordered[0][0], ordered[-1][0])

    def next_arrival(self, after: int) -> int | None:
        """The first τ > after of an element with a key."""
        at = bisect.bisect_left(self.keyed, (after + 1,))
        return self.keyed[at][0] if at < len(self.keyed) else None

    def reach(self, instant: int, size: int) -> int:
        """The earliest τ a window read at or after `instant` holds."""
        earliest = instant + 1
        bound = (instant + 1,)
        for entries in self.by_key.values():
            end = bisect.bisect_left(entries, bound)
            if end:
                earliest = min(earliest, entries[max(0, end - size)][0])
        return earliest

    def cut_before(self, instant: int) -> None:
        """Forget the elements with τ < instant (evicted from the store)."""
        bound = (instant,)
        cut = bisect.bisect_left(self.keyed, bound)
        if not cut:
            return
        del self.keyed[:cut]
        for key in list(self.by_key):
            entries = self.by_key[key]
            at = bisect.bisect_left(entries, bound)
            if at == len(entries):
                del self.by_key[key]
            elif at:
                del entries[:at]
