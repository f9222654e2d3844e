"""The Python API: the engine in a notebook or a program, with no server, Spark or files.

    from datetime import datetime, timezone
    import rspstar

    engine = rspstar.Engine(start=datetime(2026, 3, 1, 8, tzinfo=timezone.utc))
    query = engine.register(QUERY_TEXT, id="warm")
    engine.push("http://example.org/temp", TRIG_TEXT)          # elements with their timestamps
    engine.push("http://example.org/temp", {"time": datetime(...), "data": "ex:t1 ex:value 22 ."})
    engine.advance(datetime(2026, 3, 1, 8, 0, 10, tzinfo=timezone.utc))
    query.rows()           # [{"time": datetime, "t": "http://example.org/t1", "v": 22}, ...]
    query.dataframe()      # the same as a pandas DataFrame

    rspstar.replay(QUERY_TEXT, {"http://example.org/temp": "temp.trig"}, start=..., end=...)

It is the engine `rspstar serve` and `rspstar replay` run (one runner: a query gives here what it
gives there), over an in-memory store and a clock that moves only when `advance` is called.
Times are `datetime`s with a time zone (a naive one is read as UTC) or xsd:dateTime strings.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pyoxigraph as ox

from rspstar.store import formats
from rspstar.store.codec import Payload, decode
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import format_instant, parse_instant

from .engine.clock import VirtualClock
from .engine.runner import Runner, EngineConfig, RegisteredQuery
from .engine.replay import Replay, ReplayInput

__all__ = ["Engine", "Query", "Results", "replay"]

_XSD = "http://www.w3.org/2001/XMLSchema#"


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


class Results:
    """The records of a query's evaluations (the JSON lines `rspstar replay` writes), and the
    same as rows of Python values or a pandas DataFrame."""

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


class Query(Results):
    """A query registered on an `Engine`: its records so far (they grow as the engine
    advances), its windows, policy and status as `GET /queries/<id>` shows them."""

    def __init__(self, registered: RegisteredQuery):
        super().__init__([])
        self._registered = registered
        self._feed = registered.feed.subscribe(backlog=0)      # unbounded: drained here

    @property
    def id(self) -> str:
        return self._registered.id

    @property
    def records(self) -> list[dict]:
        while not self._feed.empty():
            record = self._feed.get_nowait()
            self._records.append({k: v for k, v in record.items() if k not in ("trigger", "latency_ms")})
        return self._records

    @records.setter
    def records(self, value: list[dict]) -> None:
        self._records = value

    def describe(self) -> dict:
        return self._registered.describe()


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

    def load_background(self, data: str | bytes | Path, format: str | None = None) -> int:
        """Background (static) data: TriG, Turtle, N-Quads or N-Triples text, or a file. Returns
        the number of quads loaded."""
        source = "background"
        if isinstance(data, Path):
            source, fmt = str(data), formats.by_path(data)
            data = data.read_bytes()
        else:
            fmt = formats.by_name(format or "trig")
        return self.store.background.load(data, fmt.rdf, source)

    def register(self, text: str, id: str | None = None, **options) -> Query:
        """Register an RSP-QL* query (or one in a dialect); `options` are the query options
        (report, window_default_graph, dialect, start, ...). Its first evaluation is the first
        report instant after the clock's current time."""
        registered = self.engine.register(text, id, options={k: str(v).lower() if isinstance(v, bool) else str(v)
                                                             for k, v in options.items()})
        query = self.queries[registered.id] = Query(registered)
        return query

    def remove(self, query_id: str) -> None:
        self.engine.remove(query_id)
        self.queries.pop(query_id, None)

    def push(self, stream: str, data, *, time=None, format: str | None = None) -> int:
        """Add elements to `stream`; returns how many. `data` is TriG (default) or N-Quads text
        (format="nquads") holding elements with their timestamp triples, a JSON envelope (a dict
        or its JSON text: {"time", "data", "graph"?}, `time` a datetime or string) or JSON lines
        of envelopes. `time` stamps what carries no time of its own (default: the clock).
        RdfInputError names the line and column of bad input; nothing of it is added then."""
        ingest = self.clock.now() if time is None else _instant(time)
        if isinstance(data, dict):
            envelope = dict(data)
            if isinstance(envelope.get("time"), datetime):
                envelope["time"] = format_instant(_instant(envelope["time"]))
            data, format = json.dumps(envelope), "jsonl"
        elif isinstance(data, bytes):
            data = data.decode("utf-8")
        if format is None:
            format = "jsonl" if data.lstrip().startswith("{") else "trig"
        decoded = decode(Payload(stream, formats.by_name(format).name, "push", data, ingest))
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
        return self.engine.tick()


def replay(query: str, streams: dict[str, str | Path], start, end, *, background: str | Path | None = None,
           **options) -> Results:
    """Replay recorded streams (TriG or N-Quads files, by stream IRI) through a query in event
    time, as `rspstar replay` does: the records of every evaluation in (start, end]."""
    spec = ReplayInput.single(query, [(iri, Path(path)) for iri, path in streams.items()], _instant(start), _instant(end),
                              Path(background) if background is not None else None,
                              {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()})
    run = Replay(spec)
    records = [record for _, record in run.run()]
    failed = run.failures()
    if failed:
        raise RuntimeError("query failed at %s: %s" % failed[0][1:])
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
