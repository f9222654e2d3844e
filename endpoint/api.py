"""The Python API: the engine in a notebook or a program, with no server, Spark or files.

    from datetime import datetime, timezone
    import rspstar

    engine = rspstar.Engine(start=datetime(2026, 3, 1, 8, tzinfo=timezone.utc))
    query = engine.register(QUERY_TEXT, id="warm")
    engine.push("http://example.org/temp", TRIG_TEXT)          # elements with their timestamps
    engine.push("http://example.org/temp", "ex:t1 ex:value 22 .", time=datetime(...))   # one element
    engine.push("http://example.org/temp", {"time": datetime(...), "data": "ex:t1 ex:value 22 ."})
    engine.advance(datetime(2026, 3, 1, 8, 0, 10, tzinfo=timezone.utc))
    query.rows()           # [{"time": datetime, "t": "http://example.org/t1", "v": 22}, ...]
    query.dataframe()      # the same as a pandas DataFrame

    rspstar.replay(QUERY_TEXT, {"http://example.org/temp": Path("temp.trig")}, start=..., end=...)

It is the engine `rspstar serve` and `rspstar replay` run (one runner: a query gives here what it
gives there), over an in-memory store and a clock that moves only when `advance` is called.
Times are `datetime`s with a time zone (a naive one is read as UTC) or xsd:dateTime strings.

One rule for input, in every function: a `str` (or `bytes`) is the text itself (a query, RDF);
a file is given as a `pathlib.Path` (any path-like object) or an open file. A str that can only
be a file name is refused with a TypeError saying so, never parsed as text.
"""
from __future__ import annotations

import html
import json
import os
import re
import threading
import time as _time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

import pyoxigraph as ox

from rspstar.store import formats
from rspstar.store.codec import Payload, decode
from rspstar.store.errors import RdfInputError
from rspstar.store.stream_store import StreamStore
from rspstar.translator.syntax import check_stream_iri
from rspstar.translator.temporal import format_instant, parse_instant

from .engine.clock import VirtualClock
from .engine.errors import EndpointError
from .engine.runner import Runner, EngineConfig, RegisteredQuery
from .engine.replay import Document, Replay, ReplayInput

__all__ = ["Engine", "Query", "Results", "replay", "QueryFailed"]

_XSD = "http://www.w3.org/2001/XMLSchema#"
_RDF_FORMS = ("TriG, Turtle, N-Quads or N-Triples text (a str or bytes), a pathlib.Path of such a file, an open "
              "file, or an rdflib Graph or Dataset")
# What a file name given where text is expected ends with (a query or RDF text never does).
_FILE_SUFFIXES = tuple(e for f in formats.FORMATS for e in f.extensions) + (".rq", ".sparql", ".json", ".txt")


# How often a `follow` waiting for records looks whether another thread took them in.
FOLLOW_TURN_SECONDS = 0.1


class QueryFailed(EndpointError, RuntimeError):
    """A query that failed during a replay: the instant and the error."""


def _instant(value) -> int:
    """Microseconds since the epoch of a datetime (naive: UTC) or an xsd:dateTime string."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return parse_instant(value.isoformat())
    if isinstance(value, str):
        return parse_instant(value)
    raise TypeError("a time is a datetime or an xsd:dateTime string, not %s" % type(value).__name__)


def _datetime(micros: int) -> datetime:
    return datetime.fromtimestamp(micros // 1_000_000, tz=timezone.utc).replace(microsecond=micros % 1_000_000)


# -- input: one rule for every function -------------------------------------------------------
def _text_of(value, what: str, forms: str) -> tuple[str, str, Path | None]:
    """(the text, the name messages give it, its file when it came from one) of a str or bytes
    (the text itself), a path-like object or an open file. TypeError for anything else, and
    for a str that can only be a file name."""
    if isinstance(value, bytes):
        return value.decode("utf-8"), what, None
    if isinstance(value, str):
        one_line = value.strip()
        if one_line and not any(c.isspace() for c in one_line) and (
                one_line.lower().endswith(_FILE_SUFFIXES) or os.path.isfile(one_line)):
            raise TypeError("%s: %r is a str, which is read as the text itself, and it looks like a file name; "
                            "to read the file, pass pathlib.Path(%r)" % (what, value, value))
        return value, what, None
    if isinstance(value, os.PathLike):
        path = Path(value)
        return path.read_text(encoding="utf-8"), str(path), path
    if callable(getattr(value, "read", None)):
        data = value.read()
        name = str(getattr(value, "name", what))
        return (data.decode("utf-8") if isinstance(data, bytes) else data), name, None
    raise TypeError("%s is %s, not %s" % (what, forms, type(value).__name__))


def _rdflib_text(value) -> tuple[str, str] | None:
    """(N-Quads or N-Triples text, its format name) of an rdflib Dataset or Graph, None for
    anything else (rdflib is not imported: a program that has one has rdflib)."""
    if not type(value).__module__.startswith("rdflib") or not callable(getattr(value, "serialize", None)):
        return None
    if any(c.__name__ in ("Dataset", "ConjunctiveGraph") for c in type(value).__mro__):
        return value.serialize(format="nquads"), "nquads"
    return value.serialize(format="nt"), "ntriples"


def _rdf_input(data, format: str | None, what: str, forms: str = _RDF_FORMS) -> tuple[str, str, str]:
    """(text, format name, source name) of RDF input in any of `_RDF_FORMS`."""
    converted = _rdflib_text(data)
    if converted is not None:
        return converted[0], format or converted[1], "%s (rdflib %s)" % (what, type(data).__name__)
    text, source, path = _text_of(data, what, forms)
    if format is None:
        format = formats.by_path(path).name if path is not None else "trig"
    return text, formats.by_name(format).name, source


def _envelope_line(envelope: dict) -> str:
    envelope = dict(envelope)
    if isinstance(envelope.get("time"), datetime):
        envelope["time"] = format_instant(_instant(envelope["time"]))
    return json.dumps(envelope)


def _options(options: dict) -> dict[str, str]:
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()}


def _query_options(options: dict, path: Path | None) -> dict[str, str]:
    """A query's options; one read from a file resolves its relative IRIs against the file, as
    `rspstar replay` and a configuration's [[queries]] read it (unless `base` says otherwise)."""
    given = _options(options)
    if path is not None:
        given.setdefault("base", path.resolve().as_uri())
    return given


class Results:
    """The records of a query's evaluations (the JSON lines `rspstar replay` writes), and the
    same as rows of Python values or a pandas DataFrame."""

    HTML_ROWS = 20          # rows a notebook shows

    def __init__(self, records: list[dict]):
        self.records = records

    def rows(self) -> list[dict]:
        """One dict per emitted solution (SELECT), triple (CONSTRUCT, as subject, predicate,
        object) or answer (ASK, as boolean), with the evaluation's `time` as a datetime and
        terms as Python values: IRIs and blank nodes as strings, numbers, booleans and
        dateTimes as such, other literals as their lexical form."""
        rows = []
        for record in self.records:
            time = datetime.fromisoformat(record["time"].replace("Z", "+00:00"))
            if "bindings" in record:
                rows += [{"time": time, **{name: python_value(term) for name, term in row.items()}}
                         for row in record["bindings"]]
            elif "triples" in record:
                rows += [{"time": time, **dict(zip(("subject", "predicate", "object"),
                                                   (python_value(t) for t in _triple_terms(line))))}
                         for line in record["triples"]]
            else:
                rows.append({"time": time, "boolean": record["boolean"]})
        return rows

    def dataframe(self):
        """The rows as a pandas DataFrame (pandas is imported here, not with the engine)."""
        import pandas
        return pandas.DataFrame(self.rows())

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    def _summary(self) -> str:
        records = self.records
        if not records:
            return "no evaluations yet"
        rows = sum(len(r.get("bindings", r.get("triples", ()))) if "boolean" not in r else 1 for r in records)
        span = records[0]["time"] if len(records) == 1 else "%s to %s" % (records[0]["time"], records[-1]["time"])
        return "%d evaluation%s, %d row%s, %s" % (len(records), "s" * (len(records) != 1), rows,
                                                 "s" * (rows != 1), span)

    def __repr__(self) -> str:
        return "<Results: %s>" % self._summary()

    def _html_title(self) -> str:
        return "Results: %s" % self._summary()

    def _repr_html_(self) -> str:
        """A table of the first rows, for notebooks."""
        rows = self.rows()
        columns = list(dict.fromkeys(name for row in rows for name in row))
        shown = rows[:self.HTML_ROWS]
        cell = lambda value: html.escape(value.isoformat() if isinstance(value, datetime) else str(value))
        lines = ["<div><p>%s</p>" % html.escape(self._html_title())]
        if shown:
            lines.append("<table><thead><tr>%s</tr></thead><tbody>" % "".join("<th>%s</th>" % html.escape(c)
                                                                             for c in columns))
            lines += ["<tr>%s</tr>" % "".join("<td>%s</td>" % (cell(row[c]) if c in row else "") for c in columns)
                      for row in shown]
            lines.append("</tbody></table>")
            if len(rows) > len(shown):
                lines.append("<p>... %d more rows (.rows(), .dataframe())</p>" % (len(rows) - len(shown)))
        lines.append("</div>")
        return "\n".join(lines)


class Query(Results):
    """A query registered on an `Engine`: its records so far (they grow as the engine
    advances), its windows, policy and status as `GET /queries/<id>` shows them. `len(query)` is
    the number of evaluations so far and `iter(query)` goes over their records; `follow` and
    `on_result` give the new ones as they come."""

    def __init__(self, registered: RegisteredQuery):
        super().__init__([])
        self._registered = registered
        self._feed = registered.feed.subscribe(backlog=0)      # unbounded: drained here
        self._drain = threading.Lock()
        self._callbacks: list[list] = []                        # [callback, records given it]

    @property
    def id(self) -> str:
        return self._registered.id

    @property
    def records(self) -> list[dict]:
        with self._drain:
            while not self._feed.empty():
                self._keep(self._feed.get_nowait())
        return self._records

    @records.setter
    def records(self, value: list[dict]) -> None:
        self._records = value

    def _keep(self, record: dict) -> None:
        self._records.append({k: v for k, v in record.items() if k not in ("trigger", "latency_ms")})

    def follow(self, since=None, *, timeout: float | None = 0) -> Iterator[dict]:
        """The records after `since` (a datetime or xsd:dateTime string, exclusive; None: from
        the first), then each new one as the engine gives it, in order. It waits `timeout`
        seconds at most for the next record: 0 (the default) ends once every record there is has
        been given (a notebook advancing the engine itself), None waits for ever (another
        thread advances the engine, or the engine is removed: then it ends)."""
        after = None if since is None else _instant(since)
        given = 0
        while True:
            records = self.records
            while given < len(records):
                record = records[given]
                given += 1
                if after is None or parse_instant(record["time"]) > after:
                    yield record
            if timeout == 0:
                return
            # Another thread may drain the feed first (`records`): wait in short turns, each
            # looking whether the records grew.
            deadline = None if timeout is None else _time.monotonic() + timeout
            while len(self.records) == given:
                if self._registered.removed or (deadline is not None and _time.monotonic() >= deadline):
                    return
                self._feed.wait(FOLLOW_TURN_SECONDS if deadline is None else
                                max(0.0, min(FOLLOW_TURN_SECONDS, deadline - _time.monotonic())))

    def on_result(self, callback: Callable[[dict], object], since=None) -> Callable[[], None]:
        """Call `callback(record)` for each record after `since` (a datetime or xsd:dateTime
        string, exclusive; None: each one from now on), in order: at once for those there are,
        then for each new one before `Engine.advance` returns. Returns a function that stops
        the calls. An exception the callback raises comes out of the call that made the record
        (this one, or `advance`), the engine's state kept; the record is not given again."""
        after = None if since is None else _instant(since)
        records = self.records
        start = len(records) if since is None else next(
            (k for k, r in enumerate(records) if parse_instant(r["time"]) > after), len(records))
        entry = [callback, start]
        self._callbacks.append(entry)
        self._notify()
        return lambda: self._callbacks.remove(entry) if entry in self._callbacks else None

    def _notify(self) -> None:
        records = self.records
        for entry in list(self._callbacks):
            while entry[1] < len(records) and entry in self._callbacks:
                record = records[entry[1]]
                entry[1] += 1
                entry[0](record)

    def describe(self) -> dict:
        return self._registered.describe()

    def _heading(self) -> str:
        query = self._registered.query
        windows = ", ".join("<%s> [%s]" % (w.iri, "RANGE %(range)s STEP %(step)s" % d if "range" in d
                                           else "ELEMS %(elements)d STEP %(step)d" % d)
                            for w in query.windows.values() for d in [w.describe()])
        return "%r: %s %s over %s, %s" % (self.id, query.r2s.value, query.form.value, windows or "no window",
                                         self._registered.status.state)

    def __repr__(self) -> str:
        return "<Query %s; %s>" % (self._heading(), self._summary())

    def _html_title(self) -> str:
        return "Query %s; %s" % (self._heading(), self._summary())


class Engine:
    """Continuous queries over an in-memory store, on a clock that moves with `advance`.

    `start` is the clock's first instant (default: the epoch); `max_delay` how long past a
    close an evaluation waits for incomplete input (default 0: `advance` declares every stream
    complete up to the instant it moves to, so it never waits). Other keyword arguments are
    the engine's settings (`EngineConfig`: max_range, max_reports_per_second, ...)."""

    def __init__(self, start=None, *, max_delay: int = 0, **settings):
        self.store = StreamStore()
        self.clock = VirtualClock(0 if start is None else _instant(start))
        settings.setdefault("federation_allowed", [])
        self.engine = Runner(self.store, self.clock, EngineConfig(max_delay=max_delay, history=0, **settings))
        self.queries: dict[str, Query] = {}

    @property
    def now(self) -> datetime:
        return _datetime(self.clock.now())

    def __repr__(self) -> str:
        return "<Engine at %s: %d quer%s, %d stream%s>" % (
            format_instant(self.clock.now()), len(self.queries), "y" if len(self.queries) == 1 else "ies",
            len(self.store.streams()), "s" * (len(self.store.streams()) != 1))

    def load_background(self, data, format: str | None = None) -> int:
        """Background (static) data: TriG, Turtle, N-Quads or N-Triples text (str or bytes), a
        pathlib.Path of such a file (its format from its extension), an open file, or an rdflib
        Graph or Dataset. Returns the number of quads loaded."""
        text, fmt, source = _rdf_input(data, format, "background")
        return self.store.background.load(text, formats.by_name(fmt).rdf, source)

    def register(self, text, id: str | None = None, **options) -> Query:
        """Register an RSP-QL* query (or one in a dialect): its text, or a pathlib.Path of a
        file holding it; `options` are the query options (report, window_default_graph,
        dialect, start, ...). Its first evaluation is the first report instant after the
        clock's current time."""
        text, _, path = _text_of(text, "the query", "the query's text (a str) or a pathlib.Path of a file holding it")
        registered = self.engine.register(text, id, options=_query_options(options, path))
        query = self.queries[registered.id] = Query(registered)
        return query

    def remove(self, query_id: str) -> None:
        self.engine.remove(query_id)
        self.queries.pop(query_id, None)

    def push(self, stream: str, data, *, time=None, format: str | None = None) -> int:
        """Add elements to `stream`; returns how many. `data` is one of:

        - RDF: TriG (the default), N-Quads, Turtle or N-Triples text, a pathlib.Path of a file
          (its format from its extension), an open file, or an rdflib Graph or Dataset. Every
          named graph with a timestamp triple in the default graph is one element; a named
          graph without one is stamped with `time`. A document of plain triples (no named
          graph) is one element, stamped with `time`.
        - JSON envelopes: a dict {"time"?, "data", "graph"?} (`time` a datetime or string,
          `data` Turtle), a list of them, or their JSON lines (format="jsonl", or text starting
          with "{"). An envelope without a time is stamped with `time`.

        `time` defaults to the engine's clock. RdfInputError names the line and column of bad
        input; nothing of it is added then."""
        check_stream_iri(stream, "push: the stream")
        ingest = self.clock.now() if time is None else _instant(time)
        if isinstance(data, dict):
            text, format, source = _envelope_line(data), "jsonl", "the envelope"
        elif isinstance(data, (list, tuple)):
            if not all(isinstance(envelope, dict) for envelope in data):
                raise TypeError("a list pushed is a list of JSON envelopes (dicts {\"time\", \"data\", \"graph\"}), "
                                "not of %s" % ", ".join(sorted({type(e).__name__ for e in data if not isinstance(e, dict)})))
            text, format, source = "\n".join(_envelope_line(e) for e in data), "jsonl", "the envelopes"
        else:
            sniff = format is None and not isinstance(data, os.PathLike)
            text, format, source = _rdf_input(data, format, "the pushed data", _RDF_FORMS + "; or a JSON envelope "
                                              "(a dict), a list of them or their JSON lines")
            if sniff and format == "trig" and text.lstrip().startswith("{"):
                format = "jsonl"
        fmt = formats.by_name(format)
        decoded = decode(Payload(stream, fmt.name, source, text, ingest, line=1 if fmt.line_based else None))
        if decoded.rejected:
            raise decoded.rejected[0].error()
        if decoded.ignored_default_triples:
            if decoded.elements:
                raise RdfInputError("the default graph holds %d triple%s that %s not timestamps: an element is a "
                                    "named graph, and the default graph says when each was generated; put them in "
                                    "a named graph, or push them on their own (one element)"
                                    % (decoded.ignored_default_triples, "s" * (decoded.ignored_default_triples != 1),
                                       "are" if decoded.ignored_default_triples != 1 else "is"), source)
            # Plain triples: one element at `time`, as an envelope of them would be.
            envelope = json.dumps({"time": format_instant(ingest), "data": text})
            decoded = decode(Payload(stream, "jsonl", source, envelope, ingest, line=1))
            if decoded.rejected:
                raise decoded.rejected[0].error()
        added = 0
        for target, elements in decoded.elements.items():
            added += self.store.add_elements(target, elements)
        return added

    def advance(self, to) -> int:
        """Move the clock to `to`, every stream complete up to it, and evaluate every query at
        each report instant up to it, in order. Returns the number of evaluations."""
        instant = _instant(to)
        if instant < self.clock.now():
            raise ValueError("the clock is at %s: it does not go back to %s" % (format_instant(self.clock.now()),
                                                                                format_instant(instant)))
        for stream in self.store.streams():
            self.store.advance_watermark(stream, instant + 1)
        self.clock.set(instant)
        evaluations = self.engine.tick()
        for query in list(self.queries.values()):
            query._notify()
        return evaluations


def _document(data, what: str, format: str | None = None) -> Path | Document:
    """A stream or background of a replay: a Path as it is, anything else as a document."""
    if isinstance(data, os.PathLike) and format is None:
        return Path(data)
    text, fmt, source = _rdf_input(data, format, what)
    return Document(source, text.encode("utf-8"), formats.by_name(fmt).rdf)


def replay(query, streams: dict, start, end, *, background=None, **options) -> Results:
    """Replay recorded streams through a query in event time, as `rspstar replay` does: the
    records of every evaluation in (start, end]. `query` is its text or a pathlib.Path;
    `streams` maps each stream IRI to its elements: TriG text, a pathlib.Path of a TriG or
    N-Quads file, an open file or an rdflib Dataset; `background` is RDF in the same forms.
    QueryFailed when the query fails during the replay."""
    text, _, path = _text_of(query, "the query", "the query's text (a str) or a pathlib.Path of a file holding it")
    if not isinstance(streams, dict):
        raise TypeError("streams is a dict {stream IRI: TriG text or pathlib.Path}, not %s" % type(streams).__name__)
    for iri in streams:
        check_stream_iri(iri, "replay: the stream")
    spec = ReplayInput.single(text, [(iri, _document(data, "stream <%s>" % iri)) for iri, data in streams.items()],
                              _instant(start), _instant(end),
                              _document(background, "background") if background is not None else None,
                              _query_options(options, path))
    run = Replay(spec)
    records = [record for _, record in run.run()]
    failed = run.failures()
    if failed:
        raise QueryFailed("query failed at %s: %s" % failed[0][1:])
    return Results(records)


# -- terms as Python values -----------------------------------------------------------------
_LITERAL = re.compile(r'^"((?:[^"\\]|\\.)*)"(?:\^\^<([^>]*)>|@([A-Za-z0-9-]+))?$', re.S)
_ESCAPE = re.compile(r'\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)', re.S)
_SIMPLE = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_NUMBERS = {_XSD + t: int for t in ("integer", "int", "long", "short", "byte", "nonNegativeInteger",
                                     "positiveInteger", "negativeInteger", "nonPositiveInteger", "unsignedInt",
                                     "unsignedLong", "unsignedShort", "unsignedByte")}
_NUMBERS.update({_XSD + "decimal": float, _XSD + "double": float, _XSD + "float": float})


def _unescape(text: str) -> str:
    def one(m):
        code = m.group(1)
        return chr(int(code[1:], 16)) if code[0] in "uU" and len(code) > 1 else _SIMPLE.get(code, code)
    return _ESCAPE.sub(one, text)


def python_value(term: str):
    """An N-Triples term (as records write them) as a Python value."""
    if term.startswith("<") and term.endswith(">") and not term.startswith("<<"):
        return term[1:-1]
    if term.startswith("_:"):
        return term
    m = _LITERAL.match(term)
    if not m:
        return term                     # a triple term: its N-Triples text
    lexical, datatype = _unescape(m.group(1)), m.group(2)
    try:
        if datatype in _NUMBERS:
            return _NUMBERS[datatype](lexical)
        if datatype == _XSD + "boolean":
            return lexical in ("true", "1")
        if datatype == _XSD + "dateTime":
            return _datetime(parse_instant(lexical))
    except (ValueError, ArithmeticError):
        pass                            # an ill-typed literal: its lexical form
    return lexical


def _triple_terms(line: str) -> list[str]:
    """The subject, predicate and object of an N-Triples line, as term texts."""
    [quad] = list(ox.parse(line.encode("utf-8"), format=ox.RdfFormat.N_TRIPLES))
    return [str(quad.subject), str(quad.predicate), str(quad.object)]
