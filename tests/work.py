"""What a workload costs the store, counted rather than timed, and the doors a query comes in by.

`Work.counting()` counts, while it lasts, the store evaluations (`StreamStore.evaluate`: one
Oxigraph query over window contents each) and the window elements they read, the Oxigraph
queries the store ran (`StreamStore.query`), and keeps every query registered (through whatever
door: they all reach `Runner.register`), whose `rspu:` calls it sums. The counters wrap the
functions and return what they return; nothing else changes (as tests/differential/runs.py's
`Reached` does), and they are put back when it ends. The counts are facts of the code: the
same on every machine and run.

The doors (`DOORS`) register the same queries as users do and drive them over the same stream:
the Python API (`rspstar.Engine.register`), `rspstar replay` with one file per query (the
command line's own code, `cli.main`), `[[queries]]` read from files (`load_config` and
`register_configured`, as `rspstar serve` starts) and written in the configuration, and `POST
/queries` and `PUT /queries/<id>` over HTTP. The API,
configuration and HTTP doors drive one engine on a virtual clock second by second, pushing each
second's elements before advancing to it, as a live engine receives them; the replay publishes
them as its clock reaches them.
"""
from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

import rspstar
from rspstar.endpoint.cli import main as cli_main
from rspstar.endpoint.config import load_config, register_configured
from rspstar.endpoint.engine.runner import Runner
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.store.stream_store import StreamStore
from rspstar.endpoint.engine import sharing
from rspstar.endpoint.engine.r2r import RangeRows
from rspstar.translator import variants
from rspstar.translator.parser import _Parser
from rspstar.translator.rewrite import _Rewriter
from rspstar.translator.windows import Progression
from rspstar.translator.temporal import format_instant, parse_instant

T0 = parse_instant("2026-03-01T08:00:00Z")
S = 1_000_000
EX = "http://example.org/"
STREAM = EX + "stream"
TOKEN = "work-token"
PREFIXES = """@prefix ex: <http://example.org/> .
@prefix sosa: <http://www.w3.org/ns/sosa/> .
@prefix prov: <http://www.w3.org/ns/prov#> .
@prefix rspu: <http://w3id.org/rsp/rspu#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
"""


@dataclass
class Work:
    evaluations: int = 0            # StreamStore.evaluate calls
    elements: int = 0               # window elements those evaluations were given
    oxigraph: int = 0               # Oxigraph queries through StreamStore.query
    registered: list = field(default_factory=list)      # every RegisteredQuery, in order
    # The most rows a table of constants (translator/constants.py) had in a query the store ran:
    # a group's query joins each of its rows with every solution of its pattern.
    table_rows: int = 0
    templates: int = 0              # queries rewritten into templates (translator/rewrite.py)
    instants_asked: int = 0         # a window progression asked for its next instant
    parsed: int = 0                 # texts our parser read (translator/parser.py)
    # Queries whose constants were worked out from their syntax tree (translator/constants.py
    # `parameterized`, as the engine calls it), not read from a query of their shape.
    constants_worked_out: int = 0
    # Windows a query read range by range itself (r2r.RangeRows._between), not given by its group.
    ranges_read: int = 0

    @contextlib.contextmanager
    def counting(self):
        patches = []

        def wrap(owner, name, before=None, after=None):
            original = getattr(owner, name)

            def wrapper(*args, **kwargs):
                if before is not None:
                    before(*args, **kwargs)
                result = original(*args, **kwargs)
                if after is not None:
                    after(result)
                return result
            patches.append((owner, name, original))
            setattr(owner, name, wrapper)

        def evaluated(store, template, elements, *args, **kwargs):
            self.evaluations += 1
            self.elements += sum(len(graphs) for graphs in elements.values())

        def queried(store, sparql, *args, **kwargs):
            self.oxigraph += 1
            table = _CONSTANTS_TABLE.search(sparql)
            if table is not None:
                self.table_rows = max(self.table_rows, len(_TABLE_ROW.findall(table.group(1))))

        def rewritten(*args, **kwargs):
            self.templates += 1

        def asked(*args, **kwargs):
            self.instants_asked += 1

        def parsed(*args, **kwargs):
            self.parsed += 1

        def worked_out(*args, **kwargs):
            self.constants_worked_out += 1

        def read_ranges(*args, **kwargs):
            self.ranges_read += 1

        wrap(StreamStore, "evaluate", before=evaluated)
        wrap(_Rewriter, "run", before=rewritten)
        wrap(Progression, "next", before=asked)
        wrap(_Parser, "parse", before=parsed)
        wrap(RangeRows, "_between", before=read_ranges)
        for module in (sharing, variants):      # (where the engine looks the name up)
            wrap(module, "parameterized", before=worked_out)
        wrap(StreamStore, "query", before=queried)
        wrap(Runner, "register", after=self.registered.append)
        try:
            yield self
        finally:
            for owner, name, original in reversed(patches):
                setattr(owner, name, original)

    def rspu(self) -> tuple[int, int, int]:
        """(calls, computed, kept) of the registered queries' rspu: functions together."""
        counts = [r.evaluator.functions.counts for r in self.registered]
        return (sum(c.calls for c in counts), sum(c.computed for c in counts), sum(c.kept for c in counts))


# A table of constants as translator/constants.py writes it: VALUES (?__rspc<k> ...) { (0 ...) (1 ...) }
_CONSTANTS_TABLE = re.compile(r"VALUES \(\?__rspc\d+[^)]*\) \{ (.*?) \}", re.S)
_TABLE_ROW = re.compile(r"\(\d+[ )]")


class Element(NamedTuple):
    index: int
    ms: int             # after T0
    sensor: int
    value: float
    sigma: float


def elements(seconds: int = 22, per_second: int = 10, sensors: int = 10) -> list[Element]:
    """`per_second` observations a second for `seconds`, made by `sensors` sensors in turn, each
    reading an oxygen fraction in [0.160, 0.209] with a measurement uncertainty."""
    step = 1000 // per_second
    return [Element(i, i * step, i % sensors, round(0.16 + (i * 37 % 50) / 1000, 3), round(1e-4 + (i % 7) * 1e-5, 6))
            for i in range(seconds * per_second)]


def trig(items: list[Element], sensors: list[str] | None = None) -> str:
    """The elements as TriG, sensor k written ex:sk (or `sensors`[k], an IRI)."""
    parts = [PREFIXES]
    for e in items:
        sensor = "ex:s%d" % e.sensor if sensors is None else "<%s>" % sensors[e.sensor]
        parts.append('ex:e%d prov:generatedAtTime "%s"^^xsd:dateTime .\n' % (e.index, format_instant(T0 + e.ms * 1000)))
        parts.append('ex:e%d { ex:o%d sosa:madeBySensor %s ; sosa:hasSimpleResult %s '
                     '{| rspu:uncertainty "N(0, %s)"^^rspu:distribution |} . }\n'
                     % (e.index, e.index, sensor, e.value, e.sigma))
    return "".join(parts)


@dataclass
class Workload:
    """Queries (id -> text) over the stream, from T0 to T0 + `seconds`, with the options every
    query is given, the base some are given (id -> IRI: the option base, [[queries]] base; a
    replay's files have their own), and engine settings (the Python API's keyword arguments)."""
    queries: dict[str, str]
    items: list[Element]
    seconds: int = 22
    options: dict[str, str] = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    bases: dict[str, str] = field(default_factory=dict)
    sensors: list[str] | None = None      # the sensors' IRIs (None: ex:s0, ex:s1, ...)
    background: str | None = None         # background data (TriG)
    # The whole stream pushed, then the clock advanced once to its end: a backlog, every close
    # due at once (as after a pause, or a micro-batch spanning several steps).
    at_once: bool = False

    def options_of(self, query_id: str) -> dict[str, str]:
        base = self.bases.get(query_id)
        return dict(self.options, **({"base": base} if base is not None else {}))


def _records(feed) -> list[dict]:
    found = []
    while not feed.empty():
        record = feed.get_nowait()
        found.append({k: v for k, v in record.items() if k not in ("trigger", "latency_ms")})
    return found


def drive(engine: rspstar.Engine, workload: Workload) -> dict[str, list[dict]]:
    """Each second's elements pushed, then the clock advanced to the second's end (which
    declares the stream complete through it: its elements are in before), or all of them and
    then the clock to the end (`at_once`); every registered query's records."""
    feeds = {q.id: q.feed.subscribe(backlog=0) for q in engine.engine.queries()}
    records = {query_id: [] for query_id in feeds}
    try:
        if workload.at_once:
            engine.push(STREAM, trig(workload.items, workload.sensors))
            engine.advance(format_instant(T0 + workload.seconds * S))
            return {query_id: _records(feed) for query_id, feed in feeds.items()}
        for second in range(1, workload.seconds + 1):
            batch = [e for e in workload.items
                     if (second - 1) * 1000 < e.ms <= second * 1000 or (second == 1 and e.ms == 0)]
            if batch:
                engine.push(STREAM, trig(batch, workload.sensors))
            engine.advance(format_instant(T0 + second * S))
            for query_id, feed in feeds.items():
                records[query_id] += _records(feed)
    finally:
        for query_id, feed in feeds.items():
            engine.engine.get(query_id).feed.unsubscribe(feed)
    return records


def _files(workload: Workload, directory: Path) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for query_id, text in workload.queries.items():
        paths[query_id] = directory / ("%s.rq" % query_id)
        paths[query_id].write_text(text, encoding="utf-8")
    return paths


def _engine(workload: Workload) -> rspstar.Engine:
    engine = rspstar.Engine(start=format_instant(T0), **workload.settings)
    if workload.background is not None:
        engine.load_background(workload.background)
    return engine


def python_api(workload: Workload, tmp: Path) -> rspstar.Engine:
    engine = _engine(workload)
    for query_id, text in workload.queries.items():
        engine.register(text, id=query_id, **workload.options_of(query_id))
    return engine


def replay_files(workload: Workload, tmp: Path) -> dict[str, list[dict]]:
    """`rspstar replay q0.rq q1.rq ... --stream ... --out-dir`: the command line's code."""
    assert not workload.bases, "a replay's query files have the base of their own file"
    assert not workload.at_once, "a replay publishes the elements as its clock reaches them"
    paths = _files(workload, tmp / "queries")
    stream = tmp / "stream.trig"
    stream.write_text(trig(workload.items, workload.sensors), encoding="utf-8")
    out = tmp / "out"
    options = [a for k, v in workload.options.items() for a in ("--option", "%s=%s" % (k, v))]
    arguments = ["replay", *map(str, paths.values()), "--stream", "%s=%s" % (STREAM, stream),
                 "--from", format_instant(T0), "--to", format_instant(T0 + workload.seconds * S), *options]
    if workload.background is not None:
        (tmp / "background.trig").write_text(workload.background, encoding="utf-8")
        arguments += ["--background", str(tmp / "background.trig")]
    arguments += ["--out-dir", str(out)] if len(paths) > 1 else ["--out", str(out / ("%s.jsonl" % next(iter(paths))))]
    assert cli_main(arguments) == 0
    return {query_id: [json.loads(line) for line in (out / ("%s.jsonl" % query_id)).read_text().splitlines()]
            for query_id in paths}


def _toml(value) -> str:
    return json.dumps(value)       # a TOML basic string is a JSON string


def configuration_files(workload: Workload, tmp: Path) -> rspstar.Engine:
    """`[[queries]]` entries, each naming its file, read as `rspstar serve` reads them."""
    paths = _files(workload, tmp / "queries")
    lines = []
    for query_id, path in paths.items():
        lines += ["[[queries]]", "id = %s" % _toml(query_id), "file = %s" % _toml("queries/" + path.name)]
        if query_id in workload.bases:
            lines.append("base = %s" % _toml(workload.bases[query_id]))
        if workload.options:
            lines.append("options = { %s }" % ", ".join("%s = %s" % (k, _toml(v)) for k, v in workload.options.items()))
    config_path = tmp / "rspstar.toml"
    config_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    engine = _engine(workload)
    assert register_configured(engine.engine, load_config(config_path)) == list(paths)
    return engine


def configuration_inline(workload: Workload, tmp: Path) -> rspstar.Engine:
    """`[[queries]]` entries, each holding its query's text (`query = \"\"\"...\"\"\"`): all of them in one
    configuration file, whose file: IRI is every query's base."""
    lines = []
    for query_id, text in workload.queries.items():
        lines += ["[[queries]]", "id = %s" % _toml(query_id), "query = %s" % _toml(text)]
        if query_id in workload.bases:
            lines.append("base = %s" % _toml(workload.bases[query_id]))
        if workload.options:
            lines.append("options = { %s }" % ", ".join("%s = %s" % (k, _toml(v)) for k, v in workload.options.items()))
    tmp.mkdir(parents=True, exist_ok=True)
    config_path = tmp / "rspstar.toml"
    config_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    engine = _engine(workload)
    assert register_configured(engine.engine, load_config(config_path)) == list(workload.queries)
    return engine


def http_put(workload: Workload, tmp: Path) -> rspstar.Engine:
    """`PUT /queries/<id>` with the query's text as the body, its options as parameters."""
    engine = _engine(workload)
    client = create_app(engine.engine, HttpSettings(token=TOKEN, landing_dir=tmp / "landing")).test_client()
    for query_id, text in workload.queries.items():
        options = ["%s=%s" % kv for kv in workload.options_of(query_id).items()]
        response = client.put("/queries/" + query_id, data=text, content_type="application/sparql-query",
                              query_string={"option": options}, headers={"Authorization": "Bearer " + TOKEN})
        assert response.status_code == 201, response.get_data(as_text=True)
    return engine


def http_post(workload: Workload, tmp: Path) -> rspstar.Engine:
    """`POST /queries` with the query's text as the body (as curl sends a file), its id and
    options as parameters."""
    engine = _engine(workload)
    client = create_app(engine.engine, HttpSettings(token=TOKEN, landing_dir=tmp / "landing")).test_client()
    for query_id, text in workload.queries.items():
        options = ["%s=%s" % kv for kv in workload.options_of(query_id).items()]
        response = client.post("/queries", data=text, content_type="application/sparql-query",
                               query_string={"id": query_id, "option": options},
                               headers={"Authorization": "Bearer " + TOKEN})
        assert response.status_code == 201, response.get_data(as_text=True)
    return engine


# The doors that register queries in an engine (then driven second by second), by name.
REGISTERING: dict[str, Callable[[Workload, Path], rspstar.Engine]] = {
    "python api": python_api, "configuration files": configuration_files, "configuration inline": configuration_inline,
    "http post": http_post, "http put": http_put,
}


DOORS: dict[str, Callable[[Workload, Path], dict[str, list[dict]]]] = {
    "python api": lambda workload, tmp: drive(python_api(workload, tmp), workload),
    "replay files": replay_files,
    "configuration files": lambda workload, tmp: drive(configuration_files(workload, tmp), workload),
    "configuration inline": lambda workload, tmp: drive(configuration_inline(workload, tmp), workload),
    "http post": lambda workload, tmp: drive(http_post(workload, tmp), workload),
    "http put": lambda workload, tmp: drive(http_put(workload, tmp), workload),
}


def run(door: str, workload: Workload, tmp: Path) -> tuple[dict[str, list[dict]], Work]:
    """The workload's records per query through `door`, and what it cost."""
    work = Work()
    with work.counting():
        records = DOORS[door](workload, tmp)
    return records, work


def rows(records: list[dict]) -> list[tuple[str, tuple]]:
    """A query's records as (instant, its bindings as a sorted bag): the order of rows within an
    evaluation is SPARQL's to choose."""
    return [(r["time"], tuple(sorted(json.dumps(b, sort_keys=True) for b in r.get("bindings", [])))) for r in records]
