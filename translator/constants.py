"""Queries that differ only in constants (docs/incremental-evaluation.md, "Queries differing
only in constants").

Fifty queries watching one stream for fifty thresholds, or fifty patients' sensors, match the
same elements fifty times. In a query evaluated incrementally (`incremental.distributive_window`),
the literals of the FILTERs and BINDs that work row by row (beside its window, beside its GRAPH
block, inside the block) and the IRIs and literals its GRAPH block's triple patterns have as
objects may be variables bound by a VALUES table instead: one query then evaluates a range for every such
query, each solution once per query whose constants it passes, marked with that query's row
in the table. A literal evaluates to the term it writes and a variable to the term bound to it,
so each query's rows are the ones it has alone (as a bag: SPARQL leaves their order open, and
it may differ).

A query's base (the IRI it was retrieved from: its file, the URL it was registered at) is part
of its meaning only where a relative IRI resolves against it (`reads_its_base`): a thousand
query files that write every IRI in full mean what they would mean from one file, and are
evaluated together whatever folder they were read from.

The table sits beside the GRAPH block, after it, so the window's and WHERE's FILTERs and the
BINDs after the block see it (a BIND sees only what precedes it; one before the block keeps its
literals). A FILTER inside the block moves beside it where that means the same (`_liftable`);
the others, and the block's BINDs, keep their literals. Inside the block the table would be
joined to the solutions of every graph in the store before the window's graphs are chosen
(bench/out/NOTES.md#constants-table).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .model import ContinuousQuery
from .syntax import Bind, Filter, GraphPattern, Span, Term, TriplesBlock, is_absolute_iri
from .tokens import IRI, LANGTAG, NUMBER, PNAME, STRING, VAR


@dataclass(frozen=True)
class Parameterized:
    """A query with its row-wise literals as variables: queries with equal `key` are evaluated
    together, each given its `constants` as a row of the table."""

    before: str                     # the query's text up to the table's rows
    after: str                      # and after them
    constants: tuple[str, ...]      # the literals, as written, in text order
    marker: str                     # the variable holding a solution's row in the table
    spans: tuple[tuple[int, int], ...]   # where each literal is in the query's text (offsets)
    base: str | None = None         # the IRI its relative IRIs resolve against (None: it has none)

    @property
    def key(self) -> tuple[str, str, str | None]:
        """Queries of one text with different bases may mean different IRIs by the same text:
        the base is part of the key when the query reads it (`reads_its_base`), else None."""
        return self.before, self.after, self.base

    def text(self, table: list[tuple[str, ...]]) -> str:
        """The query evaluating every row of `table` (each row's constants, in order): a
        solution's `marker` is its row's index."""
        return "%s%s%s" % (self.before, " ".join("(%d %s)" % (k, " ".join(row)) for k, row in enumerate(table)),
                           self.after)


# An IRI as the tokenizer reads one (tokens._IRIREF), and a call of IRI() or URI().
_IRI_REF = re.compile(r'<([^<>"{}|^`\\\x00-\x20]*)>')
_IRI_CALL = re.compile(r"\b(?:IRI|URI)\s*\(", re.IGNORECASE)


def reads_its_base(query: ContinuousQuery) -> bool:
    """Whether the query's meaning depends on its base, the IRI it was retrieved from (SPARQL
    1.1, 4.1.1.1): a relative IRI written before any absolute BASE of its own (in the prologue,
    a PREFIX, a window, a pattern, a datatype, SERVICE), or IRI()/URI(), which resolve a string
    against the base in effect, with no absolute BASE before them. Past an absolute BASE the
    query's IRIs resolve against that."""
    text = query.body.source.text
    # Most queries write every IRI in full: the text itself says so without its tokens (every
    # IRI token matches _IRI_REF; a match in a string or a comment only sends the query on).
    if all(is_absolute_iri(iri) for iri in _IRI_REF.findall(text)) and not _IRI_CALL.search(text):
        return False
    tokens = list(query.body.tokens)
    for k, token in enumerate(tokens):
        if token.is_keyword("BASE") and k + 1 < len(tokens) and tokens[k + 1].kind == IRI \
                and is_absolute_iri(tokens[k + 1].text[1:-1]):
            return False
        if token.kind == IRI and not is_absolute_iri(token.text[1:-1]):
            return True
        if token.is_keyword("IRI", "URI") and k + 1 < len(tokens) and tokens[k + 1].is_punct("("):
            return True
    return False


def without_unread_base(query: ContinuousQuery) -> ContinuousQuery:
    """The query without its base when it does not read it (`reads_its_base`): compiled so,
    queries of one text read from different files or URLs compile to one text, and share what
    equal texts share (sharing.RangeResults) and what texts differing only in constants share
    (sharing.ConstantGroups)."""
    if query.base is None or query.body is None or reads_its_base(query):
        return query
    return replace(query, base=None)


def parameterized(query: ContinuousQuery) -> Parameterized | None:
    """The query with its row-wise literals as variables, or None when it has none. The query
    is one `distributive_window` accepts."""
    if query.dialect != "rspql" or query.merged_windows is not None:
        return None     # its text is a translation, and its windows more than the text says
    body = query.body
    tokens = body.tokens
    text = body.source.text
    outer = body.where
    window_pattern = next(n for n in outer.items if isinstance(n, GraphPattern) and n.is_window)
    block = next(n for n in window_pattern.group.items if isinstance(n, GraphPattern))
    literals: list[tuple[int, int]] = []      # token spans [first, last]
    for group, after in ((outer, window_pattern), (window_pattern.group, block)):
        after_at = group.items.index(after)
        for position, item in enumerate(group.items):
            if isinstance(item, Filter) or (isinstance(item, Bind) and position > after_at):
                literals += _literals(item.expression.parts, tokens)
    for item in block.group.items:
        if isinstance(item, TriplesBlock):
            literals += _pattern_constants(item, tokens)
    lifted = [(f, found) for f in _liftable(block, tokens) if (found := _literals(f.expression.parts, tokens))]
    order = sorted(literals + [span for _, found in lifted for span in found])
    if not order:
        return None
    marker, *variables = _fresh(set(body.variable_uses), len(order) + 1)

    def as_variables(spans) -> list[tuple[int, int, str]]:
        return [(tokens[a].offset, tokens[b].end, "?" + name) for (a, b), name in zip(order, variables)
                if (a, b) in spans]

    edits = as_variables(set(literals))
    moved = []
    for f, found in lifted:
        first, last = tokens[f.expression.parts[0].start], tokens[f.expression.parts[-1].end - 1]
        edits.append((first.offset, last.end, ""))
        moved.append(_spliced(text, first.offset, last.end, as_variables(set(found))))
    projection = _projection_start(body)
    if projection is not None:
        edits.append((projection, projection, "?%s " % marker))
    # The REGISTER clause and the R2S operator act after a range's rows are made: queries
    # differing in them (a name, COMPUTED EVERY, IStream) evaluate ranges together.
    for span in body.removed:
        if tokens[span.start].is_keyword("REGISTER", "RSTREAM", "ISTREAM", "DSTREAM"):
            edits.append((tokens[span.start].offset, tokens[span.end].offset, ""))   # and the space after
    # The table's rows go right after the block; no edit spans that point.
    closed = tokens[block.group.close].end
    before = _spliced(text, 0, closed, [e for e in edits if e[0] < closed])
    after = _spliced(text, closed, len(text), [e for e in edits if e[0] >= closed])
    head = " VALUES (?%s %s) { " % (marker, " ".join("?" + name for name in variables))
    return Parameterized(before + head, " } " + " ".join(moved) + after,
                         tuple(text[tokens[a].offset:tokens[b].end] for a, b in order), marker,
                         tuple((tokens[a].offset, tokens[b].end) for a, b in order),
                         query.base if query.base is not None and reads_its_base(query) else None)


def _spliced(text: str, start: int, end: int, edits: list[tuple[int, int, str]]) -> str:
    """text[start:end] with each (from, to, replacement) edit inside it made."""
    pieces, at = [], start
    for first, last, replacement in sorted(edits, key=lambda e: (e[0], e[1])):
        pieces += [text[at:first], replacement]
        at = last
    return "".join(pieces) + text[at:end]


def _liftable(block: GraphPattern, tokens) -> list[Filter]:
    """The FILTERs of a GRAPH block that mean the same beside it: in a group of triple patterns,
    FILTERs and BINDs only, a FILTER reading only variables the group binds (not the graph's:
    inside the block it is unbound) filters the block's solutions wherever it stands. Beside
    the block, it sees the VALUES table (inside, the table would be joined to every graph's
    solutions before the window's graphs are)."""
    items = block.group.items
    if not all(isinstance(item, (TriplesBlock, Filter, Bind)) for item in items):
        return []
    bound = {tokens[k].text[1:] for item in items if isinstance(item, TriplesBlock)
             for k in range(item.span.start, item.span.end) if tokens[k].kind == VAR}
    bound |= {item.variable for item in items if isinstance(item, Bind)}
    bound.discard(tokens[block.name].text[1:])
    return [item for item in items if isinstance(item, Filter) and item.variables <= bound
            and all(isinstance(part, Span) for part in item.expression.parts)]


def _pattern_constants(block: TriplesBlock, tokens) -> list[tuple[int, int]]:
    """The IRIs and literals objects of a GRAPH block's own triple patterns are written with
    (the sensor or patient a query watches; not inside annotations, reified triples or
    collections). A pattern with a constant object matches what it matches with a fresh
    variable there, joined with the variable bound to the constant. Subjects and predicates stay:
    a variable predicate would match every triple of an element."""
    found: list[tuple[int, int]] = []
    for triple in block.triples:
        for values in triple.properties:
            for value in values.objects:
                if not isinstance(value.node, Term):
                    continue
                first, end = value.node.span.start, value.node.span.end
                if end - first == 1 and tokens[first].kind in (IRI, PNAME):
                    found.append((first, first))
                else:
                    found.extend(span for span in _literals([value.node.span], tokens) if span == (first, end - 1))
    return found


def _literals(parts, tokens) -> list[tuple[int, int]]:
    """The literals in an expression's text: a number, or a string with its language tag or
    datatype."""
    found = []
    for part in parts:
        if not isinstance(part, Span):
            continue
        k = part.start
        while k < part.end:
            token = tokens[k]
            if token.kind == NUMBER:
                found.append((k, k))
            elif token.kind == STRING:
                last = k
                if k + 1 < part.end and tokens[k + 1].kind == LANGTAG:
                    last = k + 1
                elif k + 2 < part.end and tokens[k + 1].is_punct("^^") and tokens[k + 2].kind in (IRI, PNAME):
                    last = k + 2
                found.append((k, last))
                k = last
            k += 1
    return found


def _fresh(used: set[str], count: int) -> list[str]:
    names, k = [], 0
    while len(names) < count:
        name = "__rspc%d" % k
        if name not in used:
            names.append(name)
        k += 1
    return names


def _projection_start(body) -> int | None:
    """Where the SELECT clause's first projected item starts (None: SELECT *, which projects
    the marker already)."""
    tokens = body.tokens
    removed = {k for span in body.removed for k in range(span.start, span.end)}
    for part in body.form_head.parts:
        if not isinstance(part, Span):
            continue
        for k in range(part.start, part.end):
            if k in removed:
                continue
            if tokens[k].is_punct("*"):
                return None
            if tokens[k].kind == VAR or tokens[k].is_punct("("):
                return tokens[k].offset
    return None
