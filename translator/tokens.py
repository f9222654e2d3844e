"""Tokenizer for RSP-QL* (SPARQL 1.2 plus the window extensions).

Tokens keep their exact source text and offset, so the rewriter copies the user's text
verbatim and maps any later error back to the user's line and column.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from .errors import QuerySyntaxError

IRI = "IRI"
PNAME = "PNAME"
BNODE = "BNODE"
VAR = "VAR"
STRING = "STRING"
NUMBER = "NUMBER"
LANGTAG = "LANGTAG"
NAME = "NAME"
PUNCT = "PUNCT"
EOF = "EOF"

_PN_CHARS_BASE = (
    "A-Za-z\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u02FF\u0370-\u037D\u037F-\u1FFF\u200C-\u200D"
    "\u2070-\u218F\u2C00-\u2FEF\u3001-\uD7FF\uF900-\uFDCF\uFDF0-\uFFFD\U00010000-\U000EFFFF"
)
_PN_CHARS_U = _PN_CHARS_BASE + "_"
_PN_CHARS = _PN_CHARS_U + r"\-0-9\u00B7\u0300-\u036F\u203F-\u2040"
_PN_PREFIX = "[%s](?:[%s.]*[%s])?" % (_PN_CHARS_BASE, _PN_CHARS, _PN_CHARS)
_PLX = r"%[0-9A-Fa-f]{2}|\\[_~.\-!$&'()*+,;=/?#@%]"
_PN_LOCAL = "(?:[%s:0-9]|%s)(?:(?:[%s.:]|%s)*(?:[%s:]|%s))?" % (
    _PN_CHARS_U, _PLX, _PN_CHARS, _PLX, _PN_CHARS, _PLX)

_WS = re.compile(r"(?:\s+|#[^\n\r]*)+")
_IRIREF = re.compile(r'<[^<>"{}|^`\\\x00-\x20]*>')
_PNAME_RE = re.compile("(?:%s)?:(?:%s)?" % (_PN_PREFIX, _PN_LOCAL))
_BNODE_RE = re.compile("_:[%s0-9](?:[%s.]*[%s])?" % (_PN_CHARS_U, _PN_CHARS, _PN_CHARS))
_VAR_RE = re.compile("[?$][%s0-9][%s0-9\u00B7\u0300-\u036F\u203F-\u2040]*" % (_PN_CHARS_U, _PN_CHARS_U))
_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.\d*[eE][+-]?\d+|\.\d+[eE][+-]?\d+|\d+[eE][+-]?\d+|\d*\.\d+|\d+)")
_LANGTAG_RE = re.compile(r"@[a-zA-Z]+(?:-[a-zA-Z0-9]+)*(?:--[a-zA-Z]+)?")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING_RES = [
    re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""', re.S),
    re.compile(r"'''(?:[^'\\]|\\.|'(?!''))*'''", re.S),
    re.compile(r'"(?:[^"\\\n\r]|\\.)*"'),
    re.compile(r"'(?:[^'\\\n\r]|\\.)*'"),
]
# Longest first: "<<(" before "<<" before "<=" before "<".
_PUNCTS = ["<<(", ")>>", "<<", ">>", "{|", "|}", "^^", "||", "&&", "!=", "<=", ">=",
           "{", "}", "(", ")", "[", "]", ",", ";", ".", "=", "<", ">", "!", "*", "/",
           "+", "-", "^", "|", "?", "~"]
# The same, tried in that order in one match.
_PUNCT_RE = re.compile("|".join(map(re.escape, _PUNCTS)))


class Token(NamedTuple):
    kind: str
    text: str
    offset: int
    end: int

    def is_keyword(self, *words: str) -> bool:
        return self.kind == NAME and self.text.upper() in words

    def is_punct(self, *texts: str) -> bool:
        return self.kind == PUNCT and self.text in texts


_new = tuple.__new__


class Tokens(Sequence):
    """A parsed query's tokens, kept as plain tuples and read as Tokens. The cycle collector
    stops tracking a plain tuple of strings and numbers after its first collection (not a
    Token: a tuple subclass), and Python's full collections scan every tracked object with
    every thread held: registered queries' tokens made every full collection longer
    (bench/out/NOTES.md#full-collections)."""

    __slots__ = ("_rows",)

    def __init__(self, tokens: Iterable[Token]):
        self._rows = tuple(tuple(t) for t in tokens)

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self):
        return (_new(Token, row) for row in self._rows)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [_new(Token, row) for row in self._rows[k]]
        return _new(Token, self._rows[k])

    def words(self) -> set[str]:
        """The words (NAME tokens) of the text, upper case: read from the rows, no Token made."""
        return {text.upper() for kind, text, _, _ in self._rows if kind == NAME}

    @property
    def rows(self) -> tuple[tuple, ...]:
        """The tokens as plain (kind, text, offset, end) tuples, read with no Token made."""
        return self._rows


class SourceText:
    """The query text with offset -> (line, column) conversion."""

    def __init__(self, text: str):
        self.text = text
        self._line_starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - self._line_starts[lo] + 1

    def offset(self, line: int, column: int) -> int:
        line = max(1, min(line, len(self._line_starts)))
        return min(self._line_starts[line - 1] + max(column, 1) - 1, len(self.text))

    def error(self, message: str, offset: int) -> QuerySyntaxError:
        line, column = self.position(offset)
        return QuerySyntaxError(message, line, column)


class TokenReader:
    """A cursor over a query's tokens, with errors at the token's line and column."""

    def __init__(self, text: str, tokens: list[Token] | None = None):
        """`tokens`: the text's, when the caller has tokenized it already."""
        self.source = SourceText(text)
        self.tokens = tokenize(self.source) if tokens is None else tokens
        self.i = 0
        self._last = len(self.tokens) - 1      # the EOF token's index

    def peek(self, k: int = 0) -> Token:
        # (The parser peeks at about every token several times: no call to min.)
        i = self.i + k
        return self.tokens[i if i < self._last else self._last]

    def advance(self) -> Token:
        tok = self.tokens[self.i]
        if tok.kind != EOF:
            self.i += 1
        return tok

    def error(self, message: str, tok: Token | None = None) -> QuerySyntaxError:
        return self.source.error(message, (tok or self.peek()).offset)

    @staticmethod
    def describe(tok: Token) -> str:
        return "end of query" if tok.kind == EOF else repr(tok.text)

    def expect_punct(self, text: str, context: str) -> Token:
        tok = self.peek()
        if not tok.is_punct(text):
            raise self.error("expected %r %s, found %s" % (text, context, self.describe(tok)))
        return self.advance()

    def expect_keyword(self, word: str, context: str) -> Token:
        tok = self.peek()
        if not tok.is_keyword(word):
            raise self.error("expected %s %s, found %s" % (word, context, self.describe(tok)))
        return self.advance()

    def count(self, what: str) -> int:
        """A positive whole number of elements."""
        tok = self.peek()
        if tok.kind != NUMBER or not tok.text.isdigit() or int(tok.text) < 1:
            raise self.error("%s takes a positive whole number of elements, found %s" % (what, self.describe(tok)))
        self.advance()
        return int(tok.text)


def tokenize(source: SourceText) -> list[Token]:
    text = source.text
    tokens: list[Token] = []
    i, n = 0, len(text)
    while True:
        m = _WS.match(text, i)
        if m:
            i = m.end()
        if i >= n:
            tokens.append(Token(EOF, "", n, n))
            return tokens
        c = text[i]
        m = None
        kind = None
        if c == "<":
            m = _IRIREF.match(text, i)
            kind = IRI if m else None
        elif c in "\"'":
            for pattern in _STRING_RES:
                m = pattern.match(text, i)
                if m:
                    kind = STRING
                    break
            else:
                raise source.error("unterminated string", i)
        elif c in "?$":
            m = _VAR_RE.match(text, i)
            kind = VAR if m else None
        elif c == "_" and text.startswith("_:", i):
            m = _BNODE_RE.match(text, i)
            if not m:
                raise source.error("invalid blank node label", i)
            kind = BNODE
        elif c == "@":
            m = _LANGTAG_RE.match(text, i)
            if not m:
                raise source.error("invalid language tag", i)
            kind = LANGTAG
        elif c.isdigit() or (c in "+-." and i + 1 < n and (text[i + 1].isdigit() or (
                text[i + 1] == "." and i + 2 < n and text[i + 2].isdigit()))):
            m = _NUMBER_RE.match(text, i)
            kind = NUMBER if m else None
        if m is None:
            pm = _PNAME_RE.match(text, i)
            if pm and pm.end() > i:
                m, kind = pm, PNAME
        if m is None and (c.isalpha() or c == "_"):
            m, kind = _NAME_RE.match(text, i), NAME
        if m is None:
            pm = _PUNCT_RE.match(text, i)
            if pm is None:
                raise source.error("unexpected character %r" % c, i)
            tokens.append(Token(PUNCT, pm.group(), i, pm.end()))
            i = pm.end()
            continue
        tokens.append(Token(kind, m.group(0), i, m.end()))
        i = m.end()
