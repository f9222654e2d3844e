"""What the queries of one runner share: the rows of time ranges of equal window blocks
(`RangeResults`), and the queries that differ only in constants, evaluated together
(`ConstantGroups`; docs/incremental-evaluation.md)."""
from __future__ import annotations

import collections
import logging
import threading
from typing import Callable, Protocol

from rspstar.store.terms import select_rows_by
from rspstar.translator.constants import Parameterized
from rspstar.translator.errors import TranslatorError
from rspstar.translator.parser import parse_query
from rspstar.translator.rewrite import RewriteOptions, Template, compile_template

log = logging.getLogger(__name__)


class Member(Protocol):
    """A member of a group: one query's incremental window (r2r.RangeRows), evaluating its
    ranges in `store` with its `functions`, its window's elements filling slot `window`."""

    store: object
    window: str
    functions: object


class RangeResults:
    """The rows of element-local queries over time ranges, shared by the queries of one engine:
    queries whose window blocks compile to the same text read a range's rows once. A range's
    rows are final (kept only once the stream is complete through it), and the key holds the
    stream's late count, so a late element makes new keys. A range ending before the window that
    stored a newer one opens is dropped (a query keeps its own window's ranges itself: the
    entries only spare the first evaluation of each), and the oldest go beyond `capacity`."""

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self._rows: collections.OrderedDict[tuple, tuple[list[dict], int]] = collections.OrderedDict()
        # Each stream's keys in the order they were put (ranges come in time order, about):
        # dropping the ranges a window has left looks at the oldest only, not at every key.
        self._by_stream: dict[str, collections.deque] = {}
        self._lock = threading.Lock()
        self.hits = 0

    def get(self, key: tuple) -> tuple[list[dict], int] | None:
        with self._lock:
            found = self._rows.get(key)
            if found is not None:
                self.hits += 1
            return found

    def put(self, key: tuple, value: tuple[list[dict], int], opens: int) -> None:
        """Keep `value` for `key` (block, stream, lo, hi, late count), dropping that stream's
        ranges ending at or before `opens`."""
        with self._lock:
            stream = key[1]
            order = self._by_stream.setdefault(stream, collections.deque())
            if key not in self._rows:
                order.append(key)
            self._rows[key] = value
            while order and (order[0] not in self._rows or order[0][3] <= opens):
                self._rows.pop(order.popleft(), None)
            while len(self._rows) > self.capacity:
                self._rows.popitem(last=False)


class ConstantGroups:
    """Queries evaluated incrementally whose texts differ only in constants (the literals of their
    row-wise FILTERs and BINDs, the objects of their GRAPH block's triple patterns:
    translator.constants), grouped so that one evaluation of a time range serves them all
    (docs/incremental-evaluation.md)."""

    def __init__(self):
        self._groups: dict[tuple, _ConstantGroup] = {}
        self._lock = threading.Lock()

    def join(self, member: Member, query: Parameterized, options: RewriteOptions,
             compiles: Callable[[], bool] = lambda: True) -> "_ConstantGroup | None":
        """The group `member` joins, None when its parameterized query does not compile
        (`compiles` is asked once per group, not once per member: a member differs from the
        others in constants only)."""
        key = (query.key, options)
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                if not compiles():
                    return None
                group = self._groups[key] = _ConstantGroup(query, options, lambda: self._forget(key))
            group.add(member, query.constants)
            return group

    def _forget(self, key: tuple) -> None:
        with self._lock:
            group = self._groups.get(key)
            if group is not None and not group.members:
                del self._groups[key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._groups)


class _ConstantGroup:
    """The members of one group, the query evaluating all their constants (compiled again when
    they change), and the rows of ranges evaluated for members that have not read them yet."""

    def __init__(self, query: Parameterized, options: RewriteOptions, forget):
        self.query = query
        self.options = options
        self._forget = forget
        self.members: dict[Member, tuple[str, ...]] = {}
        self._compiled: tuple[Template, dict[tuple[str, ...], int]] | None = None
        self._changes = 0             # membership changes: a query compiled before one is stale
        self._unread: dict[tuple, dict[Member, list[dict]]] = {}
        self._uncompiled = False      # the members' query did not compile: each goes alone
        self._distinct: dict[tuple[str, ...], int] = {}   # members per set of constants
        self._running: dict[tuple, threading.Event] = {}    # ranges being evaluated, set when done
        self._lock = threading.Lock()

    def add(self, member: Member, constants: tuple[str, ...]) -> None:
        with self._lock:
            self.members[member] = constants
            self._distinct[constants] = self._distinct.get(constants, 0) + 1
            self._compiled, self._uncompiled = None, False
            self._changes += 1

    def leave(self, member: Member) -> None:
        with self._lock:
            constants = self.members.pop(member, None)
            if constants is not None:
                self._distinct[constants] -= 1
                if not self._distinct[constants]:
                    del self._distinct[constants]
            self._compiled, self._uncompiled = None, False
            self._changes += 1
            for unread in self._unread.values():
                unread.pop(member, None)
        self._forget()

    def shared(self) -> bool:
        """Whether the members hold more than one set of constants (equal queries share their
        ranges through RangeResults already)."""
        with self._lock:
            return not self._uncompiled and len(self._distinct) > 1

    def rows(self, member: Member, key: tuple, elements: list[str],
             window_opens: int) -> list[dict] | None:
        """The rows of `member`'s range `key` (stream, lo, hi, late count) holding
        `elements`: read from an evaluation made for another member, or evaluated now for
        every member; None when the group's query does not compile or the member has left
        (it then evaluates the range alone). Ranges ending at or before `window_opens` are
        dropped for the stream."""
        while True:
            with self._lock:
                taken = self._take_unread(member, key)
                if taken is not None:     # another member's evaluation came between `unread` and here
                    return taken[0]
                if member not in self.members:
                    return None
                running = self._running.get(key)
                if running is None:
                    compiled, changes, members = self._compiled, self._changes, dict(self.members)
                    running = self._running[key] = threading.Event()
                    break
            # Another member is evaluating this range: its rows for this one follow (or, if it
            # failed or this one joined since, this one evaluates it).
            running.wait()
        # Compiled and evaluated outside the lock: members join and leave meanwhile without
        # waiting (compiling a thousand members' constants takes tens of milliseconds).
        try:
            if compiled is None:
                try:
                    compiled = self._compile(members)
                except TranslatorError:
                    log.exception("queries differing in constants: their group's query does not compile; "
                                  "each evaluates alone until the group changes")
                    with self._lock:
                        self._uncompiled = self._changes == changes
                    return None
                with self._lock:
                    if self._changes == changes:
                        self._compiled = compiled
            template, rows_of = compiled
            apart = member.store.evaluate(template, {member.window: elements}, member.functions,
                                          lambda result: select_rows_by(result, self.query.marker),
                                          share=len(rows_of))
            with self._lock:
                self._unread[key] = {other: (apart.get(rows_of[constants], []), len(elements))
                                     for other, constants in members.items()
                                     if other is not member and other in self.members}
                for old in [k for k in self._unread if k[0] == key[0] and k[2] <= window_opens]:
                    del self._unread[old]
        finally:
            with self._lock:
                del self._running[key]
            running.set()
        return apart.get(rows_of[members[member]], [])

    def unread(self, member: Member, key: tuple) -> tuple[list[dict], int] | None:
        """The rows of `member`'s range `key` and the elements it holds, when an evaluation
        made for another member left them: read without looking the range's elements up."""
        with self._lock:
            return self._take_unread(member, key)

    def _take_unread(self, member: Member, key: tuple) -> tuple[list[dict], int] | None:
        unread = self._unread.get(key)
        return unread.pop(member) if unread is not None and member in unread else None

    def _compile(self, members: dict[Member, tuple[str, ...]]) -> tuple[Template, dict[tuple[str, ...], int]]:
        """The query evaluating every member's constants, and each set of constants' row."""
        table = sorted(set(members.values()))
        template = compile_template(parse_query(self.query.text(table), self.query.base), self.options)
        return template, {constants: k for k, constants in enumerate(table)}
