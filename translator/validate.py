"""Compile RSP-QL* text into a checked query: parse, rewrite, and have Oxigraph check the
SPARQL the rewrite produces, with its errors reported at the user's line and column."""
from __future__ import annotations

import re

import pyoxigraph as ox

from .dialects import translate
from .errors import QuerySyntaxError
from .facts import GRAPHS, constants_query, match_query
from .model import ContinuousQuery, FactWindow
from .nesting import check_nesting
from .parser import parse_query
from .rewrite import RewriteOptions, RewrittenQuery, rewrite
from .syntax import Bind, Expression, Filter, GraphPattern, Group, Keyworded, Span, SubSelect, UnionPattern
from .tokens import IRI, PNAME
from .uncertainty import FunctionLibrary
from .warnings import query_warnings

_POSITION = re.compile(r"^error at (\d+):(\d+): (.*)$", re.S)
_UNSUPPORTED_FUNCTION = re.compile(r"The custom function <([^>]*)> is not supported")
_MESSAGE_LIMIT = 240


def _short(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= _MESSAGE_LIMIT else message[:_MESSAGE_LIMIT] + " ..."


def oxigraph_syntax_error(message: str, text: str | None = None) -> tuple[str, int | None, int | None]:
    """(message, line, column) of an Oxigraph SPARQL syntax error ("error at L:C: ..."); given
    the client's text, the message also quotes what stands there ("near ...")."""
    m = _POSITION.match(message)
    if not m:
        return _short(message), None, None
    line, column = int(m.group(1)), int(m.group(2))
    detail = _short(m.group(3))
    if text is not None:
        lines = text.split("\n")
        if 1 <= line <= len(lines):
            near = lines[line - 1][max(column - 1, 0):max(column - 1, 0) + 24].strip()
            detail = "%s (line %d, column %d%s)" % (detail, line, column, ", near %r" % near if near else
                                                    ", the end of the line")
    return detail, line, column


def unknown_function(message: str, text: str) -> tuple[str, int, int] | None:
    """(message, line, column) when Oxigraph refused a query for calling a function nobody
    provides, at the function's first use in `text`; None for any other error."""
    m = _UNSUPPORTED_FUNCTION.search(message)
    if not m:
        return None
    iri = m.group(1)
    candidates = ["<%s>" % iri]
    for prefix, namespace in re.findall(r"PREFIX\s+([A-Za-z][\w.-]*)?:\s*<([^>]*)>", text, re.I):
        if iri.startswith(namespace):
            candidates.append("%s:%s" % (prefix, iri[len(namespace):]))
    at = min((text.find(c) for c in candidates if c in text), default=0)
    line = text.count("\n", 0, at) + 1
    return ("unknown function <%s> (the engine provides rspu:%s)" % (
        iri, ", rspu:".join(("add", "subtract", "greaterThan", "lessThan", "between"))),
        line, at - text.rfind("\n", 0, at))


def compile_query(text: str, functions: FunctionLibrary | None = None, dialect: str | None = None,
                  start: str | None = None, base: str | None = None,
                  streams: tuple[str, ...] = ()) -> ContinuousQuery:
    """Parse and fully check a query written in RSP-QL* or one of the dialects (spec §6.5:
    `dialect`, else recognized from the text; `start`, t0 of a dialect query's windows; `base`,
    the IRI the text was retrieved from, which its relative IRIs resolve against before any
    BASE of its own; `streams`, the streams a replay is given, which an EP-SPARQL query naming
    none reads); raises QuerySyntaxError (line, column of `text`)."""
    check_nesting(text)         # first: every step below reads the text, some recursively
    try:
        return _compile_checked(text, functions, dialect, start, base, streams)
    except RecursionError:
        raise QuerySyntaxError("the query is nested too deeply to be read", 1, 1) from None


def _compile_checked(text: str, functions: FunctionLibrary | None, dialect: str | None,
                     start: str | None, base: str | None, streams: tuple[str, ...] = ()) -> ContinuousQuery:
    translation = translate(text, dialect, start, base, streams)
    if translation is None:
        query = _compile(text, functions, base)
    else:
        try:
            query = translation.apply(_compile(translation.text, functions, base), text)
        except QuerySyntaxError as e:
            raise translation.locate(e) from None
    query.warnings = query_warnings(text)
    return query


def _compile(text: str, functions: FunctionLibrary | None, base: str | None) -> ContinuousQuery:
    query = parse_query(text, base)
    rewritten = rewrite(query, {w: [] for w in query.windows}, [], RewriteOptions(lazy_bind=False, h4=False))
    check_with_oxigraph(query, rewritten, functions or FunctionLibrary())
    for window in query.windows.values():
        if isinstance(window, FactWindow):
            check_fact_window(window)
    return query


def check_fact_window(window: FactWindow) -> None:
    """A fact window's SINCE and TILL patterns and template literals, checked by Oxigraph as
    the engine will run them; an error names the part, at the window's declaration."""
    probe = ox.Store()
    parts = [("SINCE", match_query(window, "SINCE").replace(GRAPHS, "")),
             ("TILL", match_query(window, "TILL").replace(GRAPHS, ""))]
    constants = constants_query(window)
    if constants is not None:
        parts.append(("the FACTS template", constants[0]))
    for part, text in parts:
        try:
            probe.query(text)
        except (SyntaxError, RuntimeError) as e:
            raise QuerySyntaxError("window <%s>: %s: %s" % (window.iri, part, oxigraph_syntax_error(str(e))[0]),
                                   window.line, window.column) from None


def check_with_oxigraph(query: ContinuousQuery, rewritten: RewrittenQuery, functions: FunctionLibrary) -> None:
    probe = ox.Store()
    try:
        probe.query(rewritten.text, custom_functions=functions.table_for(rewritten.fused_functions))
    except SyntaxError as e:
        raise _locate(query, rewritten, str(e), probe, functions) from None
    except RuntimeError as e:
        m = _UNSUPPORTED_FUNCTION.search(str(e))
        if not m:
            raise
        message = unknown_function(str(e), "")[0]
        raise QuerySyntaxError(message, *_token_position(query, m.group(1))) from None


def _token_position(query: ContinuousQuery, iri: str) -> tuple[int, int]:
    body = query.body
    for k, tok in enumerate(body.tokens):
        if tok.kind == IRI or (tok.kind == PNAME and tok.text.partition(":")[0] in body.prefixes):
            if body.resolve(k) == iri:
                return body.source.position(tok.offset)
    return 1, 1


def _locate(query: ContinuousQuery, rewritten: RewrittenQuery, message: str, probe: ox.Store,
            functions: FunctionLibrary) -> QuerySyntaxError:
    """Oxigraph's parser often reports the end of the enclosing group; re-check each
    expression alone to point at the one that is wrong."""
    body = query.body
    detail, out_line, out_column = oxigraph_syntax_error(message)
    prologue = ""
    if body.prologue.end > body.prologue.start:
        prologue = body.source.text[body.tokens[body.prologue.start].offset:body.tokens[body.prologue.end - 1].end]
    for expression in _expressions(body.where):
        start = body.tokens[expression.parts[0].start].offset if isinstance(expression.parts[0], Span) else None
        if start is None:
            continue
        end = _expression_end(body, expression)
        text = body.source.text[start:end]
        try:
            probe.query("%s\nSELECT * WHERE { %s }" % (prologue, text), custom_functions=functions.table,
                        base_iri=query.base)
        except SyntaxError as e:
            line, column = body.source.position(start)
            return QuerySyntaxError("invalid expression: %s" % oxigraph_syntax_error(str(e))[0], line, column)
        except RuntimeError:
            continue
    if out_line is not None:
        line, column = rewritten.source_position(out_line, out_column)
    else:
        line, column = 1, 1
    return QuerySyntaxError(detail, line, column)


def _expression_end(body, expression: Expression) -> int:
    last = expression.parts[-1]
    if isinstance(last, Span):
        return body.tokens[last.end - 1].end
    return body.tokens[last.close].end


def _expressions(node):
    """FILTER and BIND expressions of a pattern, depth first."""
    if isinstance(node, (Filter, Bind)):
        yield node.expression
        for part in node.expression.parts:
            if isinstance(part, Group):
                yield from _expressions(part)
    elif isinstance(node, Group):
        for item in node.items:
            yield from _expressions(item)
    elif isinstance(node, (GraphPattern, Keyworded)):
        yield from _expressions(node.group)
    elif isinstance(node, UnionPattern):
        for g in node.groups:
            yield from _expressions(g)
    elif isinstance(node, SubSelect):
        yield from _expressions(node.where)
