"""Rewrite an RSP-QL* query into SPARQL-star for one evaluation (spec §3, window datasets).

The store keeps every stream element as a named graph, its timestamp triple in its stream's
timestamps graph, and background data in the default graph and other named graphs. For the
elements each window holds at this evaluation:

- `GRAPH ?g { P }` inside `WINDOW w` becomes
  `{ SELECT * WHERE { GRAPH ?g { P } VALUES ?g { elements of w } } }`;
  `GRAPH <n> { P }` stays only if `n` is an element of `w`, else it matches nothing.
- Triples in a window's default graph match the timestamp triples of the window's elements:
  they move into the stream's timestamps graph with their subjects restricted to the elements.
- `WINDOW ?w { P }` becomes a UNION over the declared windows with `?w` bound to each.
- Outside every window, `GRAPH` ranges over the background named graphs only (or the
  `FROM NAMED` graphs); `FROM` graphs become the query's default graph.

Element sets are inlined as VALUES: the store selects them from its time index, so the cost
does not grow with the size of the store.

Under RDFS entailment (`RewriteOptions.entailment`, spec §6.11) a window's element graphs are
matched through their closure graphs (store/entailment.py) while `?g` still binds the element:
`GRAPH ?g { P }` becomes `GRAPH ?c { P } VALUES (?g ?c) { (element closure) ... }` and a merged
default graph reads the closures; the store gives the closure graphs and the default graph.

A query is rewritten once, at registration, into a `Template`: the SPARQL-star text with a slot
wherever the text depends on an evaluation (a window's elements, whether a named graph is among
them, the background graphs). An evaluation only fills the slots.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import QuerySyntaxError
from .model import ContinuousQuery
from .namespaces import RDF, RSPU
from .syntax import (
    Bind, BlankNodePropertyList, Collection, Expression, Filter, GraphPattern, Group, InlineData,
    Keyworded, ParsedBody, PropertyValues, ReifiedTriple, Span, SubSelect, Term, TriplesBlock,
    TriplesSameSubject, TripleTerm, UnionPattern, holds_graph_pattern, walk,
)
from .tokens import BNODE, IRI, NAME, PNAME, VAR, SourceText
from .uncertainty.functions import FUNCTION_NAMES, FUSED_PREFIX, fused_shape
from .vocabulary import PROV_GENERATED_AT_TIME, timestamps_graph

# Variables the rewrite introduces start with this; they are never part of a query's results.
INTERNAL_VARIABLE_PREFIX = "__rsp"
_FRESH = INTERNAL_VARIABLE_PREFIX
_NOTHING = "FILTER(false)"


@dataclass(frozen=True)
class RewriteOptions:
    """Switches for the optimizations of the RSPU paper (on by default; off only to measure them)."""

    lazy_bind: bool = True
    h4: bool = True
    # Whether a window's default graph also holds its elements' merged content: True in every
    # WINDOW block, False in none (section 3), None in the blocks holding no GRAPH pattern
    # (spec 6.15: `block_reads_content`).
    window_union: bool | None = None
    fuse_rspu: bool = True       # nested rspu: calls as one call (functions.FUSED_PREFIX)
    entailment: bool = False     # RDFS entailment: elements read through their closure graphs


class _Filling:
    """What one evaluation fills a template's slots with, each window's set made once."""

    def __init__(self, elements: dict[str, list[str]], background: list[str],
                 closures: dict[str, str] | None = None):
        self.elements = elements
        self.background = background
        self.closures = closures or {}
        self._values: dict[str | None, str] = {}
        self._members: dict[str | None, set[str]] = {}

    def graphs(self, window: str | None) -> list[str]:
        return self.background if window is None else self.elements.get(window, [])

    def values(self, window: str | None) -> str:
        if window not in self._values:
            self._values[window] = " ".join(["<%s>" % g for g in self.graphs(window)])
        return self._values[window]

    def closure(self, element: str) -> str:
        return self.closures.get(element, element)

    def has(self, window: str | None, iri: str) -> bool:
        if window not in self._members:
            self._members[window] = set(self.graphs(window))
        return iri in self._members[window]


@dataclass(frozen=True)
class Values:
    """The graphs of a window (None: the background graphs), as VALUES data."""
    window: str | None

    def fill(self, filling: _Filling) -> str:
        return filling.values(self.window)

    def show(self) -> str:
        return "$elements(<%s>)" % self.window if self.window is not None else "$background"


@dataclass(frozen=True)
class Closures:
    """The elements of a window with their closure graphs, as VALUES pairs (`pairs`), or the
    closure graphs alone."""
    window: str
    pairs: bool

    def fill(self, filling: _Filling) -> str:
        if self.pairs:
            return " ".join("(<%s> <%s>)" % (g, filling.closure(g)) for g in filling.graphs(self.window))
        return " ".join("<%s>" % filling.closure(g) for g in filling.graphs(self.window))

    def show(self) -> str:
        return "$%s(<%s>)" % ("closures" if self.pairs else "closure-graphs", self.window)


@dataclass(frozen=True)
class ClosureOf:
    """The closure graph of one element named in the query (the element itself when the
    window does not hold it: the pattern then matches nothing anyway)."""
    window: str
    iri: str

    def fill(self, filling: _Filling) -> str:
        return "<%s>" % (filling.closure(self.iri) if filling.has(self.window, self.iri) else self.iri)

    def show(self) -> str:
        return "$closure(<%s>)" % self.iri


@dataclass(frozen=True)
class IfMember:
    """One text when every IRI of `iris` is among the graphs of a window (None: the background
    graphs), another when one is not."""
    window: str | None
    iris: tuple[str, ...]
    member: tuple
    other: tuple

    def fill(self, filling: _Filling) -> str:
        inside = all(filling.has(self.window, iri) for iri in self.iris)
        return _fill(self.member if inside else self.other, filling)

    def show(self) -> str:
        iris = " ".join("<%s>" % i for i in self.iris)
        if self.member == ("",):
            return "$unless(%s in %s){ %s }" % (iris, Values(self.window).show(), _show(self.other))
        return "$if(%s in %s){ %s }else{ %s }" % (iris, Values(self.window).show(), _show(self.member),
                                                   _show(self.other))


def _fill(pieces: tuple, filling: _Filling) -> str:
    return "".join(p if isinstance(p, str) else p.fill(filling) for p in pieces)


def _show(pieces: tuple) -> str:
    return "".join(p if isinstance(p, str) else p.show() for p in pieces)


@dataclass
class RewrittenQuery:
    text: str
    default_graph: list[str] | None
    source: SourceText
    placed: list[tuple[int, int, int]] = field(repr=False)   # (length, source offset, copied) per part
    fused_functions: tuple[str, ...] = ()    # FUSED_PREFIX IRIs the text calls

    def source_position(self, line: int, column: int) -> tuple[int, int]:
        """Map a (line, column) in the rewritten text back to the user's query text."""
        offset = SourceText(self.text).offset(line, column)
        best, start = (0, 0, 0), 0
        for length, src, copied in self.placed:
            if start > offset:
                break
            best = (start, src, copied)
            start += length + 1
        out_start, src, copied = best
        return self.source.position(src + min(max(offset - out_start, 0), max(copied - 1, 0)))


@dataclass
class Template:
    """A query rewritten once: text parts (each a tuple of strings and slots) with where in the
    user's text each came from; `instantiate` fills the slots for one evaluation."""

    parts: list[tuple[tuple, int, bool]]     # (pieces, source offset, copied from the source)
    # A query's FROM and FROM NAMED graphs are its whole background dataset, as in SPARQL (1.1
    # section 13.2): the default graph outside windows is the merge of the FROM graphs (none:
    # empty) and GRAPH there ranges over the FROM NAMED graphs (none: nothing). Without either,
    # both are None: the background default graph and every background named graph.
    default_graph: list[str] | None
    source: SourceText
    fused_functions: tuple[str, ...]
    from_named: list[str] | None             # FROM NAMED graphs: the background GRAPH ranges over
    calls_rspu: bool = True                  # whether the text calls rspu: functions (fused or not)
    entailment: bool = False                 # reads elements through closure graphs (spec §6.11)
    # Triple patterns read against timestamp triples alone whose constant predicate is not the
    # timestamp predicate, so they never match: (source offset, window, predicate IRI).
    unmatchable: tuple = ()

    def instantiate(self, elements: dict[str, list[str]], background_graphs: list[str],
                    closures: dict[str, str] | None = None) -> RewrittenQuery:
        """The text for one evaluation: `elements` per window, the background graphs, and under
        entailment each element's closure graph."""
        filling = _Filling(elements, background_graphs if self.from_named is None else self.from_named, closures)
        texts = [pieces[0] if len(pieces) == 1 and isinstance(pieces[0], str) else _fill(pieces, filling)
                 for pieces, _, _ in self.parts]
        placed = [(len(text), src, len(text) if copied else 0) for text, (_, src, copied) in zip(texts, self.parts)]
        return RewrittenQuery(" ".join(texts) + " ", self.default_graph, self.source, placed, self.fused_functions)

    def show(self) -> str:
        """The template as text, its slots written `$elements(<window>)`, `$background`,
        `$if(<graph> in ...){ ... }else{ ... }` and `$unless(<graph> in ...){ ... }`."""
        return " ".join(_show(pieces) for pieces, _, _ in self.parts)


class _Emitter:
    def __init__(self, body: ParsedBody):
        self.text = body.source.text
        self.tokens = body.tokens
        self.parts: list[tuple[tuple, int, bool]] = []

    def _put(self, pieces: str | tuple, src: int, copied: bool) -> None:
        self.parts.append((pieces if isinstance(pieces, tuple) else (pieces,), src, copied))

    def copy(self, span: Span) -> None:
        if span.start >= span.end:
            return
        a, b = self.tokens[span.start].offset, self.tokens[span.end - 1].end
        self._put(self.text[a:b], a, True)

    def put(self, pieces: str | tuple, at_token: int) -> None:
        """Text, or a tuple of strings and slots, placed at a token of the user's query."""
        self._put(pieces, self.tokens[at_token].offset, False)

    def span_text(self, span: Span) -> str:
        return self.text[self.tokens[span.start].offset:self.tokens[span.end - 1].end]


@dataclass(frozen=True)
class _Context:
    window: str | None = None     # the window whose dataset is active, None outside windows
    in_graph: bool = False        # inside a GRAPH pattern (triples are in that graph)
    content: bool = False         # the window's default graph holds its elements' content too


def block_reads_content(block: GraphPattern, options: RewriteOptions) -> bool:
    """Whether a WINDOW block's default graph holds its elements' merged content besides their
    timestamp triples: as the option (or the dialect) says, else when no GRAPH pattern stands
    anywhere inside the block (spec 6.15)."""
    if options.window_union is not None:
        return options.window_union
    return not holds_graph_pattern(block.group)


class _Rewriter:
    def __init__(self, query: ContinuousQuery, options: RewriteOptions):
        self.query = query
        self.body = query.body
        self.tokens = query.body.tokens
        self.options = options
        self.emit = _Emitter(query.body)
        self.fresh_count = 0
        self.deferred: list[Filter] = _deferrable_filters(query) if options.h4 else []
        self._deferred_ids = {id(f) for f in self.deferred}
        self.fused: set[str] = set()
        self.unmatchable: list[tuple[int, str, str]] = []

    # -- helpers ----------------------------------------------------------------------------
    def fresh(self) -> str:
        self.fresh_count += 1
        return "?%s%d" % (_FRESH, self.fresh_count)

    def resolve(self, token_index: int) -> str:
        return self.body.resolve(token_index)

    def error(self, message: str, token_index: int) -> QuerySyntaxError:
        return self.body.source.error(message, self.tokens[token_index].offset)

    # -- query --------------------------------------------------------------------------------
    def run(self) -> Template:
        body = self.body
        if self.query.base is not None:
            # Oxigraph resolves what is copied as written (GRAPH names, expressions, the
            # CONSTRUCT template, the query's own BASE) against the IRI the parser used.
            self.emit.put("BASE <%s>" % self.query.base, 0)
        self.emit.copy(body.prologue)
        self.form_head(body)
        if body.construct_template is not None:
            t = body.construct_template
            self.emit.copy(Span(t.open, t.close + 1))
        self.emit.put("WHERE", body.where.open)
        if self.deferred:
            self.emit.put("{ { SELECT * WHERE", body.where.open)
            self.group(body.where, _Context())
            self.emit.put("}", body.where.open)
            for k, f in enumerate(self.deferred, 1):
                constraint = f.expression.parts[0]
                variable = "?%sh4_%d" % (_FRESH, k)
                self.emit.put("BIND(", constraint.start)
                self.expression_span(Span(constraint.start + 1, constraint.end))
                self.emit.put("AS %s) FILTER(%s)" % (variable, variable), constraint.start)
            self.emit.put("}", body.where.close)
        else:
            self.group(body.where, _Context())
        self.expression(body.modifiers, _Context())
        described = bool(self.query.from_graphs or self.query.from_named_graphs)
        default = list(self.query.from_graphs) if described else None
        if self.query.named_keep_default and not self.query.from_graphs:
            default = None          # CQELS-QL: FROM NAMED alone leaves the background default graph
        return Template(self.emit.parts, default, body.source,
                        tuple(sorted(self.fused)), list(self.query.from_named_graphs) if described else None,
                        bool(self.fused) or body.calls_rspu(), self.options.entailment,
                        tuple(dict.fromkeys(self.unmatchable)))

    def form_head(self, body: ParsedBody) -> None:
        """The query form and its projection, an alias read by a later projected expression of a
        grouping SELECT written out as its expression (`projection_aliases`)."""
        inlined = projection_aliases(body)
        if not inlined:
            self.expression(body.form_head, _Context())
            return
        for part in body.form_head.parts:
            at = part.start
            for k in range(part.start, part.end):
                if k in inlined:
                    self.expression_span(Span(at, k))
                    self.emit.put("(%s)" % inlined[k], k)
                    at = k + 1
            self.expression_span(Span(at, part.end))

    def expression(self, expression: Expression, ctx: _Context) -> None:
        for part in expression.parts:
            if isinstance(part, Span):
                self.expression_span(part)
            else:
                self.group(part, ctx)

    # -- nested rspu: calls ---------------------------------------------------------------------
    def expression_span(self, span: Span) -> None:
        """Copy expression tokens, fusing each rspu: call that has rspu: calls as arguments
        into one call (FUSED_PREFIX)."""
        k = copied = span.start
        while k < span.end:
            call = self.rspu_call(k, span.end) if self.options.fuse_rspu else None
            if call is None or all(child is None for child in call[0][1:]):
                k += 1
                continue
            tree, leaves, end = call
            self.emit.copy(Span(copied, k))
            self.emit.put("<%s%s>(" % (FUSED_PREFIX, fused_shape(tree)), k)
            for n, (a, b) in enumerate(leaves):
                if n:
                    self.emit.put(",", a)
                self.emit.copy(Span(a, b))
            self.emit.put(")", end - 1)
            self.fused.add(FUSED_PREFIX + fused_shape(tree))
            k = copied = end
        self.emit.copy(Span(copied, span.end))

    def rspu_call(self, k: int, end: int):
        """(call tree, leaf argument token ranges, end) of an rspu: function call starting at
        token k, or None. A tree is (name, child, ...) with None for a leaf argument."""
        tokens = self.tokens
        if not (k + 1 < end and tokens[k].kind in (IRI, PNAME) and tokens[k + 1].is_punct("(")):
            return None
        iri = self.resolve(k)
        if not iri.startswith(RSPU) or iri[len(RSPU):] not in FUNCTION_NAMES:
            return None
        arguments, depth, start, i = [], 0, k + 2, k + 2
        while i < end:
            tok = tokens[i]
            if tok.is_punct("(", "<<(", "[", "{"):
                depth += 1
            elif tok.is_punct(")", ")>>", "]", "}"):
                if depth == 0:
                    if i > start or arguments:
                        arguments.append((start, i))
                    break
                depth -= 1
            elif tok.is_punct(",") and depth == 0:
                arguments.append((start, i))
                start = i + 1
            i += 1
        else:
            return None
        tree, leaves = [iri[len(RSPU):]], []
        for a, b in arguments:
            inner = self.rspu_call(a, b)
            if inner is not None and inner[2] == b:
                tree.append(inner[0])
                leaves += inner[1]
            else:
                tree.append(None)
                leaves.append((a, b))
        return tuple(tree), leaves, i + 1

    def group(self, group: Group, ctx: _Context) -> None:
        self.emit.put("{", group.open)
        for item in group.items:
            self.node(item, ctx)
        self.emit.put("}", group.close if group.close >= 0 else group.open)

    def node(self, node, ctx: _Context) -> None:
        if isinstance(node, Group):
            self.group(node, ctx)
        elif isinstance(node, GraphPattern):
            if node.is_window:
                self.window_pattern(node, ctx)
            else:
                self.graph_pattern(node, ctx)
        elif isinstance(node, Keyworded):
            self.emit.copy(node.head)
            self.group(node.group, ctx)
        elif isinstance(node, UnionPattern):
            for k, g in enumerate(node.groups):
                if k:
                    self.emit.put("UNION", g.open)
                self.group(g, ctx)
        elif isinstance(node, SubSelect):
            self.expression(node.head, ctx)
            self.group(node.where, ctx)
            self.expression(node.tail, ctx)
        elif isinstance(node, Bind):
            if not self.lazy_skips(node):
                self.expression(node.expression, ctx)
        elif isinstance(node, Filter):
            if id(node) not in self._deferred_ids:
                self.expression(node.expression, ctx)
        elif isinstance(node, InlineData):
            self.emit.copy(node.span)
        elif isinstance(node, TriplesBlock):
            if ctx.window is not None and not ctx.in_graph:
                self.window_default_triples(node, ctx.window, ctx.content)
            elif ctx.window is None and not ctx.in_graph and self.query.merged_windows:
                self.merged_default_triples(node)
            else:
                self.emit.copy(node.span)
        else:  # pragma: no cover - the parser produces no other node
            raise TypeError(node)

    def lazy_skips(self, bind: Bind) -> bool:
        """Lazy variables (the RSPU paper): a BIND of an rspu: call whose variable nothing else reads
        is not computed. BIND never removes a row, so dropping it changes no other binding."""
        if not (self.options.lazy_bind and bind.calls_rspu):
            return False
        projected = self.body.projected
        if projected is None or bind.variable in projected:
            return False
        return self.body.variable_uses.get(bind.variable, 0) <= 1

    # -- GRAPH and WINDOW -------------------------------------------------------------------
    def graph_pattern(self, node: GraphPattern, ctx: _Context) -> None:
        name = self.tokens[node.name]
        inner = _Context(ctx.window, True, ctx.content)
        if ctx.window is not None and self.is_fact_window(ctx.window):
            # A fact window holds facts in its default graph and no named graph (spec §6.13).
            self.emit.put("{ %s }" % _NOTHING, node.keyword)
        if ctx.window is not None and self.options.entailment:
            self.closure_pattern(node, ctx.window, inner)
            return
        if name.kind == VAR:
            # As a sub-select, Oxigraph materializes the window's matches once and hash-joins
            # them (bench/out/NOTES.md#graph-subselect). Semantics are unchanged: a GRAPH group
            # only ever sees its own variables.
            # VALUES after the GRAPH pattern: Oxigraph then joins the two instead of looking
            # the pattern up graph by graph.
            self.emit.put("{ SELECT * WHERE {", node.keyword)
            self.emit.copy(Span(node.keyword, node.name + 1))
            self.group(node.group, inner)
            self.emit.put(("VALUES %s { " % name.text, Values(ctx.window), " } } }"), node.keyword)
            return
        self.emit.put("{", node.keyword)
        self.emit.copy(Span(node.keyword, node.name + 1))
        self.group(node.group, inner)
        self.emit.put((IfMember(ctx.window, (self.resolve(node.name),), ("",), (_NOTHING,)),), node.name)
        self.emit.put("}", node.keyword)

    def closure_pattern(self, node: GraphPattern, window: str, inner: _Context) -> None:
        """A GRAPH pattern in a window under entailment: matched in the closure graphs, the
        graph's name bound to the element's."""
        name = self.tokens[node.name]
        if name.kind == VAR:
            closure = self.fresh()
            self.emit.put("{ SELECT * WHERE { GRAPH %s" % closure, node.keyword)
            self.group(node.group, inner)
            self.emit.put(("VALUES (%s %s) { " % (name.text, closure), Closures(window, True), " } } }"),
                          node.keyword)
            return
        iri = self.resolve(node.name)
        self.emit.put(("{ GRAPH ", ClosureOf(window, iri)), node.keyword)
        self.group(node.group, inner)
        self.emit.put((IfMember(window, (iri,), ("",), (_NOTHING,)),), node.name)
        self.emit.put("}", node.keyword)

    def window_pattern(self, node: GraphPattern, ctx: _Context) -> None:
        name = self.tokens[node.name]
        content = block_reads_content(node, self.options)
        if name.kind != VAR:
            self.group(node.group, _Context(self.resolve(node.name), False, content))
            return
        for k, window in enumerate(self.query.windows):
            if k:
                self.emit.put("UNION", node.keyword)
            self.emit.put("{ VALUES %s { <%s> }" % (name.text, window), node.name)
            self.group(node.group, _Context(window, False, content))
            self.emit.put("}", node.keyword)

    # -- a window's default graph --------------------------------------------------------------
    def merged_default_triples(self, block: TriplesBlock) -> None:
        triples = self.block_triples(block)
        self.union_default_triples(triples, list(self.query.merged_windows), True, block.span.start)

    def block_triples(self, block: TriplesBlock) -> list[tuple[str, str, str]]:
        triples: list[tuple[str, str, str]] = []
        labels: dict[str, str] = {}
        for tss in block.triples:
            self.expand_subject(tss, triples, labels)
        return triples

    def is_fact_window(self, window: str) -> bool:
        return self.query.windows[window].reads_facts

    def fact_default_triples(self, block: TriplesBlock, window: str) -> None:
        """A fact window's default graph is the graph its facts are in at this evaluation: the
        one graph the evaluation gives as the window's content (spec §6.13)."""
        graph = self.fresh()
        at = block.span.start
        self.emit.put("{ GRAPH %s {" % graph, at)
        self.emit.copy(block.span)
        self.emit.put(("} VALUES %s { " % graph, Values(window), " } }"), at)

    def window_default_triples(self, block: TriplesBlock, window: str, content: bool) -> None:
        if self.is_fact_window(window):
            self.fact_default_triples(block, window)
            return
        triples = self.block_triples(block)
        at = block.span.start
        if content:
            self.union_default_triples(triples, [window], False, at)
            return
        self.note_unmatchable(block, window)
        restricted: list[str] = []
        constants: list[str] = []
        impossible = False
        for s, _, _ in triples:
            if s.startswith("?"):
                if s not in restricted:
                    restricted.append(s)
            elif s.startswith("<"):
                constants.append(s[1:-1])
            else:
                impossible = True
        self.emit.put("{ GRAPH <%s> {" % timestamps_graph(self.query.windows[window].stream), at)
        for s, p, o in triples:
            self.emit.put("%s %s %s ." % (s, p, o), at)
        self.emit.put("}", at)
        for var in restricted:
            self.emit.put(("VALUES %s { " % var, Values(window), " }"), at)
        if constants:
            self.emit.put((IfMember(window, tuple(constants), ("",), (_NOTHING,)),), at)
        if impossible:
            self.emit.put(_NOTHING, at)
        self.emit.put("}", at)

    def note_unmatchable(self, block: TriplesBlock, window: str) -> None:
        """Each constant predicate of a block read against its window's timestamp triples other
        than the timestamp predicate (an annotation's too: its rdf:reifies triple is not there
        either): such a pattern can never match (a warning, translator/warnings.py)."""
        def visit(properties: list[PropertyValues]) -> None:
            for pv in properties:
                tok = self.tokens[pv.verb.start]
                if pv.is_simple and (tok.kind in (IRI, PNAME) or tok.is_keyword("A")):
                    predicate = RDF + "type" if tok.is_keyword("A") else self.resolve(pv.verb.start)
                    if predicate != PROV_GENERATED_AT_TIME:
                        self.unmatchable.append((tok.offset, window, predicate))
                for obj in pv.objects:
                    if obj.annotations:
                        self.unmatchable.append((self.tokens[pv.verb.start].offset, window, RDF + "reifies"))
                    for annotation in obj.annotations:
                        visit(annotation.properties)
                    nodes(obj.node)

        def nodes(node) -> None:
            if isinstance(node, BlankNodePropertyList):
                visit(node.properties)
            elif isinstance(node, Collection):
                for item in node.items:
                    nodes(item)
            elif isinstance(node, ReifiedTriple):
                self.unmatchable.append((self.tokens[node.verb.start].offset, window, RDF + "reifies"))

        for tss in block.triples:
            nodes(tss.subject)
            visit(tss.properties)

    def union_default_triples(self, triples: list[tuple[str, str, str]], windows: list[str], background: bool,
                              at: int) -> None:
        """A default graph that merges the elements of `windows` (their timestamp triples and
        content) and, with `background`, the background default graph: `window_default_graph
        = "union"` (spec §3) or a dialect's merged windows (§6.5). A BGP over a merge joins
        each pattern's distinct matches over all the graphs, so each pattern becomes a
        DISTINCT sub-select over a UNION of the graphs."""
        self.emit.put("{", at)
        for s, p, o in triples:
            variables = sorted({t for t in re.findall(r"[?$][\w]+", " ".join((s, p, o)))})
            projection = " ".join(variables) if variables else "(1 AS %s)" % self.fresh()
            members = [member for window in windows for member in self.window_members(s, p, o, window)]
            if background:
                members.append(("%s %s %s" % (s, p, o),))
            pieces: list = ["{ SELECT DISTINCT %s WHERE { " % projection]
            for k, member in enumerate(members):
                pieces += ["UNION { " if k else "{ ", *member, " } "]
            self.emit.put(tuple(pieces) + ("} }",), at)
        self.emit.put("}", at)

    def window_members(self, s: str, p: str, o: str, window: str) -> list[tuple]:
        """Where one triple pattern matches a window's merged elements: the timestamps graph
        (subjects restricted to the elements) and the element graphs."""
        values = Values(window)
        graph = self.fresh()
        if self.is_fact_window(window):
            return [("GRAPH %s { %s %s %s } VALUES %s { " % (graph, s, p, o, graph), values, " }")]
        ts_graph = timestamps_graph(self.query.windows[window].stream)
        if s.startswith("?"):
            timestamp_part = ("GRAPH <%s> { %s %s %s } VALUES %s { " % (ts_graph, s, p, o, s), values, " }")
        elif s.startswith("<"):
            timestamp_part = (IfMember(window, (s[1:-1],), ("GRAPH <%s> { %s %s %s }" % (ts_graph, s, p, o),),
                                       (_NOTHING,)),)
        else:
            timestamp_part = (_NOTHING,)
        content = Closures(window, False) if self.options.entailment else values
        return [timestamp_part, ("GRAPH %s { %s %s %s } VALUES %s { " % (graph, s, p, o, graph), content, " }")]

    def term_text(self, term: Term, labels: dict[str, str]) -> str:
        """A term as text for a timestamps-graph pattern: blank nodes become fresh variables
        (VALUES cannot restrict blank nodes), IRIs are written in full (subjects are compared
        with element names); the rest stays as written (the prologue still declares prefixes)."""
        span = term.span
        tok = self.tokens[span.start]
        if tok.kind == BNODE:
            if tok.text not in labels:
                labels[tok.text] = self.fresh()
            return labels[tok.text]
        if tok.is_punct("["):
            return self.fresh()
        if span.end - span.start == 1 and tok.kind in (IRI, PNAME):
            return "<%s>" % self.resolve(span.start)
        return self.emit.span_text(span)

    def node_text(self, node, triples: list, labels: dict[str, str]) -> str:
        if isinstance(node, Term):
            return self.term_text(node, labels)
        if isinstance(node, TripleTerm):
            return self.emit.span_text(node.span)
        if isinstance(node, BlankNodePropertyList):
            subject = self.fresh()
            self.expand_properties(subject, node.properties, triples, labels)
            return subject
        if isinstance(node, Collection):
            head = cell = self.fresh()
            for k, item in enumerate(node.items):
                triples.append((cell, "<%sfirst>" % RDF, self.node_text(item, triples, labels)))
                rest = self.fresh() if k + 1 < len(node.items) else "<%snil>" % RDF
                triples.append((cell, "<%srest>" % RDF, rest))
                cell = rest
            return head
        if isinstance(node, ReifiedTriple):
            s = self.node_text(node.subject, triples, labels)
            p = self.verb_text(node.verb)
            o = self.node_text(node.object, triples, labels)
            reifier = self.term_text(node.reifier, labels) if node.reifier else self.fresh()
            triples.append((reifier, "<%sreifies>" % RDF, "<<( %s %s %s )>>" % (s, p, o)))
            return reifier
        raise TypeError(node)  # pragma: no cover

    def verb_text(self, span: Span) -> str:
        tok = self.tokens[span.start]
        if tok.is_keyword("A"):
            return "<%stype>" % RDF
        if tok.kind in (IRI, PNAME):
            return "<%s>" % self.resolve(span.start)
        return tok.text

    def expand_subject(self, tss: TriplesSameSubject, triples: list, labels: dict[str, str]) -> None:
        subject = self.node_text(tss.subject, triples, labels)
        self.expand_properties(subject, tss.properties, triples, labels)

    def expand_properties(self, subject: str, properties: list[PropertyValues], triples: list,
                          labels: dict[str, str]) -> None:
        for pv in properties:
            if not pv.is_simple:
                raise self.error("property paths are not supported in a window's default graph (its "
                                 "triples are matched one pattern at a time; use GRAPH ?g { ... })",
                                 pv.verb.start)
            verb = self.verb_text(pv.verb)
            for obj in pv.objects:
                o = self.node_text(obj.node, triples, labels)
                triples.append((subject, verb, o))
                for annotation in obj.annotations:
                    reifier = self.term_text(annotation.reifier, labels) if annotation.reifier else self.fresh()
                    triples.append((reifier, "<%sreifies>" % RDF, "<<( %s %s %s )>>" % (subject, verb, o)))
                    self.expand_properties(reifier, annotation.properties, triples, labels)


def window_readings(query: ContinuousQuery, options: RewriteOptions, forced_by: str = "") -> list[str]:
    """What each WINDOW block of the query reads as its default graph and why (spec 6.15), one
    line per block at its line and column (of the RSP-QL* translation, for a dialect query):
    its elements' merged content and their timestamp triples, their timestamp triples alone
    (its elements being its named graphs), or a fact window's facts. `forced_by` names what set
    `options.window_union` (the option, the dialect), when something did."""
    body = query.body
    if body is None:
        return []
    where = " in the RSP-QL* translation" if query.translation is not None else ""
    found = []
    for node in walk(body.where):
        if not (isinstance(node, GraphPattern) and node.is_window):
            continue
        name = body.tokens[node.name]
        windows = list(query.windows) if name.kind == VAR else [body.resolve(node.name)]
        facts = [w for w in windows if w in query.windows and query.windows[w].reads_facts]
        elements = [w for w in windows if w not in facts]
        shown = name.text if name.kind == VAR else "<%s>" % windows[0]
        line, column = body.source.position(body.tokens[node.keyword].offset)
        parts = []
        if elements:
            content = block_reads_content(node, options)
            what = ("its elements' merged content and their timestamp triples" if content else
                    "its elements as named graphs (GRAPH), its default graph their timestamp triples")
            if forced_by:
                why = forced_by
            elif content:
                why = "no GRAPH pattern inside the block, spec 6.15"
            else:
                why = "a GRAPH pattern inside the block, spec section 3"
            parts.append("%s (%s)" % (what, why))
        if facts:
            parts.append("%sthe facts that hold (spec 6.13)" % (
                "" if not elements else "fact window%s %s: " % ("s" * (len(facts) > 1),
                                                               ", ".join("<%s>" % f for f in facts))))
        subject = "WINDOW %s%s" % (shown, " (each declared window)" if name.kind == VAR else "")
        found.append("%d:%d%s: %s reads %s" % (line, column, where, subject, "; ".join(parts)))
    if query.merged_windows:
        found.append("outside WINDOW and GRAPH, the WHERE clause reads the merge of windows %s and the background "
                     "default graph (the %s dialect, spec 6.5)" % (
                         ", ".join("<%s>" % w for w in query.merged_windows), query.dialect))
    return found


_AGGREGATES = {"COUNT", "SUM", "MIN", "MAX", "AVG", "SAMPLE", "GROUP_CONCAT"}


def projection_aliases(body: ParsedBody) -> dict[int, str]:
    """In a grouping SELECT, each variable token of a projected expression that names an alias
    bound before it in the same SELECT (`(COUNT(?r) AS ?n) (?n > 3 AS ?many)`, as the peer
    corpus's queries write them, docs/peers.md): the text of that alias's expression, itself
    written out the same way.
    SPARQL 1.1 evaluates projected expressions in order (18.2.4.4), and Oxigraph refuses a
    grouping query that reads an alias so; written out, it reads the aggregates themselves."""
    parts = body.form_head.parts
    if not parts or not all(isinstance(p, Span) for p in parts):
        return {}
    tokens = body.tokens
    head = [k for p in parts for k in range(p.start, p.end)]
    if not any(tokens[k].kind == NAME and tokens[k].text.upper() in _AGGREGATES and k + 1 < len(tokens)
               and tokens[k + 1].is_punct("(") for k in head):
        return {}
    text = body.source.text
    aliases: dict[str, str] = {}
    inlined: dict[int, str] = {}
    position = 0
    while position < len(head):
        k = head[position]
        if not tokens[k].is_punct("("):
            position += 1
            continue
        depth, end = 0, position
        for end in range(position, len(head)):
            depth += tokens[head[end]].is_punct("(") - tokens[head[end]].is_punct(")")
            if depth == 0:
                break
        inner = head[position + 1:end]
        if len(inner) >= 3 and tokens[inner[-2]].is_keyword("AS") and tokens[inner[-1]].kind == VAR:
            expression = inner[:-2]
            pieces, at = [], tokens[expression[0]].offset if expression else 0
            for j in expression:
                name = tokens[j].text[1:] if tokens[j].kind == VAR else None
                if name in aliases:
                    inlined[j] = aliases[name]
                    pieces += [text[at:tokens[j].offset], "(%s)" % aliases[name]]
                    at = tokens[j].end
            if expression:
                pieces.append(text[at:tokens[expression[-1]].end])
            aliases[tokens[inner[-1]].text[1:]] = "".join(pieces)
        position = end + 1
    return inlined


def defers_filters(query: ContinuousQuery) -> bool:
    """Whether H4 moves any FILTER of this query (RewriteOptions.h4 changes its rewrite)."""
    return bool(_deferrable_filters(query))


def _deferrable_filters(query: ContinuousQuery) -> list[Filter]:
    """H4 (the RSPU paper): FILTERs calling rspu: functions that can run after every join.

    Oxigraph pushes a FILTER down to where its variables are bound, even through sub-selects,
    so each selected filter becomes `BIND(expr AS ?v) FILTER(?v)` after the whole pattern
    (wrapped in a sub-select): a BIND is not pushed down (bench/out/NOTES.md#h4-bind).

    A filter is deferred only when that cannot change results: it sits in a chain of plain
    groups, GRAPH and WINDOW patterns from the WHERE clause (not under OPTIONAL, MINUS,
    UNION, a sub-select or EXISTS), holds no EXISTS, and each of its variables either occurs
    nowhere else in the WHERE clause or is bound by a triple pattern of the filter's group.
    Then sigma_F(A) join B = sigma_F(A join B). `SELECT *` is left alone: the extra variable
    would show in its results."""
    body = query.body
    if body.projected is None:
        return []
    found: list[Filter] = []

    def local_counts(group: Group) -> dict[str, int]:
        counts: dict[str, int] = {}
        for tok in body.tokens[group.open:group.close + 1]:
            if tok.kind == VAR:
                counts[tok.text[1:]] = counts.get(tok.text[1:], 0) + 1
        return counts

    # Only the WHERE clause can bind a variable before the filter runs (projection, GROUP BY
    # and ORDER BY read results; a trailing VALUES joins after the whole WHERE).
    in_where = local_counts(body.where)

    def bound_by_triples(group: Group) -> set[str]:
        names: set[str] = set()
        for item in group.items:
            if isinstance(item, TriplesBlock):
                names |= {t.text[1:] for t in body.tokens[item.span.start:item.span.end] if t.kind == VAR}
        return names

    def visit(group: Group) -> None:
        counts = None
        for item in group.items:
            if isinstance(item, Group):
                visit(item)
            elif isinstance(item, GraphPattern):
                visit(item.group)
            elif isinstance(item, Filter) and item.calls_rspu and len(item.expression.parts) == 1:
                if counts is None:
                    counts, bound = local_counts(group), bound_by_triples(group)
                if all(v in bound or counts.get(v, 0) == in_where.get(v, 0) for v in item.variables):
                    found.append(item)

    visit(body.where)
    return found


def compile_template(query: ContinuousQuery, options: RewriteOptions = RewriteOptions()) -> Template:
    """The query rewritten once; each evaluation instantiates it."""
    return _Rewriter(query, options).run()


def rewrite(query: ContinuousQuery, elements: dict[str, list[str]], background_graphs: list[str],
            options: RewriteOptions = RewriteOptions()) -> RewrittenQuery:
    """SPARQL-star for one evaluation: `elements` maps each declared window to the graph IRIs
    of its elements at that evaluation (absent or empty: the window is empty)."""
    return compile_template(query, options).instantiate(elements, background_graphs)
