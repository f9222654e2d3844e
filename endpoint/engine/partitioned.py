"""Partitioned queries on the driver (docs/partitioned-queries.md). A query registered with the
option `partition` is evaluated per key group on Spark's executors (store/partitions.py, which
`plan` tells what to evaluate); each micro-batch of what its groups emitted comes back here
(`accept`) and becomes the query's evaluations, instant by instant, in order, each through its
evaluator as every query's: S2R what the groups told of the windows (s2r.KeyGroupWindows), R2R
the rows they found (r2r.KeyGroupRows), then R2S. While none of its groups holds elements, none
reports, and the engine evaluates the query's instants itself (`run_unheld`).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Callable

from rspstar.store.partitions import (
    AT, FAILED, HOLDS, MARK, ROWS, AtReport, Emitted, PartitionPlan, read_at, read_mark,
)
from rspstar.store.stream_store import StreamStore

from .clock import Clock
from .registered import RegisteredQuery
from .s2r import KeyGroupReport

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Standing:
    """Where one key group's partitioned windows stand as of `instant` (store.partitions.AT):
    what they give, and how many elements they held."""

    instant: int
    group: str
    at: AtReport
    elements: int


@dataclass
class MicroBatch:
    """One micro-batch of a partitioned query's key groups, read: every instant up to `through`
    is complete (-1: none), `late` of their new elements came late, whether some group `holds`
    elements after it, the latest `watermark` a group saw, the first evaluation that `failed`;
    per instant, the rows found, the elements read and the windows holding some (a query over
    time windows), and where each group's partitioned windows stand (a query over those)."""

    through: int = -1
    late: int = 0
    holds: bool = False
    watermark: int | None = None
    failed: Emitted | None = None
    rows: dict[int, list] = field(default_factory=dict)
    elements: dict[int, int] = field(default_factory=dict)
    holding: dict[int, set[str]] = field(default_factory=dict)
    standing: list[Standing] = field(default_factory=list)

    @classmethod
    def of(cls, emitted: list[Emitted]) -> "MicroBatch":
        batch = cls()
        marks = [row for row in emitted if row.kind == MARK]
        batch.through = max((row.instant for row in marks), default=-1)
        batch.late = sum(row.count for row in marks)
        # Every group that keeps elements runs at every micro-batch (store.partitions): one with
        # no MARK keeping some is one where none holds elements.
        told = [read_mark(row.payload) for row in marks]
        batch.holds = any(holds for holds, _ in told)
        batch.watermark = max((w for _, w in told if w is not None), default=None)
        batch.failed = min((row for row in emitted if row.kind == FAILED), default=None, key=lambda row: row.instant)
        if batch.failed is not None:     # the instants before it are complete; it and the rest are not
            batch.through = min(batch.through, batch.failed.instant - 1)
        for row in emitted:
            if row.kind == ROWS:
                batch.rows.setdefault(row.instant, []).extend(json.loads(row.payload))
                batch.elements[row.instant] = batch.elements.get(row.instant, 0) + row.count
            elif row.kind == HOLDS:
                batch.holding.setdefault(row.instant, set()).update(json.loads(row.payload))
            elif row.kind == AT:
                batch.standing.append(Standing(row.instant, row.key, read_at(row.payload), row.count))
        batch.standing.sort(key=lambda standing: standing.instant)     # (a group's later word at one instant last)
        return batch

    def report(self, instant: int) -> KeyGroupReport:
        """What the groups found at `instant`, a query over time windows."""
        return KeyGroupReport(self.rows.get(instant, []), self.elements.get(instant, 0),
                              frozenset(self.holding.get(instant, ())))


def standing_report(standing: list[Standing]) -> KeyGroupReport:
    """What partitioned windows give at an instant from each key group's latest word: the rows
    of all, the elements read, the windows holding elements and the interval each lists (from the
    oldest element any group holds to the newest)."""
    rows, count, windows = [], 0, {}
    for word in standing:
        rows.extend(word.at.rows)
        count += word.elements
        for window, (oldest, newest) in word.at.windows.items():
            held = windows.get(window)
            windows[window] = (oldest, newest) if held is None else (min(held[0], oldest), max(held[1], newest))
    return KeyGroupReport(rows, count, frozenset(windows), windows)


class PartitionedQueries:
    """The partitioned queries' protocol over the engine's store, clock and configuration;
    `save` keeps a query's progress."""

    def __init__(self, store: StreamStore, clock: Clock, config, save: Callable[[RegisteredQuery], None]):
        self.store = store
        self.clock = clock
        self.config = config
        self.save = save

    def plan(self, registered: RegisteredQuery) -> PartitionPlan:
        """What Spark's executors need to evaluate a partitioned query: its text and options, its
        streams' keys, the background as it is now."""
        options, config = registered.evaluator.options, self.config
        return PartitionPlan(registered.id, registered.spec.text,
                             {s: config.partition_keys[s] for s in registered.query.streams},
                             self.store.background.nquads(), options.dialect, options.start, options.report,
                             options.rewrite_options(registered.query), options.rspu_cache, config.max_delay,
                             config.key_groups, options.base)

    def accept(self, registered: RegisteredQuery | None, emitted: list[Emitted]) -> int:
        """A micro-batch of a partitioned query's key groups (store.partitions.Emitted): every
        instant up to the watermark the groups saw is evaluated, each from what all groups found
        for it (none: an empty evaluation), in order; instants already evaluated (a micro-batch
        replayed after a restart, late elements of a new key) are not again. Returns the number
        of evaluations (none for a query removed meanwhile)."""
        if registered is None:
            return 0
        batch = MicroBatch.of(emitted)
        with registered.lock:
            if registered.status.state != "running":
                return 0
            if batch.late:
                registered.status.late_elements += batch.late
                log.warning("query %s: %d late element(s), kept for the windows still open", registered.id,
                            batch.late)
            policy = registered.evaluator.policy
            instants = policy.fixed_instants(registered.after, batch.through) if batch.through >= 0 else []
            keyed = any(w.keyed for w in registered.query.windows.values())
            if keyed:
                instants = self._keyed_instants(registered, instants, batch)
                latest: dict[str, Standing] = {}      # each group's latest word
                taken = 0
            for instant in instants:
                if keyed:
                    while taken < len(batch.standing) and batch.standing[taken].instant <= instant:
                        latest[batch.standing[taken].group] = batch.standing[taken]
                        taken += 1
                    registered.evaluator.tell(standing_report(list(latest.values())))
                else:
                    registered.evaluator.tell(batch.report(instant))
                evaluation = registered.evaluator.evaluate(instant)
                registered.after = instant
                # Due by the watermark the groups saw, or else by max_delay of processing time.
                due = batch.watermark is not None and batch.watermark >= policy.complete_through(instant)
                registered.emit(instant, "watermark" if due else "max_delay", evaluation)
            registered.status.next_close = registered.next_instant()
            changed = batch.holds != registered.groups_hold
            registered.groups_hold = batch.holds
            if instants or changed:
                self.save(registered)
            if batch.failed is not None:     # as a failing evaluation stops a query of the single store
                registered.fail(batch.failed.instant, batch.failed.payload)
        return len(instants)

    @staticmethod
    def _keyed_instants(registered: RegisteredQuery, fixed: list[int], batch: MicroBatch) -> list[int]:
        """A query over partitioned windows: its instants in (after, through], those its policy
        gives whatever the data (periodic) and those where the windows its key groups say
        closed there, together, make the policy hold."""
        closed: dict[int, set[str]] = {}
        for word in batch.standing:
            if word.at.closed and registered.after < word.instant <= batch.through:
                closed.setdefault(word.instant, set()).update(word.at.closed)
        policy = registered.evaluator.policy
        return sorted(set(fixed) | {t for t, windows in closed.items() if policy.gives(t, windows)})

    def may_hold(self, registered: RegisteredQuery) -> bool:
        """Whether a partitioned query's key groups may hold elements (so that they report its
        instants): as the latest micro-batch told, or, before any has, whether the store holds
        elements of its streams (its streaming query reads them again)."""
        if registered.groups_hold is not None:
            return registered.groups_hold
        streams = self.store.streams()
        return any(streams[s].elements for s in registered.query.streams if s in streams)

    def run_unheld(self, registered: RegisteredQuery, most: int) -> int:
        """A partitioned query's instants while none of its key groups holds elements: none
        reports then (before the first element, after they all expired), so the engine
        evaluates them itself once due by max_delay, empty, as the single store does with
        nothing in the windows; at most `most` of them. Returns how many ran."""
        if not registered.lock.acquire(blocking=False):
            registered.status.missed_runs += 1
            return 0
        ran = 0
        nothing = KeyGroupReport([], windows={} if any(w.keyed for w in registered.query.windows.values()) else None)
        try:
            while registered.status.state == "running" and not registered.removed and ran < most \
                    and not self.may_hold(registered):
                instant = registered.next_instant()     # (those that depend on the data: none here)
                if instant is None or self.clock.now() < instant + self.config.max_delay:
                    break
                registered.evaluator.tell(nothing)
                evaluation = registered.evaluator.evaluate(instant)
                registered.after = instant
                registered.emit(instant, "max_delay", evaluation)
                ran += 1
            registered.status.next_close = registered.next_instant()
            if ran:
                self.save(registered)
        finally:
            registered.lock.release()
        return ran
