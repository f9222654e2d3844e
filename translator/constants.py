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

Numbers compared with one variable (`Bounds`) are joined with the solutions without anything to
hash on: a group of many may apply those comparisons to its rows itself
(endpoint/engine/sharing.py), from the query without them, reading values and comparing them
as Oxigraph does (`number`, `compares`).
"""
from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import NamedTuple

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
    bounds: "Bounds | None" = None  # its constants compared with one variable (None: none are)
    values: tuple = ()              # the values of those constants (Number, None where not numeric)

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


# An IRI as the tokenizer reads one (tokens._IRIREF), and a call of IRI() or URI(): between
# the name and its bracket, what the tokenizer skips (tokens._WS: white space and comments),
# read one way only (a character of white space, or a comment to its line's end): a pattern
# with two ways to read a run of spaces would try each on a text that has no bracket after.
_IRI_REF = re.compile(r'<([^<>"{}|^`\\\x00-\x20]*)>')
_IRI_CALL = re.compile(r"\b(?:IRI|URI)(?:\s|#[^\n\r]*[\n\r])*\(", re.IGNORECASE)


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
    outer_filters = [f for f in outer.items if isinstance(f, Filter)]
    window_filters = [f for f in window_pattern.group.items if isinstance(f, Filter)] + [f for f, _ in lifted]
    filters = outer_filters + window_filters
    found_bounds = _bounds(body, block, window_pattern, outer_filters, window_filters, order)

    def as_variables(spans) -> list[tuple[int, int, str]]:
        return [(tokens[a].offset, tokens[b].end, "?" + name) for (a, b), name in zip(order, variables)
                if (a, b) in spans]

    def assembled(rewritten: dict[int, str], dropped: set[int], projected: str) -> tuple[str, str]:
        """The query's text before and after the table's rows, with the FILTERs in `rewritten`
        (by id) written so and the table without the columns `dropped`."""
        inside = [(tokens[f.expression.parts[0].start].offset, tokens[f.expression.parts[-1].end - 1].end)
                  for f in filters if id(f) in rewritten]
        edits = [e for e in as_variables(set(literals)) if not any(a <= e[0] < b for a, b in inside)]
        moved = []
        for f, found in lifted:
            first, last = tokens[f.expression.parts[0].start], tokens[f.expression.parts[-1].end - 1]
            edits.append((first.offset, last.end, ""))
            moved.append(rewritten[id(f)] if id(f) in rewritten else
                         _spliced(text, first.offset, last.end, as_variables(set(found))))
        lifted_ids = {id(f) for f, _ in lifted}
        for f in filters:
            if id(f) in rewritten and id(f) not in lifted_ids:
                edits.append((tokens[f.expression.parts[0].start].offset,
                              tokens[f.expression.parts[-1].end - 1].end, rewritten[id(f)]))
        projection = _projection_start(body)
        if projection is not None:
            edits.append((projection, projection, "?%s %s" % (marker, projected)))
        # The REGISTER clause and the R2S operator act after a range's rows are made: queries
        # differing in them (a name, COMPUTED EVERY, IStream) evaluate ranges together.
        for span in body.removed:
            if tokens[span.start].is_keyword("REGISTER", "RSTREAM", "ISTREAM", "DSTREAM"):
                edits.append((tokens[span.start].offset, tokens[span.end].offset, ""))   # and the space after
        # The table's rows go right after the block; no edit spans that point.
        closed = tokens[block.group.close].end
        before = _spliced(text, 0, closed, [e for e in edits if e[0] < closed])
        after = _spliced(text, closed, len(text), [e for e in edits if e[0] >= closed])
        head = " VALUES (?%s %s) { " % (marker, " ".join("?" + name for k, name in enumerate(variables)
                                                         if k not in dropped))
        return before + head, " } " + " ".join(m for m in moved if m) + after

    before, after = assembled({}, set(), "")
    bounds, values = None, ()
    if found_bounds is not None:
        variable, removed, kept_of = found_bounds
        at = {span: k for k, span in enumerate(order)}
        rewritten = {}
        for f, kept in kept_of.items():
            rewritten[f] = "FILTER(%s)" % " && ".join(
                _spliced(text, tokens[a].offset, tokens[b - 1].end, as_variables(
                    {span for span in order if a <= span[0] and span[1] < b})) for a, b in kept) if kept else ""
        projected = _projects(body, variable)
        fast_before, fast_after = assembled(rewritten, {at[span] for span, _ in removed},
                                            "" if projected else "?%s " % variable)
        bounds = Bounds(variable, tuple(at[span] for span, _ in removed), tuple(op for _, op in removed),
                        fast_before, fast_after, projected)
        values = tuple(constant_number(body, span) for span, _ in removed)
    return Parameterized(before, after, tuple(text[tokens[a].offset:tokens[b].end] for a, b in order), marker,
                         tuple((tokens[a].offset, tokens[b].end) for a, b in order),
                         query.base if query.base is not None and reads_its_base(query) else None,
                         bounds, values)


@dataclass(frozen=True)
class Bounds:
    """The comparisons of a query's constants with one variable that a group of queries may
    apply itself, row by row, instead of in the store (endpoint/engine/sharing.py): each is
    `?variable operator constant` (a constant written first is turned round), joined to the
    rest of its FILTER by && (a FILTER keeps a row when each conjunct is true, so a row kept by
    the rest and by each comparison is a row the whole keeps). `before` and `after` are the
    query's text without them, around a table without their columns, projecting the variable
    (`projected`: the query projects it itself, else its rows are read without it)."""

    variable: str
    columns: tuple[int, ...]        # the constants compared, by their position in `constants`
    operators: tuple[str, ...]      # <, <=, >, >=, =
    before: str
    after: str
    projected: bool

    def text(self, table: list[tuple[str, ...]]) -> str:
        """The query evaluating the rows of `table` (each row the constants of the other
        columns): a solution's marker is its row's index."""
        return "%s%s%s" % (self.before, " ".join("(%d %s)" % (k, " ".join(row)) for k, row in enumerate(table)),
                           self.after)


def _bounds(body, block: GraphPattern, window_pattern: GraphPattern, outer_filters: list[Filter],
            window_filters: list[Filter], order: list[tuple[int, int]]):
    """(variable, [(constant's span, operator)], {id(FILTER): its other conjuncts' token ranges})
    for the variable most often compared with a constant, or None. A comparison counts where
    its variable has, where the FILTER stands, the value it has in the query's rows: in WHERE,
    any; in the window, one bound by the GRAPH block's triple patterns or by a BIND in the block
    or the window (a variable bound only outside the window is unbound inside it, and a
    comparison with it an error there)."""
    tokens = body.tokens
    if any(tokens[k].is_keyword("AS") for part in body.form_head.parts if isinstance(part, Span)
           for k in range(part.start, part.end)):
        aliases = {tokens[k + 1].text[1:] for part in body.form_head.parts if isinstance(part, Span)
                   for k in range(part.start, part.end - 1) if tokens[k].is_keyword("AS")}
    else:
        aliases = set()
    bound = {tokens[k].text[1:] for item in block.group.items if isinstance(item, TriplesBlock)
             for k in range(item.span.start, item.span.end) if tokens[k].kind == VAR}
    bound |= {item.variable for group in (block.group, window_pattern.group) for item in group.items
              if isinstance(item, Bind)}
    literal_at = {a: b for a, b in order}
    found: dict[str, list[tuple[int, tuple[int, int], str]]] = {}     # variable: [(filter, span, op)]
    conjuncts: dict[int, list] = {}
    for f in outer_filters + window_filters:
        if not all(isinstance(part, Span) for part in f.expression.parts):
            continue
        first, last = f.expression.parts[0].start + 1, f.expression.parts[-1].end
        brackets = _Brackets(tokens, first, last)
        if not (tokens[first].is_punct("(") and brackets.closing(first) == last - 1):
            continue
        conjuncts[id(f)] = [(a, b, _comparison(tokens, a, b, literal_at, brackets))
                            for a, b in _conjuncts(tokens, first, last, brackets)]
        for a, b, match in conjuncts[id(f)]:
            if match is None:
                continue
            variable, span, operator = match
            if variable in aliases or (f in window_filters and variable not in bound):
                continue
            found.setdefault(variable, []).append((id(f), span, operator))
    if not found:
        return None
    variable = max(found, key=lambda v: len(found[v]))     # the first of the most compared
    removed_spans = {span for _, span, _ in found[variable]}
    kept_of = {}
    for f, _, _ in found[variable]:
        kept_of[f] = [(a, b) for a, b, match in conjuncts[f] if match is None or match[1] not in removed_spans]
    return variable, sorted((span, op) for _, span, op in found[variable]), kept_of


_OPENS = ("(", "[", "{", "<<(", "<<")
_CLOSES = (")", "]", "}", ")>>", ">>")


class _Brackets:
    """Where each bracket of a token range closes, found in one pass."""

    def __init__(self, tokens, start: int, end: int):
        self.closes: dict[int, int] = {}
        opened = []
        for k in range(start, end):
            if tokens[k].is_punct(*_OPENS):
                opened.append(k)
            elif tokens[k].is_punct(*_CLOSES) and opened:
                self.closes[opened.pop()] = k

    def closing(self, at: int) -> int:
        """The token closing the bracket opened at `at` (-1 when none does)."""
        return self.closes.get(at, -1)


def _conjuncts(tokens, start: int, end: int, brackets: _Brackets) -> list[tuple[int, int]]:
    """The token ranges [a, b) an expression in [start, end) is the && of (itself when its top
    level holds ||, which binds looser)."""
    while tokens[start].is_punct("(") and brackets.closing(start) == end - 1:
        start, end = start + 1, end - 1
    cuts, depth = [], 0
    for k in range(start, end):
        if tokens[k].is_punct(*_OPENS):
            depth += 1
        elif tokens[k].is_punct(*_CLOSES):
            depth -= 1
        elif depth == 0 and tokens[k].is_punct("||"):
            return [(start, end)]
        elif depth == 0 and tokens[k].is_punct("&&"):
            cuts.append(k)
    if not cuts:
        return [(start, end)]
    pieces = zip([start] + [c + 1 for c in cuts], cuts + [end])
    return [found for a, b in pieces for found in _conjuncts(tokens, a, b, brackets)]


def _comparison(tokens, start: int, end: int, literal_at: dict[int, int], brackets: _Brackets):
    """(variable, the constant's span, operator as `variable operator constant`) when [start,
    end) is a variable compared with one constant and nothing else, else None."""
    while tokens[start].is_punct("(") and brackets.closing(start) == end - 1:
        start, end = start + 1, end - 1
    if end - start < 3:
        return None
    if tokens[start].kind == VAR and tokens[start + 1].text in _COMPARISONS and tokens[start + 1].kind != STRING \
            and literal_at.get(start + 2) == end - 1:
        return tokens[start].text[1:], (start + 2, end - 1), tokens[start + 1].text
    if start in literal_at and literal_at[start] + 3 == end and tokens[end - 1].kind == VAR \
            and tokens[end - 2].text in _COMPARISONS and tokens[end - 2].kind != STRING:
        return tokens[end - 1].text[1:], (start, literal_at[start]), _COMPARISONS[tokens[end - 2].text]
    return None


def _head_tokens(body):
    """The indexes of the SELECT clause's tokens, in order, without those the body removed."""
    removed = {k for span in body.removed for k in range(span.start, span.end)}
    for part in body.form_head.parts:
        if isinstance(part, Span):
            yield from (k for k in range(part.start, part.end) if k not in removed)


def _projects(body, variable: str) -> bool:
    """Whether the query's rows hold `variable`: SELECT *, or a projection naming it."""
    tokens = body.tokens
    depth = 0
    for k in _head_tokens(body):
        if tokens[k].is_punct("*") and depth == 0:
            return True
        if tokens[k].is_punct("("):
            depth += 1
        elif tokens[k].is_punct(")"):
            depth -= 1
        elif depth == 0 and tokens[k].kind == VAR and tokens[k].text[1:] == variable:
            return True
    return False


_QUOTES = ('"""', "'''", '"', "'")


def constant_number(body, span: tuple[int, int]) -> Number | None:
    """The value of the numeric literal written at `span` (a number, or a string typed with a
    numeric datatype), else None."""
    tokens = body.tokens
    a, b = span
    if a == b and tokens[a].kind == NUMBER:
        written = tokens[a].text
        kind = "double" if "e" in written.lower() else "decimal" if "." in written else "integer"
        return number(written, XSD + kind)
    if b == a + 2 and tokens[a].kind == STRING and tokens[a + 1].is_punct("^^"):
        written = tokens[a].text
        quote = next(q for q in _QUOTES if written.startswith(q))
        lexical = written[len(quote):-len(quote)]
        if "\\" in lexical:
            return None
        try:
            return number(lexical, body.resolve(b))
        except KeyError:
            return None
    return None


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
    for k in _head_tokens(body):
        if tokens[k].is_punct("*"):
            return None
        if tokens[k].kind == VAR or tokens[k].is_punct("("):
            return tokens[k].offset
    return None


# ---------------------------------------------------------------------------------------------
# Numeric bounds: constants compared with one variable, indexed instead of joined.

XSD = "http://www.w3.org/2001/XMLSchema#"
# The datatypes Oxigraph reads as xsd:integer (it keeps their values as integers, with no check
# of the derived type's range), and the other numeric ones.
_INTEGER_TYPES = frozenset(XSD + name for name in (
    "integer", "int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger", "nonPositiveInteger",
    "negativeInteger", "unsignedLong", "unsignedInt", "unsignedShort", "unsignedByte"))
_KIND_OF = {XSD + "decimal": "m", XSD + "float": "f", XSD + "double": "d"}
_KIND_OF.update({iri: "i" for iri in _INTEGER_TYPES})

_INTEGER_RE = re.compile(r"[+-]?[0-9]+\Z")
_DECIMAL_RE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?\Z")
_FLOATING_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_SPECIAL = {"INF": math.inf, "-INF": -math.inf, "NaN": math.nan}
_I64 = 1 << 63
_I128 = 1 << 127
_DECIMAL_DIGITS = 18


class Number(NamedTuple):
    """A numeric literal's value as SPARQL compares it (XPath's numeric promotion, as Oxigraph
    computes it): `kind` i (xsd:integer and the types derived from it), m (xsd:decimal), f
    (xsd:float), d (xsd:double); `exact`, the value of an integer or decimal times 10^18 (what
    Oxigraph keeps of a decimal: an integer, which the cycle collector need not track);
    `double`, the value promoted to xsd:double; `single`, promoted to xsd:float (None for a
    double)."""
    kind: str
    exact: int | None
    double: float
    single: float | None


def number(lexical: str, datatype: str) -> Number | None:
    """The value of the literal `lexical`^^`datatype` when it is a well-formed numeric literal,
    else None (comparing an ill-typed literal is an error). Only lexical forms Oxigraph reads
    the same way are read; Oxigraph writes the values it reads in their canonical forms, which
    are among these, and leaves an ill-typed literal as written."""
    kind = _KIND_OF.get(datatype)
    if kind == "i":
        if not _INTEGER_RE.match(lexical):
            return None
        value = int(lexical)
        if not -_I64 <= value < _I64:
            return None
        return Number("i", value * 10 ** _DECIMAL_DIGITS, float(value), _single_of(Fraction(value)))
    if kind == "m":
        found = _DECIMAL_RE.match(lexical)
        if found is None or not (found.group(2) or found.group(3)):
            return None
        sign, whole, fraction = found.group(1), found.group(2), (found.group(3) or "").rstrip("0")
        if len(fraction) > _DECIMAL_DIGITS:
            return None
        scaled = int((whole or "0") + fraction) * 10 ** (_DECIMAL_DIGITS - len(fraction))
        if sign == "-":
            scaled = -scaled
        if not -_I128 <= scaled < _I128:
            return None
        double = _decimal_to_double(scaled)
        return Number("m", scaled, double, _double_to_single(double))
    if kind in ("f", "d"):
        if lexical in _SPECIAL:
            value = _SPECIAL[lexical]
        elif _FLOATING_RE.match(lexical):
            value = float(lexical) if kind == "d" else _single_of(Fraction(lexical))
        else:
            return None
        return Number(kind, None, value, value if kind == "f" else None)
    return None


def _decimal_to_double(scaled: int) -> float:
    """A decimal (its value times 10^18) as xsd:double, as Oxigraph converts it: the trailing
    zeros dropped, the digits rounded to a double, then divided by the power of ten left."""
    shift = _DECIMAL_DIGITS
    if scaled:
        while shift and scaled % 10 == 0:
            scaled //= 10
            shift -= 1
    return float(scaled) / float(10 ** shift)


def _double_to_single(value: float) -> float:
    """A double rounded to the nearest float (ties to even; past the largest, infinite)."""
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def _single_of(value: Fraction) -> float:
    """The float nearest an exact value (ties to even), rounded once: a double rounded to a float
    can land on the midpoint of two floats that the exact value is not on."""
    if value == 0:
        return 0.0
    if abs(value) >= 2 ** 129:
        return math.copysign(math.inf, value)
    first = _double_to_single(float(value))
    if math.isinf(first) or math.isinf(_next_single(first, Fraction(first) < value)):
        # Near the largest float: from half an ulp above it, infinite.
        return math.copysign(_LARGEST_SINGLE if abs(value) < _LARGEST_SINGLE + _TOP_HALF_ULP else math.inf, value)
    if Fraction(first) == value:
        return first
    other = _next_single(first, Fraction(first) < value)
    near, far = abs(value - Fraction(first)), abs(value - Fraction(other))
    if near != far:
        return first if near < far else other
    return first if _bits(first) % 2 == 0 else other


_LARGEST_SINGLE = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
_TOP_HALF_ULP = Fraction(2) ** 103


def _bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


def _next_single(value: float, up: bool) -> float:
    """The float next to `value` (a float) upwards or downwards."""
    bits = _bits(value)
    if value == 0:
        bits = 1 if up else 0x80000001
    elif (value > 0) == up:
        bits += 1
    else:
        bits -= 1
    if bits & 0x7F800000 == 0x7F800000:
        return math.copysign(math.inf, value)
    return struct.unpack("<f", struct.pack("<I", bits))[0]


_NTRIPLES_LITERAL = re.compile(r'"([^"\\]*)"\^\^<([^<>"\\]*)>\Z')


def number_of_term(text: str) -> Number | None:
    """The value of a term written in N-Triples (store.terms) when it is a numeric literal."""
    found = _NTRIPLES_LITERAL.match(text)
    return number(found.group(1), found.group(2)) if found else None


_COMPARISONS = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}     # each with its sides swapped


def nan_itself(value: Number, operator: str, constant: Number) -> bool:
    """Where NaN is compared: true only for <= or >= between NaNs of one datatype (the same
    term, which Oxigraph holds equal to itself before it compares values)."""
    return operator in ("<=", ">=") and value.kind == constant.kind and value.double != value.double \
        and constant.double != constant.double


def compares(value: Number, operator: str, constant: Number) -> bool:
    """Whether `value operator constant` is true (a comparison a FILTER keeps a row for): an
    integer or decimal with an integer or decimal exactly; with a double, both as doubles; else
    with a float, both as floats. NaN compares false, but for Oxigraph's one exception: a term
    is <= and >= itself, so NaN is <= and >= NaN of its own datatype (`nan_itself`)."""
    if value.double != value.double or constant.double != constant.double:
        return nan_itself(value, operator, constant)
    kinds = value.kind + constant.kind
    if "d" in kinds:
        a, b = value.double, constant.double
    elif "f" in kinds:
        a, b = value.single, constant.single
    else:
        a, b = value.exact, constant.exact
    if operator == "<":
        return a < b
    if operator == "<=":
        return a <= b
    if operator == ">":
        return a > b
    if operator == ">=":
        return a >= b
    return a == b
