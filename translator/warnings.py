"""What a query says that is valid but surely not meant, named with its line and column: a
warning goes with the query (registration answer, `rspstar check`, the replay's standard error)
and the query runs as written.

- HAVING over a SELECT alias (spec §6.7, the RSP query features page Q2): `SELECT ?p (COUNT(?r) AS ?n) ... HAVING
  (?n >= 5)`. SPARQL evaluates HAVING before the projection binds the alias, so `?n` is unbound
  there and the condition never holds; the aggregate itself must be written in HAVING.
"""
from __future__ import annotations

from .tokens import EOF, VAR, SourceText, Token, tokenize

_MODIFIER_END = ("ORDER", "LIMIT", "OFFSET", "VALUES")


def query_warnings(text: str) -> list[str]:
    """The warnings of a query's text (any dialect: what they read is copied from the text)."""
    source = SourceText(text)
    try:
        tokens = tokenize(source)
    except Exception:       # the parser reports what does not tokenize
        return []
    found = []
    for k, tok in enumerate(tokens):
        if tok.is_keyword("SELECT"):
            found += _having_over_aliases(source, tokens, k)
    return found


def _having_over_aliases(source: SourceText, tokens: list[Token], select: int) -> list[str]:
    aliases, k = _aliases(source, tokens, select + 1)
    if not aliases:
        return []
    # The WHERE group (the first brace at the SELECT's level), then its modifiers up to the
    # brace closing the SELECT's own group or the end.
    while k < len(tokens) and not tokens[k].is_punct("{") and tokens[k].kind != EOF:
        k += 1
    k = _past_group(tokens, k)
    warnings = []
    while k < len(tokens) and tokens[k].kind != EOF and not tokens[k].is_punct("}", "{"):
        if tokens[k].is_keyword("HAVING"):
            end = k + 1
            depth = 0
            while tokens[end].kind != EOF and not (depth == 0 and (tokens[end].is_keyword(*_MODIFIER_END) or
                                                                    tokens[end].is_punct("}"))):
                depth += tokens[end].is_punct("(") - tokens[end].is_punct(")")
                end += 1
            used = [t for t in tokens[k + 1:end] if t.kind == VAR and t.text[1:] in aliases]
            if used:
                rewritten = _replace(source.text, tokens[k].offset, tokens[end - 1].end,
                                     [(t.offset, t.end, aliases[t.text[1:]]) for t in used])
                names = sorted({t.text for t in used})
                line, column = source.position(used[0].offset)
                warnings.append(
                    "%d:%d: HAVING reads %s, %s of the SELECT clause, which HAVING is evaluated before: "
                    "unbound there, so the condition never holds and no group is kept; write the "
                    "aggregate itself: %s" % (line, column, ", ".join(names),
                                              "an alias" if len(names) == 1 else "aliases", rewritten))
            k = end
        else:
            k += 1
    return warnings


def _aliases(source: SourceText, tokens: list[Token], k: int) -> tuple[dict[str, str], int]:
    """The projection's `(expression AS ?alias)` as {alias: expression text}, and the index
    after the projection."""
    aliases = {}
    while tokens[k].kind != EOF and not (tokens[k].is_punct("{") or tokens[k].is_keyword("FROM", "WHERE")):
        if tokens[k].is_punct("("):
            close = _matching_paren(tokens, k)
            if close - k >= 3 and tokens[close - 2].is_keyword("AS") and tokens[close - 1].kind == VAR:
                aliases[tokens[close - 1].text[1:]] = source.text[tokens[k + 1].offset:tokens[close - 3].end]
            k = close + 1
        else:
            k += 1
    return aliases, k


def _matching_paren(tokens: list[Token], k: int) -> int:
    depth = 0
    for j in range(k, len(tokens)):
        depth += tokens[j].is_punct("(") - tokens[j].is_punct(")")
        if depth == 0 or tokens[j].kind == EOF:
            return j
    return len(tokens) - 1


def _past_group(tokens: list[Token], k: int) -> int:
    depth = 0
    for j in range(k, len(tokens)):
        depth += tokens[j].is_punct("{") - tokens[j].is_punct("}")
        if depth == 0:
            return j + 1
    return len(tokens)


def _replace(text: str, start: int, end: int, edits: list[tuple[int, int, str]]) -> str:
    out, at = [], start
    for a, b, new in edits:
        out += [text[at:a], new]
        at = b
    out.append(text[at:end])
    return " ".join("".join(out).split())
