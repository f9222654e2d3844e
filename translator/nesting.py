"""A bound on nesting and chaining, checked before any parser sees a query, an update or RDF
data from outside.

Parsers of SPARQL and RDF (ours and Oxigraph's) are recursive, and so is what Oxigraph does
with what it parsed (the algebra, the plan, freeing them): past some depth a thread's stack
overflows and the whole process dies with it, where ours raises RecursionError. Depth is not
only brackets: a flat chain of one operator (`!!!…`, `?a || ?b || …`, `{…} UNION {…} UNION …`,
triple patterns joined one after another, a path `:p/:q/…`) is as deep to Oxigraph as the chain
is long. So one pass over the text counts, on every path from the outside in, what each
construct costs the stack: the brackets that enclose it (each kind its own cost) and, in every
group along the way, the operators, keywords and triple patterns chained in it. A text whose
costliest path passes the budget is refused at the token that takes it past, with its line and
column; no bracket nests deeper than MAX_NESTING either. The costs are Oxigraph's own, measured
(tests/parser_stack.py) and kept with their margin in tests/test_parser_limits.py, which also
proves the budget against the stack of the threads that parse.

Nesting costs time too: Oxigraph plans an OPTIONAL nested in others in time that doubles with
each level (chains of OPTIONALs nested some twenty deep sharing a variable plan for seconds,
many of them side by side for minutes: bench/out/NOTES.md#planning-nested-optionals), inside
`query()`, where nothing can stop it. So the same pass adds up what
each OPTIONAL costs the planner, 2**k for one nested k deep (counting itself), and refuses the
text at the OPTIONAL that takes it past PLANNING_BUDGET: what the budget lets through plans
within a fraction of a second (bench/out/NOTES.md#planning-nested-optionals), and real queries
(OPTIONALs a few levels deep) spend a few hundredths of it.

Three languages are read:
- "sparql" (queries, updates, RSP-QL* and its dialects): brackets, operators, keywords and
  triple patterns as above. What is data to Oxigraph (INSERT DATA, update and CONSTRUCT
  templates, VALUES rows) chains nothing and costs only its brackets.
- "rdf" (Turtle, TriG, N-Triples, N-Quads, JSON lines, JSON-LD): brackets `(` `{` `[`, triple
  terms and reified triples `<<( )>>` `<< >>`, annotations `{| |}`, counted together to
  MAX_NESTING (Oxigraph reads RDF's lists and groups without recursion).
- "xml" (RDF/XML): elements nested to MAX_NESTING, and no entity declarations (an entity can
  expand to thousands of times the size of the document that declares it).
"""
from __future__ import annotations

import re
from itertools import accumulate, repeat

from .errors import QuerySyntaxError

MAX_NESTING = 128
# Bytes of a thread's stack a client's query or update may take Oxigraph (and what the rewrite
# of a registered query adds, REWRITE_ALLOWANCE): far below any thread's, whatever the mix.
STACK_BUDGET = 256 << 10
REWRITE_ALLOWANCE = 64 << 10
# What the OPTIONALs of a query or an update may cost Oxigraph's planner, in units of one
# OPTIONAL at the top level costing 2 (one nested k deep costs 2**k): one chain 15 deep, two
# 14 deep, sixty 8 deep (bench/out/NOTES.md#planning-nested-optionals).
PLANNING_BUDGET = 1 << 16

# Strings, long and short, double and single quoted, with their loops unrolled: a run of plain
# characters, then (an escape or a lone quote and another run) repeated. They match the texts
# `(?:[^"\\]|\\.)*` does, without a step of the engine per character (a replay checks every
# part of its files before Oxigraph parses it: bench/out/NOTES.md#unrolled-strings).
_STRINGS = (r'''"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""|\'\'\'[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*\'\'\''''
            r'''|"[^"\\\n]*(?:\\.[^"\\\n]*)*"''' r"""|'[^'\\\n]*(?:\\.[^'\\\n]*)*'""")
_IRI = r'''<[^<>"{}|^`\\\s]*>'''
# Strings, comments and IRIs are skipped (what is inside them does not nest); what is left of
# interest is the openers and closers themselves, longest first. Every alternative starts with
# a literal character (no class): the regular expression engine then skips, in C, the bytes
# that cannot start a token, instead of trying each alternative at each of them.
_PATTERN = (_STRINGS + r'''|#[^\r\n]*|''' + _IRI
            + r'''|<<\(|<<|\{\||\(|\{|\[|\)>>|>>|\|\}|\)|\}|\]''')
_TOKEN = re.compile(_PATTERN, re.S)
_TOKEN_BYTES = re.compile(_PATTERN.encode(), re.S)
_OPENERS = {"(", "{", "[", "<<(", "<<", "{|"}
_CLOSERS = {")", "}", "]", ")>>", ">>", "|}"}
# What each token does to the depth (strings, comments and IRIs nothing).
_STEP = {**dict.fromkeys(_OPENERS, 1), **dict.fromkeys(_CLOSERS, -1)}
_STEP_BYTES = {token.encode(): step for token, step in _STEP.items()}

# --- SPARQL: what one more of each construct costs Oxigraph's stack, in bytes -----------------
# Frames: the query's top level, a pattern (a group, a blank node's or an annotation's property
# list, a reified triple), an expression (brackets and calls), a collection, and data.
_ROOT, _PATTERN_FRAME, _EXPRESSION, _COLLECTION, _DATA = range(5)
COSTS = {
    "group": 1 << 10,           # `{` opening a pattern
    "call": 11 << 10,           # `(` after a name or IRI in an expression: a call, or FILTER(, BIND(
    "bracket": 2304,            # any other `(` in an expression
    "collection": 8 << 10,      # `(` opening a collection (or a path group) in a pattern
    "blank node": 1 << 10,      # `[` in a pattern
    "reifier": 1 << 10,         # `<<` in a pattern
    "triple term": 1 << 10,     # `<<(`
    "annotation": 4 << 10,      # `{|` in a pattern
    "data bracket": 3 << 10,    # any bracket in data
    "sibling": 4 << 10,         # a group, bracket or list beside others in a pattern or the top level
    "triple": 4 << 10,          # `.` `;` `,` between triple patterns
    "union": 2 << 10,           # UNION and the group after it
    "filter": 1 << 10,          # FILTER and its constraint
    "keyword": 4 << 10,         # OPTIONAL MINUS BIND VALUES SERVICE GRAPH WINDOW and the group after it
    "path": 4 << 10,            # `/` `|` `^` `*` `+` `?` `!` in a pattern
    "item": 8 << 10,            # a term of a collection
    "not": 1 << 10,             # `!` in an expression
    "logic": 1 << 10,           # `||` `&&`
    "arithmetic": 1536,         # `+` `-` `*` `/`, and a signed number after a term
}
_SPARQL = re.compile(r'''
  (?P<skip>''' + _STRINGS + "|" + _IRI + r''')
 |(?P<comment>\#[^\r\n]*|\^\^|@[A-Za-z]+(?:-[A-Za-z0-9]+)*)
 |(?P<var>[?$][\w\u00B7\u0300-\u036F\u203F\u2040]+)
 |(?P<signed>[+-](?:(?:\d+\.\d*|\.\d+|\d+)[eE][+-]?\d+|\d*\.\d+|\d+))
 |(?P<number>(?:(?:\d+\.\d*|\.\d+|\d+)[eE][+-]?\d+|\d*\.\d+|\d+))
 |(?P<keyword>(?i:UNION|OPTIONAL|MINUS|FILTER|BIND|VALUES|SERVICE|GRAPH|WINDOW|DATA|INSERT|DELETE|WHERE|CONSTRUCT)
          (?![\w\u00B7:.-]))
 |(?P<name>(?:[^\W\d][\w\u00B7.-]*)?:(?:[\w\u00B7:%-]|\\.|\.(?=[\w\u00B7:%-]))*|[^\W\d]\w*)
 |(?P<open><<\(|<<|\{\||[({\[])
 |(?P<close>\)>>|>>|\|\}|[)}\]])
 |(?P<logic>\|\||&&)
 |(?P<compare>!=|<=|>=)
 |(?P<op>[!|/^*+?-])
 |(?P<separator>[.;,])
''', re.S | re.X)
# Keywords that chain what follows them to what precedes them; the bracket after one is paid for by it.
_CHAINING = {"UNION": "union", "FILTER": "filter", **dict.fromkeys(
    ("OPTIONAL", "MINUS", "BIND", "VALUES", "SERVICE", "GRAPH", "WINDOW"), "keyword")}
# What names a `{` holding data: INSERT DATA, DELETE DATA, a template, VALUES' rows.
_DATA_NEXT = {"DATA", "INSERT", "DELETE", "CONSTRUCT", "VALUES"}
_EXPRESSION_OPS = {"!": "not", "+": "arithmetic", "-": "arithmetic", "*": "arithmetic", "/": "arithmetic"}
_OPENINGS = {"{": "group", "{|": "annotation", "[": "blank node", "<<": "reifier", "<<(": "triple term"}

# --- RDF/XML -----------------------------------------------------------------------------------
_XML = re.compile(r'''<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>|(?P<declaration><!ENTITY)|<!DOCTYPE
                     |(?P<close></)|(?P<open><[^\s/>!?][^>"']*(?:(?:"[^"]*"|'[^']*')[^>"']*)*?(?P<empty>/?)>)''',
                  re.S | re.X)


def check_nesting(text: str | bytes, limit: int = MAX_NESTING, language: str = "rdf",
                  budget: int = STACK_BUDGET) -> None:
    """QuerySyntaxError at the first construct nested deeper than `limit`, or (SPARQL) nested
    and chained past `budget` bytes of stack, with its line and column (for bytes, the column
    counts bytes)."""
    if language == "sparql":
        text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        if not within_on_counts(text, limit, budget, PLANNING_BUDGET):
            _sparql_cost(text, limit, budget, PLANNING_BUDGET)
    elif language == "xml":
        _check_xml(text.decode("utf-8", "replace") if isinstance(text, bytes) else text, limit)
    else:
        _check_brackets(text, limit)


# A SPARQL text with no collection (a `(` in a pattern that calls nothing: `_frame`) has terms
# that cost nothing: a bracket costs at most its opening beside others (a call's, where it has
# `(`), and anything chained at most what a triple pattern, a path operator or a keyword chains.
# So its costliest path is at most the sum of those bounds over its brackets and chaining
# tokens, counted as characters (a token of each holds at least one of them) and as words,
# overcounted in IRIs, strings and comments but counted in C.
_MOST_OPENING = COSTS["sibling"] + max(COSTS[k] for k in ("group", "blank node", "reifier", "annotation",
                                                          "data bracket"))
_MOST_CALL_OPENING = COSTS["sibling"] + max(COSTS["call"], COSTS["bracket"], _MOST_OPENING - COSTS["sibling"])
_MOST_CHAINED = max(COSTS[k] for k in ("triple", "path", "logic", "keyword", "union", "filter", "not", "arithmetic"))
_CHAINING_MARKS = ".;,!|/^*+?-&"
_CHAINING_WORDS = tuple(word.lower() for word in _CHAINING)
# What a `(` that opens no collection follows, across spaces: a word standing alone (FILTER, BIND,
# a function's name; not `a`, which is a term, nor the end of a prefixed name, a variable, a
# number or a language tag), or another such `(`, inside whose call it opens. Each match names
# the `(` after it; where they name every `(`, the text has no collection.
_BEFORE_CALL = re.compile(r"(?:(?<![\w:.\-\u00B7?$@])([A-Za-z_]\w*)|\()\s*(?=\()")


def within_on_counts(text: str, limit: int, budget: int, planning_budget: int) -> bool:
    """Whether a SPARQL text with no collection is within `limit`, `budget` and
    `planning_budget` whatever its tokens, on the bounds above (False: it is to be walked token
    by token). The OPTIONALs of a text with n of them cost its planner at most n * 2**n."""
    if not text.isascii():      # (outside ASCII, case-insensitive words are not only those
        return False            # `lower` finds: the walk reads them)
    calls = text.count("(")
    if calls and (calls > limit or sum(1 for m in _BEFORE_CALL.finditer(text) if m.group(1) != "a") != calls):
        return False
    opens = calls + text.count("{") + text.count("[") + text.count("<<")
    if opens > limit:
        return False
    lower = text.lower()
    optionals = lower.count("optional")
    if optionals * (1 << min(optionals, 62)) > planning_budget:
        return False
    chained = sum(map(text.count, _CHAINING_MARKS)) + sum(map(lower.count, _CHAINING_WORDS))
    return opens * (_MOST_CALL_OPENING if calls else _MOST_OPENING) + chained * _MOST_CHAINED <= budget


def stack_cost(text: str) -> int:
    """The bytes of stack the costliest path through a SPARQL text is counted to take, as
    check_nesting counts them (whatever the budget)."""
    return _sparql_cost(text, 1 << 30, 1 << 62)


def planning_cost(text: str) -> int:
    """What the OPTIONALs of a SPARQL text are counted to cost Oxigraph's planner, as
    check_nesting counts it (whatever the budget): 2**k for each, nested k deep."""
    costs = [0]
    _sparql_cost(text, 1 << 30, 1 << 62, 1 << 62, costs)
    return costs[0]


def _refuse(text, at: int, message: str) -> None:
    newline = b"\n" if isinstance(text, bytes) else "\n"
    raise QuerySyntaxError(message, text.count(newline, 0, at) + 1, at - text.rfind(newline, 0, at))


def _check_brackets(text: str | bytes, limit: int) -> None:
    binary = isinstance(text, bytes)
    openers = (b"(", b"{", b"[", b"<<") if binary else ("(", "{", "[", "<<")
    # Fewer openers than the limit anywhere (quoted ones counted too) cannot nest past it: most
    # texts are let through on these counts alone, in C.
    if sum(text.count(o) for o in openers) <= limit:
        return
    pattern, steps = (_TOKEN_BYTES, _STEP_BYTES) if binary else (_TOKEN, _STEP)
    # The deepest point, found without a Python step per token: every ingested batch of many
    # small elements pays this pass (bench/out/NOTES.md#figures-from-comments); only text that
    # goes too deep is walked again for the position.
    if max(accumulate(map(steps.get, pattern.findall(text), repeat(0))), default=0) <= limit:
        return
    depth = 0
    for token in pattern.finditer(text):
        depth += steps.get(token.group(), 0)
        if depth > limit:
            _refuse(text, token.start(), "nested deeper than %d levels (brackets, << >>, {| |}): not parsed" % limit)


def _check_xml(text: str, limit: int) -> None:
    depth = 0
    for token in _XML.finditer(text):
        if token.group("declaration"):
            _refuse(text, token.start(), "an entity declaration: RDF/XML with <!ENTITY ...> is not read (an entity "
                                         "may expand to far more than the document); write the text out")
        elif token.group("close"):
            depth -= 1
        elif token.group("open") and not token.group("empty"):
            depth += 1
            if depth > limit:
                _refuse(text, token.start(), "elements nested deeper than %d levels: not parsed" % limit)


def _sparql_cost(text: str, limit: int, budget: int, planning_budget: int = 1 << 62,
                 planning: list | None = None) -> int:
    """The costliest path through the text, in bytes of stack: a frame (a bracket and what it
    holds) costs its opening, what is chained directly in it, and its costliest child frame.
    Refused at the first token past which the text cannot stay within `budget`: the open frames'
    costs so far plus the costliest closed child of the innermost one only grow. The OPTIONALs'
    planning cost is added up as they open, and refused past `planning_budget` (into
    `planning[0]` when given)."""
    kinds = [_ROOT]          # per open frame: its kind,
    spent = [0]              # its opening and what is chained in it so far,
    deepest = [0]            # and its costliest closed child
    optionals = [0]          # per open frame: the OPTIONALs enclosing it
    planned = 0              # the OPTIONALs' planning cost so far
    optional_next = False    # the next `{` opens an OPTIONAL's group
    path = 0                 # the sum of `spent` over the open frames
    data_next = False        # the next `{` holds data (INSERT DATA, a template, VALUES' rows)
    owned = False            # the next bracket is a chaining keyword's (which paid for it)
    previous = None          # what the previous token was: "word", "iri", "call", "term" or None
    search = _SPARQL.search
    position = 0
    while (token := search(text, position)) is not None:
        position = token.end()
        group = token.lastgroup
        what = token.group()
        kind = kinds[-1]
        cost = 0
        if what[0] == "<" and kind == _EXPRESSION and previous in ("term", "iri") and group in ("skip", "open"):
            # After an operand, `<` is less-than and what follows it is read, not an IRI nor a
            # triple term: `?a <?b&&?c> ?d` is `?a < ?b && ?c > ?d` to SPARQL, `?a<<b>` is `?a < <b>`.
            position = token.start() + 1
            group, what = "compare", "<"
        if group == "open":
            if len(kinds) > limit:
                _refuse(text, token.start(), "nested deeper than %d levels (brackets, << >>, {| |}): not parsed" % limit)
            new, opening = _frame(what, kind, data_next and what == "{", previous)
            depth = optionals[-1]
            if optional_next and what == "{" and new != _DATA:
                depth += 1
                planned += 1 << min(depth, 62)
                if planned > planning_budget:
                    _refuse(text, token.start(), _too_costly(planning_budget))
            optional_next = False
            optionals.append(depth)
            if what == "{":
                data_next = False
            if owned:
                owned = False
            elif kind == _PATTERN_FRAME or (kind == _ROOT and new != _DATA):
                cost = COSTS["sibling"]          # joined, extended, filtered... one after the other
            elif kind == _COLLECTION:
                cost = COSTS["item"]
            spent[-1] += cost
            kinds.append(new)
            spent.append(COSTS[opening])
            deepest.append(0)
            path += cost + COSTS[opening]
            previous = None
        elif group == "close":
            previous = "term"
            if len(kinds) == 1:
                continue
            kinds.pop()
            optionals.pop()
            own = spent.pop()
            path -= own
            total = own + deepest.pop()
            if total > deepest[-1]:
                deepest[-1] = total
            continue
        else:
            cost = _chained(group, what, kind, previous)
            if group == "keyword":
                word = what.upper()
                if word in _DATA_NEXT:
                    data_next = True
                elif word == "WHERE":
                    data_next = False
                owned = word in _CHAINING and kind != _DATA
                optional_next = word == "OPTIONAL" and kind != _DATA
                previous = "filter" if word == "FILTER" else "word"
            elif group in ("name", "skip"):
                iri = ":" in what if group == "name" else what.startswith("<")
                # An IRI right after FILTER names a function; elsewhere in a pattern, a term.
                previous = ("call" if previous == "filter" else "iri") if iri else "word" if group == "name" \
                    and what != "a" else "term"
            elif group in ("var", "number", "signed"):
                previous = "term"
            elif group != "comment":
                previous = None
            if not cost:
                continue
            spent[-1] += cost
            path += cost
        if path + deepest[-1] > budget:
            _refuse(text, token.start(), _too_complex(what, group, budget))
    if planning is not None:
        planning[0] = planned
    while len(kinds) > 1:                   # brackets left open: the parser will say so
        kinds.pop()
        total = spent.pop() + deepest.pop()
        deepest[-1] = max(deepest[-1], total)
    return spent[0] + deepest[0]


def _chained(group: str, what: str, kind: int, previous: str | None) -> int:
    """What a token that opens or closes nothing chains in a frame of `kind`."""
    if kind == _COLLECTION:
        if group in ("name", "var", "number", "signed", "skip"):
            return COSTS["item"]
        return COSTS["logic"] if group == "logic" else COSTS["path"] if group == "op" else 0
    if group == "keyword":
        return COSTS[_CHAINING[what.upper()]] if kind != _DATA and what.upper() in _CHAINING else 0
    if group == "separator":
        return COSTS["triple"] if kind == _PATTERN_FRAME else 0
    if group == "logic":
        return COSTS["logic"]
    if group == "op":
        return COSTS[_EXPRESSION_OPS[what]] if kind == _EXPRESSION and what in _EXPRESSION_OPS else COSTS["path"]
    if group == "signed":
        # A sign after a term is a binary operator in an expression; elsewhere, part of a number.
        return COSTS["arithmetic"] if kind == _EXPRESSION and previous in ("term", "iri", "call") else 0
    return 0


def _frame(opener: str, parent: int, data: bool, previous: str | None) -> tuple[int, str]:
    """(kind of the frame `opener` opens inside a `parent` frame, the name of its opening's cost).
    A `(` after a word (FILTER, BIND, IF, STR, ...) or a function's IRI opens a call; in an
    expression or the top level, after an IRI too; elsewhere in a pattern, a collection or a
    path group (a pattern calls a function by IRI only right after FILTER)."""
    if parent == _DATA or data:
        return _DATA, "data bracket"
    if opener != "(":
        return _PATTERN_FRAME, _OPENINGS[opener]
    if previous in ("word", "filter", "call") or (previous == "iri" and parent in (_ROOT, _EXPRESSION)):
        return _EXPRESSION, "call"
    if parent in (_ROOT, _EXPRESSION):
        return _EXPRESSION, "bracket"
    return _COLLECTION, "collection"


def _too_costly(budget: int) -> str:
    return ("OPTIONALs nested too deeply to plan, at this OPTIONAL: Oxigraph's planning of an OPTIONAL doubles "
            "with each level it is nested in, and with those before it this one would take the query past what "
            "its OPTIONALs may cost to plan (%d, counting 2**k for one nested k deep); nest fewer levels or split "
            "the query" % budget)


def _too_complex(what: str, group: str, budget: int) -> str:
    construct = {"open": "%r" % what, "keyword": what.upper(), "separator": "triple pattern (%r)" % what,
                 "signed": "operator (%r)" % what[0]}.get(group, "%r" % what)
    return ("nested and chained too deeply to parse, at this %s: with the brackets enclosing it and the operators, "
            "keywords and triple patterns chained with it, it would take a parser more than the %d KiB of stack a "
            "query or an update may take; split it" % (construct, budget >> 10))
