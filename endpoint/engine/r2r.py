"""R2R: a query's rows over what its windows hold at an instant, computed by the one strategy
chosen for the query when it is registered (`strategy_for`, from translator.options.r2r_plan):

- `WholeWindows`: every window's elements selected, the whole query evaluated over them;
- `IncrementalWindow`: one distributive window, its rows the union of the rows of time ranges
  each evaluated once (`RangeRows`), shared with equal queries and with the queries that differ
  from it only in constants (sharing.py);
- `JoinedWindows`: a join of such windows and of background patterns, each part evaluated on its
  own and the rows joined here;
- `LandmarkRanges`: one landmark window (spec §6.10), its query evaluated at each close over the
  elements since the close before only, its rows added to (or its aggregates combined with)
  those before: a close costs what arrived since the last one, not the landmark's length.

A partitioned query's rows are found on Spark's executors (store/partitions.py): its strategy,
`KeyGroupRows`, unites the rows its key groups told.

The last two above fall back to `WholeWindows` at an instant whose windows are not complete yet
(docs/incremental-evaluation.md). All of them run the query through `Compiled`, which compiles
it once per set of rewrite options and places its rspu: FILTERs where they made fewer calls.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import pyoxigraph as ox

from rspstar.store.limits import too_large
from rspstar.store.stream_store import StreamStore
from rspstar.store.terms import select_rows, term_to_ntriples, triple_to_ntriples
from rspstar.translator.constants import without_unread_base
from rspstar.translator.incremental import PARTIAL_ROWS, Landmark
from rspstar.translator.errors import TranslatorError
from rspstar.translator.model import ContinuousQuery, QueryForm, WindowContent
from rspstar.translator.options import QueryOptions, R2RPlan
from rspstar.translator.parser import parse_query
from rspstar.translator.rewrite import RewriteOptions, Template, compile_template, defers_filters
from rspstar.translator.uncertainty import FunctionLibrary

from .s2r import KeyGroupReport
from .sharing import ConstantGroups, RangeResults


@dataclass
class Relation:
    """What R2R gives for one instant: SELECT rows ({var: term}), CONSTRUCT triples as
    (N-Triples line, triple) pairs, or an ASK answer; and how many elements the windows held."""

    form: QueryForm
    value: object
    elements: int


class FilterPlacement:
    """Whether the next evaluation places the query's rspu: FILTERs after its joins (the RSPU
    paper's heuristic H4) or where the query writes them.

    Deferring saves calls when the joins are selective and costs calls when they multiply rows
    (bench/out/NOTES.md#figures-from-comments). Both placements give the same
    results, so the one that made fewer rspu: calls per window element runs; the other is tried
    again every PROBE_EVERY evaluations, as the data may change."""

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


class Compiled:
    """A query compiled once per set of rewrite options (two at most: rspu: FILTERs deferred
    and in place) and run by the store over given window contents."""

    def __init__(self, query: ContinuousQuery, store: StreamStore, options: RewriteOptions,
                 functions: FunctionLibrary, place_filters: bool):
        # Compiled without a base it does not read, a query read from a file compiles to the text
        # it would from any other (the key of what equal queries share).
        self.query = without_unread_base(query)
        self.store = store
        self.options = options
        self.functions = functions
        self.placement = FilterPlacement() if place_filters and options.h4 and defers_filters(query) else None
        self._templates: dict[RewriteOptions, Template] = {}
        self._parsed_from: str | None = None     # the text of a syntax tree let go of
        self._block_text: str | None = None

    def run(self, elements: dict[str, list[str]], count: int, convert):
        """The query's result over these window contents, straight from the store, read by
        `convert` (the rspu: calls are made as the solutions are read)."""
        options = self.options
        deferred = self.placement.next() if self.placement is not None else options.h4
        if deferred != options.h4:
            options = replace(options, h4=deferred)
        calls_before = self.functions.counts.calls
        result = self.store.evaluate(self.template(options), elements, self.functions, convert)
        if self.placement is not None:
            self.placement.record(deferred, self.functions.counts.calls - calls_before, count)
        return result

    def template(self, options: RewriteOptions | None = None) -> Template:
        """The query compiled under `options` (the query's own when None), once."""
        options = options or self.options
        template = self._templates.get(options)
        if template is None:
            query = self.query
            if query.body is None:
                query = replace(query, body=parse_query(self._parsed_from, query.base).body)
            template = self._templates[options] = compile_template(query, options)
        return template

    def schema_version(self) -> str | None:
        """What the query's rows depend on besides its elements: under RDFS entailment, the
        digest of its background schema (store/entailment.py), else None."""
        if not self.options.entailment:
            return None
        return self.store.entailment.schema_digest(self.query.from_graphs or None)

    def block_text(self) -> str:
        """What a range's rows depend on: the compiled query (its window's elements a slot)."""
        if self._block_text is None:
            self._block_text = self.template().show()
        return self._block_text

    def let_go_of_syntax_tree(self) -> None:
        """Keep the query without its syntax tree: about forty objects that Python's full
        collections would scan in each of a thousand members of a group, holding every thread
        meanwhile. Its template, needed when it evaluates alone, is compiled from the text
        parsed again (a member's group, not its text, keys the rows it shares)."""
        self._templates.clear()
        self._parsed_from = self.query.body.source.text
        self.query = replace(self.query, body=None)


def _distinct_triples(result) -> list[tuple[str, ox.Triple]]:
    """CONSTRUCT triples by their N-Triples line, each once."""
    distinct = {}
    for triple in result:
        distinct.setdefault(triple_to_ntriples(triple), triple)
    return list(distinct.items())


def lines_with_triples(lines: list[str]) -> list[tuple[str, ox.Triple]]:
    """N-Triples lines, each with the triple it reads as (CONSTRUCT results kept or sent as text)."""
    return list(zip(lines, (quad.triple for quad in ox.parse("\n".join(lines), format=ox.RdfFormat.N_TRIPLES))))


_READ = {QueryForm.SELECT: select_rows, QueryForm.CONSTRUCT: _distinct_triples, QueryForm.ASK: bool}


class WholeWindows:
    """Every window's elements selected at the instant, the whole query evaluated over them."""

    kind = "whole"              # as translator.options.R2RPlan names it
    reads_store = True          # (the background held while it reads)

    def __init__(self, compiled: Compiled):
        self.compiled = compiled

    @property
    def query(self) -> ContinuousQuery:
        return self.compiled.query

    def relation(self, contents: dict[str, WindowContent]) -> Relation:
        query, store = self.compiled.query, self.compiled.store
        elements = {w: content.select(query.windows[w].stream, store) for w, content in contents.items()}
        count = sum(len(e) for e in elements.values())
        return Relation(query.form, self.compiled.run(elements, count, _READ[query.form]), count)

    def close(self) -> None:
        pass


@dataclass
class _Range:
    """The rows a distributive query gives over the elements of one time range of its stream."""
    opens: int
    closes: int
    rows: list[dict]
    elements: int


class RangeRows:
    """The rows of one distributive window's query, kept as contiguous time ranges inside the
    window last read, each evaluated once (or read from an equal query's, or a group's)."""

    def __init__(self, compiled: Compiled, window: str, shared: RangeResults | None,
                 groups: ConstantGroups | None, share_constants: bool):
        self.compiled = compiled
        self.window = window
        # Its window, as its query declares it (read at every evaluation).
        self._declared = compiled.query.windows[window]
        self.shared = shared
        self._ranges: list[_Range] = []
        self._late_seen: int | None = None
        self.group = self._join_group(groups) if share_constants else None
        if self.group is not None:      # (its group says what its ranges' rows depend on)
            compiled.let_go_of_syntax_tree()

    @property
    def store(self) -> StreamStore:
        return self.compiled.store

    @property
    def functions(self) -> FunctionLibrary:
        return self.compiled.functions

    @property
    def stream(self) -> str:
        return self._declared.stream

    def _join_group(self, groups: ConstantGroups | None):
        """The group of queries differing from this one only in constants, when it has such
        constants and the group's query compiles (else it is evaluated alone, as always)."""
        if groups is None:
            return None
        query = groups.constants_of(self.compiled.query)
        if query is None:
            return None

        def compiles() -> bool:
            try:
                compile_template(parse_query(query.text([query.constants]), query.base), self.compiled.options)
                return True
            except TranslatorError:
                return False
        return groups.join(self, query, self.compiled.options, compiles)

    def close(self) -> None:
        """The query is removed: it leaves its group."""
        if self.group is not None:
            self.group.leave(self)
            self.group = None

    def complete(self, closes: int) -> bool:
        """Whether no element can still arrive in the window without being counted late."""
        watermark = self.store.watermark(self.stream)
        return watermark is not None and watermark >= closes

    def rows(self, opens: int, closes: int) -> tuple[list[dict], int]:
        """The window's rows, and how many elements it holds, from contiguous time ranges, each
        evaluated once: ranges still inside the window are reused, the rest evaluated now."""
        compiled = self.compiled
        stream = self._declared.stream
        late = compiled.store.late_count(stream)
        if compiled.options.entailment:     # rows read through closures are kept per schema too
            late = (late, compiled.schema_version())
        if late != self._late_seen:
            self._ranges, self._late_seen = [], late    # a late element may sit in a kept range
        group = self.group
        if group is not None and group.shared():
            # The group makes every member's window at once from ranges it evaluates once.
            found = group.window(self, stream, opens, closes, late)
            if found is not None:
                self._ranges = []           # (what it keeps is for reading its ranges itself)
                return found
        kept = [r for r in self._ranges if opens <= r.opens and r.closes <= closes]
        if not kept:
            ranges = self._between(stream, opens, closes, opens)
        else:
            ranges = kept
            if kept[0].opens > opens:
                ranges = self._between(stream, opens, kept[0].opens, opens) + ranges
            if kept[-1].closes < closes:
                ranges = ranges + self._between(stream, kept[-1].closes, closes, opens)
        self._ranges = ranges
        rows, elements = [], 0
        for r in ranges:
            rows += r.rows
            elements += r.elements
        return rows, elements

    def edges(self, opens: int, closes: int) -> list[int]:
        """Where [opens, closes) is cut: its ends, and wherever a later window opens or closes
        inside it (so each later window is a run of whole ranges)."""
        window = self._declared
        step = window.step
        cuts = {opens, closes}
        for shift in (0, window.range):
            # Closes lie on start + range + k * step; opens `range` before them.
            base = window.start + window.range - shift
            x = base + max(0, (opens - base) // step + 1) * step
            while x < closes:
                cuts.add(x)
                x += step
        return sorted(cuts)         # (every cut lies in [opens, closes])

    def _between(self, stream: str, opens: int, closes: int, window_opens: int) -> list[_Range]:
        """[opens, closes) evaluated as ranges cut wherever a later window opens or closes
        (so each later window is a run of whole ranges), in the window opening at
        `window_opens`."""
        if opens >= closes:
            return []
        edges = self.edges(opens, closes)
        ranges = []
        block = None if self.shared is None else \
            self.group.identity(self) if self.group is not None else self.compiled.block_text()
        for lo, hi in zip(edges, edges[1:]):
            key = (block, stream, lo, hi, self._late_seen)
            found = self.shared.get(key) if block is not None else None
            if found is None:
                elements = self.store.elements_in(stream, lo, hi)
                rows = self.compiled.run({self.window: elements}, len(elements), select_rows) if elements else []
                found = (rows, len(elements))
                if block is not None:
                    self.shared.put(key, found, window_opens)
            ranges.append(_Range(lo, hi, *found))
        return ranges


class IncrementalWindow(WholeWindows):
    """One distributive window read by time ranges once complete; whole before."""

    kind = "incremental"

    def __init__(self, compiled: Compiled, ranges: RangeRows):
        super().__init__(compiled)
        self.ranges = ranges

    def relation(self, contents: dict[str, WindowContent]) -> Relation:
        window = contents.get(self.ranges.window)
        if window is None or not self.ranges.complete(window.closes):
            return super().relation(contents)
        rows, count = self.ranges.rows(window.opens, window.closes)
        return Relation(QueryForm.SELECT, rows, count)

    def close(self) -> None:
        self.ranges.close()


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


class JoinedWindows(WholeWindows):
    """A join of windows, each a distributive query of its own read by time ranges, and of the
    background patterns, evaluated at every instant (docs/incremental-evaluation.md); whole
    while a window is not complete."""

    kind = "joined"

    def __init__(self, compiled: Compiled, parts: dict[str, RangeRows], background: Compiled | None,
                 projected: frozenset[str] | None):
        super().__init__(compiled)
        self.parts = parts
        self.background = background
        self.projected = projected

    def relation(self, contents: dict[str, WindowContent]) -> Relation:
        # A window of a join that has not closed yet is empty (spec §6.6), so is the join; the
        # windows that have closed are still read by ranges, which later evaluations reuse.
        if not all(part.complete(contents[w].closes) for w, part in self.parts.items() if w in contents):
            return super().relation(contents)
        read = [part.rows(contents[w].opens, contents[w].closes) for w, part in self.parts.items() if w in contents]
        sides = [rows for rows, _ in read]
        if len(read) < len(self.parts):
            sides.append([])
        elif self.background is not None:
            sides.append(self.background.run({}, 0, select_rows))
        rows = _join_all(sides, self.compiled.store.result_bound())
        return Relation(QueryForm.SELECT, _project(rows, self.projected), sum(n for _, n in read))

    def close(self) -> None:
        for part in self.parts.values():
            part.close()


def _rows_with_internal(result) -> list[dict]:
    """SELECT solutions as rows of N-Triples terms, the rewrite's own variables included."""
    names = [variable.value for variable in result.variables]
    return [{name: term_to_ntriples(term) for name, term in zip(names, solution) if term is not None}
            for solution in result]


class LandmarkRanges(WholeWindows):
    """A landmark window's query close by close (translator.incremental.landmark_window): at a
    close x, the query over the elements of [previous close, x) only, its rows added to the rows
    before (a distributive query) or its groups' aggregates combined with theirs (COUNT and SUM
    summed, MIN and MIN, MAX and MAX, by SPARQL itself over the two, so types and errors come out
    as one evaluation over the whole window gives them). Like the incremental windows, only a
    complete window is read so (its stream's watermark past the close), and what is kept is
    dropped when a late element arrives; then, or while a value cannot be written back into a
    query (a blank node), the whole window is evaluated."""

    kind = "landmark"

    def __init__(self, compiled: Compiled, plan: Landmark, partial: Compiled):
        super().__init__(compiled)
        self.plan = plan
        self.partial = partial
        self.store = partial.store
        self.aggregating = bool(plan.aggregates)
        self.through: int | None = None     # the rows kept cover the window's elements up to here
        self.rows: list[dict] = []
        self._late_seen = 0
        self._scratch = ox.Store() if self.aggregating else None

    def relation(self, contents: dict[str, WindowContent]) -> Relation:
        content = contents.get(self.plan.window)
        if content is None:
            return super().relation(contents)
        stream = self.query.windows[self.plan.window].stream
        watermark, late = self.store.watermark(stream), self.store.late_count(stream)
        if watermark is None or watermark < content.closes or late != self._late_seen:
            self._late_seen, self.through = late, None
            return super().relation(contents)
        if self.through is None or content.closes < self.through:
            self.through, self.rows = content.opens, []
        if content.closes > self.through:
            elements = self.store.elements_in(stream, self.through, content.closes)
            if elements:
                rows = self._combined(elements) if self.aggregating else \
                    self.rows + self.partial.run({self.plan.window: elements}, len(elements), select_rows)
                if rows is None:
                    self.through = None
                    return super().relation(contents)
                self.rows = rows
            self.through = content.closes
        rows = self.rows if self.rows or not self.aggregating else self._combine([])
        return Relation(QueryForm.SELECT, list(rows), self.store.count_between(stream, content.opens, content.closes))

    def _combined(self, elements: list[str]) -> list[dict] | None:
        """The groups' aggregates over what was kept and these elements (None: a value cannot
        be combined in a query)."""
        new = self.partial.run({self.plan.window: elements}, len(elements), _rows_with_internal)
        new = [row for row in new if row.get(PARTIAL_ROWS) != '"0"^^<http://www.w3.org/2001/XMLSchema#integer>']
        if not new:
            return self.rows
        if any(value.startswith("_:") for row in new for value in row.values()):
            return None
        return self._combine(self.rows + new)

    def _combine(self, rows: list[dict]) -> list[dict]:
        groups = self.plan.groups
        aggregates = self.plan.aggregates
        columns = groups + ["__rsp_part%d" % k for k in range(len(aggregates))]
        sources = groups + [name for name, _ in aggregates]
        data = " ".join("(%s)" % " ".join(row.get(name, "UNDEF") for name in sources) for row in rows)
        text = "SELECT %s %s WHERE { VALUES (%s) { %s } }%s" % (
            " ".join("?" + g for g in groups),
            " ".join("(%s(?__rsp_part%d) AS ?%s)" % (combine, k, name) for k, (name, combine) in enumerate(aggregates)),
            " ".join("?" + c for c in columns), data,
            " GROUP BY %s" % " ".join("?" + g for g in groups) if groups else "")
        return select_rows(self._scratch.query(text))

    def close(self) -> None:
        pass


class KeyGroupRows:
    """R2R of a partitioned query: the rows its key groups found at the instant (told with
    them), united; a CONSTRUCT triple two groups made is one triple."""

    kind = "partitioned"
    reads_store = False

    def __init__(self, query: ContinuousQuery):
        self.query = query
        self.told: KeyGroupReport | None = None

    def tell(self, report: KeyGroupReport) -> None:
        self.told = report

    def relation(self, contents: dict[str, WindowContent]) -> Relation:
        rows, form = self.told.rows, self.query.form
        if form is QueryForm.CONSTRUCT:
            value = lines_with_triples(list(dict.fromkeys(rows)))
        else:
            value = rows if form is QueryForm.SELECT else bool(rows)
        return Relation(form, value, self.told.elements)

    def close(self) -> None:
        pass


def strategy_for(plan: R2RPlan, query: ContinuousQuery, store: StreamStore, options: QueryOptions,
                 functions: FunctionLibrary, shared: RangeResults | None, groups: ConstantGroups | None):
    """The R2R strategy of `plan` for the query."""
    rewrite_options = options.rewrite_options(query)
    share_constants = options.share_constants
    compiled = Compiled(query, store, rewrite_options, functions, place_filters=True)
    if plan.kind == "landmark":
        partial = compiled if not plan.landmark.aggregates else Compiled(
            plan.landmark.partial, store, options.rewrite_options(plan.landmark.partial), functions, place_filters=True)
        return LandmarkRanges(compiled, plan.landmark, partial)
    if plan.kind == "incremental":
        return IncrementalWindow(compiled, RangeRows(compiled, plan.window, shared, groups, share_constants))
    if plan.kind == "joined":
        parts = {}
        for window, sub in plan.join.windows.items():
            part = Compiled(sub, store, options.rewrite_options(sub), functions, place_filters=True)
            parts[window] = RangeRows(part, window, shared, groups, share_constants)
        background = None
        if plan.join.background is not None:
            background = Compiled(plan.join.background, store, rewrite_options, functions, place_filters=False)
        return JoinedWindows(compiled, parts, background, query.body.projected)
    return WholeWindows(compiled)


Strategy = WholeWindows      # or one of its kinds, which fall back to it
