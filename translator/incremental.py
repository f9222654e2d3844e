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

from .model import ContinuousQuery, QueryForm, TimeWindow
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
    body = query.body
    tokens = body.tokens
    if query.form is not QueryForm.SELECT:
        return None, "only SELECT queries are evaluated incrementally"
    if len(query.windows) != 1:
        return None, "the query reads %d windows" % len(query.windows)
    why = _combining(body)
    if why:
        return None, why
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
    declared = query.windows[body.resolve(window.name)]
    if not isinstance(declared, TimeWindow):
        return None, "a count window is evaluated whole"
    if declared.lag or declared.upper_closed:
        return None, "a window in the past or with upper-closed bounds is evaluated whole"
    if declared.range > MAX_RANGES_PER_WINDOW * declared.step:
        return None, "the window would be kept as more than %d ranges (RANGE / STEP)" % MAX_RANGES_PER_WINDOW
    return body.resolve(window.name), ""


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
    varying = sorted({t.text.upper() for t in tokens if t.kind == NAME} & _PER_EVALUATION)
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
