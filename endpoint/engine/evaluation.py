"""One continuous query evaluated at an instant: window bounds, element selection, the
rewritten query with the `rspu:` functions, and the R2S operator (spec §3).

The same `QueryEvaluator` serves `rspstar replay` (virtual clock) and the live scheduler, so
live results equal what a replay of the same input gives.
"""
from __future__ import annotations

import collections
import itertools
import logging
import re
import threading
import time
from dataclasses import dataclass, field, fields, replace
from typing import Callable

import pyoxigraph as ox

from rspstar.store.limits import too_large
from rspstar.store.stream_store import StreamStore
from rspstar.store.terms import select_rows, select_rows_by, triple_to_ntriples
from rspstar.translator.constants import Parameterized, parameterized
from rspstar.translator.incremental import Join, distributive_window, joined_windows
from rspstar.translator.dialects import DIALECTS
from rspstar.translator.errors import TemporalValueError, TranslatorError
from rspstar.translator.model import R2S, ContinuousQuery, QueryForm
from rspstar.translator.policy import PolicyError, ReportPolicy, parse_strategies, report_policy
from rspstar.translator.parser import parse_query
from rspstar.translator.rewrite import RewriteOptions, Template, compile_template, defers_filters
from rspstar.translator.temporal import format_instant, parse_instant
from rspstar.translator.uncertainty import FunctionLibrary

from .errors import UsageError
from .r2s import R2SOperator

log = logging.getLogger(__name__)
_TRUE = ("true", "on", "yes", "1")
_CHOICES = {"window_default_graph": ("timestamps", "union"), "dialect": DIALECTS, "overrun": ("catch-up", "skip")}
_FALSE = ("false", "off", "no", "0")
_VARIABLE = re.compile(r"[?$][A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class EvaluationOptions:
    """Per-query options (`--option KEY=VALUE` on the command line, `options` in config).

    report: a conjunction of strategies joined by `and` (spec §6.6, translator/policy.py):
    `close` (every window close), `non-empty` (skip an evaluation when every window is empty),
    `periodic` (the COMPUTED EVERY instants), `content-change` (spec §6.3), each also bound to
    one window, `close(<w>)`, `non-empty(<w>)`, `content-change(<w>)`, and `periodic(PT5S)`;
    unset, the query's own (COMPUTED EVERY, its dialect), else `close`. window_default_graph:
    `timestamps` (a window's default graph is its elements' timestamp triples) or `union` (also
    their merged content, spec §3); unset, the dialect's, else `timestamps`. dialect: the
    language the query is written in (spec §6.5; unset: recognized from the text); start: t0
    of a dialect query's windows (an xsd:dateTime); partition: the variable a partitioned query
    is evaluated per key of (docs/partitioned-queries.md); overrun: what a query behind the
    clock does, `catch-up` (every due instant, in order: the spec's semantics) or `skip` (only
    the latest due instant, the ones before counted as skipped). The switches exist to measure the
    optimizations (the RSPU paper's cache, lazy variables and H4, fusing nested rspu: calls,
    incremental evaluation of sliding windows, and evaluating together the queries that differ
    only in constants); they never change results."""

    report: str | None = None
    window_default_graph: str | None = None
    dialect: str | None = None
    start: str | None = None
    rspu_cache: bool = True
    lazy_bind: bool = True
    h4: bool = True
    fuse_rspu: bool = True
    incremental: bool = True
    share_constants: bool = True
    partition: str | None = None
    overrun: str = "catch-up"

    @classmethod
    def from_pairs(cls, pairs: dict[str, str]) -> "EvaluationOptions":
        known = {f.name: f for f in fields(cls)}
        values: dict[str, object] = {}
        for key, raw in pairs.items():
            name = key.replace("-", "_")
            if name not in known:
                raise UsageError("unknown option %r (known: %s)" % (key, ", ".join(sorted(known))))
            if not isinstance(raw, str):
                raise UsageError("option %s takes a string, not %s" % (key, type(raw).__name__))
            if known[name].type in ("bool", bool):
                if raw.lower() in _TRUE:
                    values[name] = True
                elif raw.lower() in _FALSE:
                    values[name] = False
                else:
                    raise UsageError("option %s takes true or false, not %r" % (key, raw))
            elif name == "partition":
                if not _VARIABLE.fullmatch(raw):
                    raise UsageError("option partition takes a variable such as ?location, not %r" % raw[:80])
                values[name] = raw
            elif name == "report":
                try:
                    parse_strategies(raw)
                except PolicyError as e:
                    raise UsageError("option %s" % e) from None
                values[name] = raw
            elif name == "start":
                try:
                    parse_instant(raw)
                except TemporalValueError as e:
                    raise UsageError("option start takes an xsd:dateTime: %s" % e) from None
                values[name] = raw
            else:
                allowed = _CHOICES[name]
                if raw not in allowed:
                    raise UsageError("option %s takes %s, not %r" % (key, " or ".join(allowed), raw))
                values[name] = raw
        return cls(**values)

    def rewrite_options(self, query: ContinuousQuery) -> RewriteOptions:
        """How this query is rewritten: these options over the ones its dialect implies."""
        window_default_graph = self.window_default_graph or \
            query.option_defaults.get("window_default_graph", "timestamps")
        return RewriteOptions(lazy_bind=self.lazy_bind, h4=self.h4, window_union=window_default_graph == "union",
                              fuse_rspu=self.fuse_rspu)

    def incremental_window(self, query: ContinuousQuery, policy: ReportPolicy) -> tuple[str | None, str]:
        """(the window evaluated incrementally, "") or (None, why not), under the query's
        report policy."""
        if not self.incremental:
            return None, "incremental evaluation is off (option incremental)"
        if not policy.at_closes:
            return None, "the report policy reads the windows between their closes"
        return distributive_window(query)

    def joined_windows(self, query: ContinuousQuery, policy: ReportPolicy) -> tuple[Join | None, str]:
        """(its parts, "") when the query is evaluated as a join of windows each evaluated
        incrementally (and of background patterns), or (None, why not)."""
        if not self.incremental:
            return None, "incremental evaluation is off (option incremental)"
        if not policy.at_closes:
            return None, "the report policy reads the windows between their closes"
        return joined_windows(query)


@dataclass
class Evaluation:
    """What one evaluation emitted, after R2S."""

    time: int
    windows: dict[str, tuple[int, int]]
    form: QueryForm
    rows: list = field(default_factory=list)   # SELECT: {var: term}; CONSTRUCT: N-Triples lines
    triples: list = field(default_factory=list)  # CONSTRUCT: the emitted triples as terms
    boolean: bool | None = None
    elements: int = 0                          # elements in all windows together
    seconds: float = 0.0                       # time spent evaluating

    def record(self) -> dict:
        """The conformance JSON line (tests/conformance/README.md)."""
        line: dict = {
            "time": format_instant(self.time),
            "windows": {w: [format_instant(lo), format_instant(hi)] for w, (lo, hi) in self.windows.items()},
        }
        if self.form is QueryForm.SELECT:
            line["bindings"] = self.rows
        elif self.form is QueryForm.CONSTRUCT:
            line["triples"] = self.rows
        else:
            line["boolean"] = self.boolean
        return line


def _solution_key(row: dict):
    return tuple(sorted(row.items()))


def _triple_key(row: tuple):
    return row[0]


class H4Choice:
    """Whether the next evaluation defers rspu: FILTERs past the joins (H4, the RSPU paper).

    Deferring saves calls when the joins are selective and costs calls when they multiply
    rows (live TVS, 1000 sectors: 72,792 calls deferred against 40,000 in place). Both plans
    give the same results, so the plan that made fewer rspu: calls per window element runs;
    the other is tried again every PROBE_EVERY evaluations, as the data may change."""

    PROBE_EVERY = 16

    def __init__(self) -> None:
        self.cost: dict[bool, float] = {}
        self.evaluations = 0

    def next(self) -> bool:
        self.evaluations += 1
        for deferred in (True, False):
            if deferred not in self.cost:
                return deferred
        best = min((True, False), key=lambda deferred: (self.cost[deferred], not deferred))
        return (not best) if self.evaluations % self.PROBE_EVERY == 0 else best

    def record(self, deferred: bool, calls: int, elements: int) -> None:
        self.cost[deferred] = calls / max(elements, 1)


@dataclass
class _Range:
    """The rows a distributive query gives over the elements of one time range of its stream."""
    opens: int
    closes: int
    rows: list[dict]
    elements: int


def _distinct_triples(result) -> dict:
    """CONSTRUCT triples by their N-Triples line, each once."""
    distinct = {}
    for triple in result:
        distinct.setdefault(triple_to_ntriples(triple), triple)
    return distinct


def _lines_with_triples(lines: list[str]) -> list[tuple[str, ox.Triple]]:
    """N-Triples lines, each with the triple it reads as (CONSTRUCT results kept or sent as text)."""
    return list(zip(lines, (quad.triple for quad in ox.parse("\n".join(lines), format=ox.RdfFormat.N_TRIPLES))))


def _join_all(sides: list[list[dict]], bound: int | None = None) -> list[dict]:
    """The SPARQL join of bags of rows (compatible rows merged), smallest side first; past
    `bound` rows ResultTooLarge, before they are made."""
    sides = sorted(sides, key=len)
    joined = sides[0]
    for side in sides[1:]:
        joined = _join(joined, side, bound)
    return joined


def _join(left: list[dict], right: list[dict], bound: int | None = None) -> list[dict]:
    if not left or not right:
        return []
    shared = sorted(set().union(*left) & set().union(*right))
    if all(name in row for rows in (left, right) for row in rows for name in shared):
        index: dict[tuple, list[dict]] = {}
        for row in right:
            index.setdefault(tuple(row[name] for name in shared), []).append(row)
        if bound is not None and sum(len(index.get(tuple(row[name] for name in shared), ())) for row in left) > bound:
            raise too_large(bound)
        return [{**row, **match} for row in left for match in index.get(tuple(row[name] for name in shared), ())]
    # A variable unbound on one side (OPTIONAL in a block) is compatible with any value.
    joined = ({**a, **b} for a in left for b in right
              if all(a[name] == b[name] for name in shared if name in a and name in b))
    rows = list(joined if bound is None else itertools.islice(joined, bound + 1))
    if bound is not None and len(rows) > bound:
        raise too_large(bound)
    return rows


def _project(rows: list[dict], projected: frozenset[str] | None) -> list[dict]:
    if projected is None:
        return rows
    return [{name: term for name, term in row.items() if name in projected} for row in rows]


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

    def join(self, evaluator: "QueryEvaluator", query: Parameterized, options: RewriteOptions,
             compiles: Callable[[], bool] = lambda: True) -> "_ConstantGroup | None":
        """The group `evaluator` joins, None when its parameterized query does not compile
        (`compiles` is asked once per group, not once per member: a member differs from the
        others in constants only)."""
        key = (query.key, options)
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                if not compiles():
                    return None
                group = self._groups[key] = _ConstantGroup(query, options, lambda: self._forget(key))
            group.add(evaluator, query.constants)
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
        self.members: dict[QueryEvaluator, tuple[str, ...]] = {}
        self._compiled: tuple[Template, dict[tuple[str, ...], int]] | None = None
        self._changes = 0             # membership changes: a query compiled before one is stale
        self._unread: dict[tuple, dict[QueryEvaluator, list[dict]]] = {}
        self._uncompiled = False      # the members' query did not compile: each goes alone
        self._distinct: dict[tuple[str, ...], int] = {}   # members per set of constants
        self._running: dict[tuple, threading.Event] = {}    # ranges being evaluated, set when done
        self._lock = threading.Lock()

    def add(self, evaluator: "QueryEvaluator", constants: tuple[str, ...]) -> None:
        with self._lock:
            self.members[evaluator] = constants
            self._distinct[constants] = self._distinct.get(constants, 0) + 1
            self._compiled, self._uncompiled = None, False
            self._changes += 1

    def leave(self, evaluator: "QueryEvaluator") -> None:
        with self._lock:
            constants = self.members.pop(evaluator, None)
            if constants is not None:
                self._distinct[constants] -= 1
                if not self._distinct[constants]:
                    del self._distinct[constants]
            self._compiled, self._uncompiled = None, False
            self._changes += 1
            for unread in self._unread.values():
                unread.pop(evaluator, None)
        self._forget()

    def shared(self) -> bool:
        """Whether the members hold more than one set of constants (equal queries share their
        ranges through RangeResults already)."""
        with self._lock:
            return not self._uncompiled and len(self._distinct) > 1

    def rows(self, evaluator: "QueryEvaluator", key: tuple, elements: list[str],
             window_opens: int) -> list[dict] | None:
        """The rows of `evaluator`'s range `key` (stream, lo, hi, late count) holding
        `elements`: read from an evaluation made for another member, or evaluated now for
        every member; None when the group's query does not compile or the evaluator has left
        (it then evaluates the range alone). Ranges ending at or before `window_opens` are
        dropped for the stream."""
        while True:
            with self._lock:
                taken = self._take_unread(evaluator, key)
                if taken is not None:     # another member's evaluation came between `unread` and here
                    return taken[0]
                if evaluator not in self.members:
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
            apart = evaluator.store.evaluate(template, {evaluator.incremental_window: elements}, evaluator.functions,
                                             lambda result: select_rows_by(result, self.query.marker), share=len(rows_of))
            with self._lock:
                self._unread[key] = {member: (apart.get(rows_of[constants], []), len(elements))
                                     for member, constants in members.items()
                                     if member is not evaluator and member in self.members}
                for old in [k for k in self._unread if k[0] == key[0] and k[2] <= window_opens]:
                    del self._unread[old]
        finally:
            with self._lock:
                del self._running[key]
            running.set()
        return apart.get(rows_of[members[evaluator]], [])

    def unread(self, evaluator: "QueryEvaluator", key: tuple) -> tuple[list[dict], int] | None:
        """The rows of `evaluator`'s range `key` and the elements it holds, when an evaluation
        made for another member left them: read without looking the range's elements up."""
        with self._lock:
            return self._take_unread(evaluator, key)

    def _take_unread(self, evaluator: "QueryEvaluator", key: tuple) -> tuple[list[dict], int] | None:
        unread = self._unread.get(key)
        return unread.pop(evaluator) if unread is not None and evaluator in unread else None

    def _compile(self, members: dict["QueryEvaluator", tuple[str, ...]]) -> tuple[Template, dict[tuple[str, ...], int]]:
        """The query evaluating every member's constants, and each set of constants' row."""
        table = sorted(set(members.values()))
        template = compile_template(parse_query(self.query.text(table)), self.options)
        return template, {constants: k for k, constants in enumerate(table)}


class QueryEvaluator:
    """Evaluates one registered query at successive instants, keeping its R2S state."""

    def __init__(self, query: ContinuousQuery, store: StreamStore,
                 options: EvaluationOptions = EvaluationOptions(),
                 functions: FunctionLibrary | None = None, shared: RangeResults | None = None,
                 groups: ConstantGroups | None = None):
        self.query = query
        self.shared = shared
        self._block_text: str | None = None
        self.store = store
        self.options = options
        self.functions = functions or FunctionLibrary(cache=options.rspu_cache)
        self.functions.cache_enabled = options.rspu_cache
        self.rewrite_options = options.rewrite_options(query)
        self.policy = report_policy(query, options.report)
        self.h4 = H4Choice() if options.h4 and defers_filters(query) else None
        # Rewritten once per set of rewrite options (two at most: H4 on and off).
        self._templates: dict[RewriteOptions, Template] = {}
        self.incremental_window = options.incremental_window(query, self.policy)[0]
        self.constants = self._join_constants(groups) if self.incremental_window is not None else None
        self._ranges: list[_Range] = []      # contiguous, in time order, inside the last window
        self._late_seen: int | None = None
        self.r2s = R2SOperator(query.r2s, _triple_key if query.form is QueryForm.CONSTRUCT else _solution_key)
        # A join of windows: each window's block evaluated incrementally on its own, the rows
        # joined here (docs/incremental-evaluation.md).
        join = options.joined_windows(query, self.policy)[0] if self.incremental_window is None else None
        self.joined = {w: QueryEvaluator(sub, store, replace(options, report=None), self.functions, shared, groups)
                       for w, sub in (join.windows if join else {}).items()}
        self._background = join.background if join else None
        self._background_template: Template | None = None
        self._parsed_from: str | None = None     # the text of a syntax tree let go of
        if self.constants is not None:
            self._let_go_of_syntax_tree()

    def _let_go_of_syntax_tree(self) -> None:
        """A member of a group keeps its query without the syntax tree: about forty objects
        that Python's full collections would scan in each of a thousand members, holding every
        thread meanwhile. What its evaluations read of it is kept (the text its ranges' rows
        depend on); its own template, needed when it evaluates alone, is compiled from the
        text parsed again."""
        if self.shared is not None:
            self._range_query_text()
        self._templates.clear()
        self._parsed_from = self.query.body.source.text
        self.query = replace(self.query, body=None)

    def _join_constants(self, groups: ConstantGroups | None) -> _ConstantGroup | None:
        """The group of queries differing from this one only in constants, when it has such
        constants and the group's query compiles (else it is evaluated alone, as always). A
        partitioned query's ranges are evaluated on Spark's executors: it has no part in it."""
        if groups is None or not self.options.share_constants or self.options.partition is not None:
            return None
        query = parameterized(self.query)
        if query is None:
            return None

        def compiles() -> bool:
            try:
                compile_template(parse_query(query.text([query.constants])), self.rewrite_options)
                return True
            except TranslatorError:
                return False
        return groups.join(self, query, self.rewrite_options, compiles)

    def close(self) -> None:
        """The query is removed: it (or each window of a join) leaves its group."""
        if self.constants is not None:
            self.constants.leave(self)
            self.constants = None
        for child in self.joined.values():
            child.close()

    def next_instant(self, after: int) -> int | None:
        """The query's first evaluation instant after `after` known now."""
        return self.policy.next_instant(after, self.store)

    def evaluate(self, instant: int) -> Evaluation | None:
        """Evaluate at `instant`; None when the report policy skips it."""
        started = time.perf_counter()
        contents = self.policy.contents(instant, self.store)
        if not self.policy.report_at(contents, self.store):
            return None
        window = contents.get(self.incremental_window)
        incremental = window is not None and self._complete(window.closes)
        # A window of a join that has not closed yet is empty (spec §6.6), so is the join; the
        # windows that have closed are still read by ranges, which later evaluations reuse.
        joined = bool(self.joined) and all(child._complete(contents[w].closes)
                                           for w, child in self.joined.items() if w in contents)
        if incremental:
            rows, count = self._rows_by_ranges(window.opens, window.closes)
        elif joined:
            parts = [child._rows_by_ranges(contents[w].opens, contents[w].closes)
                     for w, child in self.joined.items() if w in contents]
            sides = [rows for rows, _ in parts]
            if len(parts) < len(self.joined):
                sides.append([])
            elif self._background is not None:
                sides.append(self._background_rows())
            rows = _project(_join_all(sides, self.store.result_bound()), self.query.body.projected)
            count = sum(n for _, n in parts)
            incremental = True
        else:
            elements = {w: content.select(self.query.windows[w].stream, self.store)
                        for w, content in contents.items()}
            count = sum(len(e) for e in elements.values())
        evaluation = Evaluation(instant, {w: content.shown for w, content in contents.items()},
                                self.query.form, elements=count)
        if incremental:
            evaluation.rows = self.r2s.apply(rows)
        elif self.query.form is QueryForm.SELECT:
            evaluation.rows = self.r2s.apply(self._run(elements, count, select_rows))
        elif self.query.form is QueryForm.CONSTRUCT:
            distinct = self._run(elements, count, _distinct_triples)
            emitted = self.r2s.apply(list(distinct.items()))
            evaluation.rows = [line for line, _ in emitted]
            evaluation.triples = [triple for _, triple in emitted]
        else:
            evaluation.boolean = self._run(elements, count, bool)
        evaluation.seconds = time.perf_counter() - started
        return evaluation

    def _run(self, elements: dict[str, list[str]], count: int, convert):
        """The query's result over these window contents, straight from the store, read by
        `convert` (the rspu: calls are made as the solutions are read)."""
        options = self.rewrite_options
        deferred = self.h4.next() if self.h4 is not None else options.h4
        if deferred != options.h4:
            options = replace(options, h4=deferred)
        calls_before = self.functions.counts.calls
        result = self.store.evaluate(self._template(options), elements, self.functions, convert)
        if self.h4 is not None:
            self.h4.record(deferred, self.functions.counts.calls - calls_before, count)
        return result

    # -- incremental evaluation (docs/incremental-evaluation.md) ----------------------------
    def _background_rows(self) -> list[dict]:
        """The rows of a join's triple patterns over the background, as it is now."""
        if self._background_template is None:
            self._background_template = compile_template(self._background, self.rewrite_options)
        return self.store.evaluate(self._background_template, {}, self.functions, select_rows)

    def _complete(self, closes: int) -> bool:
        """Whether no element can still arrive in the window without being counted late."""
        watermark = self.store.watermark(self.query.windows[self.incremental_window].stream)
        return watermark is not None and watermark >= closes

    def _rows_by_ranges(self, opens: int, closes: int) -> tuple[list[dict], int]:
        """The window's rows, and how many elements it holds, from contiguous time ranges, each
        evaluated once: ranges still inside the window are reused, the rest evaluated now."""
        stream = self.query.windows[self.incremental_window].stream
        late = self.store.late_count(stream)
        if late != self._late_seen:
            self._ranges, self._late_seen = [], late    # a late element may sit in a kept range
        kept = [r for r in self._ranges if opens <= r.opens and r.closes <= closes]
        if not kept:
            ranges = self._ranges_between(stream, opens, closes, opens)
        else:
            ranges = self._ranges_between(stream, opens, kept[0].opens, opens) + kept + \
                self._ranges_between(stream, kept[-1].closes, closes, opens)
        self._ranges = ranges
        return [row for r in ranges for row in r.rows], sum(r.elements for r in ranges)

    def _ranges_between(self, stream: str, opens: int, closes: int, window_opens: int) -> list["_Range"]:
        """[opens, closes) evaluated as ranges cut wherever a later window opens or closes
        (so each later window is a run of whole ranges), in the window opening at
        `window_opens`."""
        window = self.query.windows[self.incremental_window]
        cuts = {opens, closes}
        for shift in (0, window.range):
            # Closes lie on start + range + k * step; opens `range` before them.
            base = window.start + window.range - shift
            x = base + max(0, (opens - base) // window.step + 1) * window.step
            while x < closes:
                cuts.add(x)
                x += window.step
        edges = sorted(c for c in cuts if opens <= c <= closes)
        ranges = []
        block = self._range_query_text() if self.shared is not None else None
        for lo, hi in zip(edges, edges[1:]):
            key = (block, stream, lo, hi, self._late_seen)
            found = self.shared.get(key) if block is not None else None
            if found is None and self.constants is not None:
                found = self.constants.unread(self, (stream, lo, hi, self._late_seen))
            if found is None:
                elements = self.store.elements_in(stream, lo, hi)
                rows = None if elements else []
                if elements and self.constants is not None and self.constants.shared():
                    rows = self.constants.rows(self, (stream, lo, hi, self._late_seen), elements, window_opens)
                if rows is None:
                    rows = self._run({self.incremental_window: elements}, len(elements), select_rows)
                found = (rows, len(elements))
                if block is not None:
                    self.shared.put(key, found, window_opens)
            ranges.append(_Range(lo, hi, *found))
        return ranges

    def _range_query_text(self) -> str:
        """What a range's rows depend on: the compiled query (its window's elements a slot)."""
        if self._block_text is None:
            self._block_text = self._template(self.rewrite_options).show()
        return self._block_text

    def _template(self, options: RewriteOptions) -> Template:
        """The query compiled under `options`, once."""
        template = self._templates.get(options)
        if template is None:
            query = self.query
            if query.body is None:
                query = replace(query, body=parse_query(self._parsed_from).body)
            template = self._templates[options] = compile_template(query, options)
        return template

    def evaluation_of(self, instant: int, rows: list, count: int, holding: set[str] = frozenset()) -> Evaluation | None:
        """The evaluation at `instant` from results found elsewhere (a partitioned query's keys,
        evaluated on Spark's executors, `holding` the windows where they found elements), after
        R2S; None when the report policy's non-empty strategies skip it."""
        if not self.policy.report_where(holding.__contains__):
            return None
        contents = self.policy.contents(instant, self.store)
        evaluation = Evaluation(instant, {w: content.shown for w, content in contents.items()}, self.query.form,
                                elements=count)
        if self.query.form is QueryForm.SELECT:
            evaluation.rows = self.r2s.apply(rows)
        elif self.query.form is QueryForm.CONSTRUCT:     # N-Triples lines: a line two keys made is one triple
            emitted = self.r2s.apply(_lines_with_triples(list(dict.fromkeys(rows))))
            evaluation.rows = [line for line, _ in emitted]
            evaluation.triples = [triple for _, triple in emitted]
        else:
            evaluation.boolean = bool(rows)
        return evaluation

    def r2s_state(self) -> list | None:
        """What IStream/DStream remember of the last evaluation, as JSON (None for RStream):
        SELECT rows as they are, CONSTRUCT triples as N-Triples lines."""
        if self.query.r2s is R2S.RSTREAM:
            return None
        if self.query.form is QueryForm.CONSTRUCT:
            return [line for line, _ in self.r2s.previous]
        return self.r2s.previous

    def restore_r2s_state(self, state: list) -> None:
        if self.query.form is QueryForm.CONSTRUCT:
            self.r2s.restore(_lines_with_triples(state))
        else:
            self.r2s.restore(state)

    def retention_bounds(self, after: int) -> dict[str, int]:
        """Per stream, the earliest timestamp an evaluation after `after` can read."""
        return self.policy.retention(after, self.store)
