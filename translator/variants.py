"""Queries that differ only in constants, parsed once (docs/incremental-evaluation.md, "Queries
differing only in constants").

A thousand query files watching a thousand sensors are one text with another IRI in each. The
parser reads a query's constants (translator/constants.py: the literals of its row-wise FILTERs
and BINDs, the IRIs and literals its GRAPH block's triple patterns have as objects) as tokens it
keeps, never as values: the syntax tree holds token positions only. So the tree of a text whose
tokens are another's but for those constants is that one's, over its own tokens, and
`CompiledShapes` gives it without parsing. What compiling checks after parsing (the rewrite,
Oxigraph's reading of it, the functions called, the warnings) is still done for every text: a
constant may be one Oxigraph refuses.

A text is read as another's variant only where that gives what parsing it gives:
- its tokens are the other's, kind for kind, and text for text outside the constants;
- a constant that is a prefixed name keeps its prefix (declared, then), one that is an IRI is
  absolute (nothing to resolve), and each is of the kind the other's was;
- its text up to its first constant is the other's: what is positioned there (its windows'
  lines, the notes on how their forms were read) stands where it stood;
- its base is the other's, or the other does not read its base (`reads_its_base`) and has no
  fact window (whose patterns keep the base in effect).
"""
from __future__ import annotations

import collections
import threading
from dataclasses import replace

from .constants import Parameterized, constant_number, parameterized, reads_its_base
from .incremental import distributive_window
from .model import ContinuousQuery
from .syntax import is_absolute_iri
from .tokens import IRI, NUMBER, PNAME, STRING, SourceText, Token, Tokens

# The kinds of token a constant is; a shape is keyed by the others' texts and by these kinds.
_CONSTANT_KINDS = frozenset((IRI, PNAME, STRING, NUMBER))
# Texts of one key that differ outside their constants (another sensor's predicate, say): the
# first few of them are kept.
_PER_KEY = 4


def _key(tokens) -> tuple:
    """A text's tokens without their constants' texts (Tokens or the rows of Tokens.rows)."""
    return tuple(t[0] if t[0] in _CONSTANT_KINDS else (t[0], t[1]) for t in tokens)


class CompiledShapes:
    """The syntax trees of queries parsed before, by shape (at most `capacity` shapes, the
    least recently read going first): a text differing from one of them only in its constants is
    given that one's tree over its own tokens (`variant`). Owned by whoever compiles many
    queries (a replay, a runner); `parsed` and `reused` count the texts parsed and not."""

    def __init__(self, capacity: int = 64):
        self.capacity = capacity
        self._shapes: collections.OrderedDict[tuple, list[_Shape]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.parsed = 0
        self.reused = 0

    def variant(self, text: str, tokens: list[Token], base: str | None) -> ContinuousQuery | None:
        """The query `text` (its `tokens`, read against `base`) parses to, from a tree kept
        before; None when none is of its shape (it is to be parsed)."""
        key = _key(tokens)
        with self._lock:
            shapes = self._shapes.get(key)
            if shapes is None:
                return None
            self._shapes.move_to_end(key)
            shapes = tuple(shapes)
        for shape in shapes:
            query = shape.variant(text, tokens, base)
            if query is not None:
                with self._lock:
                    self.reused += 1
                return query
        return None

    def parameterized(self, query: ContinuousQuery) -> Parameterized | None:
        """`constants.parameterized(query)` made from the kept query of its shape, when its text
        is that one's outside their constants (whitespace and comments too: they are in the
        text a group evaluates); None when no kept query is (it is to be worked out)."""
        body = query.body
        if body is None or query.dialect != "rspql" or query.merged_windows is not None:
            return None     # (as parameterized: a translation's text says less than its query)
        rows = body.tokens.rows
        with self._lock:
            shapes = tuple(self._shapes.get(_key(rows), ()))
        for shape in shapes:
            found = shape.parameterized(query, rows)
            if found is not None:
                return found
        return None

    def keep(self, query: ContinuousQuery, tokens: list[Token]) -> None:
        """A query just parsed from `tokens` (and checked), for the texts that differ from it
        in constants."""
        with self._lock:
            self.parsed += 1
        if query.dialect != "rspql" or query.translation is not None or query.body is None:
            return      # a dialect's translation: its tree is not over the text's tokens
        key = _key(tokens)
        with self._lock:
            shapes = self._shapes.setdefault(key, [])
            self._shapes.move_to_end(key)
            if len(shapes) < _PER_KEY:
                shapes.append(_Shape(query, tokens))
            while len(self._shapes) > self.capacity:
                self._shapes.popitem(last=False)


class _Shape:
    """One query as parsed, and what a text must keep of it to be read with its tree (worked out
    the first time a text of its key asks: most shapes are never asked)."""

    def __init__(self, query: ContinuousQuery, tokens: list[Token]):
        self.query = query
        self.tokens = tokens
        self._read: tuple | None = None
        self.shared: Parameterized | None = None     # parameterized(query), once read
        self.spans: tuple[tuple[int, int], ...] = ()  # its constants' first and last tokens

    def _reading(self) -> tuple:
        """(tokens of a constant kind that are no constant, the prefixed names among the
        constants with their prefixes, the IRIs among them, where the first constant starts,
        whether the query reads its base, whether it declares one)."""
        if self._read is None:
            query, tokens = self.query, self.tokens
            constants: set[int] = set()
            if distributive_window(query)[0] is not None:
                shared = parameterized(query)
                if shared is not None:
                    starts = {tok.offset: k for k, tok in enumerate(tokens)}
                    ends = {tok.end: k for k, tok in enumerate(tokens)}
                    self.spans = tuple((starts[start], ends[end]) for start, end in shared.spans)
                    constants = {first for first, _ in self.spans}
                    self.shared = shared
            fixed = tuple(k for k, tok in enumerate(tokens) if tok.kind in _CONSTANT_KINDS and k not in constants)
            prefixed = tuple((k, tokens[k].text.partition(":")[0]) for k in sorted(constants)
                             if tokens[k].kind == PNAME)
            iris = tuple(k for k in sorted(constants) if tokens[k].kind == IRI)
            first = min((tokens[k].offset for k in constants), default=len(query.text))
            # A fact window keeps the base in effect in the patterns it runs: read against another
            # base, the query's tree is not this one's.
            bound_to_base = reads_its_base(query) or any(w.reads_facts for w in query.windows.values())
            self._read = (fixed, prefixed, iris, first, bound_to_base, any(tok.is_keyword("BASE") for tok in tokens))
        return self._read

    def variant(self, text: str, tokens: list[Token], base: str | None) -> ContinuousQuery | None:
        """This query's tree over `tokens`, when `text` differs from its text only in constants
        (the module's rules; `tokens` are of this one's key); else None."""
        fixed, prefixed, iris, first, reads_base, declares_base = self._reading()
        query, mine = self.query, self.tokens
        if base != query.base and reads_base:
            return None
        if not text.startswith(query.text[:first]) or (first == len(query.text) and text != query.text):
            return None
        for k in fixed:
            if tokens[k].text != mine[k].text:
                return None
        for k, prefix in prefixed:
            if tokens[k].text.partition(":")[0] != prefix:
                return None
        for k in iris:
            if not is_absolute_iri(tokens[k].text[1:-1]):
                return None
        body = query.body
        return replace(query, text=text, base=base, warnings=[], body=replace(
            body, source=SourceText(text), tokens=Tokens(tokens), prefixes=dict(body.prefixes),
            base=body.base if base == query.base or declares_base else base))

    def parameterized(self, query: ContinuousQuery, rows: tuple[tuple, ...]) -> Parameterized | None:
        """parameterized(query) from this one's, for a query whose tokens `rows` are of this
        one's key, when its text outside its constants is this one's; else None."""
        self._reading()
        shared = self.shared
        if shared is None:
            return None
        text, mine = query.body.source.text, self.query.text
        at = at_mine = 0
        for first, last in self.spans:
            start, start_mine = rows[first][2], self.tokens[first].offset
            if text[at:start] != mine[at_mine:start_mine]:
                return None
            at, at_mine = rows[last][3], self.tokens[last].end
        if text[at:] != mine[at_mine:]:
            return None
        spans = tuple((rows[first][2], rows[last][3]) for first, last in self.spans)
        values = () if shared.bounds is None else \
            tuple(constant_number(query.body, self.spans[column]) for column in shared.bounds.columns)
        return replace(shared, constants=tuple(text[start:end] for start, end in spans), spans=spans, values=values,
                       base=query.base if query.base is not None and reads_its_base(query) else None)
