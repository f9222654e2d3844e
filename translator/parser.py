"""Recursive-descent parser for RSP-QL* (spec §2) into a `ContinuousQuery`.

The parser understands the SPARQL 1.2 structure the window rewrite depends on (groups,
GRAPH, WINDOW, OPTIONAL/MINUS/UNION/SERVICE, sub-selects, FILTER/BIND with EXISTS, VALUES,
triples with annotations, reifiers, triple terms and paths). Expressions are kept verbatim and
checked by Oxigraph when the query is validated (see `validate.py`).
"""
from __future__ import annotations

from typing import Callable

from .errors import QuerySyntaxError, TemporalValueError
from .namespaces import XSD
from .model import ContinuousQuery, QueryForm, R2S
from .windows import CountWindow, FactTemplate, FactWindow, LandmarkWindow, PartitionedWindow, TimeWindow, Window
from .syntax import (
    Annotation, Bind, BlankNodePropertyList, Collection, Expression, Filter, GraphPattern, Group,
    InlineData, Keyworded, ObjectWithAnnotations, ParsedBody, PropertyValues, ReifiedTriple, Span,
    SubSelect, Term, TriplesBlock, TriplesSameSubject, TripleTerm, UnionPattern, calls_rspu, is_absolute_iri,
    resolve_iri,
)
from .temporal import format_duration, parse_duration, parse_instant
from .nesting import check_nesting
from .tokens import (
    BNODE, EOF, IRI, LANGTAG, NAME, NUMBER, PNAME, STRING, VAR, Token, TokenReader, Tokens,
)


# Words that only make sense in the RSP-QL* header; seen anywhere else they are misplaced.
_HEADER_ONLY = {"REGISTER", "COMPUTED", "RSTREAM", "ISTREAM", "DSTREAM", "FROM", "RANGE", "STEP",
                "TUMBLING", "START", "ELEMS"}
_PATH_START_PUNCT = ("^", "!", "(")
# The versions a VERSION declaration may name (SPARQL 1.2, VersionDecl).
SPARQL_VERSIONS = ("1.1", "1.2", "1.2-basic")


_CLOSER_OF = {"(": ")", "{": "}", "[": "]", "<<": ">>", "<<(": ")>>"}


# A relative IRI with nothing to resolve it against.
_NO_BASE = ("relative IRI %s cannot be resolved: the query has no BASE and no IRI of its own (it was not read "
            "from a file or registered at a URL); declare BASE <http://example.org/> before the query, or give "
            "the option base")
_RELATIVE_BASE = ("relative IRI %s in BASE cannot be resolved: the query has no IRI of its own (it was not read "
                  "from a file or registered at a URL); write an absolute BASE such as BASE <http://example.org/>, "
                  "or give the option base")


class PrologueReader(TokenReader):
    """A token reader that knows the query's PREFIX and BASE declarations and reads IRIs
    through them (shared by the RSP-QL* parser and the dialect readers).

    `base` is the IRI the query was retrieved from (its file's `file:` IRI, the URL it was
    registered at, a configured base; None: none): relative IRIs resolve against it until a
    BASE declaration, itself resolved against it, takes its place (SPARQL 1.1, 4.1.1.1). A
    relative IRI with no base at all is an error at its line and column."""

    def __init__(self, text: str, base: str | None = None, tokens: list[Token] | None = None):
        super().__init__(text, tokens)
        self.prefixes: dict[str, str] = {}
        self.retrieval_base = base
        self.base: str | None = base

    def resolve(self, tok: Token, text: str | None = None) -> str:
        text = tok.text if text is None else text
        if tok.kind == IRI and self.base is None and not is_absolute_iri(text[1:-1]):
            raise self.error(_NO_BASE % text, tok)
        try:
            return resolve_iri(text, tok.kind, self.prefixes, self.base)
        except KeyError:
            prefix = text.partition(":")[0] + ":"
            raise self.error("undeclared prefix %r (declare it before the query: PREFIX %s <http://example.org/>)"
                             % (prefix, prefix), tok) from None
        except ValueError as e:
            raise self.error("%s cannot be resolved against the base <%s>: %s" % (text, self.base, e), tok) from None

    def declaration_iri(self, context: str) -> tuple[str, Token]:
        """An IRI in the RSP-QL* header. Prefixed names there may contain '/' (as in
        `ex:stream/oxygen`, the form the RSP-QL* papers write), so adjacent pieces are joined."""
        tok = self.peek()
        if tok.kind == IRI:
            self.advance()
            return self.resolve(tok), tok
        if tok.kind != PNAME:
            raise self.error("expected an IRI %s, found %s" % (context, self.describe(tok)))
        self.advance()
        text, end = tok.text, tok.end
        while True:
            nxt = self.peek()
            if nxt.offset != end or not (nxt.kind in (NAME, NUMBER, PNAME) or nxt.is_punct("/", "-", ".")):
                break
            if nxt.is_punct(".") and not (self.peek(1).offset == nxt.end and self.peek(1).kind in (NAME, NUMBER)):
                break
            text += nxt.text
            end = nxt.end
            self.advance()
        return self.resolve(tok, text), tok

    def prologue(self) -> None:
        while True:
            tok = self.peek()
            if tok.is_keyword("PREFIX"):
                self.advance()
                ns = self.peek()
                if ns.kind != PNAME or not ns.text.endswith(":") or ns.text.count(":") != 1:
                    raise self.error("expected a prefix name such as ex: after PREFIX, found %s" % self.describe(ns))
                self.advance()
                iri_tok = self.peek()
                if iri_tok.kind != IRI:
                    raise self.error("expected <IRI> after PREFIX %s" % ns.text)
                self.advance()
                self.prefixes[ns.text[:-1]] = self.resolve(iri_tok)
            elif tok.is_keyword("BASE"):
                self.advance()
                iri_tok = self.peek()
                if iri_tok.kind != IRI:
                    raise self.error("expected <IRI> after BASE")
                self.advance()
                if self.base is None and not is_absolute_iri(iri_tok.text[1:-1]):
                    raise self.error(_RELATIVE_BASE % iri_tok.text, iri_tok)
                self.base = self.resolve(iri_tok)
            elif tok.is_keyword("VERSION"):
                self.version()
            else:
                return

    def version(self) -> None:
        """SPARQL 1.2's `VERSION "1.2"`: the language version the query is written in, a short
        string. Oxigraph reads the versions this engine knows, and the declaration stays in
        the text it is given."""
        self.advance()
        tok = self.peek()
        if tok.kind != STRING or tok.text.startswith(('"""', "'''")):
            raise self.error("expected a version string such as \"1.2\" after VERSION, found %s" % self.describe(tok))
        if tok.text[1:-1] not in SPARQL_VERSIONS:
            raise self.error("VERSION %s: this engine reads SPARQL %s" % (
                tok.text, ", ".join('"%s"' % v for v in SPARQL_VERSIONS)), tok)
        self.advance()


# The window specifications the parser reads, for the message when none is found.
WINDOW_FORMS = ("[RANGE PT10S STEP PT5S] (a time window; TUMBLING for STEP = RANGE; START \"...\"^^xsd:dateTime; "
                "a bare integer is milliseconds: [RANGE 10000 STEP 2000]), [RANGE UNBOUNDED STEP PT5S] (a landmark, "
                "spec 6.10), [FROM NOW-PT10M TO NOW-PT2M STEP PT1M] (a window in the past, 6.2), [ELEMS 5 STEP 2] "
                "(a count window, 6.1), [ELEMS 1 PARTITION BY ex:sensor] (partitioned, 6.9), "
                "[FACTS { ... } SINCE { ... } TILL { ... }] (facts, 6.13)")


class _Parser(PrologueReader):
    def __init__(self, text: str, base: str | None = None, tokens: list[Token] | None = None):
        super().__init__(text, base, tokens)
        self.removed: list[Span] = []
        # Forms of other RSP-QL engines read as this engine's (spec 6.7, 6.15), at their offsets.
        self.notes: list[tuple[int, str]] = []

    # -- temporal values ------------------------------------------------------------------
    def _typed_literal(self, datatype: str, what: str) -> tuple[str, Token]:
        tok = self.advance()
        lexical = tok.text[1:-1] if not tok.text.startswith(('"""', "'''")) else tok.text[3:-3]
        if self.peek().is_punct("^^"):
            self.advance()
            dt_tok = self.peek()
            if dt_tok.kind not in (IRI, PNAME):
                raise self.error("expected a datatype IRI after ^^", dt_tok)
            self.advance()
            if self.resolve(dt_tok) != XSD + datatype:
                raise self.error("%s must be an xsd:%s, not <%s>" % (what, datatype, self.resolve(dt_tok)), dt_tok)
        return lexical, tok

    def duration(self, what: str, milliseconds: bool = False) -> tuple[int, Token]:
        """An xsd:duration (PT10S, or a quoted "..."^^xsd:duration); with `milliseconds` (a
        window's RANGE and STEP) also a bare integer of milliseconds (spec 6.15)."""
        tok = self.peek()
        if milliseconds and tok.kind == NUMBER and tok.text.isdigit():
            self.advance()
            after = self.peek()
            if after.kind == NAME and after.offset == tok.end:
                raise self.error("%s%s is not an xsd:duration; write %s (or a bare integer of milliseconds, "
                                 "[RANGE 10000 STEP 2000])" % (tok.text, after.text, _as_xsd(tok.text, after.text)),
                                 tok)
            value = int(tok.text) * 1000
            if value <= 0:
                raise self.error("%s must be positive, got %s" % (what, tok.text), tok)
            self.notes.append((tok.offset, "%s %s read as %s (a bare integer is milliseconds, as RSP-JS and rsp-rs "
                                           "read it)" % (what, tok.text, format_duration(value))))
            return value, tok
        if tok.kind == STRING:
            text, tok = self._typed_literal("duration", what)
        elif tok.kind == NAME:
            self.advance()
            text, end = tok.text, tok.end
            while self.peek().offset == end and self.peek().kind in (NAME, NUMBER):
                text += self.peek().text
                end = self.advance().end
        else:
            raise self.error("expected a duration (such as PT10S%s) for %s, found %s" % (
                ", or 10000 for milliseconds" if milliseconds else "", what, self.describe(tok)))
        try:
            value = parse_duration(text)
        except TemporalValueError as e:
            raise self.error("%s: %s" % (what, e), tok) from None
        if value <= 0:
            raise self.error("%s must be positive, got %s" % (what, text), tok)
        return value, tok

    def instant(self, what: str) -> int:
        tok = self.peek()
        if tok.kind != STRING:
            raise self.error('expected a quoted xsd:dateTime ("...Z"^^xsd:dateTime) for %s' % what, tok)
        text, tok = self._typed_literal("dateTime", what)
        try:
            return parse_instant(text)
        except TemporalValueError as e:
            raise self.error("%s: %s" % (what, e), tok) from None

    # -- query -------------------------------------------------------------------------------
    def parse(self) -> ContinuousQuery:
        """The whole query: REGISTER (before or after the prologue), the form and its head, the
        dataset and window declarations, WHERE, the solution modifiers."""
        self.refuse_tef_sparql()
        register = self.register() if self.peek().is_keyword("REGISTER") else None
        prologue_start = self.i
        self.prologue()
        prologue = Span(prologue_start, self.i)
        if self.peek().is_keyword("REGISTER"):
            if register is not None:
                raise self.error("a query has at most one REGISTER clause")
            register = self.register()
        self.check_resolvable(self.i)
        form, head_parts, template, r2s_after_form, projected = self.form_head()
        windows, from_graphs, from_named = self.dataset()
        template, where = self.where_clause(form, template)
        mod_start = self.i
        self.scan_balanced(lambda t: t.kind == EOF)
        modifiers = Expression(self.expression_parts(mod_start, self.i))
        r2s, name, output_stream, every = self.stream_operator(register, r2s_after_form, form)
        self.check_windows_declared(where, windows)

        uses: dict[str, int] = {}
        for tok in self.tokens:
            if tok.kind == VAR:
                uses[tok.text[1:]] = uses.get(tok.text[1:], 0) + 1
        body = ParsedBody(
            source=self.source, tokens=Tokens(self.tokens), prologue=prologue, form_head=Expression(head_parts),
            construct_template=template, where=where, modifiers=modifiers, prefixes=dict(self.prefixes),
            base=self.base, projected=None if projected is None else frozenset(projected), variable_uses=uses,
            removed=self.removed)
        return ContinuousQuery(
            text=self.source.text, form=form, r2s=r2s, windows=windows, body=body, name=name,
            output_stream=output_stream, computed_every=every, from_graphs=from_graphs,
            from_named_graphs=from_named, base=self.retrieval_base,
            variables=projected if form is QueryForm.SELECT else None,
            normalised=["%d:%d: %s" % (*self.source.position(offset), note) for offset, note in sorted(self.notes)])

    def check_resolvable(self, first: int) -> None:
        """Every IRI from token `first` on resolves (the parser resolves the IRIs it reads;
        the ones in expressions, VALUES, SERVICE and modifiers go to Oxigraph as written): the
        first that cannot is the error, wherever it stands."""
        for tok in self.tokens[first:]:
            if tok.kind == IRI:
                self.resolve(tok)

    def refuse_tef_sparql(self) -> None:
        """TEF-SPARQL's `CONSTRUCT FACT` and `WHERE (CURRENT ...)` (seed 004 Q9) are refused
        with the fact window that says the same (spec §6.13)."""
        upper = self.source.text.upper()        # (a word's upper case is in its text's)
        if "FACT" not in upper and "CURRENT" not in upper:
            return
        for k, tok in enumerate(self.tokens[:-1]):
            after = self.tokens[k + 1]
            if (tok.is_keyword("CONSTRUCT") and after.is_keyword("FACT")) or (tok.is_punct("(") and after.is_keyword("CURRENT")):
                raise self.error(tef_sparql_message(self.source.text, after.offset), after)

    def form_head(self):
        """SELECT / CONSTRUCT / ASK with its R2S keyword, projection or template: (form, the
        head's parts, the CONSTRUCT template, (R2S, its token) or None, the projected names in
        their order)."""
        form_tok = self.peek()
        head_parts: list = []
        template = None
        r2s_after_form: tuple[R2S, Token] | None = None
        projected: tuple[str, ...] | None = ()
        if form_tok.is_keyword("SELECT", "CONSTRUCT", "ASK"):
            form = QueryForm(form_tok.text.upper())
            self.advance()
            head_parts.append(Span(self.i - 1, self.i))
            if self.peek().is_keyword("RSTREAM", "ISTREAM", "DSTREAM"):
                if form is QueryForm.ASK:
                    raise self.error("an R2S operator does not apply to ASK")
                r2s_tok = self.advance()
                self.removed.append(Span(self.i - 1, self.i))
                r2s_after_form = (R2S(r2s_tok.text.upper()), r2s_tok)
            if form is QueryForm.SELECT:
                start = self.i
                projected = self.projection()
                head_parts.extend(self.expression_parts(start, self.i))
            elif form is QueryForm.CONSTRUCT and self.peek().is_punct("{"):
                template = self.construct_template()
        elif form_tok.is_keyword("DESCRIBE"):
            raise self.error("DESCRIBE is not supported in continuous queries; use CONSTRUCT")
        elif form_tok.is_keyword(*_HEADER_ONLY):
            raise self.error("misplaced %s: it belongs before the query form" % form_tok.text.upper())
        else:
            raise self.error("expected SELECT, CONSTRUCT or ASK, found %s" % self.describe(form_tok))
        return form, head_parts, template, r2s_after_form, projected

    def dataset(self) -> tuple[dict[str, Window], list[str], list[str]]:
        """FROM NAMED WINDOW declarations, FROM and FROM NAMED graphs."""
        windows: dict[str, Window] = {}
        from_graphs: list[str] = []
        from_named: list[str] = []
        while self.peek().is_keyword("FROM"):
            start = self.i
            self.advance()
            if self.peek().is_keyword("NAMED") and self.peek(1).is_keyword("WINDOW"):
                self.advance()
                self.advance()
                decl = self.window_declaration()
                if decl.iri in windows:
                    raise QuerySyntaxError("window <%s> is declared twice" % decl.iri, decl.line, decl.column)
                windows[decl.iri] = decl
            elif self.peek().is_keyword("NAMED"):
                self.advance()
                from_named.append(self.declaration_iri("after FROM NAMED")[0])
            elif self.peek().is_keyword("STREAM"):
                raise self.error("FROM STREAM is not RSP-QL*; declare FROM NAMED WINDOW <w> ON <stream> [RANGE ...]")
            else:
                from_graphs.append(self.declaration_iri("after FROM")[0])
            self.removed.append(Span(start, self.i))
        return windows, from_graphs, from_named

    def where_clause(self, form: QueryForm, template: Group | None) -> tuple[Group | None, Group]:
        """The WHERE group, and the CONSTRUCT template (the pattern itself in CONSTRUCT WHERE)."""
        if form is QueryForm.CONSTRUCT and template is None:
            self.expect_keyword("WHERE", "in the short form CONSTRUCT WHERE { ... }")
            where = self.group()
            return where, where
        if self.peek().is_keyword("WHERE"):
            self.advance()
        if not self.peek().is_punct("{"):
            tok = self.peek()
            if tok.is_keyword(*_HEADER_ONLY):
                raise self.error("misplaced %s: dataset and window declarations come right after the "
                                 "query form" % tok.text.upper())
            raise self.error("expected WHERE { ... }, found %s" % self.describe(tok))
        return template, self.group()

    def stream_operator(self, register, r2s_after_form, form: QueryForm):
        """(R2S, name, output stream, COMPUTED EVERY) from the REGISTER clause and an R2S keyword
        after the form, which must agree."""
        r2s, name, output_stream, every = R2S.RSTREAM, None, None, None
        if register is not None:
            kind, iri, every, reg_tok = register
            if kind == "QUERY":
                name = iri
            else:
                output_stream = name = iri
                if kind in ("ISTREAM", "DSTREAM"):
                    r2s = R2S(kind)
        if r2s_after_form is not None:
            op, tok = r2s_after_form
            if register is not None and register[0] in ("ISTREAM", "DSTREAM") and op is not r2s:
                raise self.error("REGISTER %s conflicts with %s after %s" % (r2s.value, op.value, form.value), tok)
            r2s = op
        return r2s, name, output_stream, every

    def register(self):
        start = self.i
        reg_tok = self.advance()
        kind_tok = self.peek()
        if not kind_tok.is_keyword("STREAM", "RSTREAM", "ISTREAM", "DSTREAM", "QUERY"):
            raise self.error("expected STREAM, RSTREAM, ISTREAM, DSTREAM or QUERY after REGISTER, found %s"
                             % self.describe(kind_tok))
        self.advance()
        kind = kind_tok.text.upper()
        if kind_tok.text not in (kind, kind.lower()):
            self.notes.append((kind_tok.offset, "REGISTER %s read as REGISTER %s (RSP-JS and rsp-rs spell it so)"
                               % (kind_tok.text, kind)))
        kind = "RSTREAM" if kind == "STREAM" else kind
        iri, _ = self.declaration_iri("after REGISTER %s" % kind_tok.text.upper())
        every = None
        if self.peek().is_keyword("COMPUTED"):
            self.advance()
            self.expect_keyword("EVERY", "after COMPUTED")
            every, _ = self.duration("COMPUTED EVERY")
        self.expect_keyword("AS", "to end the REGISTER clause")
        self.removed.append(Span(start, self.i))
        return kind, iri, every, reg_tok

    def projection(self) -> tuple[str, ...] | None:
        """The projected variables in their order (None: SELECT *)."""
        if self.peek().is_keyword("DISTINCT", "REDUCED"):
            self.advance()
        if self.peek().is_punct("*"):
            self.advance()
            return None
        names: dict[str, None] = {}
        while True:
            tok = self.peek()
            if tok.kind == VAR:
                names[self.advance().text[1:]] = None
            elif tok.is_punct("("):
                self.scan_balanced(lambda t: t.is_punct(")"), self.advance())
                close = self.expect_punct(")", "to close the projected expression")
                as_tok, var_tok = self.tokens[self.i - 3], self.tokens[self.i - 2]
                if not (as_tok.is_keyword("AS") and var_tok.kind == VAR):
                    raise self.error("a projected expression ends with AS ?variable", close)
                names[var_tok.text[1:]] = None
            else:
                break
        if not names:
            raise self.error("expected variables, (expression AS ?var) or * after SELECT, found %s"
                             % self.describe(self.peek()))
        return tuple(names)

    def construct_template(self) -> Group:
        open_idx = self.i
        self.advance()
        self.scan_balanced(lambda t: t.is_punct("}"))
        self.expect_punct("}", "to close the CONSTRUCT template")
        return Group(open_idx, self.i - 1, [Span(open_idx + 1, self.i - 1)])

    def window_declaration(self) -> Window:
        name_tok = self.peek()
        iri, _ = self.declaration_iri("naming the window after FROM NAMED WINDOW")
        self.expect_keyword("ON", "after the window name")
        if self.peek().is_keyword("STREAM"):
            self.advance()
        if self.peek().kind == VAR:
            raise self.error("a variable as a window's stream (ON %s, as Kolibrie writes it) has no equivalent in this "
                             "engine: a window reads one stream, named by its IRI (ON <http://example.org/stream>)"
                             % self.peek().text)
        stream, _ = self.declaration_iri("naming the stream after ON")
        self.expect_punct("[", "to open the window specification")
        line, column = self.source.position(name_tok.offset)
        return self.window_clause()(iri, stream, line, column)

    def window_clause(self) -> Callable[[str, str, int, int], Window]:
        """The clause reading this window's specification, up to its ']': one per kind of window
        (windows.py), chosen by its first words."""
        if self.peek().is_keyword("ELEMS"):
            return self.partitioned_window if self.peek(2).is_keyword("PARTITION") else self.count_window
        if self.peek().is_keyword("FACTS"):
            return self.fact_window
        if self.peek().is_keyword("RANGE") and self.peek(1).is_keyword("UNBOUNDED"):
            return self.landmark_window
        return self.time_window

    def count_window(self, iri: str, stream: str, line: int, column: int) -> CountWindow:
        """`ELEMS n (STEP m)? ]` (spec §6.1)."""
        self.advance()
        size = self.count("ELEMS")
        step = 1
        if self.peek().is_keyword("STEP"):
            self.advance()
            step = self.count("STEP")
        if self.peek().is_keyword("PARTITION"):
            raise self.error("a partitioned window has no STEP: it closes at every element with a key "
                             "([ELEMS n PARTITION BY p], spec 6.9)")
        self.expect_punct("]", "to close the window specification (ELEMS n STEP m)")
        return CountWindow(iri, stream, size, step, line, column)

    def time_window(self, iri: str, stream: str, line: int, column: int) -> TimeWindow:
        """`RANGE a (STEP b | TUMBLING)? (START t0)? ]` (spec §2) or `FROM NOW-a TO NOW(-b)? STEP c
        (START t0)? ]` (spec §6.2)."""
        lag = 0
        if self.peek().is_keyword("FROM"):
            self.advance()
            self.expect_keyword("NOW", "after FROM in a window in the past")
            self.expect_punct("-", "after FROM NOW")
            width, _ = self.duration("FROM NOW-", milliseconds=True)
            self.expect_keyword("TO", "after FROM NOW-a")
            self.expect_keyword("NOW", "after TO")
            if self.peek().is_punct("-"):
                self.advance()
                lag, lag_tok = self.duration("TO NOW-", milliseconds=True)
                if lag >= width:
                    raise self.error("a window in the past ends before it begins: FROM NOW-a TO NOW-b needs "
                                     "a > b", lag_tok)
            self.expect_keyword("STEP", "after FROM NOW-a TO NOW-b")
            step, _ = self.duration("STEP", milliseconds=True)
        else:
            if not self.peek().is_keyword("RANGE"):
                raise self.error("expected a window specification, found %s; the forms: %s"
                                 % (self.describe(self.peek()), WINDOW_FORMS))
            self.advance()
            width, _ = self.duration("RANGE", milliseconds=True)
            step = width
            if self.peek().is_keyword("STEP"):
                self.advance()
                step, _ = self.duration("STEP", milliseconds=True)
            elif self.peek().is_keyword("TUMBLING"):
                self.advance()
        start = 0
        if self.peek().is_keyword("START"):
            self.advance()
            start = self.instant("START")
        if not self.peek().is_punct("]"):
            raise self.error("expected STEP, TUMBLING, START or ']' in the window specification, found %s"
                             % self.describe(self.peek()))
        self.advance()
        return TimeWindow(iri, stream, width, step, start, lag, line=line, column=column)

    def partitioned_window(self, iri: str, stream: str, line: int, column: int) -> PartitionedWindow:
        """`ELEMS n PARTITION BY p1, p2 ]` (spec §6.9)."""
        self.advance()
        size = self.count("ELEMS")
        self.advance()
        self.expect_keyword("BY", "after PARTITION")
        keys: list[str] = []
        while True:
            tok = self.peek()
            key, _ = self.declaration_iri("naming a key predicate after PARTITION BY")
            if key in keys:
                raise self.error("<%s> is named twice after PARTITION BY" % key, tok)
            keys.append(key)
            if not self.peek().is_punct(","):
                break
            self.advance()
        if self.peek().is_keyword("STEP"):
            raise self.error("a partitioned window has no STEP: it closes at every element with a key (spec 6.9)")
        self.expect_punct("]", "to close the window specification (ELEMS n PARTITION BY p1, p2)")
        return PartitionedWindow(iri, stream, size, tuple(keys), line, column)

    def landmark_window(self, iri: str, stream: str, line: int, column: int) -> LandmarkWindow:
        """`RANGE UNBOUNDED STEP β START τ0 ]` (spec §6.10)."""
        self.advance()
        unbounded = self.advance()
        if not self.peek().is_keyword("STEP"):
            raise self.error("a landmark window [RANGE UNBOUNDED ...] needs STEP and a duration (it closes every "
                             "STEP; one that closes at every element is the report policy content-change), found %s"
                             % self.describe(self.peek()), self.peek() if self.peek().is_keyword("TUMBLING") else unbounded)
        self.advance()
        step, _ = self.duration("STEP", milliseconds=True)
        start = 0
        if self.peek().is_keyword("START"):
            self.advance()
            start = self.instant("START")
        if not self.peek().is_punct("]"):
            raise self.error("expected START or ']' in a landmark window, found %s" % self.describe(self.peek()))
        self.advance()
        return LandmarkWindow(iri, stream, step, start, line, column)

    def fact_window(self, iri: str, stream: str, line: int, column: int) -> FactWindow:
        """`FACTS { template } SINCE { P } TILL { Q } (STEP β (START τ0)?)? ]` (spec §6.13)."""
        self.advance()
        template = self.fact_template()
        self.expect_keyword("SINCE", "after the FACTS template")
        since = self.fact_pattern("SINCE")
        self.expect_keyword("TILL", "after the SINCE pattern")
        till = self.fact_pattern("TILL")
        step, start = None, 0
        if self.peek().is_keyword("STEP"):
            self.advance()
            step, _ = self.duration("STEP", milliseconds=True)
            if self.peek().is_keyword("START"):
                self.advance()
                start = self.instant("START")
        elif self.peek().is_keyword("START"):
            raise self.error("START needs STEP in a fact window (without STEP it closes where facts open or close)")
        if not self.peek().is_punct("]"):
            raise self.error("expected STEP or ']' after the TILL pattern, found %s" % self.describe(self.peek()))
        self.advance()
        prologue = ""
        if self.prefixes or self.base:
            prologue = "".join("PREFIX %s: <%s>\n" % item for item in self.prefixes.items())
            if self.base:
                prologue = "BASE <%s>\n" % self.base + prologue
        return FactWindow(iri, stream, template, since, till, prologue, step, start, line, column)

    def fact_template(self) -> tuple[FactTemplate, ...]:
        """The FACTS template: triples of variables, IRIs and literals (a fact is a triple the
        window asserts; blank nodes, paths and annotations have no place in it)."""
        opened = self.expect_punct("{", "to open the FACTS template")
        triples: list[FactTemplate] = []
        while not self.peek().is_punct("}"):
            if self.peek().kind == EOF:
                raise self.error("'{' is never closed", opened)
            if self.peek().is_punct("."):
                self.advance()
                continue
            subject = self.fact_term("subject")
            while True:
                tok = self.peek()
                if tok.is_keyword("A"):
                    self.advance()
                    predicate = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
                elif tok.kind in (VAR, IRI, PNAME):
                    predicate = self.fact_term("predicate")
                else:
                    raise self.error("expected a predicate (IRI, variable or 'a') in the FACTS template, found %s"
                                     % self.describe(tok))
                while True:
                    triples.append(FactTemplate(subject, predicate, self.fact_term("object")))
                    if self.peek().is_punct("{|", "~"):
                        raise self.error("a FACTS template triple takes no annotation: the window annotates each "
                                         "fact with rspstar:since itself")
                    if not self.peek().is_punct(","):
                        break
                    self.advance()
                if not self.peek().is_punct(";"):
                    break
                while self.peek().is_punct(";"):
                    self.advance()
                if self.peek().is_punct(".", "}"):
                    break
        self.advance()
        if not triples:
            raise self.error("the FACTS template holds no triple", opened)
        return tuple(triples)

    def fact_term(self, position: str) -> str:
        tok = self.peek()
        if tok.kind == VAR:
            self.advance()
            return "?" + tok.text[1:]
        if tok.kind in (IRI, PNAME):
            self.advance()
            return "<%s>" % self.resolve(tok)
        if position == "object" and (tok.kind in (STRING, NUMBER) or tok.is_keyword("TRUE", "FALSE")):
            self.graph_node(allow_collections=False)
            text = self.source.text[tok.offset:self.tokens[self.i - 1].end]
            if self.tokens[self.i - 1].kind == PNAME:     # a datatype written as a prefixed name
                text = text[:text.rfind("^^")] + "^^<%s>" % self.resolve(self.tokens[self.i - 1])
            return text
        raise self.error("a FACTS template %s is a variable or an IRI%s, not %s" % (
            position, " or a literal" if position == "object" else "", self.describe(tok)))

    def fact_pattern(self, keyword: str) -> str:
        """A SINCE or TILL group pattern, as written (matched against one element's graph)."""
        if not self.peek().is_punct("{"):
            raise self.error("expected '{' with the %s pattern, found %s" % (keyword, self.describe(self.peek())))
        first = self.i
        group = self.group()
        for tok in self.tokens[first:self.i]:
            if tok.is_keyword("WINDOW", "GRAPH", "SERVICE"):
                raise self.error("%s inside %s: the pattern is matched against one element's graph"
                                 % (tok.text.upper(), keyword), tok)
        return self.source.text[self.tokens[group.open].offset:self.tokens[group.close].end]

    # -- graph patterns ------------------------------------------------------------------
    def group(self) -> Group:
        open_tok = self.expect_punct("{", "to open a group")
        group = Group(self.i - 1, -1)
        if self.peek().is_keyword("SELECT"):
            group.items.append(self.sub_select())
        while True:
            tok = self.peek()
            if tok.is_punct("}"):
                group.close = self.i
                self.advance()
                return group
            if tok.kind == EOF:
                raise self.error("'{' is never closed", open_tok)
            if tok.is_punct("."):
                self.advance()
                continue
            group.items.append(self.group_item(tok))

    def group_item(self, tok: Token):
        if tok.is_keyword("GRAPH", "WINDOW"):
            kw = self.i
            self.advance()
            name = self.peek()
            if name.kind not in (VAR, IRI, PNAME):
                raise self.error("expected a variable or an IRI after %s, found %s"
                                 % (tok.text.upper(), self.describe(name)))
            if name.kind != VAR:
                self.resolve(name)
            self.advance()
            return GraphPattern(kw, kw + 1, self.group(), tok.is_keyword("WINDOW"))
        if tok.is_keyword("OPTIONAL", "MINUS"):
            self.advance()
            return Keyworded(Span(self.i - 1, self.i), self.group())
        if tok.is_keyword("SERVICE"):
            start = self.i
            self.advance()
            if self.peek().is_keyword("SILENT"):
                self.advance()
            if self.peek().kind not in (VAR, IRI, PNAME):
                raise self.error("expected a variable or an IRI after SERVICE")
            self.advance()
            return Keyworded(Span(start, self.i), self.group())
        if tok.is_punct("{"):
            first = self.group()
            if not self.peek().is_keyword("UNION"):
                return first
            groups = [first]
            while self.peek().is_keyword("UNION"):
                self.advance()
                groups.append(self.group())
            return UnionPattern(groups)
        if tok.is_keyword("FILTER"):
            return self.filter()
        if tok.is_keyword("BIND"):
            return self.bind()
        if tok.is_keyword("VALUES"):
            start = self.i
            self.advance()
            self.scan_balanced(lambda t: t.is_punct("{"))
            if not self.peek().is_punct("{"):
                raise self.error("expected '{' with the VALUES data")
            self.advance()
            self.scan_balanced(lambda t: t.is_punct("}"))
            self.expect_punct("}", "to close the VALUES data")
            return InlineData(Span(start, self.i))
        if tok.is_keyword("SELECT"):
            raise self.error("a sub-query must be the only content of its group: { SELECT ... }")
        if tok.is_keyword(*_HEADER_ONLY, "PREFIX", "BASE", "WHERE", "CONSTRUCT", "ASK", "DESCRIBE"):
            raise self.error("misplaced %s inside a graph pattern" % tok.text.upper())
        if self.starts_graph_node(tok):
            return self.triples_block()
        raise self.error("unexpected %s in a graph pattern" % self.describe(tok))

    def sub_select(self) -> SubSelect:
        start = self.i
        self.advance()
        self.scan_balanced(lambda t: t.is_keyword("WHERE") or t.is_punct("{"))
        if self.peek().is_keyword("WHERE"):
            self.advance()
        head = Expression(self.expression_parts(start, self.i))
        where = self.group()
        tail_start = self.i
        self.scan_balanced(lambda t: t.is_punct("}"))
        return SubSelect(head, where, Expression(self.expression_parts(tail_start, self.i)))

    def filter(self) -> Filter:
        start = self.i
        self.advance()
        tok = self.peek()
        if tok.is_punct("("):
            self.scan_balanced(lambda t: t.is_punct(")"), self.advance())
            self.expect_punct(")", "to close the FILTER expression")
        elif tok.is_keyword("NOT", "EXISTS"):
            if tok.is_keyword("NOT"):
                self.advance()
                self.expect_keyword("EXISTS", "after FILTER NOT")
            else:
                self.advance()
            if not self.peek().is_punct("{"):
                raise self.error("expected '{' after EXISTS")
            self.group()
        elif tok.kind in (NAME, IRI, PNAME) and self.peek(1).is_punct("("):
            self.advance()
            self.scan_balanced(lambda t: t.is_punct(")"), self.advance())
            self.expect_punct(")", "to close the FILTER call")
        else:
            raise self.error("expected '(' or a function call after FILTER, found %s" % self.describe(tok))
        parts = self.expression_parts(start, self.i)
        return Filter(Expression(parts), self.calls_rspu(start, self.i), self.variables_in(start, self.i))

    def bind(self) -> Bind:
        start = self.i
        self.advance()
        opened = self.expect_punct("(", "after BIND")
        self.scan_balanced(lambda t: t.is_punct(")"), opened)
        close = self.expect_punct(")", "to close BIND")
        as_tok, var_tok = self.tokens[self.i - 3], self.tokens[self.i - 2]
        if not (as_tok.is_keyword("AS") and var_tok.kind == VAR):
            raise self.error("BIND ends with AS ?variable", close)
        return Bind(Expression(self.expression_parts(start, self.i)), var_tok.text[1:],
                    self.calls_rspu(start, self.i))

    def calls_rspu(self, start: int, end: int) -> bool:
        return calls_rspu(self.tokens, start, end, lambda k: self.resolve(self.tokens[k]))

    def variables_in(self, start: int, end: int) -> frozenset[str]:
        return frozenset(t.text[1:] for t in self.tokens[start:end] if t.kind == VAR)

    def scan_balanced(self, stop, opened: Token | None = None) -> None:
        """Advance over verbatim tokens until `stop(token)` holds at nesting depth 0, parsing the
        groups of EXISTS on the way (they may hold GRAPH or WINDOW patterns). `opened` is the
        bracket the caller already consumed, which `stop` closes: left open, it is the error."""
        openers: list[Token] = [] if opened is None else [opened]
        while True:
            tok = self.peek()
            if tok.kind == EOF:
                if openers and (len(openers) > 1 or not stop(tok)):
                    raise self.error("%r is never closed" % openers[-1].text, openers[-1])
                if stop(tok):
                    return
                raise self.error("unexpected end of query")
            if len(openers) == (opened is not None) and stop(tok):
                return
            if tok.is_keyword("EXISTS") and self.peek(1).is_punct("{"):
                self.advance()
                self.group()
                continue
            if tok.is_keyword(*_HEADER_ONLY) or tok.is_keyword("WINDOW", "GRAPH"):
                raise self.error("misplaced %s" % tok.text.upper())
            if tok.is_punct(*_CLOSER_OF):
                openers.append(tok)
            elif tok.is_punct(*_CLOSER_OF.values()):
                if not openers:
                    raise self.error("unbalanced %r" % tok.text)
                if tok.text != _CLOSER_OF[openers[-1].text]:
                    # Name the bracket left open, not the closer that gave it away.
                    raise self.error("%r is never closed (found %r)" % (openers[-1].text, tok.text), openers[-1])
                openers.pop()
            self.advance()

    def expression_parts(self, start: int, end: int) -> list:
        """Split tokens [start, end) into verbatim spans and the EXISTS groups inside them."""
        parts: list = []
        k = start
        span_start = start
        while k < end:
            tok = self.tokens[k]
            if tok.is_keyword("EXISTS") and self.tokens[k + 1].is_punct("{"):
                saved = self.i
                self.i = k + 1
                parts.append(Span(span_start, k + 1))
                group = self.group()
                parts.append(group)
                k = self.i
                span_start = k
                self.i = saved
                continue
            k += 1
        if span_start < end:
            parts.append(Span(span_start, end))
        return parts

    def check_windows_declared(self, group: Group, windows: dict[str, Window]) -> None:
        def visit(node) -> None:
            if isinstance(node, GraphPattern):
                if node.is_window:
                    tok = self.tokens[node.name]
                    if tok.kind == VAR:
                        if not windows:
                            raise self.error("WINDOW %s but the query declares no window" % tok.text, tok)
                    elif self.resolve(tok) not in windows:
                        raise self.error("window <%s> is not declared (declare it with FROM NAMED WINDOW "
                                         "... ON ... [RANGE ...])" % self.resolve(tok), tok)
                visit(node.group)
            elif isinstance(node, Group):
                for item in node.items:
                    visit(item)
            elif isinstance(node, Keyworded):
                visit(node.group)
            elif isinstance(node, UnionPattern):
                for g in node.groups:
                    visit(g)
            elif isinstance(node, SubSelect):
                visit(node.head)
                visit(node.where)
                visit(node.tail)
            elif isinstance(node, (Bind, Filter)):
                visit(node.expression)
            elif isinstance(node, Expression):
                for part in node.parts:
                    if isinstance(part, Group):
                        visit(part)
        visit(group)

    # -- triples ----------------------------------------------------------------------------
    def starts_graph_node(self, tok: Token) -> bool:
        return (tok.kind in (VAR, IRI, PNAME, BNODE, STRING, NUMBER)
                or tok.is_keyword("TRUE", "FALSE")
                or tok.is_punct("[", "(", "<<", "<<("))

    def triples_block(self) -> TriplesBlock:
        start = self.i
        triples = []
        while True:
            subject = self.graph_node(allow_collections=True)
            if isinstance(subject, (BlankNodePropertyList, Collection)) and not self.starts_verb(self.peek()):
                properties = []
            else:
                properties = self.property_list()
            triples.append(TriplesSameSubject(subject, properties))
            if not self.peek().is_punct("."):
                break
            self.advance()
            if not self.starts_graph_node(self.peek()):
                break
        return TriplesBlock(Span(start, self.i), triples)

    def starts_verb(self, tok: Token) -> bool:
        return tok.kind in (VAR, IRI, PNAME) or tok.is_keyword("A") or tok.is_punct(*_PATH_START_PUNCT)

    def property_list(self) -> list[PropertyValues]:
        properties = []
        while True:
            tok = self.peek()
            if not self.starts_verb(tok):
                raise self.error("expected a predicate (IRI, variable, 'a' or path), found %s" % self.describe(tok))
            verb_start = self.i
            if tok.kind == VAR:
                self.advance()
                simple = True
            else:
                self.path()
                simple = self.i - verb_start == 1
            verb = Span(verb_start, self.i)
            objects = [self.object_with_annotations()]
            while self.peek().is_punct(","):
                self.advance()
                objects.append(self.object_with_annotations())
            properties.append(PropertyValues(verb, simple, objects))
            if not self.peek().is_punct(";"):
                return properties
            while self.peek().is_punct(";"):
                self.advance()
            if not self.starts_verb(self.peek()):
                return properties

    def path(self) -> None:
        self.path_sequence()
        while self.peek().is_punct("|"):
            self.advance()
            self.path_sequence()

    def path_sequence(self) -> None:
        self.path_element()
        while self.peek().is_punct("/"):
            self.advance()
            self.path_element()

    def path_element(self) -> None:
        if self.peek().is_punct("^"):
            self.advance()
        tok = self.peek()
        if tok.kind in (IRI, PNAME):
            self.resolve(tok)
            self.advance()
        elif tok.is_keyword("A"):
            self.advance()
        elif tok.is_punct("!"):
            self.advance()
            if self.peek().is_punct("("):
                self.advance()
                while not self.peek().is_punct(")"):
                    if self.peek().is_punct("^", "|"):
                        self.advance()
                        continue
                    if not (self.peek().kind in (IRI, PNAME) or self.peek().is_keyword("A")):
                        raise self.error("expected an IRI in the negated property set")
                    self.advance()
                self.advance()
            else:
                if self.peek().is_punct("^"):
                    self.advance()
                if not (self.peek().kind in (IRI, PNAME) or self.peek().is_keyword("A")):
                    raise self.error("expected an IRI after '!'")
                self.advance()
        elif tok.is_punct("("):
            self.advance()
            self.path()
            self.expect_punct(")", "to close the path group")
        else:
            raise self.error("expected a property path, found %s" % self.describe(tok))
        if self.peek().is_punct("*", "+", "?"):
            self.advance()

    def object_with_annotations(self) -> ObjectWithAnnotations:
        node = self.graph_node(allow_collections=True)
        annotations = []
        while True:
            if self.peek().is_punct("~"):
                self.advance()
                reifier = None
                if self.peek().kind in (VAR, IRI, PNAME, BNODE):
                    reifier = Term(Span(self.i, self.i + 1))
                    self.advance()
                properties = []
                if self.peek().is_punct("{|"):
                    properties = self.annotation_block()
                annotations.append(Annotation(reifier, properties))
            elif self.peek().is_punct("{|"):
                annotations.append(Annotation(None, self.annotation_block()))
            else:
                return ObjectWithAnnotations(node, annotations)

    def annotation_block(self) -> list[PropertyValues]:
        self.advance()
        properties = self.property_list()
        self.expect_punct("|}", "to close the annotation")
        return properties

    def graph_node(self, allow_collections: bool):
        tok = self.peek()
        start = self.i
        if tok.is_punct("["):
            self.advance()
            if self.peek().is_punct("]"):
                self.advance()
                return Term(Span(start, self.i))
            properties = self.property_list()
            self.expect_punct("]", "to close the blank node property list")
            return BlankNodePropertyList(properties)
        if tok.is_punct("(") and allow_collections:
            self.advance()
            items = []
            while not self.peek().is_punct(")"):
                if self.peek().kind == EOF:
                    raise self.error("'(' is never closed", tok)
                items.append(self.graph_node(allow_collections=True))
            self.advance()
            return Collection(items) if items else Term(Span(start, self.i))
        if tok.is_punct("<<("):
            self.advance()
            self.graph_node(allow_collections=False)
            if self.peek().kind == VAR:
                self.advance()
            else:
                self.path_element()
            self.graph_node(allow_collections=False)
            self.expect_punct(")>>", "to close the triple term")
            return TripleTerm(Span(start, self.i))
        if tok.is_punct("<<"):
            self.advance()
            subject = self.graph_node(allow_collections=False)
            verb_start = self.i
            if self.peek().kind == VAR or self.peek().is_keyword("A"):
                self.advance()
            elif self.peek().kind in (IRI, PNAME):
                self.resolve(self.peek())
                self.advance()
            else:
                raise self.error("expected a predicate inside << >>, found %s" % self.describe(self.peek()))
            verb = Span(verb_start, self.i)
            obj = self.graph_node(allow_collections=False)
            reifier = None
            if self.peek().is_punct("~"):
                self.advance()
                if self.peek().kind in (VAR, IRI, PNAME, BNODE):
                    reifier = Term(Span(self.i, self.i + 1))
                    self.advance()
            self.expect_punct(">>", "to close the reified triple")
            return ReifiedTriple(subject, verb, obj, reifier)
        if tok.kind in (VAR, IRI, PNAME, BNODE, NUMBER) or tok.is_keyword("TRUE", "FALSE"):
            if tok.kind in (IRI, PNAME):
                self.resolve(tok)
            self.advance()
            return Term(Span(start, self.i))
        if tok.kind == STRING:
            self.advance()
            if self.peek().kind == LANGTAG:
                self.advance()
            elif self.peek().is_punct("^^"):
                self.advance()
                if self.peek().kind not in (IRI, PNAME):
                    raise self.error("expected a datatype IRI after ^^")
                self.resolve(self.peek())
                self.advance()
            return Term(Span(start, self.i))
        raise self.error("expected an RDF term, found %s" % self.describe(tok))


_XSD_UNITS = {"ms": (0.001, "S"), "s": (1, "S"), "m": (60, "S"), "h": (3600, "S"), "d": (86400, "S")}


def _as_xsd(number: str, unit: str) -> str:
    """C-SPARQL's `10s`, `5m`, `200ms` as an xsd:duration (PT10S, PT300S, PT0.2S); `PT<n>...`
    for a unit C-SPARQL has not."""
    factor = _XSD_UNITS.get(unit.lower(), (None, None))[0]
    if factor is None or unit == "M":
        return "PT%s..." % number
    return format_duration(round(int(number) * factor * 1_000_000))


def tef_sparql_message(text: str, at: int) -> str:
    """Why a TEF-SPARQL FACT query (seed 004 Q9) is refused, and the RSP-QL* window that says
    the same (spec §6.13), built from the query's own template, SINCE and TILL where they can be
    read."""
    import re
    template = re.search(r"FACT\s+\w*\s*\{([^{}]*)\}", text[max(0, at - 1):], re.I)
    since = re.search(r"\(\s*SINCE\s+([^()]*)\)", text, re.I)
    till = re.search(r"\(\s*TILL\s+([^()]*)\)", text, re.I)
    shown = "{ %s }" % " ".join(template.group(1).split()) if template else "{ ?user :isIn ?room }"
    since_text = "{ %s }" % " ".join(since.group(1).split()) if since else "{ ?user :enter ?room }"
    till_text = "{ %s }" % " ".join(till.group(1).split()) if till else "{ ?user :leave ?room }"
    return ("TEF-SPARQL's CONSTRUCT FACT / CURRENT is not RSP-QL*; declare the facts as a window and query its "
            "default graph: FROM NAMED WINDOW ex:presence ON ex:fb [FACTS %s SINCE %s TILL %s STEP PT3S] ... WHERE "
            "{ WINDOW ex:presence { %s } } (spec 6.13)" % (shown, since_text, till_text, shown[2:-2]))


def parse_query(text: str, base: str | None = None, tokens: list[Token] | None = None,
                nesting_checked: bool = False) -> ContinuousQuery:

    """Parse RSP-QL* text into a query model; raises QuerySyntaxError with line and column.
    `base`: the IRI the text was retrieved from, which relative IRIs resolve against (see
    `PrologueReader`); `tokens`: the text's, when the caller has them; `nesting_checked`: the
    caller has had check_nesting read the text already.

    The result is only structurally checked; `validate.validated_query` also has Oxigraph
    check the SPARQL that the rewrite produces."""
    if not nesting_checked:
        check_nesting(text, language="sparql")
    return _Parser(text, base, tokens).parse()
