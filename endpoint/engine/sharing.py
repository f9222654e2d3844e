"""What the queries of one runner share: the rows of time ranges of equal window blocks
(`RangeResults`), and the queries that differ only in constants, evaluated together
(`ConstantGroups`; docs/incremental-evaluation.md)."""
from __future__ import annotations

import bisect
import collections
import logging
import threading
from typing import Callable, Protocol

from rspstar.store.errors import ResultTooLarge
from rspstar.store.terms import select_rows_by, select_rows_matched
from rspstar.translator.constants import Bounds, Number, Parameterized, nan_itself, number_of_term, parameterized
from rspstar.translator.model import ContinuousQuery
from rspstar.translator.errors import TranslatorError
from rspstar.translator.parser import parse_query
from rspstar.translator.rewrite import RewriteOptions, Template, compile_template
from rspstar.translator.variants import CompiledShapes

log = logging.getLogger(__name__)


class Member(Protocol):
    """A member of a group: one query's incremental window (r2r.RangeRows), evaluating its
    ranges in `store` with its `functions`, its window's elements filling slot `window`, and
    cutting a window into ranges where later windows open and close (`edges`)."""

    store: object
    window: str
    functions: object

    def edges(self, opens: int, closes: int) -> list[int]: ...


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

    def __init__(self, shapes: CompiledShapes | None = None, windows_kept: int | None = None):
        self._groups: dict[tuple, _ConstantGroup] = {}
        self._lock = threading.Lock()
        self.shapes = shapes        # trees kept by shape: a member's constants read from its shape's
        self.windows_kept = WINDOWS_KEPT if windows_kept is None else windows_kept

    def constants_of(self, query: ContinuousQuery) -> Parameterized | None:
        """The query with its constants as variables (translator.constants.parameterized), made
        from the query of its shape that `shapes` keeps when there is one."""
        found = self.shapes.parameterized(query) if self.shapes is not None else None
        return found if found is not None else parameterized(query)

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
                group = self._groups[key] = _ConstantGroup(query, options, lambda: self._forget(key),
                                                             self.windows_kept)
            group.add(member, query.constants, _flat(query.values))
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
    they change), and the windows made for members that have not taken theirs yet."""

    def __init__(self, query: Parameterized, options: RewriteOptions, forget, windows_kept: int):
        self.query = query
        self.options = options
        self._forget = forget
        self.windows_kept = windows_kept      # windows made kept for the members that have not taken theirs
        self.members: dict[Member, tuple[str, ...]] = {}
        self._compiled: tuple[Template, dict[tuple[str, ...], int]] | None = None
        self._changes = 0             # membership changes: a query compiled before one is stale
        self._uncompiled = False      # the members' query did not compile: each goes alone
        self._distinct: dict[tuple[str, ...], int] = {}   # members per set of constants
        self._values: dict[tuple[str, ...], tuple] = {}   # each set's bounds' values (Parameterized.values, _flat)
        self._running: dict[tuple, threading.Event] = {}    # windows being made, set when done
        # Windows made for the members that have not taken theirs yet, and the ranges they were
        # made of, each set of constants' rows by its row in the query that evaluated it (`window`).
        self._windows: collections.OrderedDict[tuple, dict[Member, tuple[list[dict], int]]] = \
            collections.OrderedDict()
        self._ranges: dict[tuple, tuple[dict[int, list[dict]], int, _Compiled]] = {}
        self._lock = threading.Lock()

    def add(self, member: Member, constants: tuple[str, ...], values: tuple = ()) -> None:
        with self._lock:
            self.members[member] = constants
            self._distinct[constants] = self._distinct.get(constants, 0) + 1
            self._values[constants] = values
            self._compiled, self._uncompiled = None, False
            self._changes += 1
            self._ranges.clear()        # (their rows are by their row in a query compiled for others)

    def leave(self, member: Member) -> None:
        with self._lock:
            constants = self.members.pop(member, None)
            if constants is not None:
                self._distinct[constants] -= 1
                if not self._distinct[constants]:
                    del self._distinct[constants]
                    del self._values[constants]
            self._compiled, self._uncompiled = None, False
            self._changes += 1
            self._ranges.clear()
            for made in self._windows.values():
                made.pop(member, None)
        self._forget()

    def identity(self, member: Member) -> tuple:
        """What the rows of `member`'s ranges depend on besides the range, as equal members
        share them: the group and the member's constants (what its compiled text is made of,
        without compiling it)."""
        return self, self.members.get(member)

    def shared(self) -> bool:
        """Whether the members hold more than one set of constants (equal queries share their
        ranges through RangeResults already)."""
        with self._lock:
            return not self._uncompiled and len(self._distinct) > 1

    def window(self, member: Member, stream: str, opens: int, closes: int, late) -> tuple[list[dict], int] | None:
        """The rows of `member`'s window [opens, closes) of `stream` at the stream's late count
        `late`, and the elements it holds: made for every member when the first of them asks,
        cut into time ranges where later windows open and close (`member.edges`: the members'
        windows are one declaration), each range evaluated once for all of them or
        kept from the window before, then taken by each (a member that asks after the window
        was made without it gets its own, from the same ranges). None when the group's query
        does not compile or the member has left: it then evaluates its ranges alone (RangeRows)."""
        key = (stream, opens, closes, late)
        while True:
            with self._lock:
                made = self._windows.get(key)
                if made is not None and member in made:
                    return made.pop(member)
                if member not in self.members:
                    return None
                running = self._running.get(key)
                if running is None:
                    compiled, changes, members = self._compiled, self._changes, dict(self.members)
                    values = {constants: self._values[constants] for constants in self._distinct}
                    kept = dict(self._ranges)
                    alone = made is not None        # made for the others before this one asked
                    running = self._running[key] = threading.Event()
                    break
            # Another member is making this window: its rows for this one follow (or, if it
            # failed or this one joined since, this one makes it).
            _wait(member, running)
        # Compiled and evaluated outside the lock: members join and leave meanwhile without
        # waiting (compiling a thousand members' constants takes tens of milliseconds).
        try:
            if compiled is None:
                compiled = self._compiled_for(members, values, changes)
                if compiled is None:
                    return None
            parts, count, evaluated = [], 0, {}
            edges = member.edges(opens, closes)
            for lo, hi in zip(edges, edges[1:]):
                found = kept.get((stream, lo, hi, late))
                if found is None or found[2] is not compiled:   # (rows are by their row in the query that made them)
                    elements = member.store.elements_in(stream, lo, hi)
                    found = evaluated[(stream, lo, hi, late)] = \
                        (self._evaluate(compiled, member, elements) if elements else {}, len(elements), compiled)
                parts.append(found[0])
                count += found[1]
            rows_of = compiled.rows_of
            windows = {}
            for other, constants in ({member: members[member]} if alone else members).items():
                row, rows = rows_of[constants], []
                for part in parts:
                    rows += part.get(row, ())
                windows[other] = (rows, count)
            with self._lock:
                if self._changes == changes:    # (else made by a query the members have left)
                    self._ranges.update(evaluated)
                for old in [k for k in self._ranges if k[0] == stream and k[2] <= opens]:
                    del self._ranges[old]       # no later window reads it
                if not alone:
                    self._windows[key] = {other: made for other, made in windows.items()
                                          if other is not member and other in self.members}
                    while len(self._windows) > self.windows_kept:
                        self._windows.popitem(last=False)
        finally:
            with self._lock:
                del self._running[key]
            running.set()
        return windows[member]

    def _compiled_for(self, members: dict[Member, tuple[str, ...]], values: dict[tuple[str, ...], tuple],
                      changes: int) -> "_Compiled | None":
        """The query evaluating `members`' constants, kept while the membership is the one it
        was made for; None (logged once per membership) when it does not compile."""
        try:
            compiled = self._compile(members, values)
        except TranslatorError:
            log.exception("queries differing in constants: their group's query does not compile; "
                          "each evaluates alone until the group changes")
            with self._lock:
                self._uncompiled = self._changes == changes
            return None
        with self._lock:
            if self._changes == changes:
                self._compiled = compiled
        return compiled

    def _evaluate(self, compiled: "_Compiled", member: Member, elements: list[str]) -> dict[int, list[dict]]:
        """Each set of constants' rows of one range (by its row in the table)."""
        def run(template, reader):
            return member.store.evaluate(template, {member.window: elements}, member.functions, reader,
                                         share=len(compiled.rows_of))
        if compiled.split is None:
            return run(compiled.template, lambda result: select_rows_by(result, self.query.marker))
        try:
            return run(compiled.template, compiled.split.read)
        except ResultTooLarge:
            # The rows before the comparisons may be more than the bound allows where those after
            # them are not: the range as the comparisons in the store make it.
            if compiled.joined is None:
                compiled.joined = self._joined(sorted(compiled.rows_of, key=compiled.rows_of.get))
            return run(compiled.joined, lambda result: select_rows_by(result, self.query.marker))

    def _compile(self, members: dict[Member, tuple[str, ...]], values: dict[tuple[str, ...], tuple]) -> "_Compiled":
        """The query evaluating every member's constants, and each set of constants' row: the
        members' comparisons with one variable applied to its rows by an index
        (`_Split`) when the members are SPLIT_FROM sets of constants or more and each of those
        constants is a number, else joined with the table in the store."""
        table = sorted(set(members.values()))
        rows_of = {constants: k for k, constants in enumerate(table)}
        bounds = self.query.bounds
        if bounds is not None and len(table) >= SPLIT_FROM and \
                all(None not in values[constants][::_WIDTH] for constants in table):
            columns = set(bounds.columns)
            rest = sorted({tuple(c for k, c in enumerate(constants) if k not in columns) for constants in table})
            marker_of = {others: k for k, others in enumerate(rest)}
            by_marker: dict[int, list] = {}
            for slot, constants in enumerate(table):
                others = tuple(c for k, c in enumerate(constants) if k not in columns)
                by_marker.setdefault(marker_of[others], []).append((slot, *values[constants]))
            try:
                template = compile_template(parse_query(bounds.text(rest), self.query.base), self.options)
            except TranslatorError:
                log.exception("queries differing in constants: their group's query without its comparisons "
                              "does not compile; the comparisons are made in the store")
            else:
                return _Compiled(template, rows_of, _Split(bounds, self.query.marker,
                                                           {marker: tuple(sets) for marker, sets in by_marker.items()}))


        return _Compiled(self._joined(table), rows_of)

    def _joined(self, table: list[tuple[str, ...]]) -> Template:
        return compile_template(parse_query(self.query.text(table), self.query.base), self.options)


def _wait(member: Member, running: threading.Event) -> None:
    """Wait for another member making a window, the wait not counted as `member`'s evaluation
    time (its time limit is for its own work): one whose maker failed, or was removed, late in
    the making makes the window itself, and had started with the other's time spent."""
    with member.store.waiting(_Done(running)):
        pass


class _Done:
    """An event held once set (Budget.waiting holds what it is given)."""

    __slots__ = ("_event",)

    def __init__(self, event: threading.Event):
        self._event = event

    def __enter__(self) -> None:
        self._event.wait()

    def __exit__(self, *exc) -> None:
        return None


# Windows a group keeps made for members that have not taken theirs (a member removed leaves its
# own; one asking for a window no longer kept makes it again, for all). Members catching up on
# closes due at once each evaluate several in a turn before the next one runs (the runner gives
# its groups twice its MAX_EVALUATIONS_PER_RUN): a group keeping fewer windows than a turn makes
# has each member after the first find its first windows gone and make them for all again, each
# evicting one the others have still to take, so that every member evaluates the group's query.
WINDOWS_KEPT = 16

# From how many sets of constants a group applies its comparisons with one variable itself: with
# fewer, the rows no member keeps cost more to read than the comparisons in the store
# (bench/out/NOTES.md#constant-bounds).
SPLIT_FROM = 16


class _Compiled:
    """A group's query (`template`), each set of constants' row in its table, and, when the
    members' comparisons are applied by an index, the index (`split`) and the query making them
    in the store, compiled the first time a range needs it (`joined`)."""

    __slots__ = ("template", "rows_of", "split", "joined")

    def __init__(self, template: Template, rows_of: dict[tuple[str, ...], int], split: "_Split | None" = None):
        self.template = template
        self.rows_of = rows_of
        self.split = split
        self.joined = None


class _Split:
    """The members' comparisons of one variable with their constants (translator.constants.Bounds),
    applied to the rows of the group's query made without them: the rows of a row of the
    table (its marker) go to the sets of constants of that row whose comparisons they pass.

    A conjunction of comparisons of a variable with numbers is an interval of values, in the
    order the comparisons use: exact for integers and decimals, as doubles when either side is a
    double, else as floats (translator.constants.compares). A value's kind decides the order each
    of a set's comparisons uses, so the intervals are made per marker and kind of value: each
    set of constants is indexed by its interval in one order (`_Regions`), and checked against
    those in the others when it has comparisons in more than one. A value that is not a numeric
    literal (a string, an IRI, an ill-typed literal, unbound) passes no comparison, nor does NaN
    but as Oxigraph compares a term with itself (translator.constants.nan_itself)."""

    def __init__(self, bounds: Bounds, marker: str, by_marker: dict[int, tuple]):
        self.bounds = bounds
        self.marker = marker
        self._by_marker = by_marker
        self._indexes: dict[tuple[int, str], list] = {}
        self._lock = threading.Lock()

    def read(self, result) -> dict[int, list[dict]]:
        seen: dict[tuple[int, str], tuple[int, ...]] = {}

        def match(marker: int, term: str) -> tuple[int, ...]:
            key = (marker, term)
            found = seen.get(key)
            if found is None:
                value = number_of_term(term)
                found = seen[key] = () if value is None else self._matching(marker, value)
            return found
        return select_rows_matched(result, self.marker, self.bounds.variable, self.bounds.projected, match)

    def _matching(self, marker: int, value: Number) -> tuple[int, ...]:
        if value.double != value.double:        # NaN: no order holds it (translator.constants.nan_itself)
            return tuple(found[0] for found in self._by_marker.get(marker, ())
                         if all(nan_itself(value, operator, constant)
                                for operator, constant in zip(self.bounds.operators, _numbers(found[1:]))))
        index = self._indexes.get((marker, value.kind))
        if index is None:
            sets = self._by_marker.get(marker, ())
            with self._lock:
                index = self._indexes[(marker, value.kind)] = _index(sets, self.bounds.operators, value.kind)
        found = []
        for domain, regions, others in index:
            key = _key(value, domain)
            for slot in regions.stab(key):
                if all(_inside(_key(value, d), lo, hi) for d, lo, hi in others.get(slot, ())):
                    found.append(slot)
        return tuple(found)


def _domain(value_kind: str, constant_kind: str) -> str:
    """The order a value of one kind and a constant of another are compared in: D as doubles, F
    as floats, X exactly."""
    kinds = value_kind + constant_kind
    return "D" if "d" in kinds else "F" if "f" in kinds else "X"


def _key(value: Number, domain: str):
    return value.double if domain == "D" else value.single if domain == "F" else value.exact


def _inside(key, lo, hi) -> bool:
    """Whether `key` is above the lower bound `lo` ((key, strict) or None) and below the upper
    bound `hi` ((key, inclusive) or None)."""
    if lo is not None and not (key > lo[0] if lo[1] else key >= lo[0]):
        return False
    return hi is None or (key <= hi[0] if hi[1] else key < hi[0])


_WIDTH = len(Number._fields)


def _flat(values: tuple) -> tuple:
    """A member's values (Number or None each) as one flat tuple of strings and numbers, which the
    cycle collector stops tracking at its first collection (a tuple of tuples takes one each)."""
    return tuple(field for value in values for field in (value if value is not None else (None,) * _WIDTH))


def _numbers(flat: tuple) -> list[Number]:
    return [Number(*flat[k:k + _WIDTH]) for k in range(0, len(flat), _WIDTH)]


def _index(sets: tuple, operators: tuple[str, ...], value_kind: str) -> list:
    """[(domain, _Regions of the sets indexed in that order, {set: [(domain, lo, hi)] of its
    comparisons in other orders})] for values of `value_kind`; each set (its slot, then its
    constants' values flat) compared by `operators`."""
    intervals: dict[str, list] = {}
    others: dict[str, dict] = {}
    for found in sets:
        slot = found[0]
        bounds: dict[str, list] = {}
        empty = False
        for operator, constant in zip(operators, _numbers(found[1:])):
            domain = _domain(value_kind, constant.kind)
            key = _key(constant, domain)
            if key != key:          # NaN: the comparison is false for every value
                empty = True
                break
            lo, hi = bounds.setdefault(domain, [None, None])
            if operator in (">", ">=", "="):
                bound = (key, operator == ">")
                if lo is None or bound[0] > lo[0] or (bound[0] == lo[0] and bound[1]):
                    lo = bound
            if operator in ("<", "<=", "="):
                bound = (key, operator != "<")
                if hi is None or bound[0] < hi[0] or (bound[0] == hi[0] and not bound[1]):
                    hi = bound
            bounds[domain] = [lo, hi]
        if empty:
            continue
        first, *rest = sorted(bounds)
        intervals.setdefault(first, []).append((slot, *bounds[first]))
        if rest:
            others.setdefault(first, {})[slot] = tuple((d, *bounds[d]) for d in rest)
    return [(domain, _Regions(found), others.get(domain, {})) for domain, found in intervals.items()]


class _Regions:
    """Intervals of sets of constants over one order, found by a value in time logarithmic in
    their bounds plus the sets found. The distinct bounds cut the order into regions (each
    bound, and the open gaps below, between and above them); an interval is a run of regions,
    kept at the nodes of a segment tree over them that cover the run exactly (as many as twice
    the tree's depth); a value's region is found by bisection, and the sets whose runs hold it
    are those at the nodes from its leaf to the root."""

    def __init__(self, intervals: list):
        self.points = sorted({bound[0] for _, lo, hi in intervals for bound in (lo, hi) if bound is not None})
        at = {point: k for k, point in enumerate(self.points)}
        regions = 2 * len(self.points) + 1
        self.size = 1
        while self.size < regions:
            self.size *= 2
        self.nodes: dict[int, list[int] | tuple[int, ...]] = {}
        for slot, lo, hi in intervals:
            first = 0 if lo is None else 2 * at[lo[0]] + (2 if lo[1] else 1)
            last = regions - 1 if hi is None else 2 * at[hi[0]] + (1 if hi[1] else 0)
            left, right = first + self.size, last + self.size + 1
            while left < right:
                if left & 1:
                    self.nodes.setdefault(left, []).append(slot)
                    left += 1
                if right & 1:
                    right -= 1
                    self.nodes.setdefault(right, []).append(slot)
                left >>= 1
                right >>= 1
        # Tuples of integers, which the cycle collector stops tracking (lists it tracks).
        self.nodes = {node: tuple(slots) for node, slots in self.nodes.items()}

    def stab(self, key) -> list[int]:
        points = self.points
        k = bisect.bisect_left(points, key)
        node = self.size + (2 * k + 1 if k < len(points) and points[k] == key else 2 * k)
        found: list[int] = []
        nodes = self.nodes
        while node:
            here = nodes.get(node)
            if here:
                found.extend(here)
            node >>= 1
        return found
