"""A bound on nesting, checked before any parser sees a query, an update or RDF data.

Parsers of SPARQL and of Turtle-family RDF (ours and Oxigraph's) are recursive: Oxigraph's
overflows a thread's stack near 2,500 nested braces, or `<<` nested 10,000 deep, and takes the
whole process down; ours raises RecursionError. Every construct that nests is counted together:
brackets `(` `{` `[`, triple terms and reified triples `<<( )>>` `<< >>`, annotations `{| |}`.
No real query or document comes near MAX_NESTING; deeper text is refused with the position of
the construct that goes past it."""
from __future__ import annotations

import re
from itertools import accumulate, repeat

from .errors import QuerySyntaxError

MAX_NESTING = 128
# Strings, comments and IRIs are skipped (what is inside them does not nest); what is left of
# interest is the openers and closers themselves, longest first.
_PATTERN = (r'''"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'(?:[^'\\]|\\.|'(?!''))*\'\'\''''
            r'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|#[^\n]*|<[^<>"{}|^`\\\s]*>'''
            r'''|<<\(|<<|\{\||[({\[]|\)>>|>>|\|\}|[)}\]]''')
_TOKEN = re.compile(_PATTERN, re.S)
_TOKEN_BYTES = re.compile(_PATTERN.encode(), re.S)
_OPENERS = {"(", "{", "[", "<<(", "<<", "{|"}
_CLOSERS = {")", "}", "]", ")>>", ">>", "|}"}
# What each token does to the depth (strings, comments and IRIs nothing).
_STEP = {**dict.fromkeys(_OPENERS, 1), **dict.fromkeys(_CLOSERS, -1)}
_STEP_BYTES = {token.encode(): step for token, step in _STEP.items()}


def check_nesting(text: str | bytes, limit: int = MAX_NESTING) -> None:
    """QuerySyntaxError at the first construct nested deeper than `limit` (line and column; for
    bytes, the column counts bytes)."""
    binary = isinstance(text, bytes)
    openers = (b"(", b"{", b"[", b"<<") if binary else ("(", "{", "[", "<<")
    # Fewer openers than the limit anywhere (quoted ones counted too) cannot nest past it: most
    # texts are let through on these counts alone, in C.
    if sum(text.count(o) for o in openers) <= limit:
        return
    pattern, steps = (_TOKEN_BYTES, _STEP_BYTES) if binary else (_TOKEN, _STEP)
    # The deepest point, found without a Python step per token (a quarter faster on documents
    # of many small elements); only text that goes too deep is walked again for the position.
    if max(accumulate(map(steps.get, map(re.Match.group, pattern.finditer(text)), repeat(0))), default=0) <= limit:
        return
    depth = 0
    for token in pattern.finditer(text):
        depth += steps.get(token.group(), 0)
        if depth > limit:
            at = token.start()
            newline = b"\n" if binary else "\n"
            line = text.count(newline, 0, at) + 1
            raise QuerySyntaxError("nested deeper than %d levels (brackets, << >>, {| |}): not parsed" % limit,
                                   line, at - text.rfind(newline, 0, at))
