"""A bound on bracket nesting, checked before any parser sees a query or an update.

Parsers of SPARQL (ours and Oxigraph's) are recursive: Oxigraph's overflows a worker
thread's stack near 2,500 nested braces and takes the whole process down, ours raises
RecursionError. No real query comes near MAX_NESTING; deeper text is refused with the
position of the bracket that goes past it."""
from __future__ import annotations

import re

from .errors import QuerySyntaxError

MAX_NESTING = 128
# Strings, comments and IRIs are skipped (brackets inside them do not nest); what is left
# of interest is the brackets themselves.
_TOKEN = re.compile(r'''"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'(?:[^'\\]|\\.|'(?!''))*\'\'\''''
                    r'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|#[^\n]*|<[^<>"{}|^`\\\s]*>|[({\[]|[)}\]]''', re.S)


def check_nesting(text: str, limit: int = MAX_NESTING) -> None:
    """QuerySyntaxError at the first bracket nested deeper than `limit`."""
    depth = 0
    for token in _TOKEN.finditer(text):
        kind = token.group()
        if kind in "({[":
            depth += 1
            if depth > limit:
                at = token.start()
                line = text.count("\n", 0, at) + 1
                raise QuerySyntaxError("brackets nested deeper than %d: not parsed" % limit,
                                       line, at - text.rfind("\n", 0, at))
        elif kind in ")}]":
            depth -= 1
