"""What a query says that is valid but surely not meant, named with its line and column: a
warning goes with the query (registration answer, `rspstar check`, the replay's standard error)
and the query runs as written.

- HAVING over a SELECT alias (spec §6.7, the RSP query features page Q2): `SELECT ?p (COUNT(?r) AS ?n) ... HAVING
  (?n >= 5)`. SPARQL evaluates HAVING before the projection binds the alias, so `?n` is unbound
  there and the condition never holds; the aggregate itself must be written in HAVING.
- A triple pattern that can never match the graph it is read against (spec 6.15: no silent
  emptiness): a constant predicate other than the timestamp predicate in a WINDOW block read
  against its elements' timestamp triples (`reading_warnings`); a pattern outside every window
  when the background it reads holds nothing (`background_warnings`, given what the store
  holds); a window on a stream no source feeds (`unfed_stream_warnings`, given the streams the
  running engine's sources feed).
"""
from __future__ import annotations

from collections.abc import Callable, Collection

from .model import ContinuousQuery
from .rewrite import RewriteOptions, Template, compile_template
from .syntax import Expression, GraphPattern, Group, SubSelect, TriplesBlock, nested_groups
from .tokens import EOF, VAR, SourceText, Token, tokenize
from .vocabulary import PROV_GENERATED_AT_TIME

_SHORT = {"http://www.w3.org/1999/02/22-rdf-syntax-ns#": "rdf:", "http://www.w3.org/ns/prov#": "prov:"}


def _short(iri: str) -> str:
    for namespace, prefix in _SHORT.items():
        if iri.startswith(namespace):
            return prefix + iri[len(namespace):]
    return "<%s>" % iri


def reading_warnings(query: ContinuousQuery, options: RewriteOptions, forced_by: str = "",
                     template: Template | None = None) -> list[str]:
    """A warning for each triple pattern of a WINDOW block read against its elements' timestamp
    triples (section 3's reading: the block holds a GRAPH pattern, or `forced_by` says what
    forces it) whose constant predicate is not the timestamp predicate: it never matches.
    `template`: the query compiled under `options` already, when the caller has it."""
    if query.body is None or not query.windows:
        return []
    template = template or compile_template(query, options)
    where = " (in the RSP-QL* translation)" if query.translation is not None else ""
    found: dict[tuple[int, str], list[str]] = {}
    for offset, window, predicate in template.unmatchable:
        found.setdefault((offset, predicate), []).append(window)
    warnings = []
    for (offset, predicate), windows in sorted(found.items()):
        line, column = query.body.source.position(offset)
        why = forced_by or "the block holds a GRAPH pattern, spec section 3"
        instead = ("or give window_default_graph = union to read the elements' merged content" if forced_by else
                   "or leave GRAPH out of the block to read its elements' merged content (spec 6.15)")
        warnings.append(
            "%d:%d%s: %s in WINDOW %s is read against the window's timestamp triples (%s), whose only predicate is "
            "%s: the pattern can never match; write it inside a GRAPH pattern of the block, %s"
            % (line, column, where, _short(predicate), ", ".join("<%s>" % w for w in windows), why,
               _short(PROV_GENERATED_AT_TIME), instead))
    return warnings


def background_warnings(query: ContinuousQuery, holds: Callable[[str | None], bool], named: Collection[str]) -> list[str]:
    """A warning when triple patterns outside every window read background data that holds
    nothing: `holds(None)` tells whether the background default graph holds a triple,
    `holds(iri)` whether the background graph <iri> does; `named`: the background named graphs
    holding triples. A dialect query whose default graph merges its windows with the background
    (C-SPARQL) reads its windows there too: no warning."""
    body = query.body
    if body is None or query.merged_windows:
        return []
    outside: list[int] = []
    graphs: list[tuple[int, str | None]] = []
    _visit_outside(body.where, body, outside, graphs)
    described = bool(query.from_graphs or query.from_named_graphs)
    warnings = []
    if outside:
        if not described or (query.named_keep_default and not query.from_graphs):
            empty, what = not holds(None), "the background default graph"
        elif query.from_graphs:
            empty = not any(holds(g) for g in query.from_graphs)
            what = "the merge of the FROM graphs %s" % ", ".join("<%s>" % g for g in query.from_graphs)
        else:
            empty, what = True, "an empty default graph (the query names FROM NAMED graphs and no FROM graph)"
        if empty:
            line, column = body.source.position(outside[0])
            warnings.append("%d:%d: the triple patterns outside every WINDOW read %s, which holds no triple now: they "
                            "match nothing until background data is loaded there (the graph store protocol, "
                            "[background] in the configuration, --background in a replay)" % (line, column, what))
    allowed = set(query.from_named_graphs) if described else None
    for offset, graph in graphs:
        if graph is None:
            empty = not any(allowed is None or g in allowed for g in named)
            shown = "the background named graphs"
        else:
            empty = (allowed is not None and graph not in allowed) or not holds(graph)
            shown = "<%s>" % graph
        if empty:
            line, column = body.source.position(offset)
            warnings.append("%d:%d: GRAPH outside every WINDOW reads %s%s, which hold%s no triple now: it matches "
                            "nothing until background data is loaded there" % (
                                line, column, shown, "" if allowed is None else " (of the FROM NAMED graphs)",
                                "" if graph is None else "s"))
    return warnings


def _visit_outside(group, body, outside: list[int], named: list) -> None:
    """Triple blocks outside every WINDOW and GRAPH pattern (`outside`, their offsets) and GRAPH
    patterns outside every WINDOW (`named`, (offset, IRI or None for a variable))."""
    stack = [group]
    while stack:
        node = stack.pop()
        for item in _children(node):
            if isinstance(item, GraphPattern):
                if not item.is_window:
                    tok = body.tokens[item.name]
                    named.append((tok.offset, None if tok.kind == VAR else body.resolve(item.name)))
                continue                # what a WINDOW or GRAPH block holds reads its own graphs
            if isinstance(item, TriplesBlock):
                outside.append(body.tokens[item.span.start].offset)
            else:
                stack.append(item)


def _children(node):
    if isinstance(node, Group):
        return list(node.items)
    if isinstance(node, SubSelect):
        return [node.where] + [p for p in node.head.parts + node.tail.parts if isinstance(p, Group)]
    if isinstance(node, Expression):
        return [p for p in node.parts if isinstance(p, Group)]
    return nested_groups(node)


def unfed_stream_warnings(query: ContinuousQuery, fed: Collection[str], holding: Callable[[str], bool]) -> list[str]:
    """A warning for each window on a stream that no source of the running engine feeds (`fed`:
    the streams its sources feed and the output streams of its queries) and that holds no
    element (`holding(stream)`): the window stays empty unless elements are posted to it."""
    warnings = []
    for window in query.windows.values():
        if window.stream not in fed and not holding(window.stream):
            warnings.append("%d:%d: window <%s> reads stream <%s>, which no configured source feeds and which holds no "
                            "element: it stays empty until elements are posted to it (POST /streams?stream=...) or a "
                            "source feeds it" % (window.line, window.column, window.iri, window.stream))
    return warnings

_MODIFIER_END = ("ORDER", "LIMIT", "OFFSET", "VALUES")


def query_warnings(text: str, tokens: list[Token] | None = None) -> list[str]:
    """The warnings of a query's text (any dialect: what they read is copied from the text);
    `tokens`: the text's, when the caller has them."""
    source = SourceText(text)
    if tokens is None:
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
