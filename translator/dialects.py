"""Queries written for C-SPARQL, CQELS-QL, Streaming SPARQL (spec §6.5) and SPARQLstream (spec
§6.8), translated into RSP-QL* text plus what that text cannot say (window bounds, report
policy, the merged default graph), then compiled as any RSP-QL* query. Errors found in the
translation are reported at the line and column of the user's text.

A dialect is one class (a subclass of `Dialect` naming its `dialect`): defining it registers it,
and DIALECTS lists the registered names (RSP-QL* itself is one, `RspQl`, with nothing to
translate). Adding one: subclass `Dialect`, declare what its semantics change (`report`,
`upper_closed`, `option_defaults`), say how `detect` recognizes its texts (`recognizes`, a token
at a time, and its `precedence` among the others'), write `translate()` with the shared pieces
(`dataset_clauses`, `stream_window`, `merge_or_wrap`, `finish`), and add conformance cases; the
table below gains its row. The window forms the RSP query features page writes and no
engine's grammar has (spec §6.7: SLIDE or SLIDING for STEP, TUMBLING, units as words) are read
as their dialect's own and named in `Translation.normalised`.

| | window clause | window content | bounds | report | R2S |
| --- | --- | --- | --- | --- | --- |
| C-SPARQL | `FROM STREAM <s> [RANGE 10s STEP 1s]` | merge of all windows and background | (x − a, x] | close, non-empty | RStream |
| CQELS-QL | `STREAM <s> [RANGE 5s] { P }` in WHERE | merge of the block's window (outside: the background default graph, FROM NAMED or not) | (t − a, t] | content change | IStream |
| Streaming SPARQL | `FROM STREAM <s> WINDOW RANGE 30 MINUTE SLIDE` | merge of all windows | [x − a, x) | close | RStream |
| SPARQLstream | `FROM NAMED STREAM <s> [1 MINUTES SLIDE 1 MINUTES]` | merge of all windows and background | (x − a, x] | close, non-empty | as written |
| EP-SPARQL | `STREAM <s> { P }` and a top-level `FILTER(getDURATION() < d)` (ep_sparql.py) | every triple an event with its element's time | (t − d, t], [t − d, t] for <= d | content change, matches ending at t | RStream |

A query with one window and neither background graphs nor GRAPH patterns becomes
`WHERE { WINDOW <s> { P } }` with the window's default graph the merge of its elements
(`window_default_graph = union`); otherwise the WHERE clause's default graph is the merge of
every window and the background default graph (`ContinuousQuery.merged_windows`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .errors import PositionedError, QuerySyntaxError, TemporalValueError
from .model import ContinuousQuery
from .temporal import format_duration, format_instant, parse_instant
from .parser import PrologueReader
from .ep_sparql import MATCH_FUNCTIONS, OPERATORS, is_match_function, is_operator_between_groups, translate_events
from .tokens import EOF, IRI, NAME, NUMBER, PNAME, VAR, SourceText, Token, tokenize
from .vocabulary import PROV_GENERATED_AT_TIME

_UNITS = {"ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}
# Units written as a word after a space (spec §6.7: `3 sec`, `5 min`, `2 hours`), as the unit
# of _UNITS they mean.
_UNIT_WORDS = {"ms": "ms", "sec": "s", "second": "s", "seconds": "s", "min": "m",
               "minute": "m", "minutes": "m", "h": "h", "hour": "h", "hours": "h", "d": "d", "day": "d",
               "days": "d"}
_STREAMING_UNITS = {"MS": 1_000, "S": 1_000_000, "MINUTE": 60_000_000, "HOUR": 3_600_000_000,
                    "DAY": 86_400_000_000, "WEEK": 604_800_000_000}
_SPARQLSTREAM_UNITS = {"MS": 1_000, "S": 1_000_000, "SECOND": 1_000_000, "SECONDS": 1_000_000,
                       "MINUTE": 60_000_000, "MINUTES": 60_000_000, "HOUR": 3_600_000_000,
                       "HOURS": 3_600_000_000, "DAY": 86_400_000_000, "DAYS": 86_400_000_000}
_R2S = ("ISTREAM", "RSTREAM", "DSTREAM")
_CSPARQL_FUNCTIONS = "http://larkc.eu/csparql/sparql/jena/ext#"
_XSD_DATETIME = "http://www.w3.org/2001/XMLSchema#dateTime"
# What the translation calls the variable holding a C-SPARQL timestamp() (never in results).
_TIMESTAMP_VARIABLE = "?__rsp_timestamp%d"


@dataclass
class Translation:
    """A dialect query as RSP-QL* text, with what the text cannot say."""

    dialect: str
    source: SourceText
    text: str
    placed: list[tuple[int, int, int]]        # (offset in text, offset in source, length copied)
    report: str | None = None
    upper_closed: bool = False
    merged: bool = False
    name: str | None = None
    option_defaults: dict[str, str] = field(default_factory=dict)
    normalised: list[str] = field(default_factory=list)     # community forms read as the dialect's (§6.7)
    tumbling: tuple[str, ...] = ()      # CQELS windows written TUMBLING: their periods under content change
    lower_closed: bool = False      # time windows hold [t − a, t] under content change (EP-SPARQL's <= d)
    named_keep_default: bool = False    # FROM NAMED leaves the default graph the background's (CQELS-QL)

    def locate(self, error: QuerySyntaxError) -> QuerySyntaxError:
        """The error at the user's line and column."""
        offset = SourceText(self.text).offset(error.line, error.column)
        out, src, copied = 0, 0, 0
        for entry in self.placed:
            if entry[0] > offset:
                break
            out, src, copied = entry
        line, column = self.source.position(src + min(max(offset - out, 0), max(copied - 1, 0)))
        return QuerySyntaxError("%s (in the query's RSP-QL* translation)" % error.message
                                if not copied else error.message, line, column)

    def apply(self, query: ContinuousQuery, text: str) -> ContinuousQuery:
        windows = {iri: w.bounded(self.upper_closed, iri in self.tumbling, self.lower_closed)
                   for iri, w in query.windows.items()}
        return replace(query, text=text, windows=windows, report=self.report, dialect=self.dialect,
                       option_defaults=dict(self.option_defaults), translation=self.text,
                       merged_windows=tuple(windows) if self.merged else None,
                       name=self.name if self.name is not None else query.name,
                       normalised=list(self.normalised), named_keep_default=self.named_keep_default)


@dataclass(frozen=True)
class Scan:
    """Where `detect` stands in a text: token `k` of `tokens`, inside `depth` braces."""

    tokens: list[Token]
    k: int
    depth: int

    @property
    def token(self) -> Token:
        return self.tokens[self.k]

    def at(self, offset: int) -> Token | None:
        """The token `offset` places from this one (the end of the text past it; None before
        the first token)."""
        index = self.k + offset
        return None if index < 0 else self.tokens[min(index, len(self.tokens) - 1)]

    def is_stream_iri(self) -> bool:
        """Whether the token is STREAM followed by a stream's IRI (what C-SPARQL, CQELS-QL,
        Streaming SPARQL and SPARQLstream each write their own way)."""
        return self.token.is_keyword("STREAM") and self.at(1).kind in (IRI, PNAME)

    def is_from_stream(self) -> bool:
        """STREAM <s> right after FROM or FROM NAMED."""
        before = self.at(-1)
        return self.is_stream_iri() and before is not None and before.is_keyword("FROM", "NAMED")


def dialect_named(name: str) -> type["Dialect"]:
    """The registered dialect of that name (KeyError for none)."""
    return _READERS[name]


def detect(text: str, tokens: list | None = None) -> str:
    """The dialect a query is written in: the first token some dialect recognizes decides
    (asked in the order of their `precedence`, `Dialect.recognizes`); a text none recognizes is
    RSP-QL*. `tokens`: the text's, when the caller has them."""
    tokens = tokenize(SourceText(text)) if tokens is None else tokens
    ordered = sorted(_READERS.values(), key=lambda reader: reader.precedence)
    depth = 0
    for k, tok in enumerate(tokens):
        if tok.is_punct("{"):
            depth += 1
        elif tok.is_punct("}"):
            depth -= 1
        else:
            word, scan = tok.text.upper() if tok.kind == NAME else None, None
            for reader in ordered:
                if reader.signals is not None and word not in reader.signals:
                    continue
                scan = scan or Scan(tokens, k, depth)
                if reader.recognizes(scan):
                    return reader.dialect
    return RspQl.dialect


def translate(text: str, dialect: str | None = None, start: str | None = None,
              base: str | None = None, streams: tuple[str, ...] = (), tokens: list | None = None) -> Translation | None:
    """The RSP-QL* translation of a dialect query; None for an RSP-QL* query. `base`: the IRI
    the text was retrieved from (relative IRIs resolve against it, see `PrologueReader`);
    `streams`: the streams the query is given to read (a replay's), which an EP-SPARQL query
    naming none reads; `tokens`: the text's, when the caller has them."""
    dialect = dialect or detect(text, tokens)
    if dialect not in DIALECTS:
        raise QuerySyntaxError("unknown dialect %r (known: %s)" % (dialect, ", ".join(DIALECTS)), 1, 1)
    reader_class = _READERS[dialect]
    if reader_class.native:
        return None
    origin = None
    if start is not None:
        try:
            origin = parse_instant(start)
        except TemporalValueError as e:
            raise QuerySyntaxError("option start: %s" % e, 1, 1) from None
    reader = reader_class(text, origin, base)
    reader.streams_given = tuple(streams)
    return reader.translate()


@dataclass
class _Window:
    stream: str
    spec: str          # the RSP-QL* window specification, without brackets
    iri: str = ""


# The registered dialects by name, in the order they were defined: the one list of them.
_READERS: dict[str, type["Dialect"]] = {}
# Their names (a live view: a dialect defined later is named too).
DIALECTS = _READERS.keys()


class Dialect(PrologueReader):
    """A language the engine reads besides RSP-QL*: token-level reading of its queries into
    edits of their text (replacements of token ranges), applied in one pass so that every copied
    piece keeps its source offset, and its semantics' differences from RSP-QL* declared as class
    attributes. A subclass naming its `dialect` is registered under that name (`unregister`
    takes it back)."""

    dialect = ""
    language = ""           # the language's name in messages
    native = False          # RSP-QL* itself: nothing to translate
    section = "6.5"         # the specification's section on the language
    # How `detect` recognizes a text in this language: at each token in turn, the dialects are
    # asked in the order of their precedence (lowest first) whether the token is theirs.
    precedence = 100
    # The words (upper case) of the tokens at which `recognizes` may hold: detect asks at no
    # other token (None: at every token).
    signals: frozenset[str] | None = None
    # (language, hint) where FROM STREAM is not the language's (None: it declares a window).
    from_stream: tuple[str, str] | None = None
    # The word a window's slide is written with in this language, and the ones read as it.
    slide_word = "STEP"
    tumbling = True         # whether the language writes [RANGE d TUMBLING] itself
    # What the RSP-QL* text cannot say of the language's semantics (spec §6.5): its report
    # policy, whether its windows are closed at the top, (x − a, x], and the default of the
    # query options its windows imply.
    report: str | None = None
    upper_closed = False
    option_defaults: dict[str, str] = {}
    # Whether FROM NAMED leaves the query's default graph the background's (CQELS-QL: its engine
    # reads its default dataset, and FROM NAMED names its named datasets).
    named_keep_default = False
    streams_given: tuple[str, ...] = ()     # the streams the query is given (translate's `streams`)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.dialect:
            _READERS[cls.dialect] = cls

    @classmethod
    def recognizes(cls, scan: Scan) -> bool:
        """Whether the token `scan` stands at shows the text is in this language (a dialect
        that is only ever named, with the option dialect, recognizes nothing)."""
        return False

    @classmethod
    def unregister(cls) -> None:
        """Take the dialect out of the registry (a dialect defined for a while, as a test's)."""
        if _READERS.get(cls.dialect) is cls:
            del _READERS[cls.dialect]

    def __init__(self, text: str, origin: int | None, base: str | None = None):
        super().__init__(text, base)
        self.origin = origin
        self.edits: list[tuple[int, int, str]] = []    # (start offset, end offset, text)
        self.windows: list[_Window] = []
        self.name: str | None = None
        self.timestamp_calls: list[tuple[list[str], int, str]] = []   # (triple, group close, variable)
        self.notes: list[tuple[int, str]] = []
        self.tumbling_windows: set[int] = set()     # indices in self.windows of CQELS TUMBLING windows

    def note(self, tok: Token, message: str) -> None:
        """A community form read as the language's own (spec §6.7), at its token."""
        self.notes.append((tok.offset, message))

    def edit(self, first: Token, last: Token, text: str) -> None:
        """Replace the text from token `first` through token `last` (an insertion before
        `first` when `last` is None)."""
        self.edits.append((first.offset, first.offset if last is None else last.end, text))

    # -- shared pieces ------------------------------------------------------------------
    def duration(self, context: str) -> int:
        """A C-SPARQL / CQELS duration: a number and a unit (ms, s, m, h, d) right after it, or a
        unit written as a word after a space (`3 sec`, `5 min`, `2 hours`: spec §6.7)."""
        number = self.peek()
        if number.kind != NUMBER or not number.text.isdigit():
            raise self.error("expected a duration such as 10s for %s, found %s" % (context, self.describe(number)))
        self.advance()
        unit = self.peek()
        word = unit.text.lower() if unit.kind == NAME else ""
        if unit.kind == NAME and unit.offset == number.end and unit.text == "M":
            raise self.error("%s%s: M is months in an xsd:duration; write %sm for minutes" % (
                number.text, unit.text, number.text), number)
        if unit.kind == NAME and unit.offset == number.end and word in _UNITS:
            symbol = word
        elif word in _UNIT_WORDS:
            symbol = _UNIT_WORDS[word]
            self.note(number, "%s %s read as %s%s" % (number.text, unit.text, number.text, symbol))
        else:
            raise self.error("a duration needs a unit right after its number (ms, s, m, h or d) or a unit word "
                             "after a space (ms, sec, min, hours, days) for %s" % context, unit)
        self.advance()
        value = int(number.text) * _UNITS[symbol]
        if value <= 0:
            raise self.error("%s must be positive" % context, number)
        return value

    def sliding(self, width: int) -> int:
        """What follows RANGE d in a time window: the slide (STEP, SLIDE or SLIDING d), TUMBLING
        (the slide is the range) or nothing (tumbling too); forms that are not the language's own
        are read as its own and noted (spec §6.7)."""
        tok = self.peek()
        if tok.is_keyword("STEP", "SLIDE", "SLIDING"):
            self.advance()
            step = self.duration(tok.text.upper())
            if tok.text.upper() != self.slide_word:
                self.note(tok, "%s read as %s (%s's [RANGE %s %s %s])" % (
                    tok.text.upper(), self.slide_word, self.language, _short(width), self.slide_word, _short(step)))
            return step
        if tok.is_keyword("TUMBLING"):
            self.advance()
            if not self.tumbling:
                # CQELS-QL: content change would ignore a slide equal to the range; the window
                # this reads (the next one added) holds the current period instead.
                self.tumbling_windows.add(len(self.windows))
                self.note(tok, "TUMBLING: at each arrival instant t the window holds the elements of the tumbling "
                               "period (t0 + k*%s, t0 + (k+1)*%s] that contains t, up to t (%s's bounds; t0 the "
                               "epoch, or the option start)" % (_short(width), _short(width), self.language))
        return width

    def time_spec(self, width: int, step: int) -> str:
        spec = "RANGE %s STEP %s" % (format_duration(width), format_duration(step))
        if self.origin is not None:
            spec += ' START "%s"^^<%s>' % (format_instant(self.origin), _XSD_DATETIME)
        return spec

    def add_window(self, stream: str, spec: str) -> _Window:
        same = sum(1 for w in self.windows if w.stream == stream)
        window = _Window(stream, spec, stream if not same else "%s#%d" % (stream, same + 1))
        self.windows.append(window)
        return window

    def declarations(self, windows: list[_Window] | None = None) -> str:
        return " ".join("FROM NAMED WINDOW <%s> ON <%s> [%s]" % (w.iri, w.stream, w.spec)
                        for w in (self.windows if windows is None else windows))

    def find_where(self) -> int:
        """The token index of the WHERE clause's opening brace (from the current token)."""
        if self.peek().is_keyword("WHERE"):
            self.advance()
        if not self.peek().is_punct("{"):
            raise self.error("expected WHERE { ... }, found %s" % self.describe(self.peek()))
        return self.i

    def matching(self, open_index: int) -> int:
        depth = 0
        for k in range(open_index, len(self.tokens)):
            tok = self.tokens[k]
            if tok.is_punct("{"):
                depth += 1
            elif tok.is_punct("}"):
                depth -= 1
                if depth == 0:
                    return k
        raise self.error("'{' is never closed", self.tokens[open_index])

    def dataset_clauses(self) -> bool:
        """FROM STREAM clauses become window declarations, FROM and FROM NAMED graphs stay;
        whether the query names background graphs."""
        background = False
        while self.peek().is_keyword("FROM"):
            first = self.advance()
            if self.peek().is_keyword("NAMED") and self.peek(1).is_keyword("STREAM"):
                raise self.refuse(self.peek(), "FROM NAMED STREAM",
                                  " (declare the stream with FROM STREAM; its elements are named graphs already)")
            if self.peek().is_keyword("STREAM") and self.from_stream is not None:
                raise self.refuse(self.peek(), "FROM STREAM in %s" % self.from_stream[0], self.from_stream[1])
            if self.peek().is_keyword("STREAM"):
                self.advance()
                stream = self.declaration_iri("after FROM STREAM")[0]
                window = self.add_window(stream, self.stream_window())
                self.edit(first, self.tokens[self.i - 1], "FROM NAMED WINDOW <%s> ON <%s> [%s]"
                          % (window.iri, stream, window.spec))
            else:
                background = True
                if self.peek().is_keyword("NAMED"):
                    self.advance()
                self.declaration_iri("after FROM")
        return background

    def stream_window(self) -> str:
        """The RSP-QL* window specification of the window after FROM STREAM <s>."""
        raise NotImplementedError

    def merge_or_wrap(self, where_open: int, where_close: int, windows: list[_Window], background: bool) -> bool:
        """Whether the WHERE clause's default graph must be the merge of several windows, the
        background or both (C-SPARQL, Streaming SPARQL), GRAPH there naming background graphs;
        otherwise the clause becomes `WINDOW <w> { ... }` over its one window."""
        graphs = any(t.is_keyword("GRAPH") for t in self.tokens[where_open:where_close])
        merged = len(windows) > 1 or background or graphs
        if not merged:
            self.edit(self.tokens[where_open + 1], None, "WINDOW <%s> { " % windows[0].iri)
            self.edit(self.tokens[where_close], None, "} ")
        return merged

    def skip_to_dataset(self) -> None:
        """Past the query form, to its first FROM, WHERE or the WHERE clause's brace (a
        CONSTRUCT template is skipped whole)."""
        while not self.peek().is_keyword("FROM", "WHERE") and self.peek().kind != EOF:
            if self.peek().is_punct("{"):
                if not (self.i and self.tokens[self.i - 1].is_keyword("CONSTRUCT")):
                    return
                self.i = self.matching(self.i) + 1
                continue
            self.advance()

    def refuse(self, tok: Token, construct: str, instead: str = "") -> PositionedError:
        return self.error("%s has no equivalent in this engine%s" % (construct, instead), tok)

    def is_timestamp_function(self, tok: Token) -> bool:
        if tok.kind == NAME:
            return tok.text.lower() == "timestamp"
        if tok.kind == PNAME:
            prefix, _, local = tok.text.partition(":")
            return self.prefixes.get(prefix) == _CSPARQL_FUNCTIONS and local == "timestamp"
        return False

    def timestamp_function(self, first: int, where_open: int, where_close: int) -> None:
        """C-SPARQL's timestamp(?s ?p ?o), from token `first` (the query form) to the end of
        the WHERE clause: the time of the element holding that triple (the latest one if
        several do), a variable bound by a sub-query over the windows and left unbound (an
        expression error, as in C-SPARQL) when no window holds the triple. The sub-query joins
        the group the call is in (the WHERE clause for the projection)."""
        groups: list[int] = []
        for k in range(first, where_close + 1):
            tok = self.tokens[k]
            if tok.is_punct("{") and k >= where_open:
                groups.append(self.matching(k))
            elif tok.is_punct("}") and k >= where_open:
                groups.pop()
            elif self.is_timestamp_function(tok) and self.tokens[k + 1].is_punct("("):
                args, end = [], k + 2
                while not self.tokens[end].is_punct(")"):
                    if self.tokens[end].kind in (VAR, IRI, PNAME):
                        args.append(self.tokens[end].text)
                    elif not self.tokens[end].is_punct(","):
                        raise self.refuse(self.tokens[end], "timestamp() of anything but variables and IRIs")
                    end += 1
                if len(args) != 3:
                    raise self.error("timestamp() takes a triple: timestamp(?s, ?p, ?o)", tok)
                variable = _TIMESTAMP_VARIABLE % (len(self.timestamp_calls) + 1)
                close = groups[-1] if groups else where_close
                self.timestamp_calls.append((args, close, variable))
                self.edit(tok, self.tokens[end], variable)
        for (s, p, o), close, variable in self.timestamp_calls:
            windows = " UNION ".join(
                "{ WINDOW <%s> { ?__rsp_g <%s> ?__rsp_t . GRAPH ?__rsp_g { %s %s %s } } }"
                % (w.iri, PROV_GENERATED_AT_TIME, s, p, o) for w in self.windows)
            keys = " ".join(t for t in (s, p, o) if t.startswith("?"))
            self.edits.append((self.tokens[close].offset, self.tokens[close].offset,
                               "OPTIONAL { SELECT %s (MAX(?__rsp_t) AS %s) WHERE { %s }%s } "
                               % (keys, variable, windows, " GROUP BY " + keys if keys else "")))

    def finish(self, merged: bool = False) -> Translation:
        """The translation: the edits applied, with what the language's class declares and
        whether the WHERE clause's default graph is the merge of windows (`merged`)."""
        text = self.source.text
        pieces, placed, length, at = [], [], 0, 0
        for start, end, inserted in sorted(self.edits, key=lambda e: (e[0], e[1])):
            pieces.append(text[at:start])
            placed.append((length, at, start - at))
            length += start - at
            pieces.append(inserted)
            placed.append((length, start, 0))
            length += len(inserted)
            at = end
        pieces.append(text[at:])
        placed.append((length, at, len(text) - at))
        normalised = ["%d:%d: %s" % (*self.source.position(offset), message) for offset, message in sorted(self.notes)]
        return Translation(self.dialect, self.source, "".join(pieces), placed, report=self.report,
                           upper_closed=self.upper_closed, merged=merged, name=self.name,
                           option_defaults=dict(self.option_defaults), normalised=normalised,
                           tumbling=tuple(w.iri for k, w in enumerate(self.windows) if k in self.tumbling_windows),
                           named_keep_default=self.named_keep_default)

    def group_by(self, where_close: int) -> None:
        """`GROUPBY` after the WHERE clause (the RSP query features page writes it) read as GROUP BY."""
        for tok in self.tokens[where_close + 1:]:
            if tok.kind == NAME and tok.text.upper() == "GROUPBY":
                self.edit(tok, tok, "GROUP BY")
                self.note(tok, "GROUPBY read as GROUP BY")


class RspQl(Dialect):
    """RSP-QL* itself, the language the others are translated into: recognized by its window
    declarations (FROM NAMED WINDOW), and what a text no dialect recognizes is read as."""

    dialect = "rspql"
    language = "RSP-QL*"
    native = True
    precedence = 0
    signals = frozenset({"WINDOW"})

    @classmethod
    def recognizes(cls, scan):
        before = scan.at(-1)
        return scan.token.is_keyword("WINDOW") and before is not None and before.is_keyword("NAMED")


class CSparql(Dialect):
    dialect = "csparql"
    language = "C-SPARQL"
    report = "non-empty"
    upper_closed = True
    option_defaults = {"window_default_graph": "union"}
    precedence = 50     # FROM STREAM <s> [ ... ] that SPARQLstream does not take as its own
    signals = frozenset({"STREAM"})

    @classmethod
    def recognizes(cls, scan):
        return scan.is_from_stream() and scan.at(2).is_punct("[")

    def translate(self) -> Translation:
        self.register()
        self.prologue()
        if self.peek().is_keyword("REGISTER"):
            self.register()
        form_index = self.i
        self.skip_to_dataset()
        background = self.dataset_clauses()
        if not self.windows:
            raise self.error("a C-SPARQL query reads at least one FROM STREAM <iri> [RANGE ...]")
        where_open = self.find_where()
        where_close = self.matching(where_open)
        self.timestamp_function(form_index, where_open, where_close)
        self.group_by(where_close)
        return self.finish(merged=self.merge_or_wrap(where_open, where_close, self.windows, background))

    def register(self) -> None:
        if not self.peek().is_keyword("REGISTER"):
            return
        first = self.advance()
        kind = self.peek()
        if not kind.is_keyword("QUERY", "STREAM"):
            raise self.error("expected QUERY or STREAM after REGISTER, found %s" % self.describe(kind))
        self.advance()
        name_tok = self.peek()
        if name_tok.kind == NAME:
            self.advance()
            self.name = name_tok.text
            iri = None
        else:
            iri = self.declaration_iri("naming the query after REGISTER %s" % kind.text.upper())[0]
        every = None
        if self.peek().is_keyword("COMPUTED"):
            self.advance()
            self.expect_keyword("EVERY", "after COMPUTED")
            every = self.duration("COMPUTED EVERY")
        self.expect_keyword("AS", "after the REGISTER clause")
        clause = ""
        if iri is not None or every is not None:
            target = iri if iri is not None else "urn:csparql:query:" + self.name
            clause = "REGISTER %s <%s>" % ("RSTREAM" if kind.is_keyword("STREAM") and iri is not None else "QUERY",
                                           target)
            if every is not None:
                clause += " COMPUTED EVERY %s" % format_duration(every)
            clause += " AS"
        self.edit(first, self.tokens[self.i - 1], clause)

    def stream_window(self) -> str:
        self.expect_punct("[", "to open the window after FROM STREAM <iri>")
        self.expect_keyword("RANGE", "in a C-SPARQL window")
        if self.peek().is_keyword("TRIPLES"):
            self.advance()
            spec = "ELEMS %d" % self.count("RANGE TRIPLES")
        else:
            width = self.duration("RANGE")
            spec = self.time_spec(width, self.sliding(width))
        self.expect_punct("]", "to close the window (C-SPARQL windows are RANGE d STEP d, RANGE d TUMBLING or "
                               "RANGE TRIPLES n)")
        return spec


class Cqels(Dialect):
    dialect = "cqels"
    language = "CQELS-QL"
    slide_word = "SLIDE"
    tumbling = False
    report = "content-change"
    upper_closed = True
    option_defaults = {"window_default_graph": "union"}
    named_keep_default = True
    from_stream = ("CQELS-QL", " (CQELS-QL reads a stream with STREAM <s> [RANGE ...] { ... } inside WHERE)")
    precedence = 20
    signals = frozenset({"STREAM"})

    @classmethod
    def recognizes(cls, scan):
        """STREAM <s> [ ... ] inside the WHERE clause."""
        return scan.depth > 0 and scan.is_stream_iri() and scan.at(2).is_punct("[")

    def translate(self) -> Translation:
        self.prologue()
        form = self.peek()
        if not form.is_keyword("SELECT", "CONSTRUCT", "ASK"):
            raise self.error("expected SELECT, CONSTRUCT or ASK, found %s" % self.describe(form))
        self.advance()
        if self.peek().is_keyword("ISTREAM", "RSTREAM", "DSTREAM"):
            raise self.refuse(self.peek(), "%s in CQELS-QL" % self.peek().text.upper(),
                              " (CQELS admits IStream only, which is its default)")
        if not form.is_keyword("ASK"):
            self.edit(self.peek(), None, "ISTREAM ")
        self.skip_to_dataset()
        self.dataset_clauses()
        header_end = self.peek()
        where_open = self.find_where()
        where_close = self.matching(where_open)
        k = where_open
        while k < where_close:
            tok = self.tokens[k]
            if tok.is_keyword("STREAM") and self.tokens[k + 1].kind in (IRI, PNAME):
                self.i = k + 1
                stream = self.declaration_iri("after STREAM")[0]
                window = self.add_window(stream, self.stream_window())
                self.expect_punct("{", "to open the pattern of STREAM <%s> [...]" % stream)
                self.edit(tok, self.tokens[self.i - 2], "WINDOW <%s>" % window.iri)
                k = self.i
                continue
            k += 1
        if not self.windows:
            raise self.error("a CQELS-QL query reads at least one STREAM <iri> [RANGE ...] { ... }",
                             self.tokens[where_open])
        self.edit(header_end, None, self.declarations() + " ")
        self.group_by(where_close)
        return self.finish()

    def stream_window(self) -> str:
        self.expect_punct("[", "to open the window after STREAM <iri>")
        tok = self.peek()
        if tok.is_keyword("NOW"):
            self.advance()
            spec = self.time_spec(1, 1)
        elif tok.is_keyword("TRIPLES"):
            self.advance()
            spec = "ELEMS %d" % self.count("TRIPLES")
        elif tok.is_keyword("RANGE"):
            self.advance()
            width = self.duration("RANGE")
            spec = self.time_spec(width, self.sliding(width))
        elif tok.is_keyword("ALL"):
            raise self.refuse(tok, "[ALL]", " (a window over the whole stream is unbounded)")
        else:
            raise self.error("expected RANGE, NOW or TRIPLES in a CQELS window, found %s" % self.describe(tok))
        self.expect_punct("]", "to close the CQELS window")
        return spec


class StreamingSparql(Dialect):
    dialect = "streaming-sparql"
    language = "Streaming SPARQL"
    option_defaults = {"window_default_graph": "union"}
    precedence = 30
    signals = frozenset({"STREAM"})

    @classmethod
    def recognizes(cls, scan):
        """FROM STREAM <s> WINDOW ..., or FROM NAMED STREAM <s> without a bracketed window."""
        if not scan.is_from_stream():
            return False
        after = scan.at(2)
        return after.is_keyword("WINDOW") or (scan.at(-1).is_keyword("NAMED") and not after.is_punct("["))

    def translate(self) -> Translation:
        self.prologue()
        self.skip_to_dataset()
        background = self.dataset_clauses()
        if not self.windows:
            raise self.error("a Streaming SPARQL query reads at least one FROM STREAM <iri> WINDOW ...")
        where_token = self.peek()
        where_open = self.find_where()
        where_close = self.matching(where_open)
        declared = len(self.windows)
        # The FROM window wraps the WHERE clause before a group's own window is placed, so a
        # group window that ends the WHERE clause itself is the inner, the one its patterns read.
        merged = self.merge_or_wrap(where_open, where_close, self.windows, background)
        group_windows = self.group_windows(where_open, where_close, self.windows[0].stream)
        if group_windows:
            self.edit(where_token, None, self.declarations(self.windows[declared:]) + " ")
        if merged and group_windows:
            raise self.refuse(self.tokens[where_open], "a window inside a graph pattern of a query with several "
                              "streams or background graphs")
        return self.finish(merged=merged)

    def group_windows(self, where_open: int, where_close: int, stream: str) -> int:
        """`{ P WINDOW ELEMS n }`: the group's patterns read that window of the stream."""
        opens: list[int] = []
        found = 0
        k = where_open
        while k <= where_close:
            tok = self.tokens[k]
            if tok.is_punct("{"):
                opens.append(k)
            elif tok.is_punct("}"):
                opens.pop()
            elif tok.is_keyword("WINDOW") and self.tokens[k + 1].is_keyword("RANGE", "ELEMS"):
                self.i = k
                window = self.add_window(stream, self.stream_window())
                close = self.i
                if not self.tokens[close].is_punct("}"):
                    raise self.error("a window inside a graph pattern comes last in its group", self.tokens[close])
                group_open = opens[-1]
                self.edit(self.tokens[group_open + 1], None, "WINDOW <%s> { " % window.iri)
                self.edit(tok, self.tokens[close - 1], "} ")
                found += 1
                k = close
                continue
            k += 1
        return found

    def stream_window(self) -> str:
        self.expect_keyword("WINDOW", "after FROM STREAM <iri>")
        if self.peek().is_keyword("ELEMS"):
            self.advance()
            return "ELEMS %d" % self.count("WINDOW ELEMS")
        self.expect_keyword("RANGE", "after WINDOW")
        width, unit = self.value("RANGE")
        if self.peek().is_keyword("FIXED"):
            self.advance()
            return self.time_spec(width, width)
        self.expect_keyword("SLIDE", "after WINDOW RANGE n (or FIXED)")
        step = unit
        if self.peek().kind == NUMBER:
            step, _ = self.value("SLIDE")
        return self.time_spec(width, step)

    def value(self, context: str) -> tuple[int, int]:
        """A ValSpec: INTEGER and an optional unit (milliseconds by default); returns the
        value and one of its unit, in microseconds."""
        number = self.peek()
        if number.kind != NUMBER or not number.text.isdigit() or int(number.text) < 1:
            raise self.error("%s takes a positive whole number and a unit (MS, S, MINUTE, HOUR, DAY, WEEK), found %s"
                             % (context, self.describe(number)))
        self.advance()
        unit = _STREAMING_UNITS["MS"]
        if self.peek().kind == NAME and self.peek().text.upper() in _STREAMING_UNITS:
            unit = _STREAMING_UNITS[self.advance().text.upper()]
        return int(number.text) * unit, unit


class SparqlStream(Dialect):
    """SPARQLstream (spec §6.8): `FROM NAMED STREAM <s> [1 MINUTES SLIDE 1 MINUTES]` or a window
    in the past `[NOW - 10 MINUTES TO NOW - 2 MINUTES SLIDE 1 MINUTES]`, R2S right after SELECT
    (the one language of the three with all three operators), windows (close − α, close], their
    content merged into the default graph, reported at closes of non-empty windows."""

    dialect = "sparqlstream"
    language = "SPARQLstream"
    section = "6.8"
    report = "non-empty"
    upper_closed = True
    option_defaults = {"window_default_graph": "union"}
    precedence = 40
    signals = frozenset({"STREAM"})

    @classmethod
    def recognizes(cls, scan):
        """FROM NAMED STREAM <s> [ ... ], or FROM STREAM <s> [ ... ] whose window opens with a
        number or NOW or follows an R2S operator right after SELECT."""
        if not (scan.is_from_stream() and scan.at(2).is_punct("[")):
            return False
        opening = scan.at(3)
        return scan.at(-1).is_keyword("NAMED") or opening.kind == NUMBER or opening.is_keyword("NOW") or any(
            tok.is_keyword("SELECT") and scan.tokens[j + 1].is_keyword(*_R2S) for j, tok in enumerate(scan.tokens[:scan.k]))

    def translate(self) -> Translation:
        self.prologue()
        form = self.peek()
        if not form.is_keyword("SELECT", "CONSTRUCT", "ASK"):
            raise self.error("expected SELECT, CONSTRUCT or ASK, found %s" % self.describe(form))
        self.advance()
        self.skip_to_dataset()
        background = self.dataset_clauses()
        if not self.windows:
            raise self.error("a SPARQLstream query reads at least one FROM NAMED STREAM <iri> [... SLIDE ...]")
        where_open = self.find_where()
        where_close = self.matching(where_open)
        return self.finish(merged=self.merge_or_wrap(where_open, where_close, self.windows, background))

    def dataset_clauses(self) -> bool:
        """FROM [NAMED] STREAM <s> [...] become window declarations; FROM and FROM NAMED graphs
        stay; whether the query names background graphs."""
        background = False
        while self.peek().is_keyword("FROM"):
            first = self.advance()
            if self.peek().is_keyword("NAMED"):
                self.advance()
            if self.peek().is_keyword("STREAM"):
                self.advance()
                stream = self.declaration_iri("after FROM NAMED STREAM")[0]
                window = self.add_window(stream, self.stream_window())
                self.edit(first, self.tokens[self.i - 1], "FROM NAMED WINDOW <%s> ON <%s> [%s]"
                          % (window.iri, stream, window.spec))
            else:
                background = True
                self.declaration_iri("after FROM")
        return background

    def stream_window(self) -> str:
        opening = self.expect_punct("[", "to open the window after FROM NAMED STREAM <iri>")
        tok = self.peek()
        if tok.is_keyword("TRIPLES", "ELEMS", "RANGE") or (tok.kind == NUMBER and self.peek(1).is_keyword(
                "TRIPLES", "ELEMS")):
            raise self.refuse(tok, "a count window in SPARQLstream",
                              " (the language leaves them out; write the query in RSP-QL* with "
                              "FROM NAMED WINDOW <w> ON <s> [ELEMS n], spec 6.1)")
        if tok.is_keyword("NOW"):
            self.advance()
            self.expect_punct("-", "after NOW in a window in the past (NOW - 10 MINUTES TO NOW - 2 MINUTES)")
            width = self.value("the window's start")
            self.expect_keyword("TO", "after NOW - d")
            self.expect_keyword("NOW", "after TO")
            lag = 0
            if self.peek().is_punct("-"):
                self.advance()
                lag = self.value("the window's end")
            if lag >= width:
                raise self.error("a window in the past ends before it begins: NOW - a TO NOW - b needs a > b", tok)
        else:
            width, lag = self.value("the window's range"), 0
        if not self.peek().is_keyword("SLIDE"):
            raise self.error("a SPARQLstream window needs SLIDE and a duration, such as [1 MINUTES SLIDE 1 MINUTES]"
                             ", found %s" % self.describe(self.peek()))
        self.advance()
        step = self.value("SLIDE")
        self.expect_punct("]", "to close the window opened at %d:%d" % self.source.position(opening.offset))
        spec = "FROM NOW-%s TO NOW-%s STEP %s" % (format_duration(width), format_duration(lag), format_duration(step)) \
            if lag else "RANGE %s STEP %s" % (format_duration(width), format_duration(step))
        if self.origin is not None:
            spec += ' START "%s"^^<%s>' % (format_instant(self.origin), _XSD_DATETIME)
        return spec

    def value(self, context: str) -> int:
        """A positive whole number and a unit word: MS, S / SECOND(S), MINUTE(S), HOUR(S), DAY(S)."""
        number = self.peek()
        if number.kind != NUMBER or not number.text.isdigit() or int(number.text) < 1:
            raise self.error("%s takes a positive whole number and a unit (MS, S, SECONDS, MINUTES, HOURS, DAYS), "
                             "found %s" % (context, self.describe(number)))
        self.advance()
        unit = self.peek()
        if unit.kind != NAME or unit.text.upper() not in _SPARQLSTREAM_UNITS:
            raise self.error("%s needs a unit after its number (MS, S, SECONDS, MINUTES, HOURS, DAYS), found %s"
                             % (context, self.describe(unit)), unit)
        self.advance()
        return int(number.text) * _SPARQLSTREAM_UNITS[unit.text.upper()]


class EpSparql(Dialect):
    """EP-SPARQL (spec §6.12): event patterns joined by SEQ, EQUALS, OPTIONALSEQ, EQUALSOPTIONAL,
    AND and OR, bounded by a top-level FILTER(getDURATION() < d); each match reported at the
    instant of its last event. The reading and the translation are ep_sparql.py's."""

    dialect = "ep-sparql"
    language = "EP-SPARQL"
    section = "6.12"
    report = "content-change"
    precedence = 10
    signals = frozenset(OPERATORS) | frozenset(name.upper() for name in MATCH_FUNCTIONS)
    # Its translation reads events through GRAPH patterns and element times through WINDOW
    # blocks over timestamp triples alone (spec 6.12), never a window's merged content.
    option_defaults = {"window_default_graph": "timestamps"}

    @classmethod
    def recognizes(cls, scan):
        """An operator between two groups, or a function of a match (it has no window clause)."""
        return is_operator_between_groups(scan.tokens, scan.k) or is_match_function(scan.tokens, scan.k)

    def translate(self) -> Translation:
        for _ in range(2):      # REGISTER ... AS before or after the prologue, copied as written
            self.prologue()
            if self.peek().is_keyword("REGISTER"):
                while not self.peek().is_keyword("AS") and self.peek().kind != EOF:
                    self.advance()
                self.expect_keyword("AS", "to end the REGISTER clause")
        events = translate_events(self, self.streams_given, self.origin)
        return Translation(self.dialect, self.source, events.text, events.placed, report=self.report,
                           lower_closed=events.lower_closed, option_defaults=dict(self.option_defaults))



def _short(value: int) -> str:
    """A duration in microseconds as C-SPARQL writes it: 600000000 -> 10m."""
    for symbol in ("d", "h", "m", "s", "ms"):
        if value % _UNITS[symbol] == 0:
            return "%d%s" % (value // _UNITS[symbol], symbol)
    return format_duration(value)
