"""EP-SPARQL (spec §6.12), the fifth dialect: event patterns combined by SEQ, EQUALS,
OPTIONALSEQ, EQUALSOPTIONAL, AND and OR, written as RSP-QL* with the elements' times (spec §6.4),
so that `rspstar check` shows a query any RSP-QL* reader can run (with `report = content-change`).

How the translation says each part of the semantics:

- Every stream triple is an event with interval [τ, τ]: each triple pattern of an event pattern
  becomes a `WINDOW <s> { ?g prov:generatedAtTime ?t . GRAPH ?g { s p o } }` of its own, so
  two triples of one pattern may come from two elements. An annotated triple keeps its
  annotation (`{| |}`, `~ r`): the annotation describes that statement in that element.
  A blank node property list is a variable and its triples are events too.
- A pattern's interval is [least start, greatest end] of its events: variables bound with
  `BIND(IF(...))`; SEQ, EQUALS and their optional forms compare them in FILTERs (in the left
  join's condition for the optional forms), AND is a join, OR a UNION whose branches bind the
  same interval variables.
- A match is reported at the instant of its last event: the windows are content-change windows
  (spec §6.3) whose range is the query's bound d on getDURATION(), and the WHERE clause keeps
  the matches whose end is the latest element time its windows hold. Under content change that
  time is the evaluation instant (an element with it has just arrived, windows hold nothing
  later), so each evaluation answers exactly the matches completed by that instant's elements.
  A bound `<= d` keeps an element at t − d: its windows are closed below (TimeWindow.lower_closed).

Internal variables start with the rewrite's INTERNAL_VARIABLE_PREFIX, so they never show in
results; a `SELECT *` projects the query's own variables.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import QuerySyntaxError, TemporalValueError
from .namespaces import XSD
from .parser import PrologueReader, _Parser
from .rewrite import INTERNAL_VARIABLE_PREFIX
from .syntax import Bind, Filter, GraphPattern, Group, Keyworded, SubSelect, TriplesBlock, UnionPattern
from .temporal import format_duration, format_instant, parse_duration
from .tokens import BNODE, EOF, IRI, LANGTAG, NAME, PNAME, STRING, VAR
from .vocabulary import PROV_GENERATED_AT_TIME

# Operators between two groups, by how tightly they bind (spec §6.12), all left-associative.
OPERATORS = {"EQUALS": 3, "EQUALSOPTIONAL": 3, "SEQ": 2, "OPTIONALSEQ": 2, "AND": 1, "OR": 0}
# The functions of a whole match, as written (case-insensitive) and what each is.
MATCH_FUNCTIONS = {"getduration": "duration", "getstarttime": "start", "getendtime": "end"}
_DURATION_TYPES = (XSD + "duration", XSD + "dayTimeDuration")
_XSD_DATETIME = XSD + "dateTime"
_VARIABLE = "?%s_ep_" % INTERNAL_VARIABLE_PREFIX
# Each event nests its window pattern and two BINDs one level deeper in the SPARQL Oxigraph
# parses, recursively: a bound far above any event pattern keeps the nesting far from where its
# parser exhausts the stack.
MAX_EVENTS = 256
_FUNCTIONS_WHERE = ("is the whole match's: use it in the query's top-level FILTER (after the event patterns), "
                    "its SELECT or its ORDER BY")


def is_match_function(tokens, k: int) -> bool:
    """Whether token k starts a call of getDURATION(), getSTARTTIME() or getENDTIME()."""
    return tokens[k].kind == NAME and tokens[k].text.lower() in MATCH_FUNCTIONS and \
        k + 1 < len(tokens) and tokens[k + 1].is_punct("(")


def is_operator_between_groups(tokens, k: int) -> bool:
    """Whether token k is an EP-SPARQL operator written between two groups (`} SEQ {`,
    `} AND STREAM <s> {`)."""
    if not (tokens[k].kind == NAME and tokens[k].text.upper() in OPERATORS and k and tokens[k - 1].is_punct("}")):
        return False
    after = tokens[k + 1] if k + 1 < len(tokens) else tokens[-1]
    return after.is_punct("{") or (after.is_keyword("STREAM") and k + 2 < len(tokens)
                                   and tokens[k + 2].kind in (IRI, PNAME))


@dataclass
class _Leaf:
    """An event pattern: a group of triple patterns (and FILTER, BIND, VALUES, background GRAPH)."""

    group: Group
    stream: str | None
    number: int


@dataclass
class _Combined:
    operator: str
    token: int
    left: object
    right: object


@dataclass
class _Filtered:
    """`{ expression FILTER(...) }`: the filters hold for the expression's matches."""

    node: object
    filters: list[Filter]
    open: int


@dataclass
class EventTranslation:
    """The RSP-QL* text of an EP-SPARQL query and what its windows are."""

    text: str
    placed: list[tuple[int, int, int]]
    streams: list[str]
    bound: int
    lower_closed: bool


@dataclass
class _Out:
    """Output pieces, each with the source offset it stands for and whether it was copied."""

    source: str
    pieces: list[tuple[str, int, bool]] = field(default_factory=list)

    def text(self, text: str, at: int) -> None:
        self.pieces.append((text, at, False))

    def copy(self, start: int, end: int) -> None:
        if end > start:
            self.pieces.append((self.source[start:end], start, True))


class EventQuery:
    """Reads an EP-SPARQL query (through `reader`, a dialect's token reader past the prologue)
    into its RSP-QL* translation."""

    def __init__(self, reader: PrologueReader, given_streams: tuple[str, ...], origin: int | None):
        self.r = reader
        self.tokens = reader.tokens
        self.source = reader.source
        self.given = tuple(given_streams)
        self.origin = origin
        self.parser = _Parser(reader.source.text)
        self.streams: list[str] = []           # named by STREAM <s>, in order of appearance
        self.leaves = 0
        self.count = 0
        self.event_count = 0
        self.sources: set[tuple] = set()        # the text's events (at_now writes some twice)
        self.labels: dict[tuple[int, str], str] = {}
        self.root_chain: set[int] = set()
        self.interval: tuple[str, str] = ("", "")

    # -- reading ---------------------------------------------------------------------------
    def error(self, message: str, k: int) -> QuerySyntaxError:
        return self.source.error(message, self.tokens[k].offset)

    def read(self) -> EventTranslation:
        r = self.r
        form = r.i
        if r.peek().is_keyword("CONSTRUCT"):
            r.advance()
            if not r.peek().is_punct("{"):
                raise r.error("CONSTRUCT WHERE { ... } has no template to build from event patterns; write "
                              "CONSTRUCT { template } WHERE { ... }")
            r.i = self.matching(r.i, "{", "}") + 1
        elif r.peek().is_keyword("SELECT", "ASK"):
            r.advance()
            depth = 0
            while r.peek().kind != EOF and not (depth == 0 and (r.peek().is_keyword("FROM", "WHERE") or
                                                                r.peek().is_punct("{"))):
                depth += r.peek().is_punct("(") - r.peek().is_punct(")")
                r.advance()
        else:
            raise r.error("expected SELECT, CONSTRUCT or ASK, found %s" % r.describe(r.peek()))
        head_end = r.i
        while r.peek().is_keyword("FROM"):
            first = r.i
            r.advance()
            if r.peek().is_keyword("STREAM", "WINDOW") or (r.peek().is_keyword("NAMED") and
                                                           r.peek(1).is_keyword("STREAM", "WINDOW")):
                raise self.error("a window declaration in EP-SPARQL has no equivalent (events come from "
                                 "STREAM <s> { ... } in WHERE; the windows' range from "
                                 "FILTER(getDURATION() < d))", first)
            if r.peek().is_keyword("NAMED"):
                r.advance()
            r.declaration_iri("after FROM")
        dataset_end = r.i
        where = r.i
        if r.peek().is_keyword("WHERE"):
            r.advance()
        if not (r.peek().is_punct("{") or self.stream_operand_ahead()):
            raise r.error("expected WHERE { ... }, found %s" % r.describe(r.peek()))
        root = self.expression(None)
        trailing = self.filters()
        modifiers = r.i
        tok = r.peek()
        if tok.kind != EOF and not tok.is_keyword("GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "VALUES"):
            raise self.unexpected(r.i)
        for k in range(modifiers, len(self.tokens) - 1):
            if self.tokens[k].is_keyword("VALUES"):
                break
            if self.tokens[k].is_punct("{"):
                raise self.error("unexpected '{' after the WHERE clause", k)
        self.root_chain = {id(n) for n in self._chain(root)}
        windows = self.streams or list(self.given)
        if not windows:
            raise self.error("this EP-SPARQL query names no stream: write its event patterns as STREAM <s> { ... } "
                             "(a replay reads the streams it is given; elsewhere the option streams gives them)", where)
        self.windows = windows

        where_out = _Out(self.source.text)
        where_out.text("\nWHERE {\n  # the event patterns, numbered as written: %s" % _structure(root, True),
                       self.tokens[where].offset)
        start, end = self.emit(root, where_out, "  ", at_now=True)
        self.interval = (start, end)
        at = self.tokens[modifiers].offset
        where_out.text("\n  %s\n  FILTER(%s = %snow)" % (self.now(_VARIABLE + "now"), end, _VARIABLE), at)
        for f in trailing:
            where_out.text("\n  ", at)
            self.copy_filter(f, where_out, True)
        where_out.text("\n}\n", at)
        self.copy_tokens(modifiers, len(self.tokens) - 1, where_out, self.match_functions)
        # After the patterns are written, so that what is wrong in them is found first.
        bound, closed = self.bound(trailing + [f for n in self._chain(root) for f in n.filters], where)

        head = _Out(self.source.text)
        head.copy(0, self.tokens[form].offset)
        self.copy_tokens(form, head_end, head, self.projection(form, head_end, where, modifiers))
        if dataset_end > head_end:
            head.text(" ", self.tokens[head_end].offset)
            head.copy(self.tokens[head_end].offset, self.tokens[dataset_end - 1].end)
        for stream in windows:
            spec = "RANGE %s STEP %s" % (format_duration(bound), format_duration(bound))
            if self.origin is not None:
                spec += ' START "%s"^^<%s>' % (format_instant(self.origin), _XSD_DATETIME)
            head.text("\nFROM NAMED WINDOW <%s> ON <%s> [%s]" % (stream, stream, spec), self.tokens[where].offset)
        text, placed = _assemble(head.pieces + where_out.pieces)
        return EventTranslation(text, placed, windows, bound, closed)

    def _chain(self, root) -> list[_Filtered]:
        chain = []
        while isinstance(root, _Filtered):
            chain.append(root)
            root = root.node
        return chain

    def stream_operand_ahead(self) -> bool:
        return self.r.peek().is_keyword("STREAM") and self.r.peek(1).kind in (IRI, PNAME)

    def unexpected(self, k: int) -> QuerySyntaxError:
        tok = self.tokens[k]
        if tok.is_keyword("UNION"):
            return self.error("UNION between event patterns: EP-SPARQL writes OR", k)
        if tok.kind == NAME and tok.text.upper() in OPERATORS:
            return self.error("expected a group { ... } or STREAM <s> { ... } after %s" % tok.text.upper(), k + 1)
        if tok.is_punct("{", "."):
            return self.error("expected SEQ, EQUALS, OPTIONALSEQ, EQUALSOPTIONAL, AND or OR between two event "
                              "patterns, found %s" % self.r.describe(tok), k)
        return self.error("expected SEQ, EQUALS, OPTIONALSEQ, EQUALSOPTIONAL, AND, OR or FILTER after an event "
                          "pattern, found %s" % self.r.describe(tok), k)

    def expression(self, stream: str | None):
        """Operands joined by operators, from the current token; the tree by precedence."""
        r = self.r
        operands = [self.operand(stream)]
        operators = []
        while r.peek().kind == NAME and r.peek().text.upper() in OPERATORS:
            if not (r.peek(1).is_punct("{") or (r.peek(1).is_keyword("STREAM") and r.peek(2).kind in (IRI, PNAME))):
                raise self.unexpected(r.i)
            operators.append(r.i)
            r.advance()
            operands.append(self.operand(stream))
        for level in (3, 2, 1, 0):
            merged, kept = [operands[0]], []
            for op, right in zip(operators, operands[1:]):
                name = self.tokens[op].text.upper()
                if OPERATORS[name] == level:
                    merged[-1] = _Combined(name, op, merged[-1], right)
                else:
                    kept.append(op)
                    merged.append(right)
            operands, operators = merged, kept
        return operands[0]

    def operand(self, stream: str | None):
        r = self.r
        if r.peek().is_keyword("STREAM"):
            r.advance()
            stream = r.declaration_iri("after STREAM")[0]
            if stream not in self.streams:
                self.streams.append(stream)
            if r.peek().is_punct("["):
                raise r.error("a window after STREAM <s> is CQELS-QL's; an EP-SPARQL query gives its windows' range "
                              "with FILTER(getDURATION() < d)")
        if not r.peek().is_punct("{"):
            raise r.error("expected a group { ... } or STREAM <s> { ... }, found %s" % r.describe(r.peek()))
        return self.group(stream)

    def group(self, stream: str | None):
        r = self.r
        open_index = r.i
        if r.peek(1).is_punct("{") or (r.peek(1).is_keyword("STREAM") and r.peek(2).kind in (IRI, PNAME)):
            r.advance()
            node = self.expression(stream)
            filters = self.filters()
            if not r.peek().is_punct("}"):
                raise self.unexpected(r.i)
            r.advance()
            return _Filtered(node, filters, open_index) if filters else node
        self.parser.prefixes, self.parser.base = r.prefixes, r.base
        self.parser.i = r.i
        group = self.parser.group()
        r.i = self.parser.i
        self.check_leaf(group)
        self.leaves += 1
        return _Leaf(group, stream, self.leaves)

    def filters(self) -> list[Filter]:
        """The FILTERs after an expression's last operand (they constrain the whole expression)."""
        found = []
        while self.r.peek().is_keyword("FILTER"):
            self.parser.prefixes, self.parser.base = self.r.prefixes, self.r.base
            self.parser.i = self.r.i
            found.append(self.parser.filter())
            self.r.i = self.parser.i
        tok = self.r.peek()
        if found and tok.kind == NAME and tok.text.upper() in OPERATORS:
            raise self.r.error("%s after a FILTER: a FILTER comes after the last event pattern it constrains "
                               "(write { {A} FILTER(...) } %s {B} to constrain A alone)"
                               % (tok.text.upper(), tok.text.upper()))
        return found

    def check_leaf(self, group: Group) -> None:
        events = False
        for item in group.items:
            if isinstance(item, TriplesBlock):
                events = True
            elif isinstance(item, (Filter, Bind)):
                self.refuse_functions(*_expression_range(item))
            elif isinstance(item, GraphPattern):
                if item.is_window:
                    raise self.error("WINDOW in an EP-SPARQL query has no equivalent: its events come from "
                                     "STREAM <s> { ... }", item.keyword)
            elif isinstance(item, Keyworded):
                word = self.tokens[item.head.start].text.upper()
                hint = " (write {A} OPTIONALSEQ {B} or {A} EQUALSOPTIONAL {B})" if word == "OPTIONAL" else ""
                raise self.error("%s inside an event pattern has no equivalent%s" % (word, hint), item.head.start)
            elif isinstance(item, (Group, UnionPattern, SubSelect)):
                first = item.groups[0] if isinstance(item, UnionPattern) else item.where if \
                    isinstance(item, SubSelect) else item
                raise self.error("a group inside an event pattern: event patterns are joined by SEQ, EQUALS, "
                                 "OPTIONALSEQ, EQUALSOPTIONAL, AND or OR", first.open)
        if not events:
            raise self.error("an event pattern matches at least one stream triple; this one has none", group.open)

    def refuse_functions(self, start: int, end: int) -> None:
        for k in range(start, end):
            if is_match_function(self.tokens, k):
                raise self.error("%s() %s" % (self.tokens[k].text, _FUNCTIONS_WHERE), k)

    def bound(self, filters: list[Filter], where: int) -> tuple[int, bool]:
        """(d, whether <=) of the tightest top-level bound getDURATION() < d or <= d."""
        bounds = []
        for f in filters:
            start, end = _expression_range(f)
            if self.tokens[start + 1].is_punct("("):
                bounds += self.conjunct_bounds(start + 2, end - 1)
        if not bounds:
            raise self.error('an EP-SPARQL query bounds its matches with a top-level FILTER(getDURATION() < '
                             '"PT5M"^^xsd:duration) (or <=): the duration is the range of the windows its matches '
                             'are found in; this query has none', where)
        return min(bounds, key=lambda b: (b[0], b[1]))

    def conjunct_bounds(self, start: int, end: int) -> list[tuple[int, bool]]:
        found = []
        depth, at = 0, start
        for k in range(start, end + 1):
            tok = self.tokens[k]
            if k == end or (depth == 0 and tok.is_punct("&&")):
                a, b = at, k
                while b - a >= 2 and self.tokens[a].is_punct("(") and self.matching(a, "(", ")") == b - 1:
                    a, b = a + 1, b - 1
                found += self.conjunct_bound(a, b)
                at = k + 1
            elif tok.is_punct("(", "[", "{", "<<", "<<("):
                depth += 1
            elif tok.is_punct(")", "]", "}", ">>", ")>>"):
                depth -= 1
        return found

    def conjunct_bound(self, a: int, b: int) -> list[tuple[int, bool]]:
        t = self.tokens
        if b - a < 4:
            return []
        if t[a].text.lower() == "getduration" and is_match_function(t, a) and t[a + 2].is_punct(")"):
            op, literal = t[a + 3], a + 4
            comparison = {"<": False, "<=": True}
        elif is_match_function(t, b - 3) and t[b - 3].text.lower() == "getduration" and t[b - 1].is_punct(")"):
            op, literal = t[b - 4], a
            comparison = {">": False, ">=": True}
            b = b - 4
        else:
            return []
        if not op.is_punct(*comparison):
            return []
        end = b
        if not (end - literal == 3 and t[literal].kind == STRING and t[literal + 1].is_punct("^^") and
                t[literal + 2].kind in (IRI, PNAME) and self.r.resolve(t[literal + 2]) in _DURATION_TYPES):
            raise self.error('getDURATION() is bounded by a duration literal such as "PT5M"^^xsd:duration', literal)
        lexical = t[literal].text[1:-1]
        try:
            if lexical != lexical.strip():     # Oxigraph's duration has no spaces: the FILTER would never hold
                raise TemporalValueError("invalid duration %r: no spaces around it" % lexical)
            d = parse_duration(lexical)
        except TemporalValueError as e:
            raise self.error("the bound of getDURATION(): %s" % e, literal) from None
        if d <= 0:
            raise self.error("the bound of getDURATION() must be positive, got %r" % lexical, literal)
        return [(d, comparison[op.text])]

    def matching(self, k: int, opener: str, closer: str) -> int:
        depth = 0
        for j in range(k, len(self.tokens)):
            if self.tokens[j].is_punct(opener):
                depth += 1
            elif self.tokens[j].is_punct(closer):
                depth -= 1
                if depth == 0:
                    return j
        raise self.error("%r is never closed" % opener, k)

    # -- writing -----------------------------------------------------------------------------
    def fresh(self, kind: str) -> str:
        self.count += 1
        return "%s%s%d" % (_VARIABLE, kind, self.count)

    def copy_tokens(self, start: int, end: int, out: _Out, replace) -> None:
        """Tokens [start, end) as written (with the text between them), where `replace(k)` gives
        (text, next token) for a token it rewrites."""
        if start >= end:
            return
        run = self.tokens[start].offset
        k = start
        while k < end:
            found = replace(k)
            if found is None:
                k += 1
                continue
            text, after = found
            out.copy(run, self.tokens[k].offset)
            out.text(text, self.tokens[k].offset)
            k = after
            run = self.tokens[after - 1].end
        out.copy(run, self.tokens[end - 1].end)

    def match_functions(self, k: int):
        if not is_match_function(self.tokens, k):
            return None
        if not self.tokens[k + 2].is_punct(")"):
            raise self.error("%s() takes no arguments" % self.tokens[k].text, k + 2)
        start, end = self.interval
        kind = MATCH_FUNCTIONS[self.tokens[k].text.lower()]
        return ("(%s - %s)" % (end, start) if kind == "duration" else start if kind == "start" else end), k + 3

    def projection(self, form: int, end: int, where: int, modifiers: int):
        """The head's rewriting: the match functions, and `SELECT *` as the query's own variables
        (internal ones would make rows of DISTINCT differ)."""
        k = form + 1
        while self.tokens[k].is_keyword("DISTINCT", "REDUCED", "RSTREAM", "ISTREAM", "DSTREAM"):
            k += 1
        star = k if self.tokens[form].is_keyword("SELECT") and self.tokens[k].is_punct("*") else None
        names = list(dict.fromkeys(t.text for t in self.tokens[where:modifiers] if t.kind == VAR))

        def replace(j: int):
            if j == star and names:
                return " ".join(names), j + 1
            return self.match_functions(j)
        return replace

    def copy_filter(self, f: Filter, out: _Out, functions: bool) -> None:
        start, end = _expression_range(f)
        if functions:
            self.copy_tokens(start, end, out, self.match_functions)
        else:
            self.refuse_functions(start, end)
            out.copy(self.tokens[start].offset, self.tokens[end - 1].end)

    def emit(self, node, out: _Out, indent: str, at_now: bool = False) -> tuple[str, str]:
        """The node as a group; (start, end) variables of its matches' intervals. `at_now`: only
        the matches that end at the evaluation instant, the latest element time the windows
        hold (the whole query's matches are those), found without making the others: where an
        operator's end is one operand's, that operand ends then; AND and OPTIONALSEQ, whose end
        is either operand's, become a UNION of the two cases."""
        if isinstance(node, _Leaf):
            return self.emit_leaf(node, out, indent, at_now)
        if isinstance(node, _Filtered):
            at = self.tokens[node.open].offset
            out.text("\n%s{" % indent, at)
            interval = self.emit(node.node, out, indent + "  ", at_now)
            saved, self.interval = self.interval, interval
            for f in node.filters:
                out.text("\n%s  " % indent, at)
                self.copy_filter(f, out, id(node) in self.root_chain)
            self.interval = saved
            out.text("\n%s}" % indent, at)
            return interval
        at = self.tokens[node.token].offset
        inner = indent + "  "
        op = node.operator
        out.text("\n%s{ # %s" % (indent, op), at)
        if op == "OR" or (at_now and op in ("AND", "OPTIONALSEQ")):
            start, end = self.fresh("s"), self.fresh("e")
            if op == "OR":
                cases = [lambda: self.emit(node.left, out, inner + "  ", at_now),
                         lambda: self.emit(node.right, out, inner + "  ", at_now)]
            elif op == "AND":      # the left operand ends at t; else it ends before and the right one at t
                cases = [lambda: self.emit_pair(node, out, inner + "  ", True, False),
                         lambda: self.emit_pair(node, out, inner + "  ", False, True, left_before=True)]
            else:                  # B after A ends at t; or A ends at t, when nothing can follow it
                cases = [lambda: self.emit_pair(node, out, inner + "  ", False, True),
                         lambda: self.emit(node.left, out, inner + "  ", True)]
            for k, case in enumerate(cases):
                out.text("\n%s%s{" % (inner, "UNION " if k else ""), at)
                s, e = case()
                out.text("\n%s  BIND(%s AS %s) BIND(%s AS %s)\n%s}" % (inner, s, start, e, end, inner), at)
            out.text("\n%s}" % indent, at)
            return start, end
        if op in ("OPTIONALSEQ", "EQUALSOPTIONAL"):
            sl, el = self.emit(node.left, out, inner, at_now)        # EQUALSOPTIONAL ends with its left operand
            out.text("\n%sOPTIONAL {" % inner, at)
            sr, er = self.emit(node.right, out, inner + "  ")
            condition = "%s < %s" % (el, sr) if op == "OPTIONALSEQ" else _equal_intervals(sl, el, sr, er)
            out.text("\n%s  FILTER(%s)\n%s}" % (inner, condition, inner), at)
            if op == "OPTIONALSEQ":
                end = self.fresh("e")
                out.text("\n%sBIND(COALESCE(%s, %s) AS %s)" % (inner, er, el, end), at)
                el = end
            out.text("\n%s}" % indent, at)
            return sl, el
        start, end = self.emit_pair(node, out, inner, at_now and op == "EQUALS", at_now)
        out.text("\n%s}" % indent, at)
        return start, end

    def emit_pair(self, node: _Combined, out: _Out, indent: str, left_now: bool, right_now: bool,
                  left_before: bool = False) -> tuple[str, str]:
        """Both operands of SEQ, EQUALS, AND (or OPTIONALSEQ with its right operand there) and the
        operator's condition; `left_before`: the left operand ends before the evaluation instant."""
        sl, el = self.emit(node.left, out, indent, left_now)
        sr, er = self.emit(node.right, out, indent, right_now)
        op = node.operator
        if op in ("SEQ", "OPTIONALSEQ"):
            out.text("\n%sFILTER(%s < %s)" % (indent, el, sr), self.tokens[node.token].offset)
            return sl, er
        if op == "EQUALS":
            out.text("\n%sFILTER(%s)" % (indent, _equal_intervals(sl, el, sr, er)), self.tokens[node.token].offset)
            return sl, el
        start, end = self.fresh("s"), self.fresh("e")       # AND
        if left_before:
            out.text("\n%sFILTER(%s < %s)" % (indent, el, er), self.tokens[node.token].offset)
        out.text("\n%sBIND(IF(%s < %s, %s, %s) AS %s) BIND(IF(%s > %s, %s, %s) AS %s)" % (
            indent, sr, sl, sr, sl, start, er, el, er, el, end), self.tokens[node.token].offset)
        return start, end

    def now(self, variable: str) -> str:
        """A sub-query binding `variable` to the latest element time the windows hold."""
        window = "<%s>" % self.windows[0] if len(self.windows) == 1 else _VARIABLE + "nw"
        return "{ SELECT (MAX(%snt) AS %s) WHERE { WINDOW %s { %sng <%s> %snt } } }" % (
            _VARIABLE, variable, window, _VARIABLE, PROV_GENERATED_AT_TIME, _VARIABLE)

    def emit_leaf(self, leaf: _Leaf, out: _Out, indent: str, at_now: bool = False) -> tuple[str, str]:
        group = leaf.group
        at = self.tokens[group.open].offset
        out.text("\n%s{" % indent, at)
        if leaf.stream is not None:
            window = "<%s>" % leaf.stream
        elif len(self.windows) == 1:
            window = "<%s>" % self.windows[0]
        else:
            window = None
        times = []
        for item in group.items:
            if isinstance(item, TriplesBlock):
                for event in self.events(item.span.start, item.span.end, leaf):
                    self.event_count += 1
                    self.sources.add(tuple(segment for segment in event if not isinstance(segment, str)))
                    if len(self.sources) > MAX_EVENTS:
                        raise self.error("more than %d events in one query (each triple of an event pattern is one)"
                                         % MAX_EVENTS, _first_token(event))
                    graph, time = "%sg%d" % (_VARIABLE, self.event_count), "%st%d" % (_VARIABLE, self.event_count)
                    event_at = self.tokens[_first_token(event)].offset
                    out.text("\n%s  WINDOW %s { %s <%s> %s . GRAPH %s { " % (
                        indent, window or self.fresh("w"), graph, PROV_GENERATED_AT_TIME, time, graph), event_at)
                    for n, segment in enumerate(event):
                        if n:
                            out.text(" ", event_at)
                        if isinstance(segment, str):
                            out.text(segment, event_at)
                        else:
                            self.copy_tokens(segment[0], segment[1], out, lambda k: self.blank_node(k, leaf))
                    out.text(" } }", event_at)
                    times.append(time)
            else:
                start, end = _expression_range(item) if isinstance(item, (Filter, Bind)) else \
                    (item.keyword, item.group.close + 1) if isinstance(item, GraphPattern) else \
                    (item.span.start, item.span.end)
                out.text("\n%s  " % indent, self.tokens[start].offset)
                out.copy(self.tokens[start].offset, self.tokens[end - 1].end)
        start = end = times[0]
        if len(times) > 1:
            for t in times[1:]:
                least, greatest = self.fresh("s"), self.fresh("e")
                out.text("\n%s  BIND(IF(%s < %s, %s, %s) AS %s) BIND(IF(%s > %s, %s, %s) AS %s)" % (
                    indent, t, start, t, start, least, t, end, t, end, greatest), at)
                start, end = least, greatest
        if at_now:
            now = self.fresh("now")
            out.text("\n%s  %s FILTER(%s = %s)" % (indent, self.now(now), end, now), at)
        out.text("\n%s}" % indent, self.tokens[group.close].offset)
        return start, end

    def blank_node(self, k: int, leaf: _Leaf):
        tok = self.tokens[k]
        if tok.kind != BNODE:
            return None
        key = (leaf.number, tok.text)
        if key not in self.labels:
            self.labels[key] = self.fresh("b")
        return self.labels[key], k + 1

    # Triples of an event pattern, one event each: a list of segments, (start, end) token
    # ranges copied (blank node labels as variables) or text.
    def events(self, start: int, end: int, leaf: _Leaf) -> list[list]:
        found: list[list] = []
        k = start
        while k < end:
            subject, k = self.node(k, found)
            if k < end and not self.tokens[k].is_punct("."):
                k = self.predicates(k, subject, found)
            if k < end and self.tokens[k].is_punct("."):
                k += 1
        return found

    def predicates(self, k: int, subject: list, found: list) -> int:
        t = self.tokens
        while True:
            verb = t[k]
            if not (verb.kind == VAR or ((verb.kind in (IRI, PNAME) or verb.is_keyword("A")) and
                                         not t[k + 1].is_punct("/", "|", "*", "+", "?"))):
                raise self.error("a property path in an event pattern has no equivalent: each triple of an event "
                                 "pattern is one event", k)
            verb_at = k
            k += 1
            while True:
                obj, k = self.node(k, found)
                annotated = k
                while t[k].is_punct("~", "{|"):
                    if t[k].is_punct("~"):
                        k += 1
                        if t[k].kind in (VAR, IRI, PNAME, BNODE):
                            k += 1
                    else:
                        k = self.matching(k, "{|", "|}") + 1
                found.append(subject + [(verb_at, verb_at + 1)] + obj + ([(annotated, k)] if k > annotated else []))
                if t[k].is_punct(","):
                    k += 1
                    continue
                break
            if not t[k].is_punct(";"):
                return k
            while t[k].is_punct(";"):
                k += 1
            if not (t[k].kind in (VAR, IRI, PNAME) or t[k].is_keyword("A") or t[k].is_punct("^", "!", "(")):
                return k

    def node(self, k: int, found: list) -> tuple[list, int]:
        t = self.tokens
        tok = t[k]
        if tok.is_punct("["):
            variable = self.fresh("b")
            if t[k + 1].is_punct("]"):
                return [variable], k + 2
            k = self.predicates(k + 1, [variable], found)
            return [variable], k + 1
        if tok.is_punct("("):
            if t[k + 1].is_punct(")"):
                return [(k, k + 2)], k + 2
            raise self.error("an RDF collection in an event pattern has no equivalent (its triples would be events)", k)
        if tok.is_punct("<<("):
            j = self.matching(k, "<<(", ")>>")
            return [(k, j + 1)], j + 1
        if tok.is_punct("<<"):
            j = self.matching(k, "<<", ">>")
            return [(k, j + 1)], j + 1
        if tok.kind == STRING:
            j = k + 1
            if t[j].kind == LANGTAG:
                j += 1
            elif t[j].is_punct("^^"):
                j += 2
            return [(k, j)], j
        return [(k, k + 1)], k + 1


def _structure(node, top: bool = False) -> str:
    """How the operators were read: `(P1 EQUALS P2) SEQ (P3 EQUALS P4)`."""
    if isinstance(node, _Leaf):
        return "P%d" % node.number
    if isinstance(node, _Filtered):
        return "{ %s FILTER }" % _structure(node.node, True)
    text = "%s %s %s" % (_structure(node.left), node.operator, _structure(node.right))
    return text if top else "(%s)" % text


def _equal_intervals(sl: str, el: str, sr: str, er: str) -> str:
    """Two intervals are equal; an event's, [τ, τ], is one variable."""
    if sl == el and sr == er:
        return "%s = %s" % (sl, sr)
    return "%s = %s && %s = %s" % (sl, sr, el, er)


def _expression_range(item) -> tuple[int, int]:
    """Token range [start, end) of a FILTER or BIND."""
    parts = item.expression.parts
    last = parts[-1]
    return parts[0].start, (last.end if hasattr(last, "end") else last.close + 1)


def _first_token(event: list) -> int:
    for segment in event:
        if not isinstance(segment, str):
            return segment[0]
    return 0


def _assemble(pieces: list[tuple[str, int, bool]]) -> tuple[str, list[tuple[int, int, int]]]:
    placed, length = [], 0
    for text, at, copied in pieces:
        placed.append((length, at, len(text) if copied else 0))
        length += len(text)
    return "".join(text for text, _, _ in pieces), placed


def translate_events(reader: PrologueReader, given_streams: tuple[str, ...], origin: int | None) -> EventTranslation:
    """The RSP-QL* translation of the EP-SPARQL query `reader` stands in (past its prologue)."""
    return EventQuery(reader, given_streams, origin).read()
