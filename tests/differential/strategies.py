"""Hypothesis strategies drawing whole RSP-QL* queries (model.Query) with their streams and
background (model.Case), from composable parts so that a failure shrinks to a small query.

Three shapes of WHERE clause are drawn, because the engine's fast paths are reached by shapes:
- `distributive`: one time window, one WINDOW block with its GRAPH block and row-wise FILTERs
  and BINDs (incremental ranges, shared ranges, constant groups);
- `joined`: one WINDOW block per declared time window and background triple patterns
  (joined windows);
- `general`: any nesting of window blocks (also WINDOW ?w), background patterns and graphs,
  OPTIONAL, UNION, MINUS, groups, FILTER and BIND, over windows of every kind.
"""
from __future__ import annotations

import functools

from hypothesis import strategies as st

from .model import (
    Aggregates, Background, BackgroundData, BackgroundGraph, Binary, Bind, Call, Case, CountWindow, Declaration,
    DistLit, Element, Exists, Filter, KeyTriple, Minus, Num, Optional_, PastWindow, Query, SPELLINGS, Strategy,
    SubGroup, TimeWindow, Union_, ValueTriple, Values, Var, WindowBlock,
)

SECOND = 1000
durations = st.sampled_from([1000, 2000, 3000, 4000, 5000, 6000, 1500, 2500])
starts = st.none() | st.integers(-3, 6).map(lambda s: s * SECOND)

time_window = st.builds(TimeWindow, range=durations, step=st.none() | durations, tumbling=st.booleans(),
                        start=starts, literal=st.booleans())
count_window = st.builds(CountWindow, size=st.integers(1, 4), step=st.none() | st.integers(1, 3))


@st.composite
def past_window(draw):
    width = draw(st.integers(2, 8)) * SECOND
    lag = draw(st.integers(0, width // SECOND - 1)) * SECOND
    return PastWindow(width, lag, draw(durations), draw(starts))


any_window = st.one_of(time_window, time_window, count_window, past_window())


def declarations(spec, min_size=1, max_size=3):
    return st.lists(st.tuples(st.sampled_from([1, 2]), spec), min_size=min_size, max_size=max_size).map(
        lambda found: tuple(Declaration(k, stream, s) for k, (stream, s) in enumerate(found, 1)))


# -- expressions ----------------------------------------------------------------------------------
# Two vocabularies: `local` expressions read mostly the variables of the enclosing window block
# (or block 1 beside it) and literals, so that they are bound and their values matter; the
# `anywhere` ones read any block's and the background's as often.
spelling = st.sampled_from(SPELLINGS)
small = st.integers(0, 9).map(lambda n: Num(str(n)))
fraction = st.sampled_from(["0.05", "0.25", "0.5", "0.75", "0.9"]).map(Num)
distribution_literal = st.one_of(
    st.builds(lambda mu, var: DistLit("N(%d,%d)" % (mu, var)), st.integers(-2, 6), st.integers(1, 4)),
    st.builds(lambda a, w: DistLit("U(%d,%d)" % (a, a + w)), st.integers(-2, 5), st.integers(1, 4)))
OWN = {"local": st.just(None), "anywhere": st.sampled_from([1, 2])}


@functools.cache
def number(where):
    own = st.builds(Var, st.just("v"), OWN[where])
    return st.one_of(own, small, st.just(Var("l"))) if where == "anywhere" else st.one_of(own, small)


@functools.cache
def distribution_leaf(where):
    own = st.builds(Var, st.just("u"), OWN[where])
    background = st.sampled_from([Var("d"), Var("mu")])
    if where == "local":
        return st.one_of(own, own, distribution_literal)
    return st.one_of(own, distribution_literal, background, background)


@functools.cache
def distribution(where):
    # Nested calls as deep as hypothesis draws them (a chain: each call has one nested argument).
    leaf = distribution_leaf(where)
    nested = st.deferred(lambda: st.one_of(
        leaf, leaf,
        st.builds(lambda d, x, s: Call("add", (d, x), s), nested, number(where), spelling),
        st.builds(lambda d, x, s: Call("subtract", (d, x), s), nested, number(where), spelling),
        st.builds(lambda d, e, s: Call("add", (d, e), s), nested, leaf, spelling)))
    return nested


@functools.cache
def probability(where):
    d, x = distribution(where), number(where)
    return st.one_of(
        st.builds(lambda d, x, s: Call("greaterThan", (d, x), s), d, x, spelling),
        st.builds(lambda d, x, s: Call("lessThan", (d, x), s), d, x, spelling),
        st.builds(lambda d, lo, w, s: Call("between", (d, lo, Num(str(int(lo.text) + w))), s),
                  d, small, st.integers(1, 5), spelling))


comparison = st.sampled_from([">", ">=", "<", "<=", "="])


@functools.cache
def filters(where):
    v = st.builds(Var, st.just("v"), OWN[where])
    return st.builds(Filter, st.one_of(
        st.builds(Binary, comparison, probability(where), fraction),
        st.builds(Binary, comparison, probability(where), fraction),
        st.builds(Binary, comparison, v, small),
        st.builds(Binary, comparison, v, st.just(Var("l"))),
        st.builds(Binary, st.sampled_from([">", "<"]), st.builds(Var, st.just("b"), st.none() | st.sampled_from([1, 2])),
                  fraction)))


@functools.cache
def binds(where):
    v = st.builds(Var, st.just("v"), OWN[where])
    return st.builds(Bind, st.one_of(probability(where), probability(where), distribution(where),
                                     st.builds(Binary, st.just("+"), v, small)))


@functools.cache
def row_wise(where="local"):
    """FILTERs and BINDs, and a BIND with a FILTER reading it."""
    pair = st.builds(lambda p, f: (Bind(p), Filter(Binary(">", Var("b"), f))), probability(where), fraction)
    return st.lists(st.one_of(filters(where), binds(where), pair), max_size=2).map(
        lambda items: tuple(x for i in items for x in (i if isinstance(i, tuple) else (i,))))


# -- window blocks ------------------------------------------------------------------------------------
value_triple = st.builds(ValueTriple, st.sampled_from(["none", "annotated", "annotated", "quoted"]))
key_triple = st.builds(KeyTriple, st.none() | st.integers(1, 3))


@st.composite
def graph_block(draw, local=True):
    """The content of a GRAPH ?g block: an observation's key and value (optionally annotated),
    an OPTIONAL annotation, FILTERs and BINDs."""
    items = []
    if draw(st.booleans()) or not local:
        items.append(draw(key_triple))
    items.append(draw(value_triple))
    if draw(st.integers(0, 3)) == 0:
        items.append(Optional_((ValueTriple("annotated"),)))
    items += draw(row_wise())
    return tuple(items)


GRAPH_BLOCK = graph_block()


@functools.cache
def window_block(window, timestamp=st.booleans()):
    return st.builds(WindowBlock, st.just(window), GRAPH_BLOCK, timestamp, row_wise())


# -- the three shapes ---------------------------------------------------------------------------
@st.composite
def distributive(draw):
    decls = draw(declarations(time_window, max_size=1))
    block = draw(window_block(1, timestamp=st.just(False)))
    return decls, (block,) + draw(row_wise())


@st.composite
def joined(draw):
    decls = draw(declarations(time_window, min_size=2, max_size=3))
    blocks = [draw(window_block(d.index, timestamp=st.just(False))) for d in decls]
    # Each block keys its observation (?k joins them).
    blocks = [b if any(isinstance(i, KeyTriple) and i.constant is None for i in b.inner)
              else WindowBlock(b.window, (KeyTriple(),) + b.inner, b.timestamp, b.side) for b in blocks]
    background = draw(st.lists(st.sampled_from([Background("limit"), Background("dist")]), max_size=2, unique=True))
    order = draw(st.permutations(blocks + background))
    return decls, tuple(order)


@functools.cache
def where_clauses(windows: tuple):
    """WHERE clauses over windows with these indexes: window blocks (WINDOW ?w too), background
    patterns and graphs, FILTER and BIND, nested in OPTIONAL, UNION, MINUS and groups."""
    block, side = _short(GRAPH_BLOCK), _short(row_wise())
    # Triple patterns over a window's default graph (timestamps, and content under union).
    default = st.lists(st.sampled_from([ValueTriple("none"), KeyTriple(), ValueTriple("annotated")]), max_size=1)
    leaf = st.one_of(
        st.builds(WindowBlock, st.sampled_from(windows + (0,)), block, st.booleans(), side),
        st.builds(WindowBlock, st.sampled_from(windows), block, st.booleans(), side),
        st.builds(WindowBlock, st.sampled_from(windows + (0,)), block, st.booleans(), side,
                  graph=st.none() | st.integers(0, 5), default=default.map(tuple)),
        st.sampled_from([Background("limit"), Background("dist"), Background("sensor")]),
        st.builds(BackgroundGraph, st.booleans()),
        st.builds(Values, st.lists(st.integers(1, 3), min_size=1, max_size=2, unique=True).map(tuple)),
        _short(filters("anywhere")), _short(binds("anywhere")))
    return st.recursive(
        st.lists(leaf, min_size=1, max_size=3).map(tuple),
        lambda inner: st.one_of(
            st.builds(lambda a, b: (Optional_(b),) + a, inner, inner),
            st.builds(lambda a, b, c: a + (Union_(b, c),), inner, inner, inner),
            st.builds(lambda a, b: a + (Minus(b),), inner, inner),
            st.builds(lambda a, b: a + (SubGroup(b),), inner, inner),
            st.builds(lambda a, n, b: a + (Exists(n, b),), inner, st.booleans(), inner)),
        max_leaves=6)


@st.composite
def general(draw):
    decls = draw(declarations(any_window))
    windows = tuple(d.index for d in decls)
    where = draw(where_clauses(windows))
    if not any(_holds_window(i) for i in where):
        where = (draw(window_block(windows[0])),) + where
    return decls, where


def _short(strategy):
    """The strategy behind a short repr (hypothesis writes the repr of the strategies it draws
    from; these nest the expression strategies tens of kilobytes deep)."""
    return st.deferred(lambda: strategy)


def _holds_window(item) -> bool:
    if isinstance(item, WindowBlock):
        return True
    for part in ("items", "left", "right"):
        if any(_holds_window(i) for i in getattr(item, part, ())):
            return True
    return False


# -- the query -------------------------------------------------------------------------------------
VARIABLES = ["k", "v1", "v2", "u1", "u2", "t1", "g1", "o1", "l", "d", "mu", "lab", "w", "b1", "b2", "bg"]


@st.composite
def policy(draw, decls, every):
    windows = [d.index for d in decls]
    window = st.sampled_from(windows)
    has_count = any(isinstance(d.spec, CountWindow) for d in decls)
    choices = [
        st.just(()),
        st.just((Strategy("non-empty"),)),
        st.builds(lambda w, f: (Strategy("close", w, full_iri=f),), window, st.booleans()),
        st.builds(lambda w, v: (Strategy("close", w), Strategy("non-empty", v)), window, window),
        st.builds(lambda w: (Strategy("non-empty", w),), window),
        st.builds(lambda p: (Strategy("periodic", period=p),), durations),
        st.builds(lambda p: (Strategy("periodic", period=p), Strategy("non-empty")), durations),
        st.just((Strategy("content-change"),)),
        st.builds(lambda w: (Strategy("content-change", w),), window),
    ]
    if every is not None:
        choices.append(st.just((Strategy("periodic"),)))
    if not has_count:
        choices.append(st.builds(lambda w, v: (Strategy("close", w), Strategy("close", v)), window, window))
    return draw(st.one_of(choices))


@st.composite
def queries(draw, shape=None):
    shape = shape or draw(st.sampled_from(["distributive", "joined", "general", "general"]))
    decls, where = draw({"distributive": distributive, "joined": joined, "general": general}[shape]())
    form = "SELECT" if shape != "general" else draw(st.sampled_from(["SELECT", "SELECT", "SELECT", "CONSTRUCT", "ASK"]))
    every = draw(st.none() | durations) if draw(st.integers(0, 3)) == 0 else None
    r2s = draw(st.sampled_from(["RSTREAM", "ISTREAM", "DSTREAM"])) if form != "ASK" else "RSTREAM"
    written = "none" if r2s == "RSTREAM" and draw(st.booleans()) else \
        draw(st.sampled_from(["keyword", "register"] if form == "SELECT" else ["keyword"]))
    if form == "ASK":
        written = "none"
    projection, distinct, aggregates, template = ("k",), False, None, ()
    if form == "SELECT":
        if shape == "general" and draw(st.integers(0, 3)) == 0:
            aggregates = draw(st.builds(Aggregates, st.booleans(), st.none() | st.integers(1, 3), st.booleans()))
        else:
            projection = tuple(draw(st.lists(st.sampled_from(VARIABLES), min_size=1, max_size=5, unique=True)))
            if shape == "general":
                projection = draw(st.just(projection) | st.none())
                distinct = projection is not None and draw(st.booleans())
    elif form == "CONSTRUCT":
        template = tuple(draw(st.lists(st.tuples(st.sampled_from(["k", "o1", "g1", "o2"]),
                                                 st.sampled_from(["saw", "had"]),
                                                 st.sampled_from(["v1", "u1", "v2", "l", "b1", "t1"])),
                                       min_size=1, max_size=2, unique=True)))
    if shape == "distributive":
        chosen_policy = draw(st.sampled_from([(), (Strategy("non-empty"),)]) |
                             st.builds(lambda p: (Strategy("periodic", period=p),), durations))
    else:
        chosen_policy = draw(policy(decls, every))
    from_graphs, from_named, union = (), (), False
    if shape == "general":
        if draw(st.integers(0, 5)) == 0:
            from_graphs = tuple(draw(st.lists(st.sampled_from(["bg", "bg2", "nothing"]), max_size=2, unique=True)))
            from_named = tuple(draw(st.lists(st.sampled_from(["bg", "bg2"]), max_size=2, unique=True)))
        union = draw(st.integers(0, 4)) == 0
    return Query(form, decls, where, r2s, written, every, projection, distinct, aggregates, template, chosen_policy,
                 from_graphs, from_named, union)


element = st.builds(Element, stream=st.sampled_from([1, 2]),
                    at=st.integers(0, 20).map(lambda s: s * SECOND) | st.integers(0, 40).map(lambda h: h * 500),
                    key=st.integers(1, 3), value=st.integers(0, 9),
                    uncertainty=st.sampled_from([None, "N(0,1)", "N(1,4)", "U(-1,1)", "N(-2,0.5)", "N(3,1)"]))
background = st.builds(
    BackgroundData,
    limits=st.tuples(*[st.none() | st.integers(0, 9)] * 3),
    distributions=st.tuples(*[st.none() | st.sampled_from(["N(0,1)", "N(2,2)", "U(0,3)"])] * 3),
    sensor=st.none() | st.sampled_from(["N(0,1)", "U(-2,2)"]),
    labels=st.lists(st.integers(1, 3), unique=True).map(tuple))


def cases(shape=None):
    return st.builds(Case, queries(shape), st.lists(element, max_size=12).map(tuple), background)
