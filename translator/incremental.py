"""Which queries may be evaluated incrementally (docs/incremental-evaluation.md).

A query is distributive over its window's elements when its results over a window are the
union (as a bag) of its results over any split of the window's elements into time ranges: then
a range evaluated once serves every later window that contains it. Checked on the parsed query:

- SELECT, one window, named by an IRI;
- its WHERE is that window, holding one `GRAPH ?g { ... }` block, with FILTERs and BINDs beside
  the block (in the window or in WHERE) that only work row by row;
- inside the block anything that reads only the element's graph (it may join, OPTIONAL, MINUS,
  sub-select, aggregate: all within one element), but no nested GRAPH, WINDOW or SERVICE;
- no solution modifiers (GROUP BY, HAVING, ORDER BY, LIMIT, OFFSET, VALUES), no DISTINCT or
  REDUCED, no aggregate in the projection, and nothing that differs between evaluations (NOW,
  RAND, UUID, STRUUID, BNODE);
- no triple pattern outside the block: a window's default graph (the elements' timestamps) or
  the background would join across elements or change between evaluations;
- a time window `[RANGE a STEP β]` read at its closes, with RANGE / STEP at most
  MAX_RANGES_PER_WINDOW.

A query whose WHERE is only a join of such windows and of triple patterns over the background
(`joined_windows`: each WINDOW block alone would be distributive, the projection is plain
variables) is evaluated as that join: each window's block incrementally, as a query of its own,
the background patterns as another, and their rows joined per evaluation.
"""
from __future__ import annotations

from dataclasses import dataclass

from .model import ContinuousQuery, QueryForm
from .rewrite import INTERNAL_VARIABLE_PREFIX
from .syntax import (
    Bind, Expression, Filter, GraphPattern, Group, Keyworded, Span, TriplesBlock, nested_groups,
)
from .tokens import NAME, VAR

_PER_EVALUATION = {"NOW", "RAND", "UUID", "STRUUID", "BNODE"}
# A window is kept as about 2 * RANGE / STEP ranges; beyond this many, their bookkeeping would
# cost more than evaluating the window again (bench/out/NOTES.md#ranges-per-window).
MAX_RANGES_PER_WINDOW = 1000
_AGGREGATES = {"COUNT", "SUM", "AVG", "MIN", "MAX", "SAMPLE", "GROUP_CONCAT"}


def distributive_window(query: ContinuousQuery) -> tuple[str | None, str]:
    """(the window, "") when the query is distributive over its elements, else (None, why)."""
    if query.form is not QueryForm.SELECT:
        return None, "only SELECT queries are evaluated incrementally"
    if len(query.windows) != 1:
        return None, "the query reads %d windows" % len(query.windows)
    why = _combining(query.body)
    if why:
        return None, why
    iri, why = _one_element_block(query)
    if iri is None:
        return None, why
    why = query.windows[iri].ranges_refusal(MAX_RANGES_PER_WINDOW)
    return (None, why) if why else (iri, "")


def _one_element_block(query: ContinuousQuery) -> tuple[str | None, str]:
    """(the window, "") when WHERE is one WINDOW named by an IRI holding one GRAPH ?g block that
    reads only its element, beside row-wise FILTERs and BINDs; else (None, why)."""
    body = query.body
    tokens = body.tokens
    windows = [n for n in body.where.items if isinstance(n, GraphPattern) and n.is_window]
    if len(windows) != 1 or tokens[windows[0].name].kind == VAR:
        return None, "the WHERE clause is not one WINDOW named by an IRI"
    if not _row_wise(body.where, allowed=windows[0]):
        return None, "WHERE holds more than the window and row-wise FILTERs and BINDs"
    window = windows[0]
    blocks = [n for n in window.group.items if isinstance(n, GraphPattern)]
    if len(blocks) != 1 or blocks[0].is_window or tokens[blocks[0].name].kind != VAR:
        return None, "the window holds more than one GRAPH ?g block"
    if not _row_wise(window.group, allowed=blocks[0]):
        return None, "the window holds more than its GRAPH block and row-wise FILTERs and BINDs"
    if not _element_local(blocks[0].group, tokens):
        return None, "the GRAPH block reads more than its element (GRAPH, WINDOW or SERVICE inside it)"
    return body.resolve(window.name), ""


# Aggregates whose value over a union of parts is computed from their values over the parts,
# and what combines them.
_COMBINED_BY = {"COUNT": "SUM", "SUM": "SUM", "MIN": "MIN", "MAX": "MAX"}
PARTIAL_ROWS = INTERNAL_VARIABLE_PREFIX + "rows"


@dataclass
class Landmark:
    """How a landmark window's query is evaluated close by close (spec §6.10) without reading
    the landmark again: `partial`, the query over a range of the window's elements (with, for an
    aggregating query, the rows each group had in PARTIAL_ROWS); `groups`, the GROUP BY
    variables; `aggregates`, each projected aggregate's variable and the aggregate combining
    its values over the ranges (none: the query is distributive, its rows those of the ranges)."""
    window: str
    partial: ContinuousQuery
    groups: list[str]
    aggregates: list[tuple[str, str]]


def landmark_window(query: ContinuousQuery) -> tuple[Landmark | None, str]:
    """(the plan, "") when the query reads one landmark window whose results at a close follow
    from those at the close before and those over the elements in between: a distributive
    query (its rows added up), or one grouping them with COUNT, SUM, MIN and MAX (without
    DISTINCT) and nothing else; else (None, why)."""
    from .parser import parse_query     # the parser's model is what this reads: no cycle at import

    if query.form is not QueryForm.SELECT or len(query.windows) != 1:
        return None, "only a SELECT over one landmark window is evaluated close by close"
    [declared] = query.windows.values()
    if not declared.unbounded:
        return None, "not a landmark window"
    iri, why = _one_element_block(query)
    if iri is None:
        return None, why
    body = query.body
    tokens = body.tokens
    varying = sorted(tokens.words() & _PER_EVALUATION)
    if varying:
        return None, "%s() differs between evaluations" % varying[0]
    if not _combining(body):
        return Landmark(iri, query, [], []), ""
    head = [k for part in body.form_head.parts if isinstance(part, Span) for k in range(part.start, part.end)]
    items, why = _aggregate_projection(tokens, head[1:])
    if items is None:
        return None, why
    groups, why = _group_by(tokens, [k for part in body.modifiers.parts if isinstance(part, Span)
                                     for k in range(part.start, part.end)], body.modifiers)
    if groups is None:
        return None, why
    plain = [name for name, function in items if function is None]
    if set(plain) - set(groups):
        return None, "?%s is projected but not grouped by" % sorted(set(plain) - set(groups))[0]
    text = body.source.text
    first, last = tokens[head[1]].offset, tokens[head[-1]].end
    partial_text = "%s SELECT %s (COUNT(*) AS ?%s) %s" % (text[:tokens[head[0]].offset], text[first:last], PARTIAL_ROWS,
                                                         text[last:])
    partial = parse_query(partial_text)
    return Landmark(iri, partial, groups, [(name, _COMBINED_BY[f]) for name, f in items if f is not None]), ""


def _aggregate_projection(tokens, head: list[int]) -> tuple[list | None, str]:
    """The projection as (variable, aggregate or None) when it is plain variables and
    `(AGG(?v) AS ?a)` / `(COUNT(*) AS ?a)` with AGG a combinable aggregate."""
    items = []
    k = 0
    while k < len(head):
        tok = tokens[head[k]]
        if tok.kind == VAR:
            items.append((tok.text[1:], None))
            k += 1
            continue
        shape = [tokens[head[j]] for j in range(k, min(k + 8, len(head)))]
        if not (len(shape) == 8 and shape[0].is_punct("(") and shape[1].kind == NAME and shape[2].is_punct("(")
                and (shape[3].kind == VAR or shape[3].is_punct("*")) and shape[4].is_punct(")")
                and shape[5].is_keyword("AS") and shape[6].kind == VAR and shape[7].is_punct(")")):
            return None, "the projection computes more than COUNT, SUM, MIN or MAX of a variable"
        function = shape[1].text.upper()
        if function not in _COMBINED_BY or (shape[3].is_punct("*") and function != "COUNT"):
            return None, "%s is not combined from its values over parts of the window" % function
        items.append((shape[6].text[1:], function))
        k += 8
    return items, ""


def _group_by(tokens, modifiers: list[int], expression: Expression) -> tuple[list[str] | None, str]:
    if any(not isinstance(part, Span) for part in expression.parts):
        return None, "solution modifiers hold a pattern"
    if not modifiers:
        return [], ""
    if not (len(modifiers) > 2 and tokens[modifiers[0]].is_keyword("GROUP") and tokens[modifiers[1]].is_keyword("BY")
            and all(tokens[k].kind == VAR for k in modifiers[2:])):
        return None, "solution modifiers other than GROUP BY variables (HAVING, ORDER BY, LIMIT, ...)"
    return [tokens[k].text[1:] for k in modifiers[2:]], ""


@dataclass
class Join:
    """A query evaluated as the join of its parts: per window, a SELECT * query over that
    window's block alone (distributive, so evaluated incrementally), and the triple patterns
    outside the windows as a SELECT * query over the background (evaluated every time: an
    update may change it)."""
    windows: dict[str, ContinuousQuery]
    background: ContinuousQuery | None


def joined_windows(query: ContinuousQuery) -> tuple[Join | None, str]:
    """(the query's parts, "") when the query is a join of windows each distributive over its
    elements, and of background triple patterns, else (None, why). The query's rows are then
    the join of the parts' rows (on their shared variables), projected."""
    from .parser import parse_query     # the parser's model is what this reads: no cycle at import

    body = query.body
    tokens = body.tokens
    if query.form is not QueryForm.SELECT:
        return None, "only SELECT queries are evaluated incrementally"
    if query.dialect != "rspql" or query.merged_windows is not None:
        return None, "a dialect query is evaluated whole"
    if query.from_graphs or query.from_named_graphs:
        return None, "FROM and FROM NAMED graphs are evaluated whole"
    why = _combining(body)
    if why:
        return None, why
    if any(tokens[k].is_punct("(") for part in body.form_head.parts if isinstance(part, Span)
           for k in range(part.start, part.end)):
        return None, "the projection computes expressions"
    blocks = [n for n in body.where.items if isinstance(n, GraphPattern)]
    triples = [n for n in body.where.items if isinstance(n, TriplesBlock)]
    if len(blocks) + len(triples) != len(body.where.items) or \
            not all(n.is_window and tokens[n.name].kind != VAR for n in blocks):
        return None, "the WHERE clause holds more than WINDOW blocks named by IRIs and triple patterns"
    names = [body.resolve(n.name) for n in blocks]
    if len(set(names)) != len(names) or set(names) != set(query.windows) or len(names) + bool(triples) < 2:
        return None, "the WHERE clause is not a join of the query's windows, each once"
    text = body.source.text

    def source(first: int, last: int) -> str:
        return text[tokens[first].offset:tokens[last].end]

    prologue = source(body.prologue.start, body.prologue.end - 1) if body.prologue.end > body.prologue.start else ""
    declarations = {}
    for span in body.removed:
        if span.end - span.start > 3 and tokens[span.start].is_keyword("FROM") and tokens[span.start + 2].is_keyword("WINDOW"):
            declarations[body.resolve(span.start + 3)] = source(span.start, span.end - 1)
    windows = {}
    for name, block in zip(names, blocks):
        part = parse_query("%s\nSELECT *\n%s\nWHERE { %s }" % (prologue, declarations[name],
                                                              source(block.keyword, block.group.close)),
                           query.base)
        window, why = distributive_window(part)
        if window is None:
            return None, "window %s: %s" % (name, why)
        windows[name] = part
    background = None
    if triples:
        patterns = [source(t.span.start, t.span.end - 1).rstrip(" \t\r\n.") for t in triples]
        background = parse_query("%s\nSELECT *\nWHERE { %s }" % (prologue, " .\n".join(patterns)), query.base)
    return Join(windows, background), ""


def _combining(body) -> str:
    """Why the query's results are not made row by row from its pattern's solutions (a function
    that differs between evaluations, duplicates removed, aggregates, solution modifiers), or
    "" when they are."""
    tokens = body.tokens
    varying = sorted(tokens.words() & _PER_EVALUATION)
    if varying:
        return "%s() differs between evaluations" % varying[0]
    head = _words(body.form_head, tokens)
    if head & {"DISTINCT", "REDUCED"}:
        return "DISTINCT or REDUCED removes duplicates across elements"
    if head & _AGGREGATES:
        return "an aggregate in the projection combines elements"
    if _words(body.modifiers, tokens):
        return "solution modifiers (GROUP BY, ORDER BY, LIMIT, ...) combine elements"
    return ""


def _words(expression: Expression, tokens) -> set[str]:
    found = set()
    for part in expression.parts:
        if isinstance(part, Span):
            found |= {tokens[k].text.upper() for k in range(part.start, part.end) if tokens[k].kind == NAME}
        else:
            found.add("EXISTS")
    return found


def _row_wise(group: Group, allowed) -> bool:
    """Every item is `allowed`, or a FILTER or BIND without EXISTS (which would read the
    dataset outside the element)."""
    for item in group.items:
        if item is allowed:
            continue
        if not isinstance(item, (Filter, Bind)):
            return False
        if any(isinstance(part, Group) for part in item.expression.parts):
            return False
    return True


def _element_local(group: Group, tokens) -> bool:
    for item in group.items:
        if isinstance(item, GraphPattern):
            return False
        if isinstance(item, Keyworded) and tokens[item.head.start].text.upper() == "SERVICE":
            return False
        if not all(_element_local(g, tokens) for g in nested_groups(item)):
            return False
    return True
