"""Syntax tree of a query body, at the granularity the window rewrite needs.

Text the rewrite never changes (expressions, paths, solution modifiers) stays a `Span` of
tokens, copied verbatim; graph patterns that the rewrite must see (GRAPH, WINDOW, groups,
sub-selects, EXISTS inside expressions, triples) are nodes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence, Union

import pyoxigraph as ox

from .errors import StreamNameError
from .namespaces import RSPU
from .tokens import IRI, PNAME, PUNCT, SourceText, Token, Tokens


@dataclass
class Span:
    """Tokens [start, end) copied as the user wrote them."""

    start: int
    end: int


@dataclass
class Group:
    """`{ ... }`: open and close are token indices of the braces."""

    open: int
    close: int
    items: list["Node"] = field(default_factory=list)


@dataclass
class GraphPattern:
    """`GRAPH name { ... }` (is_window False) or `WINDOW name { ... }` (is_window True)."""

    keyword: int
    name: int
    group: Group
    is_window: bool


@dataclass
class Keyworded:
    """OPTIONAL / MINUS / SERVICE [SILENT] name, followed by a group."""

    head: Span
    group: Group


@dataclass
class UnionPattern:
    groups: list[Group]


@dataclass
class SubSelect:
    """A sub-query inside a group: `SELECT ... WHERE { ... } modifiers`."""

    head: "Expression"
    where: Group
    tail: "Expression"


@dataclass
class Expression:
    """Verbatim text with the EXISTS groups found inside it (which hold graph patterns)."""

    parts: list[Union[Span, Group]]


@dataclass
class Bind:
    """`BIND ( expr AS ?var )`."""

    expression: Expression
    variable: str
    calls_rspu: bool


@dataclass
class Filter:
    expression: Expression
    calls_rspu: bool
    variables: frozenset[str]


@dataclass
class InlineData:
    """A VALUES block (copied verbatim)."""

    span: Span


# Terms and triples, for the one context where the rewrite needs atomic triple patterns: a
# window's default graph (its elements' timestamp triples).

@dataclass
class Term:
    span: Span


@dataclass
class BlankNodePropertyList:
    properties: list["PropertyValues"]


@dataclass
class Collection:
    items: list["GraphNode"]


@dataclass
class ReifiedTriple:
    """`<< s p o ~ reifier >>`."""

    subject: "GraphNode"
    verb: Span
    object: "GraphNode"
    reifier: Term | None


@dataclass
class TripleTerm:
    """`<<( s p o )>>`: a term, kept verbatim."""

    span: Span


GraphNode = Union[Term, BlankNodePropertyList, Collection, ReifiedTriple, TripleTerm]


@dataclass
class Annotation:
    """`~ reifier` and/or `{| property list |}` after an object."""

    reifier: Term | None
    properties: list["PropertyValues"]


@dataclass
class ObjectWithAnnotations:
    node: GraphNode
    annotations: list[Annotation]


@dataclass
class PropertyValues:
    """One verb (a variable or a property path, verbatim) and its objects."""

    verb: Span
    is_simple: bool
    objects: list[ObjectWithAnnotations]


@dataclass
class TriplesSameSubject:
    subject: GraphNode
    properties: list[PropertyValues]


@dataclass
class TriplesBlock:
    span: Span
    triples: list[TriplesSameSubject]


Node = Union[Group, GraphPattern, Keyworded, UnionPattern, SubSelect, Bind, Filter, InlineData, TriplesBlock]


def nested_groups(item: Node) -> list[Group]:
    """The groups directly inside a pattern item (its own group, OPTIONAL's, a sub-select's
    WHERE, UNION's branches, EXISTS inside a FILTER or BIND); a GRAPH or WINDOW's group is
    left to the caller, which usually treats it apart."""
    if isinstance(item, Group):
        return [item]
    if isinstance(item, Keyworded):
        return [item.group]
    if isinstance(item, SubSelect):
        return [item.where]
    if isinstance(item, UnionPattern):
        return list(item.groups)
    if isinstance(item, (Filter, Bind)):
        return [part for part in item.expression.parts if isinstance(part, Group)]
    return []


def walk(node):
    """Every pattern node inside `node` (itself first), depth first: the items of groups, the
    groups of GRAPH, WINDOW, OPTIONAL, MINUS, SERVICE and UNION, a sub-select's WHERE and the
    EXISTS groups of any expression (FILTER, BIND, a sub-select's head and modifiers)."""
    pending = [node]
    while pending:
        item = pending.pop()
        yield item
        if isinstance(item, Group):
            pending.extend(reversed(item.items))
        elif isinstance(item, GraphPattern):
            pending.append(item.group)
        elif isinstance(item, SubSelect):
            pending.extend(part for part in reversed(item.tail.parts) if isinstance(part, Group))
            pending.append(item.where)
            pending.extend(part for part in reversed(item.head.parts) if isinstance(part, Group))
        elif isinstance(item, Expression):
            pending.extend(part for part in reversed(item.parts) if isinstance(part, Group))
        else:
            pending.extend(reversed(nested_groups(item)))


def holds_graph_pattern(group: Group) -> bool:
    """Whether a GRAPH pattern stands anywhere inside `group` (nested groups, OPTIONAL, UNION,
    sub-selects, EXISTS, nested WINDOW blocks): a WINDOW block holding one reads its window as
    section 3 defines it, one holding none its elements' merged content (spec 6.15)."""
    return any(isinstance(item, GraphPattern) and not item.is_window for item in walk(group))


@dataclass
class ParsedBody:
    """Everything the rewriter needs: tokens, prologue, the WHERE group and modifiers."""

    source: SourceText
    tokens: Tokens
    prologue: Span
    form_head: Expression       # SELECT/CONSTRUCT/ASK clause, R2S keyword and window decls removed
    construct_template: Group | None
    where: Group
    modifiers: Expression       # GROUP BY ... VALUES, verbatim
    prefixes: dict[str, str]
    base: str | None
    projected: frozenset[str] | None   # None: SELECT * (everything is projected)
    variable_uses: dict[str, int]       # how often each variable occurs in the query text
    removed: list[Span]                 # REGISTER, R2S and dataset clauses (not sent to Oxigraph)

    def resolve(self, token_index: int) -> str:
        """The full IRI of an IRI or prefixed-name token (the parser has checked its prefix)."""
        return resolve_iri(self.tokens[token_index].text, self.tokens[token_index].kind, self.prefixes, self.base)

    def calls_rspu(self) -> bool:
        """Whether the query calls an rspu: function anywhere (a text without `(` calls none)."""
        return "(" in self.source.text and calls_rspu(self.tokens, 0, len(self.tokens), self.resolve)


def calls_rspu(tokens: Sequence[Token], start: int, end: int, resolve) -> bool:
    """Whether tokens [start, end) call an rspu: function: an IRI or prefixed name that
    `resolve` (of a token index) makes an rspu: IRI, followed by '('."""
    rows = tokens.rows if isinstance(tokens, Tokens) else tokens    # (a Token is such a row too)
    return any(rows[k][0] in (IRI, PNAME) and rows[k + 1][0] == PUNCT and rows[k + 1][1] == "("
               and resolve(k).startswith(RSPU) for k in range(start, end - 1))


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
# What an IRI reference may not hold (SPARQL's IRIREF): written between < and > in the SPARQL
# text the engine sends to Oxigraph, a base IRI given from outside must not end that IRI early.
_NOT_IN_IRI = re.compile(r'[<>"{}|^`\\\x00-\x20]')


def is_absolute_iri(iri: str) -> bool:
    """Whether `iri` starts with a scheme (RFC 3987's absolute IRI: nothing to resolve)."""
    return _SCHEME.match(iri) is not None


def check_stream_iri(iri, what: str = "stream") -> str:
    """`iri` when it can name a stream, StreamNameError saying why not otherwise: an absolute IRI
    (with a scheme) that Oxigraph takes. A stream has one name in every door (a query's `ON`, a
    push, a replay's --stream, a source's `stream`, POST /streams): a relative or prefixed name
    would be resolved in one door and not in another, and its elements would reach no query."""
    if not isinstance(iri, str):
        raise StreamNameError("%s must be an IRI (a str), not %s" % (what, type(iri).__name__))
    if not is_absolute_iri(iri):
        raise StreamNameError("%s %r is not an absolute IRI: a stream is named in full, with its scheme, as the "
                              "query's ON names it once its prefix is expanded (e.g. http://example.org/%s)"
                              % (what, iri[:120], iri.strip("<>:/ ")[:60] or "temperature"))
    bad = _NOT_IN_IRI.search(iri)
    if bad:
        raise StreamNameError("%s %r holds %r, which an IRI cannot hold" % (what, iri[:120], bad.group()))
    try:
        ox.NamedNode(iri)
    except ValueError as e:
        raise StreamNameError("%s %r is not an IRI: %s" % (what, iri[:120], e)) from None
    return iri


def valid_base(iri: str) -> bool:
    """Whether `iri` can serve as a base IRI: absolute, writable between < and >, and one
    Oxigraph takes as a base."""
    if not is_absolute_iri(iri) or _NOT_IN_IRI.search(iri):
        return False
    try:
        ox.parse(b"", format=ox.RdfFormat.TURTLE, base_iri=iri)
    except ValueError:
        return False
    return True


def resolve_iri(text: str, kind: str, prefixes: dict[str, str], base: str | None) -> str:
    """`<iri>` against the base, or `prefix:local` through the prefixes (KeyError when the
    prefix is not declared). A relative `<iri>` without a base stays as written: the parser has
    refused one already (`PrologueReader.resolve`). An absolute IRI stays as written, as Oxigraph
    keeps it (no dot segments removed), so both name the same graph."""
    if kind == IRI:
        iri = text[1:-1]
        return resolve_reference(base, iri) if base and not is_absolute_iri(iri) else iri
    prefix, _, local = text.partition(":")
    return prefixes[prefix] + (re.sub(r"\\(.)", r"\1", local) if "\\" in local else local)


def resolve_reference(base: str, reference: str) -> str:
    """`reference` (an IRI reference as written between < and >) resolved against `base` by
    Oxigraph's own resolution, the one the SPARQL the engine writes is evaluated with: it follows
    RFC 3986 section 5.2 except where it keeps dot segments (those of the base, and after an
    authority) and, in an IRI without authority, drops the `/` a `..` would leave first
    (`urn:a/b` and `../../g` give `urn:g`). Windows, streams and background graphs are named by
    what Oxigraph queries. ValueError when Oxigraph cannot resolve it."""
    if _NOT_IN_IRI.search(reference):
        raise ValueError("%r is not an IRI reference" % reference)
    try:
        [triple] = ox.parse(("<%s> <urn:x> <urn:x> ." % reference).encode("utf-8"), format=ox.RdfFormat.TURTLE,
                            base_iri=base)
    except SyntaxError as e:
        raise ValueError((e.msg or str(e)).rpartition(": ")[2]) from None
    return triple.subject.value
