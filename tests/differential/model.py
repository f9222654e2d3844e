"""The differential test's own model of an RSP-QL* query, its streams and its background, and
the two texts each query is written as:

- `Query.text()`: the RSP-QL* query the engine registers (window declarations, WINDOW
  patterns, R2S keywords, REGISTER ... COMPUTED EVERY, rspu: IRIs spelled in any of the ways a
  user may write them);
- `Query.reference_text(dataset)`: plain SPARQL-star for one evaluation of the naive reference
  (reference.py), over a fresh store holding the dataset of that evaluation: every WINDOW
  pattern written out, by this module, as the specification (section 3) defines its dataset.

Nothing here comes from the engine: the model is built by the strategies, not parsed.
Times are milliseconds from T0 (durations and offsets) and microseconds since the epoch
(instants), the engine's unit, so records compare as text.
"""
from __future__ import annotations

import calendar
import contextlib
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Union

EX = "http://example.org/"
RSPU = "http://w3id.org/rsp/rspu#"
PROV = "http://www.w3.org/ns/prov#"
XSD = "http://www.w3.org/2001/XMLSchema#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
RSPSTAR = "https://w3id.org/rspstar#"
# Where the reference keeps a window's default graph as section 3 defines it (its elements'
# timestamp triples; a fact window's facts), and as spec 6.15 reads it in a WINDOW block holding
# no GRAPH pattern (their merged content too).
REFERENCE_DEFAULT = "urn:reference:window-default:"
REFERENCE_MERGED = "urn:reference:window-merged:"

T0 = calendar.timegm((2026, 3, 1, 8, 0, 0)) * 1_000_000     # µs since the epoch
MS = 1000                                                   # µs in a millisecond


def instant_text(micros: int) -> str:
    """xsd:dateTime in UTC: 2026-03-01T08:00:10Z, a fraction without trailing zeros."""
    seconds, fraction = divmod(micros, 1_000_000)
    text = "%04d-%02d-%02dT%02d:%02d:%02d" % time.gmtime(seconds)[:6]
    if fraction:
        text += ("." + "%06d" % fraction).rstrip("0")
    return text + "Z"


def duration_text(ms: int, literal: bool = False) -> str:
    seconds, rest = divmod(ms, 1000)
    text = "PT%d%sS" % (seconds, ("." + "%03d" % rest).rstrip("0") if rest else "")
    return '"%s"^^xsd:duration' % text if literal else text


# -- windows ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TimeWindow:
    """[RANGE α (STEP β | TUMBLING)? (START τ0)?]; `step` None: RANGE alone (or TUMBLING)."""
    range: int
    step: int | None = None
    tumbling: bool = False
    start: int | None = None          # ms from T0
    literal: bool = False             # durations written "..."^^xsd:duration

    def spec(self) -> str:
        text = "RANGE %s" % duration_text(self.range, self.literal)
        if self.step is not None:
            text += " STEP %s" % duration_text(self.step, self.literal)
        elif self.tumbling:
            text += " TUMBLING"
        if self.start is not None:
            text += ' START "%s"^^xsd:dateTime' % instant_text(T0 + self.start * MS)
        return text


@dataclass(frozen=True)
class CountWindow:
    """[ELEMS n (STEP m)?]."""
    size: int
    step: int | None = None

    def spec(self) -> str:
        return "ELEMS %d" % self.size + ("" if self.step is None else " STEP %d" % self.step)


@dataclass(frozen=True)
class PastWindow:
    """[FROM NOW-a TO NOW(-b)? STEP β (START τ0)?]."""
    width: int
    lag: int
    step: int
    start: int | None = None

    def spec(self) -> str:
        text = "FROM NOW-%s TO NOW" % duration_text(self.width)
        if self.lag:
            text += "-%s" % duration_text(self.lag)
        text += " STEP %s" % duration_text(self.step)
        if self.start is not None:
            text += ' START "%s"^^xsd:dateTime' % instant_text(T0 + self.start * MS)
        return text


@dataclass(frozen=True)
class LandmarkWindow:
    """[RANGE UNBOUNDED STEP β (START τ0)?] (spec 6.10)."""
    step: int
    start: int | None = None

    def spec(self) -> str:
        text = "RANGE UNBOUNDED STEP %s" % duration_text(self.step)
        if self.start is not None:
            text += ' START "%s"^^xsd:dateTime' % instant_text(T0 + self.start * MS)
        return text


@dataclass(frozen=True)
class PartitionedWindow:
    """[ELEMS n PARTITION BY ex:p1, ex:p2] (spec 6.9); `keys`: the predicates' local names
    (`key`: one value per element; `tag`: none, one or two)."""
    size: int
    keys: tuple

    def spec(self) -> str:
        return "ELEMS %d PARTITION BY %s" % (self.size, ", ".join("ex:" + k for k in self.keys))


@dataclass(frozen=True)
class FactRecipe:
    """What a fact window states: its template's triples (subject, predicate, object as SPARQL
    terms), and its SINCE and TILL group patterns over an element's graph."""
    template: tuple
    since: str
    till: str


# The fact windows drawn: who is in which room (TILL sharing both variables, only the key, only
# the room), a key's value high since it passed 6 until it falls below 3 (a constant object;
# FILTERs in SINCE and TILL), two triples per fact, and a constant subject (one fact per key
# whatever the room).
FACT_RECIPES = {
    "presence": FactRecipe((("?k", "ex:in", "?r"),), "{ ?o ex:key ?k ; ex:enter ?r }", "{ ?o ex:key ?k ; ex:leave ?r }"),
    "key-leaves": FactRecipe((("?k", "ex:in", "?r"),), "{ ?o ex:key ?k ; ex:enter ?r }",
                             "{ ?o ex:key ?k ; ex:leave ?anywhere }"),
    "room-empties": FactRecipe((("?k", "ex:in", "?r"),), "{ ?o ex:key ?k ; ex:enter ?r }", "{ ?x ex:leave ?r }"),
    "high": FactRecipe((("?k", "ex:high", "true"),), "{ ?o ex:key ?k ; ex:v ?v FILTER(?v >= 6) }",
                       "{ ?o ex:key ?k ; ex:v ?v FILTER(?v < 3) }"),
    "both-ways": FactRecipe((("?k", "ex:in", "?r"), ("?r", "ex:holds", "?k")), "{ ?o ex:key ?k ; ex:enter ?r }",
                            "{ ?o ex:key ?k ; ex:leave ?r }"),
    "inside": FactRecipe((("ex:building", "ex:has", "?k"),), "{ ?o ex:key ?k ; ex:enter ?r }",
                         "{ ?o ex:key ?k ; ex:leave ?r }"),
}


@dataclass(frozen=True)
class FactWindow:
    """[FACTS {template} SINCE {..} TILL {..} (STEP β (START τ0)?)?] (spec 6.13)."""
    recipe: str
    step: int | None = None
    start: int | None = None          # only with a step

    def spec(self) -> str:
        recipe = FACT_RECIPES[self.recipe]
        text = "FACTS { %s } SINCE %s TILL %s" % (" . ".join(" ".join(t) for t in recipe.template), recipe.since,
                                                  recipe.till)
        if self.step is not None:
            text += " STEP %s" % duration_text(self.step)
            if self.start is not None:
                text += ' START "%s"^^xsd:dateTime' % instant_text(T0 + self.start * MS)
        return text


WindowSpec = Union[TimeWindow, CountWindow, PastWindow, LandmarkWindow, PartitionedWindow, FactWindow]
ELEMENT_WINDOWS = (TimeWindow, CountWindow, PastWindow, LandmarkWindow, PartitionedWindow)


@dataclass(frozen=True)
class Declaration:
    index: int                        # the window is ex:w<index>
    stream: int                       # on stream ex:s<stream>
    spec: WindowSpec

    @property
    def iri(self) -> str:
        return EX + "w%d" % self.index

    @property
    def stream_iri(self) -> str:
        return EX + "s%d" % self.stream

    def text(self) -> str:
        return "FROM NAMED WINDOW ex:w%d ON ex:s%d [%s]" % (self.index, self.stream, self.spec.spec())


# -- expressions ----------------------------------------------------------------------------------
# How an rspu: function's IRI is written: a prefixed name, a full IRI, an IRI relative to the
# query's BASE, another prefix for the same namespace.
SPELLINGS = ("rspu", "full", "base", "other")
_BLOCK_ROLES = ("v", "u", "t", "g", "o", "s")


@dataclass(frozen=True)
class Var:
    """A variable by its role: `v` (an observation's value), `u` (its annotated uncertainty),
    `t` (its element's time), `g` (its element), `o` (the observation), `s` (a fact's
    rspstar:since): per window block, the
    enclosing one unless `block` says which; `k` (the key), `l` (the key's limit in the
    background), `d` (the key's distribution in the background), `mu` (ex:Sensor's), `lab`
    (the key's label in a background graph), `w` (WINDOW ?w), `b` (the `block`-th BIND, or
    the latest one written before it), `r` (a room of a fact window)."""
    role: str
    block: int | None = None

    def name(self, ctx: "Context") -> str:
        if self.role in _BLOCK_ROLES:
            return "%s%d" % (self.role, self.block or ctx.block or 1)
        if self.role == "b":       # the `block`-th BIND, or the latest written before
            return "b%d" % (self.block or max(ctx.binds, 1))
        return self.role

    def render(self, ctx: "Context") -> str:
        return "?" + self.name(ctx)


@dataclass(frozen=True)
class Num:
    text: str                         # 3, 2.5, 0.25

    def render(self, ctx: "Context") -> str:
        return self.text


@dataclass(frozen=True)
class DistLit:
    text: str                         # N(2,1), U(0,4)

    def render(self, ctx: "Context") -> str:
        return '"%s"^^rspu:distribution' % self.text


@dataclass(frozen=True)
class Call:
    name: str                         # add, subtract, greaterThan, lessThan, between
    args: tuple
    spelling: str = "rspu"

    def render(self, ctx: "Context") -> str:
        ctx.spellings.add(self.spelling)
        iri = {"rspu": "rspu:%s", "full": "<%s%%s>" % RSPU, "base": "<rspu#%s>", "other": "unc:%s"}[self.spelling]
        return "%s(%s)" % (iri % self.name, ", ".join(a.render(ctx) for a in self.args))


@dataclass(frozen=True)
class Binary:
    op: str
    left: object
    right: object

    def render(self, ctx: "Context") -> str:
        return "(%s %s %s)" % (self.left.render(ctx), self.op, self.right.render(ctx))


def calls(node) -> bool:
    """Whether an expression calls an rspu: function."""
    if isinstance(node, Call):
        return True
    if isinstance(node, Binary):
        return calls(node.left) or calls(node.right)
    return False


# -- graph patterns -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Filter:
    expression: object

    def render(self, ctx: "Context") -> str:
        return "FILTER(%s)" % self.expression.render(ctx)


@dataclass(frozen=True)
class Bind:
    """BIND(expression AS ?b<n>), n counted in the order the query's BINDs are written."""
    expression: object

    def render(self, ctx: "Context") -> str:
        ctx.binds += 1
        return "BIND(%s AS ?b%d)" % (self.expression.render(ctx), ctx.binds)


@dataclass(frozen=True)
class KeyTriple:
    """?o ex:key ?k, or ex:k<constant> as the object; `predicate` ref: a super-property of
    ex:key under a drawn schema (RDFS entailment, spec 6.11)."""
    constant: int | None = None
    predicate: str = "key"

    def render(self, ctx: "Context") -> str:
        return "?o%d ex:%s %s ." % (ctx.block, self.predicate, "?k" if self.constant is None else "ex:k%d" % self.constant)


@dataclass(frozen=True)
class ValueTriple:
    """?o ex:v ?v, annotated `{| rspu:uncertainty ?u |}` (asserted and annotated) or `quoted`
    (<< ?o ex:v ?v >> rspu:uncertainty ?u); `predicate` measure or reading: super-properties of
    ex:v under a drawn schema (an inferred triple has no annotation: spec 6.11)."""
    annotation: str = "none"          # none | annotated | quoted
    predicate: str = "v"

    def render(self, ctx: "Context") -> str:
        j, p = ctx.block, self.predicate
        if self.annotation == "annotated":
            return "?o%d ex:%s ?v%d {| rspu:uncertainty ?u%d |} ." % (j, p, j, j)
        if self.annotation == "quoted":
            return "?o%d ex:%s ?v%d . << ?o%d ex:%s ?v%d >> rspu:uncertainty ?u%d ." % (j, p, j, j, p, j, j)
        return "?o%d ex:%s ?v%d ." % (j, p, j)


@dataclass(frozen=True)
class TypeTriple:
    """?o a ex:<cls> (the observation) or ?k a ex:<cls> (its key): classes a drawn schema gives
    through domains, ranges and subclasses."""
    subject: str                      # o | k
    cls: str

    def render(self, ctx: "Context") -> str:
        return "%s a ex:%s ." % ("?o%d" % ctx.block if self.subject == "o" else "?k", self.cls)


@dataclass(frozen=True)
class Optional_:
    items: tuple

    def render(self, ctx: "Context") -> str:
        return "OPTIONAL { %s }" % " ".join(i.render(ctx) for i in self.items)


@dataclass(frozen=True)
class Minus:
    items: tuple

    def render(self, ctx: "Context") -> str:
        return "MINUS { %s }" % " ".join(i.render(ctx) for i in self.items)


@dataclass(frozen=True)
class Union_:
    left: tuple
    right: tuple

    def render(self, ctx: "Context") -> str:
        return "{ %s } UNION { %s }" % (" ".join(i.render(ctx) for i in self.left),
                                        " ".join(i.render(ctx) for i in self.right))


@dataclass(frozen=True)
class SubGroup:
    items: tuple

    def render(self, ctx: "Context") -> str:
        return "{ %s }" % " ".join(i.render(ctx) for i in self.items)


@dataclass(frozen=True)
class Background:
    """A triple pattern over the background default graph."""
    kind: str                         # limit | dist | sensor; under entailment bound | limited | thing

    def render(self, ctx: "Context") -> str:
        return {"limit": "?k ex:limit ?l .", "dist": "?k rspu:uncertainty ?d .",
                "sensor": "ex:Sensor rspu:uncertainty ?mu .", "bound": "?k ex:bound ?l .",
                "limited": "?k a ex:Limited .", "thing": "?k a ex:Thing ."}[self.kind]


@dataclass(frozen=True)
class BackgroundGraph:
    """GRAPH ex:bg { ?k ex:label ?lab } or GRAPH ?bg { ... } outside every window: background
    named graphs only (spec section 3), the FROM NAMED ones when the query names its dataset."""
    variable: bool

    def render(self, ctx: "Context") -> str:
        inner = "?k ex:label ?lab ."
        name = "?bg" if self.variable else "ex:bg"
        if ctx.dataset is None:
            return "GRAPH %s { %s }" % (name, inner)
        return "{ GRAPH %s { %s } FILTER(%s IN (%s)) }" % (name, inner, name, _iris(ctx.dataset.background_graphs))


@dataclass(frozen=True)
class Exists:
    """FILTER (NOT) EXISTS { ... }."""
    negated: bool
    items: tuple

    def render(self, ctx: "Context") -> str:
        return "FILTER(%sEXISTS { %s })" % ("NOT " if self.negated else "", " ".join(i.render(ctx) for i in self.items))


@dataclass(frozen=True)
class Values:
    """VALUES ?k { ex:k<n> ... }."""
    keys: tuple

    def render(self, ctx: "Context") -> str:
        return "VALUES ?k { %s }" % " ".join("ex:k%d" % k for k in self.keys)


@dataclass(frozen=True)
class FactBlock:
    """WINDOW ex:w<window> (WINDOW ?w when `window` is 0) { s p o [{| rspstar:since ?s<n> |}]
    side } over a fact window's default graph (spec 6.13): `pattern` one of its template's
    triples, its variables the query's (?k, ?r)."""
    window: int
    pattern: tuple
    annotated: bool = False
    side: tuple = ()

    def render(self, ctx: "Context") -> str:
        with ctx.numbered_block():
            triple = " ".join(self.pattern)
            if self.annotated:
                triple += " {| rspstar:since ?s%d |}" % ctx.block
            if ctx.dataset is None:
                body = " ".join([triple + " ."] + [s.render(ctx) for s in self.side])
                return "WINDOW %s { %s }" % ("?w" if not self.window else "ex:w%d" % self.window, body)
            # The window's default graph: the facts that hold (reference.py writes them there);
            # under WINDOW ?w an element window's too, as a block holding no GRAPH reads it.

            def body(index):
                return "GRAPH <%s> { %s . } %s" % (window_graph(ctx, index, False), triple,
                                                   " ".join(s.render(ctx) for s in self.side))
            return "{ %s }" % body(self.window) if self.window else _over_windows(ctx, body)


@dataclass(frozen=True)
class WindowBlock:
    """WINDOW ex:w<window> (or WINDOW ?w when `window` is 0) { GRAPH ?g { inner }
    [?g prov:generatedAtTime ?t .] default side }: its variables numbered by the block's
    position. `graph`: GRAPH ex:e<graph> (one element by name) instead of GRAPH ?g. `default`:
    triple patterns over the window's default graph (its elements' timestamp triples, and their
    content under window_default_graph = union: the block holds a GRAPH pattern, spec 6.15)."""
    window: int
    inner: tuple
    timestamp: bool = False
    side: tuple = ()
    graph: int | None = None
    default: tuple = ()

    def render(self, ctx: "Context") -> str:
        with ctx.numbered_block():
            if ctx.dataset is None:
                return "WINDOW %s { %s }" % ("?w" if not self.window else "ex:w%d" % self.window, self._body(ctx, None))
            if self.window:
                return "{ %s }" % self._body(ctx, self.window)
            return _over_windows(ctx, lambda index: self._body(ctx, index))

    def _body(self, ctx: "Context", window: int | None) -> str:
        j = ctx.block
        name = "?g%d" % j if self.graph is None else "ex:e%d" % self.graph
        inner = " ".join(i.render(ctx) for i in self.inner)
        default = " ".join(i.render(ctx) for i in self.default)
        if self.timestamp:
            default += " %s prov:generatedAtTime ?t%d ." % (name, j)
        if window is None:
            parts = ["GRAPH %s { %s }" % (name, inner), default]
        else:
            # The window's named graphs are its elements; its default graph their timestamps
            # (and their content under window_default_graph = union), a graph of its own here.
            parts = ["{ GRAPH %s { %s } FILTER(%s IN (%s)) }" % (name, inner, name, _iris(ctx.dataset.elements[window]))]
            if default.strip():
                parts.append("GRAPH <%s> { %s }" % (window_graph(ctx, window, True), default))
        parts += [s.render(ctx) for s in self.side]
        return " ".join(parts)


@dataclass(frozen=True)
class ContentBlock:
    """WINDOW ex:w<window> (or WINDOW ?w when `window` is 0) { triple patterns side }: a block
    holding no GRAPH pattern, which reads its elements' merged content and their timestamp
    triples (spec 6.15) unless the option window_default_graph says otherwise; `timestamp`: with
    ?g<n> prov:generatedAtTime ?t<n> beside the content's patterns."""
    window: int
    items: tuple                      # KeyTriple, ValueTriple, TypeTriple
    timestamp: bool = False
    side: tuple = ()

    def render(self, ctx: "Context") -> str:
        with ctx.numbered_block():
            patterns = " ".join(i.render(ctx) for i in self.items)
            if self.timestamp:
                patterns += " ?g%d prov:generatedAtTime ?t%d ." % (ctx.block, ctx.block)
            if ctx.dataset is None:
                side = " ".join(s.render(ctx) for s in self.side)
                return "WINDOW %s { %s %s }" % ("?w" if not self.window else "ex:w%d" % self.window, patterns, side)

            def body(index):
                return "GRAPH <%s> { %s } %s" % (window_graph(ctx, index, False), patterns,
                                                 " ".join(s.render(ctx) for s in self.side))
            return "{ %s }" % body(self.window) if self.window else _over_windows(ctx, body)


def window_graph(ctx: "Context", index: int, holds_graph: bool) -> str:
    """The reference's graph holding what a WINDOW block reads as window `index`'s default graph
    (spec 6.15): a fact window's facts; else its elements' timestamp triples alone when the
    option says `timestamps` or, without the option, when the block holds a GRAPH pattern; else
    their merged content too."""
    option = ctx.dataset.default_graph
    content = index not in ctx.dataset.facts and (option == "union" or (option is None and not holds_graph))
    return "%s%d" % (REFERENCE_MERGED if content else REFERENCE_DEFAULT, index)


def _over_windows(ctx: "Context", body: Callable[[int], str]) -> str:
    """WINDOW ?w { P } for the reference: the union over the declared windows, ?w bound to each
    (spec section 3); P (`body` of a window's index) written once per window from the same
    counts, as it is one pattern."""
    binds = ctx.binds
    branches = []
    for index in ctx.dataset.windows:
        ctx.binds = binds
        branches.append("{ BIND(<%sw%d> AS ?w) { %s } }" % (EX, index, body(index)))
    return "{ %s }" % (" UNION ".join(branches) if branches else "FILTER(false)")


def _iris(iris) -> str:
    return ", ".join("<%s>" % i for i in iris)


# -- the query ------------------------------------------------------------------------------------
def prologue(ctx: "Context") -> str:
    """A query's PREFIX and BASE declarations, for the rspu: IRIs as `ctx` saw them written."""
    lines = ["PREFIX ex: <%s>" % EX, "PREFIX rspu: <%s>" % RSPU, "PREFIX prov: <%s>" % PROV,
             "PREFIX xsd: <%s>" % XSD, "PREFIX rspstar: <%s>" % RSPSTAR]
    if "other" in ctx.spellings:
        lines.append("PREFIX unc: <%s>" % RSPU)
    if "base" in ctx.spellings:
        lines.append("BASE <http://w3id.org/rsp/>")
    return "\n".join(lines)


# An aggregate's alias by its function and argument.
AGGREGATE_ALIASES = {("COUNT", "*"): "n", ("COUNT", "v1"): "nv", ("SUM", "v1"): "total", ("MIN", "v1"): "low",
                     ("MAX", "v1"): "top", ("AVG", "v1"): "mean"}


@dataclass(frozen=True)
class Aggregates:
    """SELECT [?k] (COUNT(*) AS ?n) (SUM(?v1) AS ?total) (MAX(?v1) AS ?top) [GROUP BY ?k]
    [HAVING (COUNT(*) >= having)], or the `functions` given ((function, argument) pairs:
    COUNT(*), COUNT, SUM, MIN, MAX, AVG of ?v1)."""
    by_key: bool
    having: int | None = None
    distinct_count: bool = False
    functions: tuple | None = None

    def head(self) -> str:
        key = "?k " if self.by_key else ""
        if self.functions is not None:
            return key + " ".join("(%s(%s) AS ?%s)" % (f, "*" if a == "*" else "?" + a, AGGREGATE_ALIASES[f, a])
                                  for f, a in self.functions)
        count = "(COUNT(DISTINCT ?o1) AS ?n)" if self.distinct_count else "(COUNT(*) AS ?n)"
        return "%s%s (SUM(?v1) AS ?total) (MAX(?v1) AS ?top)" % (key, count)

    def tail(self) -> str:
        text = " GROUP BY ?k" if self.by_key else ""
        if self.having is not None:
            text += " HAVING (COUNT(*) >= %d)" % self.having
        return text


@dataclass(frozen=True)
class Strategy:
    """One strategy of a report policy (spec section 6.6)."""
    kind: str                         # close | non-empty | content-change | periodic
    window: int | None = None
    period: int | None = None         # ms, periodic(PT..S)
    full_iri: bool = False            # the window written <http://...> rather than ex:w

    def text(self) -> str:
        if self.period is not None:
            return "periodic(%s)" % duration_text(self.period)
        if self.window is None:
            return self.kind
        return "%s(%s)" % (self.kind, "<%sw%d>" % (EX, self.window) if self.full_iri else "ex:w%d" % self.window)


@dataclass(frozen=True)
class Query:
    form: str                                   # SELECT | CONSTRUCT | ASK
    declarations: tuple                         # Declaration, ...
    where: tuple                                # the WHERE group's items
    r2s: str = "RSTREAM"                        # RSTREAM | ISTREAM | DSTREAM
    r2s_written: str = "none"                   # none | keyword (after the form) | register
    every: int | None = None                    # ms: REGISTER QUERY ... COMPUTED EVERY
    projection: tuple | None = ("k",)           # SELECT: variable names; None: *
    distinct: bool = False
    aggregates: Aggregates | None = None
    template: tuple = ()                        # CONSTRUCT: (subject, predicate, object) roles
    policy: tuple = ()                          # Strategy, ...
    from_graphs: tuple = ()                     # FROM ex:<name>: the default graph outside windows
    from_named: tuple = ()                      # FROM NAMED ex:<name>: the graphs GRAPH ranges over there
    default_graph: str | None = None            # option window_default_graph: union | timestamps
    entailment: bool = False                    # option entailment = rdfs

    # -- the engine's text ----------------------------------------------------------------------
    def text(self) -> str:
        ctx = Context()
        where = " ".join(i.render(ctx) for i in self.where)
        head = self._head()
        register = ""
        if self.r2s_written == "register":
            register = "REGISTER %s ex:out" % self.r2s
        elif self.every is not None:
            register = "REGISTER QUERY ex:q"
        if register and self.every is not None:
            register += " COMPUTED EVERY %s" % duration_text(self.every)
        if register:
            register += " AS\n"
        lines = [prologue(ctx), register + head]
        lines += [d.text() for d in self.declarations]
        lines += ["FROM ex:%s" % g for g in self.from_graphs] + ["FROM NAMED ex:%s" % g for g in self.from_named]
        lines.append("WHERE { %s }%s" % (where, self._tail()))
        return "\n".join(lines)

    def _head(self, keyword: bool = True) -> str:
        r2s = " " + self.r2s if keyword and self.r2s_written == "keyword" else ""
        if self.form == "ASK":
            return "ASK"
        if self.form == "CONSTRUCT":
            triples = " ".join("?%s ex:%s ?%s ." % t for t in self.template)
            return "CONSTRUCT%s { %s }" % (r2s, triples)
        if self.aggregates is not None:
            return "SELECT%s %s" % (r2s, self.aggregates.head())
        names = "*" if self.projection is None else " ".join("?" + n for n in self.projection)
        return "SELECT%s %s%s" % (r2s, "DISTINCT " if self.distinct else "", names)

    def _tail(self) -> str:
        return self.aggregates.tail() if self.aggregates is not None and self.form == "SELECT" else ""

    def report(self) -> str | None:
        """The `report` option, or None (the query's own policy)."""
        return " and ".join(s.text() for s in self.policy) if self.policy else None

    def options(self) -> dict[str, str]:
        """The query's options (`report`, `window_default_graph`)."""
        found = {"report": self.report()} if self.policy else {}
        if self.default_graph is not None:
            found["window_default_graph"] = self.default_graph
        if self.entailment:
            found["entailment"] = "rdfs"
        return found

    def spellings(self) -> set:
        """How the query writes its rspu: IRIs (SPELLINGS)."""
        ctx = Context()
        for item in self.where:
            item.render(ctx)
        return ctx.spellings

    def streams(self) -> list[int]:
        return sorted({d.stream for d in self.declarations})

    def dataset_graphs(self, background_graphs: list[str]) -> tuple[list[str] | None, list[str]]:
        """(the default graph outside windows: None for the background's, else the FROM graphs;
        the named graphs GRAPH ranges over there), as SPARQL reads a dataset description: with
        FROM or FROM NAMED, the FROM NAMED graphs only."""
        if not self.from_graphs and not self.from_named:
            return None, background_graphs
        return [EX + g for g in self.from_graphs], [EX + g for g in self.from_named]

    # -- the reference's text --------------------------------------------------------------------
    def reference_text(self, dataset: "Dataset") -> str:
        ctx = Context(dataset=dataset)
        where = " ".join(i.render(ctx) for i in self.where)
        return "%s\n%s\nWHERE { %s }%s" % (prologue(ctx), self._head(keyword=False), where, self._tail())

    def with_r2s(self, r2s: str) -> "Query":
        """The same query under another R2S operator (written after the form unless the
        query registers an output stream)."""
        written = "register" if self.r2s_written == "register" else "keyword"
        return dataclasses.replace(self, r2s=r2s, r2s_written=written)


# -- EP-SPARQL (spec 6.12) -------------------------------------------------------------------------
EVENT_OPERATORS = ("SEQ", "EQUALS", "OPTIONALSEQ", "EQUALSOPTIONAL", "AND", "OR")


@dataclass(frozen=True)
class PairTriple:
    """?p<n> ex:key ?k: another observation of the pattern's key (an event of its own, from any
    element of the stream)."""

    def render(self, ctx: "Context") -> str:
        return "?p%d ex:key ?k ." % ctx.block


@dataclass(frozen=True)
class EventPattern:
    """STREAM <s<stream>> { triple patterns, FILTERs }: every triple pattern matches one event
    (an annotated one with its annotation); variables numbered by the pattern's position, as
    window blocks' are."""
    stream: int
    items: tuple                      # KeyTriple, ValueTriple (none | annotated), PairTriple, Filter

    def render(self, ctx: "Context") -> str:
        ctx.blocks += 1
        ctx.block = ctx.blocks
        return "STREAM <%ss%d> { %s }" % (EX, self.stream, " ".join(i.render(ctx) for i in self.items))

    def reference_text(self, ctx: "Context") -> str:
        """The pattern's matches as SPARQL over a store whose named graphs are the stream's
        elements: each event pattern in a GRAPH of its own (?__e<n>: the element it comes from)."""
        ctx.blocks += 1
        ctx.block = ctx.blocks
        parts = []
        for item in self.items:
            if isinstance(item, Filter):
                parts.append(item.render(ctx))
            else:
                parts.append("GRAPH ?__e%d { %s }" % (len(parts), item.render(ctx)))
        return "SELECT * WHERE { %s }" % " ".join(parts)


@dataclass(frozen=True)
class EventGroup:
    """Operands (EventPattern, EventGroup) with the operators written between them, as written:
    precedence is the reader's (spec 6.12)."""
    operands: tuple
    operators: tuple

    def render(self, ctx: "Context", top: bool = False) -> str:
        parts = [self.operands[0].render(ctx)]
        for operator, operand in zip(self.operators, self.operands[1:]):
            parts += [operator, operand.render(ctx)]
        return " ".join(parts) if top else "{ %s }" % " ".join(parts)

    def patterns(self) -> list:
        return [p for o in self.operands for p in (o.patterns() if isinstance(o, EventGroup) else [o])]


# What a projection's names stand for besides variables.
EVENT_FUNCTIONS = {"duration": "getDURATION()", "start": "getSTARTTIME()", "end": "getENDTIME()"}


@dataclass(frozen=True)
class EventQuery:
    """An EP-SPARQL query: event patterns joined by SEQ, EQUALS, OPTIONALSEQ, EQUALSOPTIONAL, AND
    and OR, bounded by FILTER(getDURATION() < bound) (or <=, or written the other way round,
    after another condition), the FILTER after WHERE's braces or inside them after the last
    event."""
    where: EventGroup
    bound: int                        # ms
    inclusive: bool = False
    reversed_bound: bool = False
    extra: object | None = None       # an expression the FILTER asks too
    inside: bool = False
    form: str = "SELECT"              # SELECT | CONSTRUCT
    projection: tuple | None = ("k",)   # variable names and EVENT_FUNCTIONS' names; None: *
    distinct: bool = False
    template: tuple = ()

    # What the differential test reads of any query.
    declarations = ()
    policy = ()
    every = None
    r2s = "RSTREAM"
    default_graph = None
    entailment = False

    def options(self) -> dict:
        return {}

    def report(self) -> None:
        return None

    def streams(self) -> list[int]:
        return sorted({p.stream for p in self.where.patterns()})

    def spellings(self) -> set:
        ctx = Context()
        self.where.render(ctx, top=True)
        return ctx.spellings

    def condition(self, ctx: "Context") -> str:
        """The FILTER's expression, getDURATION() as written."""
        bound = duration_text(self.bound)
        op = "<=" if self.inclusive else "<"
        if self.reversed_bound:
            text = '"%s"^^xsd:dayTimeDuration %s getDURATION()' % (bound, {"<": ">", "<=": ">="}[op])
        else:
            text = 'getDURATION() %s "%s"^^xsd:duration' % (op, bound)
        return text if self.extra is None else "%s && (%s)" % (self.extra.render(ctx), text)

    def head(self) -> str:
        if self.form == "CONSTRUCT":
            return "CONSTRUCT { %s }" % " ".join("?%s ex:%s ?%s ." % t for t in self.template)
        if self.projection is None:
            return "SELECT %s*" % ("DISTINCT " if self.distinct else "")
        names = " ".join("(%s AS ?%s)" % (EVENT_FUNCTIONS[n], n) if n in EVENT_FUNCTIONS else "?" + n
                         for n in self.projection)
        return "SELECT %s%s" % ("DISTINCT " if self.distinct else "", names)

    def text(self) -> str:
        ctx = Context()
        body = self.where.render(ctx, top=True)
        ctx.block = 0
        condition = "FILTER(%s)" % self.condition(ctx)
        if self.inside:
            return "%s\n%s\nWHERE { %s\n  %s }" % (prologue(ctx), self.head(), body, condition)
        return "%s\n%s\nWHERE { %s }\n%s" % (prologue(ctx), self.head(), body, condition)

    def reference_text(self, variables: list[str], rows: str) -> str:
        """The query's form and FILTER over the matches found (rows: a VALUES table of
        `variables` and each match's ?__start and ?__end), the functions written out as the
        spec defines them: getDURATION() is end − start, getSTARTTIME() and getENDTIME() its ends."""
        ctx = Context()
        self.where.render(ctx, top=True)
        ctx.block = 0
        condition = self.condition(ctx)
        head = self.head()
        if self.projection is None and self.form == "SELECT":
            head = head.replace("*", " ".join("?" + v for v in variables) or "*")
        functions = {"getDURATION()": "(?__end - ?__start)", "getSTARTTIME()": "?__start", "getENDTIME()": "?__end"}
        for written, meant in functions.items():
            condition, head = condition.replace(written, meant), head.replace(written, meant)
        columns = " ".join("?" + v for v in variables + ["__start", "__end"])
        return "%s\n%s WHERE { VALUES (%s) { %s } FILTER(%s) }" % (
            prologue(ctx), head, columns, rows, condition)


@dataclass
class Context:
    dataset: "Dataset | None" = None
    block: int = 0                    # the enclosing window block (0: none)
    blocks: int = 0                   # window blocks written so far
    binds: int = 0                    # BINDs written so far
    spellings: set = field(default_factory=set)

    @contextlib.contextmanager
    def numbered_block(self):
        """A window block's variables numbered by its position among the blocks written; the
        enclosing block's numbering again after it."""
        outer = self.block
        self.blocks += 1
        self.block = self.blocks
        try:
            yield
        finally:
            self.block = outer


@dataclass
class Dataset:
    """What the reference's store holds at one evaluation: each declared window's elements
    (graph IRIs, by window index) and the background's named graphs; which windows are fact
    windows, and the query's option window_default_graph (what its blocks' default graphs are)."""
    windows: list[int]
    elements: dict[int, list[str]]
    background_graphs: list[str]
    facts: frozenset = frozenset()
    default_graph: str | None = None


# -- constants: the same query with other literals ------------------------------------------------
def mapped(node, change: Callable[[object], object]):
    """`node` with `change` applied to every node below it (bottom-up), dataclasses and tuples."""
    if isinstance(node, tuple):
        return tuple(mapped(n, change) for n in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        values = {f.name: mapped(getattr(node, f.name), change) for f in dataclasses.fields(node)}
        return change(dataclasses.replace(node, **values))
    return node


def with_other_constants(query: Query, shift: int) -> Query:
    """The query with its numbers, key IRIs and distribution literals moved by `shift`: a query
    differing from it only in constants (translator/constants.py's sense, and more)."""
    def change(node):
        if isinstance(node, Num):
            value = float(node.text) + shift * (0.25 if "." in node.text else 1)
            return Num(("%g" % value) if "." in node.text else str(int(value)))
        if isinstance(node, KeyTriple) and node.constant is not None:
            return KeyTriple((node.constant + shift - 1) % 3 + 1)
        if isinstance(node, DistLit) and node.text.startswith("N("):
            mu, var = node.text[2:-1].split(",")
            return DistLit("N(%s,%s)" % (int(mu) + shift, var))
        return node
    return dataclasses.replace(query, where=mapped(query.where, change))


# Spellings of a comparison's number in the copies `with_bounds_spelled` makes: the same value
# as a decimal, a double, typed literals (a float, a type derived from xsd:integer), a value
# half below it, the double 0.1 (which the data hold as a float too), NaN and the infinities.
BOUND_SPELLINGS = (
    lambda n: n + ".0" if "." not in n else n + "e0",
    lambda n: n + "e0",
    lambda n: '"%s"^^xsd:double' % n,
    lambda n: '"%s"^^xsd:float' % n,
    lambda n: '"%s"^^xsd:int' % n if "." not in n else '"%s"^^xsd:decimal' % n,
    lambda n: "%g" % (float(n) - 0.5) if "." in "%g" % (float(n) - 0.5) else "%g.0" % (float(n) - 0.5),
    lambda n: "0.1e0",
    lambda n: '"NaN"^^xsd:double',
    lambda n: '"INF"^^xsd:double',
    lambda n: '"-INF"^^xsd:float',
)
COMPARISONS = ("<", "<=", ">", ">=", "=")


def bound_numbers(query: Query, role: str | None = None) -> int:
    """How many numbers the query compares with a variable (`?v > 4`, `0.25 <= ?b`), or with a
    variable of `role`."""
    found = []

    def count(node):
        if isinstance(node, Binary) and node.op in COMPARISONS and {type(node.left), type(node.right)} == {Var, Num} \
                and (role is None or (node.left if isinstance(node.left, Var) else node.right).role == role):
            found.append(node)
        return node
    mapped(query.where, count)
    return len(found)


def with_bounds_spelled(query: Query, copy: int) -> Query:
    """The query with each number it compares with a variable spelled another way
    (BOUND_SPELLINGS, chosen by `copy`, the comparison's place and the number): a query differing
    from it only in such constants, the ones a group of queries applies itself
    (endpoint/engine/sharing.py, `_Split`)."""
    place = [0]

    def change(node):
        if isinstance(node, Binary) and node.op in COMPARISONS and {type(node.left), type(node.right)} == {Var, Num}:
            number = node.left if isinstance(node.left, Num) else node.right
            variable = node.left if isinstance(node.left, Var) else node.right
            if copy == 1:
                # The first copy compares the observations' values with 0.1, where the three
                # orders part (a float 0.1 is above it as a double, equal to it as a float), and
                # keeps its other numbers.
                spell = (lambda n: "0.1") if variable.role == "v" else (lambda n: n)
            else:
                spell = BOUND_SPELLINGS[(3 * copy + place[0] + len(number.text)) % len(BOUND_SPELLINGS)]
            place[0] += 1
            spelled = Num(spell(number.text))
            return Binary(node.op, spelled, node.right) if node.left is number else Binary(node.op, node.left, spelled)
        return node
    return dataclasses.replace(query, where=mapped(query.where, change))


# -- streams and background ---------------------------------------------------------------------
@dataclass(frozen=True)
class Element:
    stream: int
    at: int                           # ms from T0
    key: int
    value: int | str                  # an integer, or a literal as Turtle writes it: 2.5, "x"
    uncertainty: str | None = None    # N(0,1), U(0,2): the value annotated
    tags: tuple = ()                  # ex:tag ex:t<n>: a second key, with none, one or two values
    move: tuple | None = None         # ("enter" | "leave", room): ex:enter ex:r<room>

    def instant(self) -> int:
        return T0 + self.at * MS


def element_iri(n: int) -> str:
    return EX + "e%d" % n


def element_content(n: int, element: Element) -> str:
    """The element's graph content as Turtle 1.2 (prefixes ex:, rspu: declared elsewhere)."""
    annotation = ' {| rspu:uncertainty "%s"^^rspu:distribution |}' % element.uncertainty if element.uncertainty else ""
    more = ""
    if element.tags:
        more += " ; ex:tag %s" % ", ".join("ex:t%d" % t for t in element.tags)
    if element.move is not None:
        more += " ; ex:%s ex:r%d" % element.move
    return "ex:o%d ex:key ex:k%d ; ex:v %s%s%s ." % (n, element.key, element.value, annotation, more)


PREFIXES = ("@prefix ex: <%s> .\n@prefix rspu: <%s> .\n@prefix prov: <%s> .\n@prefix xsd: <%s> .\n"
            "@prefix rdfs: <%s> .\n" % (EX, RSPU, PROV, XSD, RDFS))


def stream_file(elements: list[Element], stream: int) -> str:
    """TriG 1.2 of one stream's elements in the order drawn (ties in that order: spec 6.1)."""
    lines = [PREFIXES]
    for n, element in enumerate(elements):
        if element.stream == stream:
            lines.append('ex:e%d prov:generatedAtTime "%s"^^xsd:dateTime .' % (n, instant_text(element.instant())))
            lines.append("ex:e%d { %s }" % (n, element_content(n, element)))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class BackgroundData:
    limits: tuple                     # per key 1..3: its ex:limit, or None
    distributions: tuple              # per key 1..3: its rspu:uncertainty literal, or None
    sensor: str | None                # ex:Sensor rspu:uncertainty
    labels: tuple                     # keys labelled in the named graph ex:bg (others in ex:bg2)
    schema: tuple = ()                # (subject, rdfs: property, object) in the default graph

    def trig(self) -> str:
        lines = [PREFIXES] + ["%s rdfs:%s %s ." % triple for triple in self.schema]
        for k, limit in enumerate(self.limits, 1):
            if limit is not None:
                lines.append("ex:k%d ex:limit %d ." % (k, limit))
        for k, d in enumerate(self.distributions, 1):
            if d is not None:
                lines.append('ex:k%d rspu:uncertainty "%s"^^rspu:distribution .' % (k, d))
        if self.sensor is not None:
            lines.append('ex:Sensor rspu:uncertainty "%s"^^rspu:distribution .' % self.sensor)
        lines.append("ex:bg { %s }" % " ".join('ex:k%d ex:label "k%d" .' % (k, k) for k in self.labels))
        others = [k for k in (1, 2, 3) if k not in self.labels]
        if others:
            lines.append("ex:bg2 { %s }" % " ".join('ex:k%d ex:label "other%d" .' % (k, k) for k in others))
        return "\n".join(lines) + "\n"

    def named_graphs(self) -> list[str]:
        return [EX + "bg"] + ([EX + "bg2"] if len(set(self.labels)) < 3 else [])


@dataclass(frozen=True)
class Case:
    """One example: the query, its input, and the span of evaluation instants (T0, T0 + end]."""
    query: Query
    elements: tuple
    background: BackgroundData
    end: int = 24_000                 # ms

    def streams(self) -> list[int]:
        return self.query.streams()

    def __repr__(self) -> str:
        """What a failing example prints: the query as registered, its policy, the input."""
        return "\n".join(["", self.query.text(), "options = %s" % self.query.options(), "elements (stream, ms, key, "
                          "value, uncertainty, tags, move): %s" % [
                              (e.stream, e.at, e.key, e.value, e.uncertainty, e.tags, e.move) for e in self.elements],
                          "background:", self.background.trig(), "evaluated in (T0, T0 + %d ms]" % self.end])

    def _repr_pretty_(self, printer, cycle) -> None:     # hypothesis prints a failing example so
        printer.text(repr(self))
