"""The naive reference: what the specification (docs/spec/rspql-star.md sections 3, 6.1-6.3
and 6.6) says a query answers, computed from its formulas and nothing of the engine's.

For each evaluation instant (the report policy's instants, each one found from the formulas
and intersected as sets), each window's elements are picked from the drawn stream by their
timestamps (time windows: the latest close x = τ0 + a + i·β at or before the instant, holding
[x − a, x − b); count windows: the latest close at an element numbered a multiple of m;
content change: (t − a, t − b] and the last n elements), a fresh Oxigraph store is loaded
with those elements, each window's timestamp triples as a graph of its own, and the
background, and the query's SPARQL is run as model.Query.reference_text writes it (each
WINDOW pattern's GRAPH restricted to its window's elements, its default graph to its
timestamps graph). R2S is applied here, as section 3 defines it.

The `rspu:` functions are translator/uncertainty's (their definition, tested against scipy
in test_uncertainty.py), each called on its own: no fused calls, no cache.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyoxigraph as ox

from rspstar.translator.uncertainty import FunctionLibrary

from .model import (
    MS, PREFIXES, REFERENCE_DEFAULT, T0, Case, CountWindow, Dataset, Declaration, Query, TimeWindow,
    element_content, element_iri, instant_text,
)


@dataclass
class Content:
    elements: list[int]               # element numbers (positions in the drawn list)
    shown: tuple[int, int]            # the interval a record lists


def _time_parameters(decl: Declaration) -> tuple[int, int, int, int]:
    """(a, b, β, τ0) in µs: the window holds [x − a, x − b) at its closes x = τ0 + a + i·β."""
    spec = decl.spec
    t0 = 0 if spec.start is None else T0 + spec.start * MS
    if isinstance(spec, TimeWindow):
        return spec.range * MS, 0, (spec.step or spec.range) * MS, t0
    return spec.width * MS, spec.lag * MS, spec.step * MS, t0


class Reference:
    def __init__(self, case: Case):
        self.case = case
        self.elements = list(case.elements)
        self.background = case.background.trig()
        self.functions = FunctionLibrary(cache=False).table

    # -- streams ------------------------------------------------------------------------------
    def in_order(self, stream: int) -> list[int]:
        """A stream's element numbers in stream order: by time, ties in arrival order (6.1)."""
        return sorted((n for n, e in enumerate(self.elements) if e.stream == stream),
                      key=lambda n: (self.elements[n].instant(), n))

    def time(self, n: int) -> int:
        return self.elements[n].instant()

    # -- windows ------------------------------------------------------------------------------
    def closes(self, decl: Declaration, lo: int, hi: int) -> set[int]:
        """The window's closes x with lo < x <= hi."""
        if isinstance(decl.spec, CountWindow):
            step = decl.spec.step or 1
            order = self.in_order(decl.stream)
            return {self.time(n) for k, n in enumerate(order, 1) if k % step == 0 and lo < self.time(n) <= hi}
        a, _, step, t0 = _time_parameters(decl)
        # x_i = τ0 + a + i·β, from the first i with x_i > lo.
        found, x = set(), t0 + a + max(0, (lo - t0 - a) // step + 1) * step
        while x <= hi:
            found.add(x)
            x += step
        return found

    def content(self, decl: Declaration, t: int, sliding: bool) -> Content | None:
        """What the window holds at an evaluation at t (None: it has not closed yet)."""
        if isinstance(decl.spec, CountWindow):
            order = [n for n in self.in_order(decl.stream) if self.time(n) <= t]
            step = 1 if sliding else (decl.spec.step or 1)
            k = len(order) // step * step
            if k == 0:
                return None
            held = order[max(0, k - decl.spec.size):k]
            return Content(held, (self.time(held[0]), self.time(held[-1])))
        a, b, step, t0 = _time_parameters(decl)
        stream = self.in_order(decl.stream)
        if sliding:
            return Content([n for n in stream if t - a < self.time(n) <= t - b], (t - a, t - b))
        if t < t0 + a:
            return None
        x = t0 + a + (t - t0 - a) // step * step
        return Content([n for n in stream if x - a <= self.time(n) < x - b], (x - a, x - b))

    # -- the report policy ------------------------------------------------------------------------
    def instants(self, query: Query) -> list[int]:
        lo, hi = T0, T0 + self.case.end * MS
        decls = {d.index: d for d in query.declarations}
        giving = [s for s in query.policy if s.kind != "non-empty"]
        if not giving:
            giving = [_Own("periodic")] if query.every is not None else [_Own("close")]
        found = None
        for strategy in giving:
            if strategy.kind == "close":
                chosen = [decls[strategy.window]] if strategy.window else list(decls.values())
                instants = set().union(*(self.closes(d, lo, hi) for d in chosen))
            elif strategy.kind == "periodic":
                period = (strategy.period if strategy.period is not None else query.every) * MS
                starts = [_time_parameters(d)[3] for d in decls.values() if not isinstance(d.spec, CountWindow)]
                origin = min(starts) if starts else 0
                instants = set()
                t = origin if origin > lo else origin + ((lo - origin) // period + 1) * period
                while t <= hi:
                    instants.add(t)
                    t += period
            else:
                streams = {decls[strategy.window].stream} if strategy.window else {d.stream for d in decls.values()}
                instants = {e.instant() for e in self.elements if e.stream in streams and lo < e.instant() <= hi}
            found = instants if found is None else found & instants
        return sorted(found)

    def contents(self, query: Query, t: int) -> dict[int, Content]:
        sliding = any(s.kind == "content-change" for s in query.policy)
        found = {}
        for decl in query.declarations:
            content = self.content(decl, t, sliding)
            if content is not None:
                found[decl.index] = content
        return found

    @staticmethod
    def reported(query: Query, contents: dict[int, Content]) -> bool:
        """Whether the policy's non-empty strategies hold."""
        for s in query.policy:
            if s.kind != "non-empty":
                continue
            windows = [s.window] if s.window else [d.index for d in query.declarations]
            if not any(w in contents and contents[w].elements for w in windows):
                return False
        return True

    # -- evaluation ------------------------------------------------------------------------------
    def store(self, contents: dict[int, Content], union: bool = False) -> ox.Store:
        """A fresh store: the background, every element some window holds (its graph), and
        each window's default graph (its elements' timestamp triples; with `union`, also their
        content, merged: spec section 3) as a graph of its own."""
        store = ox.Store()
        store.load(self.background, format=ox.RdfFormat.TRIG)
        held = sorted({n for c in contents.values() for n in c.elements})
        lines = [PREFIXES] + ["ex:e%d { %s }" % (n, element_content(n, self.elements[n])) for n in held]
        for index, c in contents.items():
            stamps = " ".join('ex:e%d prov:generatedAtTime "%s"^^xsd:dateTime .' % (n, instant_text(self.time(n)))
                              for n in c.elements)
            if union:
                stamps += " " + " ".join(element_content(n, self.elements[n]) for n in c.elements)
            lines.append("<%s%d> { %s }" % (REFERENCE_DEFAULT, index, stamps))
        store.load("\n".join(lines), format=ox.RdfFormat.TRIG)
        return store

    def solutions(self, query: Query, store: ox.Store, contents: dict[int, Content]):
        """The query's result at one evaluation, before R2S: rows, N-Triples lines or a boolean."""
        default_graph, named = query.dataset_graphs(self.case.background.named_graphs())
        dataset = Dataset([d.index for d in query.declarations],
                          {d.index: [element_iri(n) for n in contents[d.index].elements] if d.index in contents else []
                           for d in query.declarations}, named)
        more = {} if default_graph is None else {"default_graph": [ox.NamedNode(g) for g in default_graph]}
        result = store.query(query.reference_text(dataset), custom_functions=self.functions, **more)
        if query.form == "ASK":
            return bool(result)
        if query.form == "CONSTRUCT":
            return list(dict.fromkeys("%s %s %s ." % (_term(t.subject), _term(t.predicate), _term(t.object))
                                      for t in result))
        names = [v.value for v in result.variables]
        return [{name: _term(s[name]) for name in names if s[name] is not None} for s in result]

    def records(self, queries: list[Query]) -> list[list[dict]]:
        """Each query's records at every evaluation instant; the queries share their windows
        and report policy (they differ in constants or R2S only)."""
        first = queries[0]
        out: list[list[dict]] = [[] for _ in queries]
        previous: list[list | None] = [None for _ in queries]
        for t in self.instants(first):
            contents = self.contents(first, t)
            if not self.reported(first, contents):
                continue
            store = self.store(contents, first.union_default)
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


def _term(term) -> str:
    if isinstance(term, ox.Triple):
        return "<<( %s %s %s )>>" % (_term(term.subject), _term(term.predicate), _term(term.object))
    return str(term)
