"""Which elements each stream holds, in time order, and each stream's counters and watermark.
Plain Python, no Oxigraph: the stream store keeps the quads, this keeps the order. The store
holds its lock around every call."""
from __future__ import annotations

import bisect
import json
import logging
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from rspstar.translator.model import CountContent

from .landing import replace_text

log = logging.getLogger(__name__)


@dataclass
class StreamStats:
    elements: int = 0             # elements currently published
    ingested: int = 0             # elements ever published
    evicted: int = 0
    late: int = 0                 # published with a timestamp below the watermark
    latest: int | None = None     # greatest timestamp published
    watermark: int | None = None  # the stream is complete up to here (spec §5)
    evicted_before: int | None = None   # every element with τ below this is gone (a landmark cannot start there)


# The counters an index cannot rebuild from the elements it holds, saved and restored.
SAVED_COUNTERS = ("ingested", "evicted", "late", "watermark", "evicted_before")


class ElementIndex:
    def __init__(self):
        self._entries: dict[str, list[tuple[int, int, str]]] = {}   # (τ, arrival, graph), sorted
        # graph -> stamp. Nothing per element but the stamp, which stores share between
        # elements (staged.Stamps): the collector then walks one dict, not a tuple per element.
        self._held: dict[str, object] = {}
        self._stats: dict[str, StreamStats] = {}
        self._arrivals = 0           # elements ever added: each entry's arrival number

    def __contains__(self, graph: str) -> bool:
        return graph in self._held

    def add(self, stream: str, timestamp: int, graph: str, stamp: object) -> None:
        """Index one element; one below the stream's watermark is counted late. `stamp` is
        whatever the owner needs to remove the element's timestamp again (handed back by
        `cut_before`)."""
        self.add_all(stream, [(graph, timestamp, stamp)])

    def add_all(self, stream: str, elements: Iterable[tuple]) -> None:
        """`add` each (graph, timestamp, stamp, ...) in turn; elements that arrive in time order
        after everything held are appended in one go (a replay publishes 100,000 so), others
        sorted in (an insert each moved the whole list: quadratic for a store reopened from
        disk, whose timestamps come in graph-name order)."""
        elements = list(elements)
        if not elements:
            return
        entries = self._entries.setdefault(stream, [])
        stats = self.stats_of(stream)
        graphs, timestamps, stamps = list(zip(*elements))[:3]
        first = self._arrivals
        self._arrivals += len(elements)
        # Whole columns at a time (zip, map, max run in C): a replay publishes a whole file at once.
        arrived = list(zip(timestamps, range(first, self._arrivals), graphs))
        self._held.update(zip(graphs, stamps))
        if stats.watermark is not None:
            stats.late += sum(map(stats.watermark.__gt__, timestamps))
        # Arrival numbers increase, so the entries are in order when the timestamps are.
        in_order = (not entries or entries[-1] <= arrived[0]) and all(map(operator.le, timestamps, timestamps[1:]))
        entries.extend(arrived)
        if not in_order:
            entries.sort()
        stats.elements += len(arrived)
        latest = max(timestamps)
        if stats.latest is None or latest > stats.latest:
            stats.latest = latest

    def holds_any(self, graphs: Iterable[str]) -> bool:
        return not self._held.keys().isdisjoint(graphs)

    def between(self, stream: str, opens: int, closes: int) -> list[str]:
        """Graph names with opens <= τ < closes, in time order (ties in arrival order)."""
        entries = self._entries.get(stream)
        if not entries:
            return []
        lo = bisect.bisect_left(entries, (opens,))
        hi = bisect.bisect_left(entries, (closes,))
        return list(map(_graph, entries[lo:hi]))

    def timed_between(self, stream: str, opens: int, closes: int) -> list[tuple[int, str]]:
        """(τ, graph name) with opens <= τ < closes, in stream order."""
        entries = self._entries.get(stream)
        if not entries:
            return []
        lo = bisect.bisect_left(entries, (opens,))
        hi = bisect.bisect_left(entries, (closes,))
        return list(map(_timed, entries[lo:hi]))

    def count_between(self, stream: str, opens: int, closes: int) -> int:
        """How many elements have opens <= τ < closes (two bisections)."""
        entries = self._entries.get(stream)
        if not entries:
            return 0
        return bisect.bisect_left(entries, (closes,)) - bisect.bisect_left(entries, (opens,))

    # -- element numbers (spec §6.1): the i-th held element of a stream has number evicted + i + 1.
    def _last_through(self, stream: str, instant: int) -> tuple[list, int]:
        """The stream's entries and the position of its last element with τ <= instant (-1)."""
        entries = self._entries.get(stream, [])
        return entries, bisect.bisect_left(entries, (instant + 1,)) - 1

    def _evicted(self, stream: str) -> int:
        stats = self._stats.get(stream)
        return 0 if stats is None else stats.evicted

    def _latest_close(self, stream: str, instant: int, step: int) -> tuple[list, int]:
        """The stream's entries and the position of the latest element with τ <= instant whose
        number is a multiple of `step` (negative before the first)."""
        entries, last = self._last_through(stream, instant)
        base = self._evicted(stream)
        return entries, ((base + last + 1) // step) * step - base - 1

    def count_window(self, stream: str, through: int, size: int, step: int) -> CountContent | None:
        """The last `size` elements up to the latest element with τ <= through whose number is
        a multiple of `step`; None before the first such element."""
        entries, close = self._latest_close(stream, through, step)
        if close < 0:
            return None
        held = entries[max(0, close - size + 1):close + 1]
        return CountContent(list(map(_graph, held)), held[0][0], held[-1][0])

    def next_count_close(self, stream: str, after: int, step: int) -> int | None:
        """The timestamp of the first element with τ > after whose number is a multiple of
        `step`."""
        entries, close = self._latest_close(stream, after, step)
        return entries[close + step][0] if close + step < len(entries) else None

    def count_reach(self, stream: str, instant: int, size: int, step: int) -> int:
        """The earliest timestamp a count window of `size` elements stepped by `step` reads at
        an evaluation at or after `instant`."""
        entries, last = self._last_through(stream, instant)
        if last < 0:
            return instant + 1 if not entries else min(entries[0][0], instant + 1)
        _, close = self._latest_close(stream, instant, step)
        return entries[max(0, close - size + 1)][0]

    def next_arrival(self, stream: str, after: int) -> int | None:
        """The earliest timestamp above `after` of an element the stream holds."""
        entries, last = self._last_through(stream, after)
        return entries[last + 1][0] if last + 1 < len(entries) else None

    def cut_before(self, stream: str, instant: int) -> list[tuple[str, object]]:
        """Remove and return (graph name, stamp) of the elements with τ < instant, counted as
        evicted."""
        entries = self._entries.get(stream)
        cut = bisect.bisect_left(entries, (instant,)) if entries else 0
        if cut == 0:
            return []
        # Whole columns at a time, in C: a replay evicts a window's worth of elements at each close.
        graphs = list(map(_graph, entries[:cut]))
        doomed = list(zip(graphs, map(self._held.pop, graphs)))
        del entries[:cut]
        stats = self._stats[stream]
        stats.elements -= cut
        stats.evicted += cut
        stats.evicted_before = max(instant, stats.evicted_before or instant)
        return doomed

    def advance_watermark(self, stream: str, instant: int) -> bool:
        """Whether the watermark moved (it never goes back)."""
        stats = self.stats_of(stream)
        if stats.watermark is not None and instant <= stats.watermark:
            return False
        stats.watermark = instant
        return True

    def stats_of(self, stream: str) -> StreamStats:
        return self._stats.setdefault(stream, StreamStats())

    def known(self, stream: str) -> StreamStats | None:
        """The stream's counters, without making the stream known by asking."""
        return self._stats.get(stream)

    def snapshot(self) -> dict[str, StreamStats]:
        return {s: StreamStats(**vars(st)) for s, st in self._stats.items()}

    def held(self) -> int:
        return sum(st.elements for st in self._stats.values())

    def saved_counters(self) -> dict[str, dict]:
        return {s: {k: getattr(st, k) for k in SAVED_COUNTERS} for s, st in self._stats.items()}

    def restore_counters(self, saved: dict[str, dict]) -> None:
        """Counters saved before a restart, over what the index rebuilt from the elements."""
        for stream, counts in saved.items():
            stats = self.stats_of(stream)
            stats.ingested = max(int(counts.get("ingested", 0)), stats.elements)
            stats.evicted = int(counts.get("evicted", 0))
            stats.late = int(counts.get("late", 0))
            if counts.get("evicted_before") is not None:
                stats.evicted_before = int(counts["evicted_before"])
            if counts.get("watermark") is not None:
                stats.watermark = max(int(counts["watermark"]), stats.watermark or int(counts["watermark"]))


# An entry's graph name, and its (τ, graph name).
_graph = operator.itemgetter(2)
_timed = operator.itemgetter(0, 2)


class CountersFile:
    """Where an on-disk store keeps its streams' counters (ingested, evicted, late) and
    watermarks, which are not in the elements: written whole, read back at open."""

    def __init__(self, path: Path):
        self.path = path

    def save(self, saved: dict[str, dict]) -> None:
        replace_text(self.path, json.dumps(saved, sort_keys=True))

    def read(self) -> dict[str, dict]:
        try:
            return json.loads(self.path.read_text(encoding="utf-8")) if self.path.exists() else {}
        except ValueError:
            log.warning("ignoring unreadable stream counters in %s", self.path)
            return {}
