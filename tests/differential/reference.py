"""The naive reference: what the specification (docs/spec/rspql-star.md sections 3, 6.1-6.3,
6.6 and 6.9-6.13) says a query answers, computed from its formulas and nothing of the engine's.

For each evaluation instant (the report policy's instants, each one found from the formulas
and intersected as sets), each window's content is picked from the drawn stream by the
formulas of its kind:
- time windows: the latest close x = τ0 + a + i·β at or before the instant, holding [x − a, x − b);
- count windows: the latest close at an element numbered a multiple of m (6.1);
- partitioned windows: for every key, the last n elements of that key (6.9);
- landmark windows: the latest close x = τ0 + i·β (i >= 1), holding [τ0, x) (6.10);
- fact windows: the facts that hold, read element by element from the stream (6.13);
- content change: (t − a, t − b], the last n elements, [τ0, t] for a landmark (6.3),
then a fresh Oxigraph store is loaded with those elements, each window's default graph as graphs
of its own (its elements' timestamp triples, or its facts, each annotated rspstar:since; and
its elements' timestamp triples with their content merged, spec 6.15), and the background, and
the query's SPARQL is run as model.Query.reference_text writes it (each WINDOW pattern's GRAPH
restricted to its window's elements, its default graph to one of those graphs: the merged one
for a block holding no GRAPH pattern unless window_default_graph says otherwise).
R2S is applied here, as section 3 defines it.

Under `entailment = rdfs` (6.11) the store holds each element's graph G as cl(G ∪ S) − (cl(S) − G)
and the background default graph B as cl(B), S the schema triples of the query's background
dataset, cl a naive fixpoint of rules rdfs2, 3, 5, 7, 9 and 11 (test_entailment.naive_closure,
written there from RDF 1.1 Semantics, not from the engine).

EP-SPARQL queries (6.12) are evaluated event by event (`EventReference`): every triple pattern
matched to one event, the operators applied to the matches' intervals as the spec defines them,
each match reported at the instant of its last event.

The `rspu:` functions are translator/uncertainty's (their definition, tested against scipy
in test_uncertainty.py), each called on its own: no fused calls, no cache.
"""
from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass, field

import pyoxigraph as ox

from rspstar.translator.uncertainty import FunctionLibrary
from test_entailment import naive_closure

from .model import (
    EX, MS, PREFIXES, PROV, RDFS, REFERENCE_DEFAULT, REFERENCE_MERGED, RSPSTAR, T0, XSD, Case, Context, CountWindow, Dataset,
    Declaration, EventGroup, EventQuery, FACT_RECIPES, FactWindow, LandmarkWindow, PartitionedWindow, PastWindow,
    Query, TimeWindow, element_content, element_iri, instant_text, prologue,
)

SCHEMA_PROPERTIES = {RDFS + p for p in ("subClassOf", "subPropertyOf", "domain", "range")}
# The background default graph's inferred triples (cl(B) − B), a graph of the reference's own.
ENTAILED_BACKGROUND = "urn:reference:entailed-background"
_REIFIES = ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#reifies")


def _memoised(method):
    """A method's answers kept on its object, by arguments."""
    @functools.wraps(method)
    def kept(self, *args):
        memo = self.__dict__.setdefault("_memo", {})
        key = (method.__name__,) + args
        if key not in memo:
            memo[key] = method(self, *args)
        return memo[key]
    return kept


@dataclass
class Content:
    elements: list[int]               # element numbers (positions in the drawn list)
    shown: tuple[int, int]            # the interval a record lists
    facts: list = field(default_factory=list)   # a fact window's: (triple, since)


def _time_parameters(decl: Declaration) -> tuple[int, int, int, int]:
    """(a, b, β, τ0) in µs: the window holds [x − a, x − b) at its closes x = τ0 + a + i·β."""
    spec = decl.spec
    t0 = 0 if spec.start is None else T0 + spec.start * MS
    if isinstance(spec, TimeWindow):
        return spec.range * MS, 0, (spec.step or spec.range) * MS, t0
    return spec.width * MS, spec.lag * MS, spec.step * MS, t0


def start_of(decl: Declaration) -> int | None:
    """τ0 of a window that has one (section 2: START, else the epoch); None for windows closing
    at their elements (count, partitioned, facts without STEP)."""
    spec = decl.spec
    if isinstance(spec, (TimeWindow, PastWindow, LandmarkWindow)) or (isinstance(spec, FactWindow) and spec.step):
        return 0 if spec.start is None else T0 + spec.start * MS
    return None


def first_close(decl: Declaration) -> tuple[int, int] | None:
    """(first close, step) of a window closing at fixed instants: x_i = τ0 + a + i·β for time
    windows, τ0 + i·β with i >= 1 for landmarks (6.10) and fact windows with STEP (6.13:
    read as the landmark's, there being no range to wait for)."""
    spec = decl.spec
    if isinstance(spec, (TimeWindow, PastWindow)):
        a, _, step, t0 = _time_parameters(decl)
        return t0 + a, step
    if isinstance(spec, LandmarkWindow) or (isinstance(spec, FactWindow) and spec.step):
        return start_of(decl) + spec.step * MS, spec.step * MS
    return None


def _progression(first: int, step: int, lo: int, hi: int) -> set[int]:
    """first + i·step, i >= 0, within (lo, hi]."""
    found, x = set(), first + max(0, (lo - first) // step + 1) * step
    while x <= hi:
        if x > lo:
            found.add(x)
        x += step
    return found


class Reference:
    def __init__(self, case: Case):
        self.case = case
        self.elements = list(case.elements)
        self.background = case.background.trig()
        self.functions = FunctionLibrary(cache=False).table
        self.end = T0 + case.end * MS

    # -- streams ------------------------------------------------------------------------------
    def in_order(self, stream: int) -> list[int]:
        """A stream's element numbers in stream order: by time, ties in arrival order (6.1)."""
        return sorted((n for n, e in enumerate(self.elements) if e.stream == stream),
                      key=lambda n: (self.elements[n].instant(), n))

    def time(self, n: int) -> int:
        return self.elements[n].instant()

    @_memoised
    def asserted(self, n: int) -> list[ox.Quad]:
        """The element's graph as drawn (RDF 1.2: an annotation through a reifier)."""
        text = PREFIXES + "ex:e%d { %s }" % (n, element_content(n, self.elements[n]))
        return list(ox.parse(text, format=ox.RdfFormat.TRIG))

    # -- entailment (6.11) ---------------------------------------------------------------------
    @_memoised
    def _background_graphs(self) -> dict:
        found: dict = {}
        for quad in ox.parse(self.background, format=ox.RdfFormat.TRIG):
            found.setdefault(quad.graph_name, set()).add(quad.triple)
        return found

    def _background_default(self, query: Query) -> set:
        """The query's background default graph: the merge of its FROM graphs, else the
        background's default graph."""
        graphs = self._background_graphs()
        if query.from_graphs:
            return set().union(*(graphs.get(ox.NamedNode(EX + g), set()) for g in query.from_graphs))
        return graphs.get(ox.DefaultGraph(), set())

    def schema(self, query: Query) -> frozenset:
        return frozenset((t.subject, t.predicate, t.object) for t in self._background_default(query)
                         if t.predicate.value in SCHEMA_PROPERTIES)

    @_memoised
    def _closure(self, triples: frozenset) -> set:
        return naive_closure(set(triples))

    def graph(self, n: int, query: Query) -> list[ox.Quad]:
        """The element's graph as the query reads it: under entailment cl(G ∪ S) − (cl(S) − G)."""
        quads = self.asserted(n)
        if not query.entailment:
            return quads
        schema = self.schema(query)
        g = frozenset((q.subject, q.predicate, q.object) for q in quads)
        read = self._closure(g | schema) - (self._closure(schema) - g)
        name = ox.NamedNode(element_iri(n))
        return [ox.Quad(s, p, o, name) for s, p, o in read if not isinstance(s, ox.Literal)]

    def entailed_background(self, query: Query) -> list[ox.Quad]:
        """cl(B) − B, B the query's background default graph."""
        b = frozenset((t.subject, t.predicate, t.object) for t in self._background_default(query))
        graph = ox.NamedNode(ENTAILED_BACKGROUND)
        return [ox.Quad(s, p, o, graph) for s, p, o in self._closure(b) - b]

    # -- partitioned windows (6.9) ---------------------------------------------------------------
    def keys(self, n: int, predicates: tuple) -> set[tuple]:
        """The element's keys: every combination of the objects of its asserted triples with
        the key predicates (none when one predicate has no value)."""
        values = [{q.object for q in self.asserted(n) if q.predicate.value == EX + p} for p in predicates]
        return set(itertools.product(*values))

    def keyed(self, decl: Declaration) -> list[int]:
        return [n for n in self.in_order(decl.stream) if self.keys(n, decl.spec.keys)]

    # -- fact windows (6.13) ----------------------------------------------------------------------
    @_memoised
    def fact_history(self, decl: Declaration, query: Query) -> tuple[list, list[int]]:
        """([(triple, opened at, closed at or None)], the instants at which a fact opened or
        closed): the stream's elements read in stream order, each matched against SINCE and
        then TILL. A replay starts with no fact at its start: the elements after T0 are read."""
        recipe = FACT_RECIPES[decl.spec.recipe]
        template = [tuple(_template_term(t) for t in triple) for triple in recipe.template]
        shared = set(re.findall(r"\?(\w+)", " ".join(" ".join(t) for t in recipe.template))) & \
            set(re.findall(r"\?(\w+)", recipe.till))
        written = prologue(Context())
        facts: list = []               # [triple, since, until]
        changes: set[int] = set()
        for n in self.in_order(decl.stream):
            t = self.time(n)
            if t <= T0:
                continue
            store = ox.Store()
            store.extend(ox.Quad(q.subject, q.predicate, q.object, ox.DefaultGraph()) for q in self.graph(n, query))
            opened = {f[0] for f in facts if f[2] is None}
            for triple in store.query("%s\nCONSTRUCT { %s } WHERE %s" % (
                    written, " . ".join(" ".join(t) for t in recipe.template), recipe.since)):
                if triple not in opened:
                    facts.append([triple, t, None])
                    opened.add(triple)
                    changes.add(t)
            for solution in store.query("%s\nSELECT * WHERE %s" % (written, recipe.till)):
                bound = {v: solution[v] for v in shared if solution[v] is not None}
                for fact in facts:
                    if fact[2] is None and any(_instance_of(pattern, fact[0], bound) for pattern in template):
                        fact[2] = t
                        changes.add(t)
        return [tuple(f) for f in facts], sorted(changes)

    def facts_at(self, decl: Declaration, query: Query, t: int) -> list:
        """The facts that hold at t: opened at or before it, not closed at or before it."""
        facts, _ = self.fact_history(decl, query)
        return [(triple, since) for triple, since, until in facts if since <= t and (until is None or until > t)]

    # -- windows ------------------------------------------------------------------------------
    def closes(self, decl: Declaration, query: Query, lo: int, hi: int) -> set[int]:
        """The window's closes x with lo < x <= hi."""
        spec = decl.spec
        if isinstance(spec, CountWindow):
            step = spec.step or 1
            order = self.in_order(decl.stream)
            return {self.time(n) for k, n in enumerate(order, 1) if k % step == 0 and lo < self.time(n) <= hi}
        if isinstance(spec, PartitionedWindow):
            # At every τ of an element that has a key.
            return {self.time(n) for n in self.keyed(decl) if lo < self.time(n) <= hi}
        if isinstance(spec, FactWindow) and not spec.step:
            # Where a fact opens or closes.
            return {t for t in self.fact_history(decl, query)[1] if lo < t <= hi}
        first, step = first_close(decl)
        return _progression(first, step, lo, hi)

    def content(self, decl: Declaration, query: Query, t: int, sliding: bool) -> Content | None:
        """What the window holds at an evaluation at t (None: it has not closed yet)."""
        spec = decl.spec
        if isinstance(spec, CountWindow):
            order = [n for n in self.in_order(decl.stream) if self.time(n) <= t]
            step = 1 if sliding else (spec.step or 1)
            k = len(order) // step * step
            if k == 0:
                return None
            held = order[max(0, k - spec.size):k]
            return Content(held, (self.time(held[0]), self.time(held[-1])))
        if isinstance(spec, PartitionedWindow):
            by_key: dict = {}
            for n in self.keyed(decl):
                if self.time(n) <= t:
                    for key in self.keys(n, spec.keys):
                        by_key.setdefault(key, []).append(n)
            if not by_key:
                return None
            held = sorted({n for ns in by_key.values() for n in ns[-spec.size:]}, key=lambda n: (self.time(n), n))
            return Content(held, (self.time(held[0]), self.time(held[-1])))
        if isinstance(spec, FactWindow):
            # "At instant t the window's default graph holds the facts that hold at t", listed
            # [t, t] (6.13: a fact window is read at t, whenever t is; its closes only say when
            # it triggers an evaluation).
            return Content([], (t, t), self.facts_at(decl, query, t))
        stream = self.in_order(decl.stream)
        if isinstance(spec, LandmarkWindow):
            t0 = start_of(decl)
            if sliding:          # content change: everything from τ0 to t, both included
                return None if t < t0 else Content([n for n in stream if t0 <= self.time(n) <= t], (t0, t))
            first, step = first_close(decl)
            if t < first:
                return None
            x = first + (t - first) // step * step
            return Content([n for n in stream if t0 <= self.time(n) < x], (t0, x))
        a, b, step, t0 = _time_parameters(decl)
        if sliding:
            return Content([n for n in stream if t - a < self.time(n) <= t - b], (t - a, t - b))
        if t < t0 + a:
            return None
        x = t0 + a + (t - t0 - a) // step * step
        return Content([n for n in stream if x - a <= self.time(n) < x - b], (x - a, x - b))

    # -- the report policy ------------------------------------------------------------------------
    def instants(self, query: Query) -> list[int]:
        lo, hi = T0, self.end
        decls = {d.index: d for d in query.declarations}
        giving = [s for s in query.policy if s.kind != "non-empty"]
        if not giving:
            giving = [_Own("periodic")] if query.every is not None else [_Own("close")]
        found = None
        for strategy in giving:
            if strategy.kind == "close":
                chosen = [decls[strategy.window]] if strategy.window else list(decls.values())
                instants = set().union(*(self.closes(d, query, lo, hi) for d in chosen))
            elif strategy.kind == "periodic":
                period = (strategy.period if strategy.period is not None else query.every) * MS
                starts = [s for d in decls.values() if (s := start_of(d)) is not None]
                instants = _progression(min(starts) if starts else 0, period, lo, hi)
            else:
                streams = {decls[strategy.window].stream} if strategy.window else {d.stream for d in decls.values()}
                instants = {e.instant() for e in self.elements if e.stream in streams and lo < e.instant() <= hi}
            found = instants if found is None else found & instants
        return sorted(found)

    def contents(self, query: Query, t: int) -> dict[int, Content]:
        sliding = any(s.kind == "content-change" for s in query.policy)
        found = {}
        for decl in query.declarations:
            content = self.content(decl, query, t, sliding)
            if content is not None:
                found[decl.index] = content
        return found

    @staticmethod
    def reported(query: Query, contents: dict[int, Content]) -> bool:
        """Whether the policy's non-empty strategies hold (a fact window holds what holds)."""
        for s in query.policy:
            if s.kind != "non-empty":
                continue
            windows = [s.window] if s.window else [d.index for d in query.declarations]
            if not any(w in contents and (contents[w].elements or contents[w].facts) for w in windows):
                return False
        return True

    # -- evaluation ------------------------------------------------------------------------------
    def store(self, query: Query, contents: dict[int, Content]) -> ox.Store:
        """A fresh store: the background, every element some window holds (its graph), and
        each window's default graph twice, as graphs of their own: its elements' timestamp
        triples (section 3; a fact window's facts), and those with the elements' content merged
        (what a block holding no GRAPH pattern reads, spec 6.15, and every block under
        window_default_graph = union)."""
        store = ox.Store()
        store.load(self.background, format=ox.RdfFormat.TRIG)
        if query.entailment:
            store.extend(self.entailed_background(query))
        held = sorted({n for c in contents.values() for n in c.elements})
        quads = [q for n in held for q in self.graph(n, query)]
        stamp = ox.NamedNode(PROV + "generatedAtTime")
        for index, c in contents.items():
            default = ox.NamedNode("%s%d" % (REFERENCE_DEFAULT, index))
            merged = ox.NamedNode("%s%d" % (REFERENCE_MERGED, index))
            for n in c.elements:
                for graph in (default, merged):
                    quads.append(ox.Quad(ox.NamedNode(element_iri(n)), stamp, _date_time(self.time(n)), graph))
                quads += [ox.Quad(q.subject, q.predicate, q.object, merged) for q in self.graph(n, query)]
            for triple, since in c.facts:
                reifier = ox.BlankNode()
                quads += [ox.Quad(triple.subject, triple.predicate, triple.object, default),
                          ox.Quad(reifier, _REIFIES, triple, default),
                          ox.Quad(reifier, ox.NamedNode(RSPSTAR + "since"), _date_time(since), default)]
        store.extend(quads)
        return store

    def solutions(self, query: Query, store: ox.Store, contents: dict[int, Content]):
        """The query's result at one evaluation, before R2S: rows, N-Triples lines or a boolean."""
        default_graph, named = query.dataset_graphs(self.case.background.named_graphs())
        dataset = Dataset([d.index for d in query.declarations],
                          {d.index: [element_iri(n) for n in contents[d.index].elements] if d.index in contents else []
                           for d in query.declarations}, named,
                          frozenset(d.index for d in query.declarations if isinstance(d.spec, FactWindow)),
                          query.default_graph)
        graphs = [ox.DefaultGraph()] if default_graph is None else [ox.NamedNode(g) for g in default_graph]
        if query.entailment:
            graphs.append(ox.NamedNode(ENTAILED_BACKGROUND))
        more = {} if default_graph is None and not query.entailment else {"default_graph": graphs}
        return _answer(query.form, store.query(query.reference_text(dataset), custom_functions=self.functions, **more))

    def records(self, queries: list) -> list[list[dict]]:
        """Each query's records at every evaluation instant; the queries share their windows
        and report policy (they differ in constants or R2S only)."""
        first = queries[0]
        if isinstance(first, EventQuery):
            return EventReference(self).records(queries)
        out: list[list[dict]] = [[] for _ in queries]
        previous: list[list | None] = [None for _ in queries]
        for t in self.instants(first):
            contents = self.contents(first, t)
            if not self.reported(first, contents):
                continue
            store = self.store(first, contents)
            windows = {d.iri: [instant_text(contents[d.index].shown[0]), instant_text(contents[d.index].shown[1])]
                       for d in first.declarations if d.index in contents}
            for k, query in enumerate(queries):
                result = self.solutions(query, store, contents)
                record = {"time": instant_text(t), "windows": windows}
                if query.form == "ASK":
                    record["boolean"] = result
                else:
                    emitted, previous[k] = r2s(query.r2s, result, previous[k])
                    record["bindings" if query.form == "SELECT" else "triples"] = emitted
                out[k].append(record)
        return out


# -- EP-SPARQL (6.12) ---------------------------------------------------------------------------------
# Operators bind from tightest: EQUALS / EQUALSOPTIONAL, then SEQ / OPTIONALSEQ, then AND, then OR,
# each left-associative.
_BINDING = {"EQUALS": 3, "EQUALSOPTIONAL": 3, "SEQ": 2, "OPTIONALSEQ": 2, "AND": 1, "OR": 0}


@dataclass(frozen=True)
class Match:
    """A set of events matching a pattern: its solution and its interval [start, end]."""
    solution: tuple                   # ((variable, term), ...), sorted
    start: int
    end: int


class EventReference:
    """EP-SPARQL as 6.12 defines it: every stream triple an event with interval [τ, τ]; a
    pattern's match a set of events with interval [least start, greatest end]; the operators
    on compatible matches with conditions on their intervals; the evaluation at t (each
    instant an element arrives on a stream the query reads) answering the matches whose last
    event has τ = t and whose duration the FILTER bounds.

    At t only events with τ <= t exist. A match ending at t with duration under the bound d has
    every event in (t − d, t] ([t − d, t] with <=), and so has every match its operators
    compared it with: an OPTIONALSEQ extension starts after its left side ends, an
    EQUALSOPTIONAL one shares its interval. So matches are looked for among those events only,
    which changes no answer."""

    def __init__(self, reference: Reference):
        self.reference = reference
        self.elements = reference.elements
        self.times = {element_iri(n): e.instant() for n, e in enumerate(self.elements)}

    @_memoised
    def _stream_store(self, stream: int) -> ox.Store:
        store = ox.Store()
        store.load(PREFIXES + "\n".join("ex:e%d { %s }" % (n, element_content(n, e))
                                        for n, e in enumerate(self.elements) if e.stream == stream),
                   format=ox.RdfFormat.TRIG)
        return store

    def leaf_matches(self, query: EventQuery) -> tuple[list[list[Match]], list[str]]:
        """Every match of each event pattern (in written order) over the whole stream, and the
        variables the patterns name."""
        found, variables = [], []
        for k, pattern in enumerate(query.where.patterns()):
            ctx = Context()
            ctx.blocks = k
            text = pattern.reference_text(ctx)
            result = self._stream_store(pattern.stream).query(prologue(ctx) + "\n" + text,
                                                              custom_functions=self.reference.functions)
            names = [v.value for v in result.variables]
            variables += [v for v in names if not v.startswith("__e") and v not in variables]
            matches = []
            for s in result:
                times = [self.times[s[v].value] for v in names if v.startswith("__e")]
                solution = tuple(sorted((v, s[v]) for v in names if not v.startswith("__e") and s[v] is not None))
                matches.append(Match(solution, min(times), max(times)))
            found.append(matches)
        return found, variables

    def evaluate(self, group: EventGroup, leaves: iter, keep) -> list[Match]:
        """The group's matches among the events `keep` admits (leaves: each pattern's matches,
        consumed in written order)."""
        operands = [self.evaluate(o, leaves, keep) if isinstance(o, EventGroup) else [m for m in next(leaves) if keep(m)]
                    for o in group.operands]
        operators = list(group.operators)
        for level in (3, 2, 1, 0):
            folded, remaining = [operands[0]], []
            for operator, right in zip(operators, operands[1:]):
                if _BINDING[operator] == level:
                    folded[-1] = _apply(operator, folded[-1], right)
                else:
                    remaining.append(operator)
                    folded.append(right)
            operands, operators = folded, remaining
        return operands[0]

    def records(self, queries: list[EventQuery]) -> list[list[dict]]:
        first = queries[0]
        streams = first.streams()
        end = self.reference.end
        instants = sorted({e.instant() for e in self.elements if e.stream in streams and T0 < e.instant() <= end})
        found = [self.leaf_matches(q) for q in queries]
        store = ox.Store()
        out: list[list[dict]] = [[] for _ in queries]
        for t in instants:
            for k, query in enumerate(queries):
                d = query.bound * MS
                lowest = t - d if query.inclusive else t - d + 1
                matches = self.evaluate(query.where, iter(found[k][0]), lambda m: lowest <= m.start and m.end <= t)
                variables = found[k][1]
                rows = " ".join("(%s)" % " ".join(
                    [str(dict(m.solution)[v]) if v in dict(m.solution) else "UNDEF" for v in variables] +
                    [str(_date_time(m.start)), str(_date_time(m.end))]) for m in matches if m.end == t)
                result = _answer(query.form, store.query(query.reference_text(variables, rows),
                                                         custom_functions=self.reference.functions))
                out[k].append({"time": instant_text(t),
                               "windows": {EX + "s%d" % s: [instant_text(t - d), instant_text(t)] for s in streams},
                               "bindings" if query.form == "SELECT" else "triples": result})
        return out


def _compatible(a: tuple, b: tuple) -> dict | None:
    merged = dict(a)
    for name, term in b:
        if merged.setdefault(name, term) != term:
            return None
    return merged


def _joined(a: Match, b: Match) -> Match | None:
    merged = _compatible(a.solution, b.solution)
    return None if merged is None else Match(tuple(sorted(merged.items())), min(a.start, b.start), max(a.end, b.end))


def _apply(operator: str, left: list[Match], right: list[Match]) -> list[Match]:
    """P1 SEQ P2: end(m1) < start(m2); EQUALS: equal intervals; AND: any order; OR: a union;
    OPTIONALSEQ and EQUALSOPTIONAL: the left join of SEQ and EQUALS on their condition."""
    if operator == "OR":
        return left + right
    condition = {"SEQ": lambda a, b: a.end < b.start, "OPTIONALSEQ": lambda a, b: a.end < b.start,
                 "EQUALS": lambda a, b: (a.start, a.end) == (b.start, b.end),
                 "EQUALSOPTIONAL": lambda a, b: (a.start, a.end) == (b.start, b.end),
                 "AND": lambda a, b: True}[operator]
    found = []
    for a in left:
        joined = [j for b in right if condition(a, b) and (j := _joined(a, b)) is not None]
        found += joined
        if not joined and operator in ("OPTIONALSEQ", "EQUALSOPTIONAL"):
            found.append(a)
    return found


# -- shared --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Own:
    """The query's own strategy when the policy gives no instants (spec 6.6)."""
    kind: str
    window: None = None
    period: None = None


def r2s(operator: str, current: list, previous: list | None) -> tuple[list, list]:
    """(what the operator emits, what the next evaluation compares with): RStream all of
    Ψ(t_j); IStream Ψ(t_j) − Ψ(t_j−1); DStream Ψ(t_j−1) − Ψ(t_j), differences on distinct
    solutions; the first evaluation compares with the empty set (spec section 3)."""
    def key(row):
        return row if isinstance(row, str) else tuple(sorted(row.items()))
    distinct = list({key(r): r for r in current}.values())
    before = previous or []
    if operator == "RSTREAM":
        return current, distinct
    before_keys = {key(r) for r in before}
    now_keys = {key(r) for r in distinct}
    if operator == "ISTREAM":
        return [r for r in distinct if key(r) not in before_keys], distinct
    return [r for r in before if key(r) not in now_keys], distinct


def _answer(form: str, result):
    """Rows, N-Triples lines (distinct) or a boolean."""
    if form == "ASK":
        return bool(result)
    if form == "CONSTRUCT":
        return list(dict.fromkeys("%s %s %s ." % (_term(t.subject), _term(t.predicate), _term(t.object))
                                  for t in result))
    names = [v.value for v in result.variables]
    return [{name: _term(s[name]) for name in names if s[name] is not None} for s in result]


def _date_time(micros: int) -> ox.Literal:
    return ox.Literal(instant_text(micros), datatype=ox.NamedNode(XSD + "dateTime"))


def _template_term(text: str):
    """A FACTS template's term as model.FACT_RECIPES writes it: ?variable, ex:name or true."""
    if text.startswith("?"):
        return text[1:]
    if text.startswith("ex:"):
        return ox.NamedNode(EX + text[3:])
    assert text == "true", text
    return ox.Literal(True)


def _instance_of(pattern: tuple, triple: ox.Triple, bound: dict) -> bool:
    """Whether the triple is the template triple `pattern` under a binding that agrees with
    `bound` (TILL's values of the variables it shares with the template)."""
    binding: dict = {}
    for term, value in zip(pattern, (triple.subject, triple.predicate, triple.object)):
        if isinstance(term, str):
            if binding.setdefault(term, value) != value or (term in bound and bound[term] != value):
                return False
        elif term != value:
            return False
    return True


def _term(term) -> str:
    if isinstance(term, ox.Triple):
        return "<<( %s %s %s )>>" % (_term(term.subject), _term(term.predicate), _term(term.object))
    return str(term)
