"""Compile RSP-QL* text into a checked query: parse, rewrite, and have Oxigraph check the
SPARQL the rewrite produces, with its errors reported at the user's line and column."""
from __future__ import annotations

import re
from dataclasses import replace

import pyoxigraph as ox

from .dialects import translate
from .errors import QuerySyntaxError
from .facts import GRAPHS, constants_query, match_query
from .model import ContinuousQuery, FactWindow, QueryForm
from .nesting import REWRITE_ALLOWANCE, STACK_BUDGET, check_nesting
from .parser import parse_query
from .rewrite import RewriteOptions, RewrittenQuery, Template, compile_template
from .namespaces import RSPU
from .syntax import (
    Bind, Expression, Filter, GraphPattern, Group, Keyworded, ParsedBody, Span, SubSelect, UnionPattern, nested_groups,
)
from .tokens import IRI, NAME, PNAME, VAR, SourceText, tokenize
from .uncertainty import FUNCTION_NAMES, FunctionLibrary
from .uncertainty.functions import arguments_in_words
from .variants import CompiledShapes
from .options import QueryOptions
from .warnings import query_warnings, reading_warnings

_POSITION = re.compile(r"^error at (\d+):(\d+): (.*)$", re.S)
_UNSUPPORTED_FUNCTION = re.compile(r"The custom function <([^>]*)> is not supported")
_ARITY = re.compile(r"The custom function <([^>]*)> requires between (\d+) and (\d+) arguments")
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


def unknown_function(message: str, text: str,
                     provided: tuple[str, ...] = FUNCTION_NAMES) -> tuple[str, int, int] | None:
    """(message, line, column) when Oxigraph refused a query for calling a function nobody
    provides, at the function's first use in `text`; None for any other error. `provided`: the
    rspu: functions the engine provides (a library's `names`)."""
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
    return ("unknown function <%s> (the engine provides rspu:%s)" % (iri, ", rspu:".join(provided)),
            line, at - text.rfind("\n", 0, at))


def compile_query(text: str, functions: FunctionLibrary | None = None, dialect: str | None = None,
                  start: str | None = None, base: str | None = None,
                  streams: tuple[str, ...] = (), shapes: CompiledShapes | None = None) -> ContinuousQuery:
    """Parse and fully check a query written in RSP-QL* or one of the dialects (spec §6.5:
    `dialect`, else recognized from the text; `start`, t0 of a dialect query's windows; `base`,
    the IRI the text was retrieved from, which its relative IRIs resolve against before any
    BASE of its own; `streams`, the streams a replay is given, which an EP-SPARQL query naming
    none reads; `shapes`, the trees of queries compiled before, for a text differing from one
    of them only in constants); raises QuerySyntaxError (line, column of `text`)."""
    check_nesting(text, language="sparql")      # first: every step below reads the text, some recursively
    try:
        return _compile_checked(text, functions, dialect, start, base, streams, shapes)
    except RecursionError:
        raise QuerySyntaxError("the query is nested too deeply to be read", 1, 1) from None


def _compile_checked(text: str, functions: FunctionLibrary | None, dialect: str | None,
                     start: str | None, base: str | None, streams: tuple[str, ...] = (),
                     shapes: CompiledShapes | None = None) -> ContinuousQuery:
    # A text whose dialect is to be recognized is tokenized once, for the recognition, the
    # parser and the warnings (a tokenizing error is the one recognition would raise).
    tokens = tokenize(SourceText(text)) if dialect is None else None
    translation = translate(text, dialect, start, base, streams, tokens)
    if translation is None:     # compile_query checked the text's nesting
        query, checked = _compile(text, functions, base, tokens, nesting_checked=True, shapes=shapes)
    else:
        try:
            query, checked = translation.apply(_compile(translation.text, functions, base)[0], text), None
        except QuerySyntaxError as e:
            raise translation.locate(e) from None
    query.warnings = query_warnings(text, tokens) + option_warnings(query, QueryOptions(), checked)
    return query


def option_warnings(query: ContinuousQuery, options: "QueryOptions", checked: Template | None = None) -> list[str]:
    """The warnings that depend on how the query is read under these options: its WINDOW blocks'
    triple patterns that can never match (spec 6.15). `checked`: the query's template under
    _CHECKED, which compiling it made (read again rather than compiled twice)."""
    union, why = options.window_content(query)
    reading = RewriteOptions(lazy_bind=False, h4=False, window_union=union)
    return reading_warnings(query, reading, why, checked if reading == _CHECKED else None)


def with_option_warnings(query: ContinuousQuery, options: "QueryOptions") -> ContinuousQuery:
    """The query with the warnings its options give in place of the ones compile_query found
    under its defaults (the same query when they are the same)."""
    if options.window_content(query) == QueryOptions().window_content(query):
        return query
    default, given = option_warnings(query, QueryOptions()), option_warnings(query, options)
    if default == given:
        return query
    return replace(query, warnings=[w for w in query.warnings if w not in default] + given)


_AGGREGATES = {"COUNT", "SUM", "MIN", "MAX", "AVG", "SAMPLE", "GROUP_CONCAT"}
_AFTER_GROUP_BY = {"HAVING", "ORDER", "LIMIT", "OFFSET", "VALUES"}


def check_grouping(query: ContinuousQuery) -> None:
    """A variable the SELECT projects as it is, in a query that groups (GROUP BY, HAVING or an
    aggregate), must be grouped by: SPARQL 1.1 (18.2.4.1) refuses it, and Oxigraph's message
    names neither the variable nor the rule. Refused here at the variable."""
    body = query.body
    if query.form is not QueryForm.SELECT:
        return
    tokens = body.tokens
    head = [k for part in body.form_head.parts if isinstance(part, Span) for k in range(part.start, part.end)]
    modifiers = [k for part in body.modifiers.parts if isinstance(part, Span) for k in range(part.start, part.end)]
    words = [tokens[k].text.upper() for k in head + modifiers if tokens[k].kind == NAME]
    aggregated = any(tokens[k].kind == NAME and tokens[k].text.upper() in _AGGREGATES and k + 1 < len(tokens)
                     and tokens[k + 1].is_punct("(") for k in head) or "GROUP" in words or "HAVING" in words
    if not aggregated:
        return
    grouped, k = set(), 0
    while k < len(modifiers):
        if tokens[modifiers[k]].is_keyword("GROUP") and k + 1 < len(modifiers) and tokens[modifiers[k + 1]].is_keyword("BY"):
            k += 2
            while k < len(modifiers) and not tokens[modifiers[k]].is_keyword(*_AFTER_GROUP_BY):
                if tokens[modifiers[k]].kind == VAR:
                    grouped.add(tokens[modifiers[k]].text[1:])
                k += 1
        else:
            k += 1
    depth = 0
    for k in head[1:]:
        tok = tokens[k]
        depth += tok.is_punct("(") - tok.is_punct(")")
        if depth == 0 and tok.kind == VAR and tok.text[1:] not in grouped:
            raise QuerySyntaxError("%s is projected but neither grouped by nor aggregated: SPARQL projects only the "
                                   "GROUP BY variables and aggregates of a grouping query; add it to GROUP BY or "
                                   "project an aggregate of it, such as (SAMPLE(%s) AS %s1)" % (tok.text, tok.text,
                                                                                                tok.text),
                                   *body.source.position(tok.offset))


# The rewrite a query is checked under (its windows empty, no optimisation), which is also
# what its default reading's warnings read.
_CHECKED = RewriteOptions(lazy_bind=False, h4=False)


def _compile(text: str, functions: FunctionLibrary | None, base: str | None,
             tokens: list | None = None, nesting_checked: bool = False,
             shapes: CompiledShapes | None = None) -> tuple[ContinuousQuery, Template]:
    """The query, checked, and its template under _CHECKED (its tree one of `shapes` when it
    differs from a query compiled before only in constants; every check made all the same)."""
    query = None
    if shapes is not None:
        tokens = tokenize(SourceText(text)) if tokens is None else tokens
        query = shapes.variant(text, tokens, base)
    parsed = query is None
    if parsed:
        query = parse_query(text, base, tokens, nesting_checked)
    check_grouping(query)
    functions = functions or FunctionLibrary()
    template = compile_template(query, _CHECKED)
    check_with_oxigraph(query, template.instantiate({w: [] for w in query.windows}, []), functions,
                        template.calls_rspu)
    check_calls(query.body, functions)
    for window in query.windows.values():
        if window.reads_facts:
            check_fact_window(window)
    if parsed and shapes is not None:
        shapes.keep(query, tokens)
    return query, template


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


def check_query_calls(text: str) -> None:
    """check_calls for a SPARQL query the engine's parser reads (`/sparql`): one it does not
    read (DESCRIBE, say) is left to Oxigraph, which finds an unknown function by itself."""
    try:
        query = parse_query(text)
    except QuerySyntaxError:
        return
    check_calls(query.body, FunctionLibrary())


def check_calls(body: ParsedBody, functions: FunctionLibrary) -> None:
    """Every function call in the query's expressions names a function that exists, with as
    many arguments as it takes: Oxigraph finds out only when it evaluates the call, and the
    check above evaluates no window's pattern (its windows are empty)."""
    probe = ox.Store()
    asked: dict[tuple[str, int], str | None] = {}
    for k, arguments in _calls(body):
        tok = body.tokens[k]
        iri = body.resolve(k)
        if (iri, arguments) not in asked:
            asked[iri, arguments] = _call_error(iri, tok.text, arguments, functions, probe)
        if asked[iri, arguments] is not None:
            raise QuerySyntaxError(asked[iri, arguments], *body.source.position(tok.offset))


def _call_error(iri: str, written: str, arguments: int, functions: FunctionLibrary, probe: ox.Store) -> str | None:
    """What is wrong with calling `iri` with that many arguments, or None."""
    if iri.startswith(RSPU):
        operation = functions.operations.get(iri[len(RSPU):])
        if operation is None:
            return unknown_function("The custom function <%s> is not supported" % iri, "", functions.names)[0]
        kinds = operation[0]
        if len(kinds) != arguments:
            return "%s takes %d arguments (%s), not %d" % (written, len(kinds), arguments_in_words(kinds), arguments)
        return None
    variables = ", ".join("?a%d" % n for n in range(arguments))
    try:
        probe.query("SELECT * WHERE { BIND(<%s>(%s) AS ?result) }" % (iri, variables), custom_functions=functions.table)
    except RuntimeError as e:
        m = _ARITY.search(str(e))
        if m:
            low, high = int(m.group(2)), int(m.group(3))
            takes = "%d argument%s" % (low, "" if low == 1 else "s") if low == high else "%d to %d arguments" % (low, high)
            return "%s takes %s, not %d" % (written, takes, arguments)
        if _UNSUPPORTED_FUNCTION.search(str(e)):
            return unknown_function(str(e), "", functions.names)[0]
        raise
    except SyntaxError:
        return None         # an IRI Oxigraph does not take in this place: the check above reports it
    return None


def _calls(body: ParsedBody):
    """(token index of the function's IRI, number of arguments) of every call in the query's
    expressions: the projection, FILTER, BIND, sub-selects' heads and modifiers, the solution
    modifiers. An IRI followed by '(' elsewhere (a predicate before a collection) is no call."""
    tokens = body.tokens
    for span in _expression_spans(body):
        for k in range(span.start, span.end - 1):
            if tokens[k].kind in (IRI, PNAME) and tokens[k + 1].is_punct("("):
                yield k, _arguments(tokens, k + 1)


def _arguments(tokens, opening: int) -> int:
    """The number of arguments of the call whose '(' is token `opening`."""
    depth, commas = 0, 0
    for k in range(opening, len(tokens)):
        tok = tokens[k]
        if tok.is_punct("(", "{", "[", "<<", "<<(", "{|"):
            depth += 1
        elif tok.is_punct(")", "}", "]", ">>", ")>>", "|}"):
            depth -= 1
            if depth == 0:
                return 0 if k == opening + 1 else commas + 1
        elif depth == 1 and tok.is_punct(","):
            commas += 1
    return commas + 1


def _expression_spans(body: ParsedBody):
    expressions = [body.form_head, body.modifiers]
    pending = [body.where]
    while pending:
        node = pending.pop()
        if isinstance(node, (Filter, Bind)):
            expressions.append(node.expression)
        elif isinstance(node, SubSelect):
            expressions += [node.head, node.tail]
        if isinstance(node, Group):
            pending.extend(node.items)
        elif isinstance(node, GraphPattern):
            pending.append(node.group)
        else:
            pending.extend(nested_groups(node))
    return [part for expression in expressions for part in expression.parts if isinstance(part, Span)]


def check_with_oxigraph(query: ContinuousQuery, rewritten: RewrittenQuery, functions: FunctionLibrary,
                        calls_rspu: bool = True) -> None:
    """Oxigraph parses and plans the rewrite as the store will run it: with the rspu: functions
    when it calls them (`calls_rspu`, the template's), else without (their table is not built)."""
    _check_rewritten_nesting(query, rewritten)
    probe = ox.Store()
    table = functions.table_for(rewritten.fused_functions) if calls_rspu else None
    try:
        probe.query(rewritten.text, custom_functions=table)
    except SyntaxError as e:
        raise _locate(query, rewritten, str(e), probe, functions) from None
    except RuntimeError as e:
        m = _UNSUPPORTED_FUNCTION.search(str(e))
        if not m:
            raise
        message = unknown_function(str(e), "", functions.names)[0]
        raise QuerySyntaxError(message, *_token_position(query, m.group(1))) from None


def _check_rewritten_nesting(query: ContinuousQuery, rewritten: RewrittenQuery) -> None:
    """What Oxigraph parses is the rewrite, which wraps each window's pattern in a few groups
    and joins its elements' VALUES: bounded like the query's own text, with room for that."""
    try:
        check_nesting(rewritten.text, language="sparql", budget=2 * STACK_BUDGET + REWRITE_ALLOWANCE)
    except QuerySyntaxError as e:
        line, column = rewritten.source_position(e.line, e.column)
        raise QuerySyntaxError("once its windows are rewritten: %s" % e.message, line, column) from None


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
