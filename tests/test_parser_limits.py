"""No text from outside can overflow a parser's stack, proven: what each construct that nests or
chains costs Oxigraph's stack was measured (tests/parser_stack.py, kept in MEASURED below), the
check that runs before every parser (translator/nesting.py) charges each at least that much, its
budget with a margin fits the stack of the threads that parse, and what it lets through parses
on a stack that small; past it, every route and every input format answers a 4xx naming what and
where, with the engine alive and its data intact."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import chains
import parser_stack
from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.nesting import MAX_NESTING, REWRITE_ALLOWANCE, STACK_BUDGET, check_nesting, stack_cost

TESTS = Path(__file__).resolve().parent
# Bytes of stack one more level (or link) of each construct takes Oxigraph to parse, plan, run
# and free, from the depths that overflow a 64 KiB and a 256 KiB thread (pyoxigraph 0.5.13,
# x86-64; `python tests/parser_stack.py`); then the depth that overflowed an 8 MiB thread, where
# it was reached (None: Oxigraph plans the construct in more than linear time, and minutes go by
# before so deep a text would overflow; or not measured). (None, None): nothing overflowed at
# 131,072 levels on a 64 KiB thread, Oxigraph reads it without recursion.
MEASURED = {
    ("not", "expression"): (894, 9408),
    ("or", "expression"): (898, 9408),
    ("and", "expression"): (898, 9408),
    ("add", "expression"): (1214, 6912),
    ("subtract", "expression"): (1214, 6912),
    ("multiply", "expression"): (1214, 6912),
    ("divide", "expression"): (1214, 6912),
    ("signed numbers", "expression"): (1214, 6912),
    ("brackets", "expression"): (1787, 4672),
    ("negation", "expression"): (1787, 4672),
    ("comparisons", "expression"): (1787, None),
    ("calls", "expression"): (8937, 960),
    ("one-argument calls", "expression"): (8937, None),
    ("exists", "expression"): (11565, 708),
    ("operators in an IRI's place", "expression"): (890, None),
    ("minus signs in a word", "expression"): (1214, None),
    ("operators after a comment", "expression"): (894, None),
    ("groups nested", "pattern"): (3855, 2192),
    ("groups", "pattern"): (3171, None),
    ("union", "pattern"): (1277, 6592),
    ("union nested", "pattern"): (3855, 2192),
    ("optional", "pattern"): (3171, None),
    ("optional nested", "pattern"): (3171, 2624),
    ("minus", "pattern"): (3171, 2624),
    ("minus nested", "pattern"): (3171, 2624),
    ("filters", "pattern"): (898, 9408),
    ("binds", "pattern"): (3171, 2624),
    ("values", "pattern"): (3223, None),
    ("graphs", "pattern"): (3171, None),
    ("graphs nested", "pattern"): (2891, None),
    ("sub-selects", "pattern"): (3277, 2544),
    ("triple patterns", "pattern"): (3171, None),
    ("predicate lists", "pattern"): (3171, None),
    ("object lists", "pattern"): (3171, None),
    ("path sequences", "pattern"): (3171, None),
    ("path alternatives", "pattern"): (768, 19456),
    ("path groups", "pattern"): (607, 13824),
    ("path modifiers", "pattern"): (607, 13824),
    ("path inverses", "pattern"): (607, None),
    ("collections nested", "pattern"): (6342, None),
    ("collection items", "pattern"): (6342, None),
    ("blank nodes nested", "pattern"): (3171, None),
    ("reifiers nested", "pattern"): (3223, None),
    ("triple terms nested", "pattern"): (1385, 6144),
    ("annotations nested", "pattern"): (6554, None),
    ("projections", "root"): (3223, 2624),
    ("groups after a less-than", "pattern"): (3171, None),
    ("collection items after a reifier", "pattern"): (6342, None),
    ("data triples", "data"): (None, None),
    ("data collections nested", "data"): (705, None),
    ("data collection items", "data"): (None, None),
    ("data blank nodes nested", "data"): (2313, 3648),
    ("data reifiers nested", "data"): (1008, 8320),
    ("data triple terms nested", "data"): (572, None),
    ("data annotations nested", "data"): (1947, None),
    ("operations", "update"): (None, None),
    ("template triples", "update"): (None, None),
    ("template collection items", "update"): (None, None),
    ("construct template triples", "query"): (None, None),
    ("values rows", "query"): (None, None),
    **{(name, place): (None, None) for place in ("turtle", "trig") for name in (
        "collections nested", "collection items", "blank nodes nested", "reifiers nested", "annotations nested",
        "predicate lists", "object lists")},
    **{("triple terms nested", place): (463, 18176) for place in ("turtle", "trig", "ntriples", "nquads")},
    ("elements nested", "rdfxml"): (None, None),
    ("literal elements nested", "rdfxml"): (None, None),
    ("objects nested", "jsonld"): (2621, 3232),
    ("arrays nested", "jsonld"): (None, None),
}
# RDF/XML elements do not overflow, but Oxigraph reads them in quadratic time: 16,384 levels took
# 15.7 s, 20,000 took 27.5 s (issue 44).
# What an empty query takes a thread's stack before any construct (the smallest stack it ran on).
BASE_BYTES = 32 << 10
# The margin between the most the check lets a parser take and the stack it has.
MARGIN = 8
# The stack of the engine's threads (`rspstar serve` sets it, endpoint/serve.py), and the least a
# thread gets by default (glibc's with `ulimit -s unlimited`): the margin holds on both.
THREAD_STACK = 8 << 20
LEAST_DEFAULT_STACK = 2 << 20
REFUSED = re.compile("nested deeper than|nested and chained too deeply|nested too deeply to plan|entity declaration")


def test_every_construct_is_in_the_table_and_the_table_in_the_catalogue():
    assert set(MEASURED) == {(c.name, c.place) for c in chains.ALL}


@pytest.mark.parametrize("construct", chains.SPARQL, ids=lambda c: "%s (%s)" % (c.name, c.place))
def test_the_check_charges_every_construct_at_least_what_it_costs(construct):
    measured, _ = MEASURED[construct.name, construct.place]
    route = chains.routes(construct)[0]
    charged = (stack_cost(construct.text(24, route)) - stack_cost(construct.text(12, route))) / 12
    assert charged >= (measured or 0), "%s: %.0f bytes a level charged, %s measured" % (construct.name, charged,
                                                                                       measured)


def test_the_budget_with_its_margin_fits_the_stack_of_every_thread_that_parses():
    # A registered query reaches Oxigraph rewritten (its windows wrapped), bounded apart.
    most = BASE_BYTES + 2 * STACK_BUDGET + REWRITE_ALLOWANCE
    assert MARGIN * most <= THREAD_STACK
    assert 2 * most <= LEAST_DEFAULT_STACK
    # RDF nests to MAX_NESTING, whatever costs the most a level.
    dearest = max(cost for (_, place), (cost, _) in MEASURED.items() if place in chains.FORMATS and cost)
    assert MARGIN * (BASE_BYTES + MAX_NESTING * dearest) <= THREAD_STACK
    # Every depth measured on 8 MiB is beyond what the check lets through, by the margin.
    for (name, place), (cost, depth) in MEASURED.items():
        if depth is not None and place not in chains.FORMATS:
            construct = chains.by_name(name, place)
            assert MARGIN * allowed(construct) <= depth, name
        elif depth is not None:
            assert MARGIN * MAX_NESTING <= depth, name


def test_serve_gives_every_thread_the_stack_the_budget_is_proven_against():
    code = ("import threading; from rspstar.endpoint.serve import configure_process, THREAD_STACK_BYTES; "
            "configure_process(); print(threading.stack_size(), THREAD_STACK_BYTES)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == [str(THREAD_STACK)] * 2, done.stderr


def allowed(construct, route: str | None = None, budget: int = STACK_BUDGET, top: int = 1 << 17) -> int:
    """The deepest the check lets `construct` through on `route` (at most `top`)."""
    route = route or chains.routes(construct)[0]
    language = "xml" if construct.place == "rdfxml" else "sparql" if construct in chains.SPARQL else "rdf"

    def passes(n: int) -> bool:
        try:
            check_nesting(construct.text(n, route), language=language, budget=budget)
            return True
        except QuerySyntaxError:
            return False

    low, high = 0, 1
    while passes(high):
        low, high = high, high * 2
        if high > top:
            return top
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if passes(middle) else (low, middle)
    return low


# -- what the check lets through parses on a stack just that large ------------------------------
SMALL_BUDGET = 48 << 10
_PARSER = r"""
import json, sys, threading
sys.path.insert(0, %r)
import chains
for line in sys.stdin:
    text, route, stack = json.loads(line)
    failed = []
    def run():
        try:
            chains.parse(None, text, route)
        except Exception as e:
            failed.append(type(e).__name__ + ": " + str(e)[:200])
    threading.stack_size(stack)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    print(json.dumps(failed), flush=True)
""" % str(TESTS)


class JsonLinesProcess:
    """A script in a process of its own, asked one JSON line at a time: whatever kills it shows
    here as a failure (`died` says of what, given the process), not as the test run's crash."""

    def __init__(self, script: str):
        self.script = script
        self.start()

    def start(self):
        self.process = subprocess.Popen([sys.executable, "-c", self.script], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ask(self, message, died: Callable[[subprocess.Popen], str]):
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            self.process.wait()
            raise AssertionError(died(self.process))
        return json.loads(answer)

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=30)


class Parser(JsonLinesProcess):
    """Oxigraph in a process of its own, parsing each text on a fresh thread of a given stack."""

    def __init__(self):
        super().__init__(_PARSER)

    def parse(self, text: str, route: str, stack: int) -> list[str]:
        if self.process.poll() is not None:         # an overflow before: the next text gets a new one
            self.start()
        return self.ask([text, route, stack], lambda process: "Oxigraph overflowed a %d KiB stack (exit %s) on %s "
                        "text of %d characters" % (stack >> 10, process.returncode, route, len(text)))


@pytest.fixture(scope="module")
def parser():
    running = Parser()
    yield running
    running.close()


EXPRESSION_PIECES = [c for c in chains.EXPRESSIONS]
PATTERN_PIECES = [c for c in chains.PATTERNS if c.place == "pattern"]


def mixed_text(pattern_pieces, expression_pieces) -> str:
    """Pieces of pattern chains, each holding the next in a group after it, the innermost
    holding a FILTER whose expression chains each expression piece with the next nested in
    brackets: every piece lies on the one path from the outside in, so their costs add up."""
    expression = "?o"
    for construct, n in reversed(expression_pieces):
        expression = "%s && (%s)" % (construct.build(n), expression)
    inner = "?s ?p ?o FILTER(%s)" % expression
    for construct, n in reversed(pattern_pieces):
        inner = "%s { %s }" % (construct.build(n), inner)
    return "SELECT * WHERE { ?s ?p ?o %s }" % inner


pieces = st.lists(st.tuples(st.sampled_from(PATTERN_PIECES), st.integers(1, 2)), min_size=1, max_size=3)
expression_pieces = st.lists(st.tuples(st.sampled_from(EXPRESSION_PIECES), st.integers(1, 4)), max_size=3)


def grown(patterns: list, expressions: list, which: int) -> str | None:
    """The mix with piece `which` (of the patterns, then the expressions) as deep as the check
    lets it be at SMALL_BUDGET, the others as drawn (or one deep each, if that passes it
    already); None when even that does."""
    everything = patterns + expressions
    if stack_cost(mixed_text(patterns, expressions)) > SMALL_BUDGET:
        everything = [(construct, 1) for construct, _ in everything]

    def text(n: int) -> str:
        pieces = list(everything)
        pieces[which] = (pieces[which][0], n)
        return mixed_text(pieces[:len(patterns)], pieces[len(patterns):])

    def passes(n: int) -> bool:
        try:
            check_nesting(text(n), language="sparql", budget=SMALL_BUDGET)
            return True
        except QuerySyntaxError:
            return False

    if not passes(1):
        return None
    low, high = 1, 2
    while passes(high) and high < 4096:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if passes(middle) else (low, middle)
    return text(low)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces, expression_pieces, st.integers(0, 5))
def test_what_the_check_lets_through_parses_on_a_stack_of_the_budget(parser, patterns, expressions, which):
    """Scaled down (a budget of SMALL_BUDGET, a thread of that plus an empty query's own stack),
    any mix of constructs the check lets through, one of them grown as deep as it lets it, is
    parsed, planned and run without overflowing: the costs add up along the path as the check
    adds them."""
    text = grown(patterns, expressions, which % len(patterns + expressions))
    if text is not None:
        parser.parse(text, "query", BASE_BYTES + SMALL_BUDGET)


@pytest.mark.parametrize("construct", chains.SPARQL, ids=lambda c: "%s (%s)" % (c.name, c.place))
def test_each_construct_as_deep_as_the_check_lets_it_parses_on_a_stack_of_the_budget(parser, construct):
    route = chains.routes(construct)[0]
    deepest = allowed(construct, route, SMALL_BUDGET, top=1024)
    parser.parse(construct.text(deepest, route), route, BASE_BYTES + SMALL_BUDGET)


# -- past the check, on every route and in every format -------------------------------------------
_SERVER = r"""
import hashlib, json, sys, tempfile, pathlib
import pyoxigraph as ox
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import Runner, EngineConfig
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.store.stream_store import StreamStore
landing = pathlib.Path(tempfile.mkdtemp())
store = StreamStore()
store.background.load(b'<http://example.org/a> <http://example.org/b> <http://example.org/c> .', ox.RdfFormat.TURTLE, "bg")
app = create_app(Runner(store, VirtualClock(0), EngineConfig()),
                 HttpSettings(token=None, max_body=1 << 26, landing_dir=landing))
client = app.test_client()

def state():
    quads = sorted(str(q) for q in store.oxigraph)
    return [hashlib.sha1("\n".join(quads).encode()).hexdigest(), sorted(p.name for p in landing.iterdir()),
            [q["id"] for q in client.get("/queries").get_json()["queries"]], client.get("/health").status_code]

print(json.dumps(state()), flush=True)
for line in sys.stdin:
    method, path, content_type, body = json.loads(line)
    response = client.open(path, method=method, data=body.encode(), content_type=content_type)
    print(json.dumps([response.status_code, response.get_json(silent=True), state()]), flush=True)
"""


class Server(JsonLinesProcess):
    """The app in a process of its own: a request that crashed it shows as a failure here."""

    def __init__(self):
        super().__init__(_SERVER)
        self.initial = json.loads(self.process.stdout.readline())

    def send(self, method: str, path: str, content_type: str, body: str):
        return self.ask([method, path, content_type, body], lambda process: "the server process died (exit %s) on "
                        "%s %s: %s" % (process.returncode, method, path, process.stderr.read()[-2000:]))


@pytest.fixture(scope="module")
def server():
    running = Server()
    yield running
    running.close()


TIMESTAMP = ('<http://example.org/g> <http://www.w3.org/ns/prov#generatedAtTime> '
             '"2026-03-01T08:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n')


def requests_for(construct: chains.Construct, n: int):
    """(method, path, media type, body) of every route `construct` reaches a parser by."""
    if construct.place in chains.FORMATS:
        text = construct.text(n, construct.place)
        media = chains.MEDIA_TYPES[construct.place]
        if construct.place in ("turtle", "ntriples", "rdfxml", "jsonld"):
            yield "PUT", "/store?graph=http://example.org/new", media, text
        if construct.place == "trig":
            yield "POST", "/streams?stream=http://example.org/s", media, TIMESTAMP + text
        if construct.place in ("nquads", "turtle", "ntriples"):
            yield "POST", "/streams?stream=http://example.org/s", media, TIMESTAMP + text
        if construct.place in ("turtle", "ntriples"):
            envelope = json.dumps({"time": "2026-03-01T08:00:00Z", "data": text})
            yield "POST", "/streams?stream=http://example.org/s", "application/x-ndjson", envelope
        return
    for route in chains.routes(construct):
        text = construct.text(n, route)
        if route == "query":
            yield "POST", "/sparql", "application/sparql-query", text
        elif route == "window":
            yield "POST", "/queries", "application/sparql-query", text
        else:
            yield "POST", "/update", "application/sparql-update", text


def past(construct: chains.Construct) -> int:
    """A depth past what the check lets through on any route: the depth that overflowed 8 MiB,
    or just past the check."""
    _, overflowed = MEASURED[construct.name, construct.place]
    return overflowed if overflowed else most_allowed(construct) + 1


def most_allowed(construct: chains.Construct) -> int:
    return max(allowed(construct, route) for route in chains.routes(construct))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from([c for c in chains.ALL if MEASURED[c.name, c.place] != (None, None)
                        or c.place in ("rdfxml",)]), st.floats(1.0, 3.0))
def test_a_chain_past_the_check_is_a_4xx_naming_where_on_every_route_and_the_engine_lives(server, construct, factor):
    n = max(int(past(construct) * factor), most_allowed(construct) + 1)
    for method, path, media, body in requests_for(construct, n):
        status, answer, state = server.send(method, path, media, body)
        assert status == 400, (construct.name, path, status, answer)
        assert REFUSED.search(answer["message"]) and answer.get("line"), answer
        assert answer.get("column") or "column" in answer["message"], answer       # an envelope's: in its data
        assert state == server.initial, "the engine's data changed"


@pytest.mark.parametrize("construct", chains.ALL, ids=lambda c: "%s (%s)" % (c.name, c.place))
def test_every_construct_at_the_depth_that_overflowed_8_mib_is_refused_on_every_route(server, construct):
    _, overflowed = MEASURED[construct.name, construct.place]
    if overflowed is None and MEASURED[construct.name, construct.place][0] is None and construct.place != "rdfxml":
        # Flat to Oxigraph: as long as the body allows (taken, or refused past MAX_NESTING brackets).
        for method, path, media, body in requests_for(construct, 2000):
            status, answer, state = server.send(method, path, media, body)
            assert status < 500, (construct.name, path, status, answer)
            server.initial = state
        return
    n = overflowed or (20_000 if construct.place in chains.FORMATS else most_allowed(construct) * 4)
    for method, path, media, body in requests_for(construct, n):
        status, answer, state = server.send(method, path, media, body)
        assert status == 400, (construct.name, path, status, answer)
        assert REFUSED.search(answer["message"]) and answer.get("line"), answer
        assert state == server.initial


def test_the_issue_s_bodies_are_refused_and_the_server_lives(server):
    """Issue 44's reproductions: 20,000 `!`, 100,000 `+` or `||` terms, 20,000 UNION or
    OPTIONAL blocks, posted as a query, an update and a registration."""
    bodies = ["!" * 20_000 + "?o", " + ".join(["1"] * 100_000), " || ".join(["?o"] * 100_000)]
    patterns = [" UNION ".join(["{ ?s ?p ?o }"] * 20_000), "OPTIONAL { ?s ?p ?o } " * 20_000]
    for fragment in bodies + patterns:
        place = "expression" if fragment in bodies else "pattern"
        for route, (method, path, media) in {"query": ("POST", "/sparql", "application/sparql-query"),
                                              "window": ("POST", "/queries", "application/sparql-query"),
                                              "update": ("POST", "/update", "application/sparql-update")}.items():
            status, answer, state = server.send(method, path, media, chains.wrap(place, fragment, route))
            assert status == 400 and REFUSED.search(answer["message"]), (route, answer)
            assert state == server.initial


def test_rdf_xml_nested_20000_deep_is_refused_at_once_and_so_is_an_entity_declaration(server):
    import time
    deep = chains.by_name("elements nested", "rdfxml").text(20_000, "rdfxml")
    started = time.monotonic()
    status, answer, _ = server.send("PUT", "/store?graph=http://example.org/x", "application/rdf+xml", deep)
    assert status == 400 and "elements nested deeper than %d" % MAX_NESTING in answer["message"]
    assert time.monotonic() - started < 5
    laughs = ('<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [\n<!ENTITY a "aaaaaaaaaa">\n<!ENTITY b "&a;&a;&a;&a;&a;">\n]>\n'
              '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:e="http://example.org/">'
              '<rdf:Description rdf:about="http://example.org/s"><e:p>&b;</e:p></rdf:Description></rdf:RDF>')
    status, answer, state = server.send("PUT", "/store?graph=http://example.org/x", "application/rdf+xml", laughs)
    assert status == 400 and "entity declaration" in answer["message"] and answer["line"] == 3, answer
    assert state == server.initial


# -- the doors that are not HTTP: the Python API, the command line, the configuration, sources ---
_DOORS = r"""
import json, sys, pathlib, tempfile
sys.path.insert(0, %r)
import chains
import rspstar
from rspstar.endpoint.cli import main
from rspstar.endpoint.config import load_config, register_configured
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import Runner, EngineConfig
from rspstar.store.codec import Payload, decode
from rspstar.store.stream_store import StreamStore
from rspstar.endpoint.serve import load_background_once

name, place, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
construct = chains.by_name(name, place)
tmp = pathlib.Path(tempfile.mkdtemp())
outcomes = {}

def outcome(door, call):
    try:
        call()
        outcomes[door] = "accepted"
    except BaseException as e:
        outcomes[door] = [type(e).__name__, str(e)[:300], getattr(e, "line", None)]

if place in chains.FORMATS:
    text = construct.text(n, place)
    fmt = {"turtle": "turtle", "trig": "trig", "ntriples": "ntriples", "nquads": "nquads"}.get(place)
    if fmt:
        engine = rspstar.Engine()
        outcome("api background", lambda: engine.load_background(text, format=fmt))
        outcome("api push", lambda: engine.push("http://example.org/s", text, format=fmt))
        decoded = decode(Payload("http://example.org/s", fmt, "mqtt topic", text, 0, line=1 if fmt in ("ntriples", "nquads") else None))
        outcomes["sources (mqtt, files)"] = [r.reason[:300] for r in decoded.rejected] or "accepted"
        (tmp / "background.ttl").write_text(text)
        (tmp / "engine.toml").write_text('[background]\nfiles = ["background.ttl"]\n')
        outcome("configured background", lambda: load_background_once(StreamStore(), load_config(tmp / "engine.toml")))
else:
    text = construct.text(n, "window")
    engine = rspstar.Engine()
    outcome("api register", lambda: engine.register(text))
    (tmp / "q.rq").write_text(text)
    outcome("cli check", lambda: sys.exit(main(["check", str(tmp / "q.rq")])))
    (tmp / "engine.toml").write_text('[[queries]]\nid = "q"\nfile = "q.rq"\n')
    outcome("configured query", lambda: register_configured(Runner(StreamStore(), VirtualClock(0), EngineConfig()),
                                                             load_config(tmp / "engine.toml")))
    outcome("api update", lambda: engine.engine.update_background(construct.text(n, "update")))
print(json.dumps(outcomes))
""" % str(TESTS)


@pytest.mark.parametrize("construct", [
    chains.by_name("not", "expression"), chains.by_name("union", "pattern"), chains.by_name("calls", "expression"),
    chains.by_name("triple patterns", "pattern"), chains.by_name("projections", "root"),
    chains.by_name("triple terms nested", "turtle"), chains.by_name("triple terms nested", "trig"),
    chains.by_name("triple terms nested", "ntriples"), chains.by_name("triple terms nested", "nquads"),
], ids=lambda c: "%s (%s)" % (c.name, c.place))
def test_past_the_check_the_api_the_command_line_the_configuration_and_the_sources_refuse_it(construct):
    n = past(construct) * 2
    done = subprocess.run([sys.executable, "-c", _DOORS, construct.name, construct.place, str(n)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, "a door let it through to a parser (exit %d): %s" % (done.returncode,
                                                                                    done.stderr[-2000:])
    outcomes = json.loads(done.stdout.splitlines()[-1])
    assert outcomes, done.stdout
    for door, outcome in outcomes.items():
        if door == "cli check":
            assert outcome == ["SystemExit", "2", None] and REFUSED.search(done.stderr), (door, done.stderr[-500:])
            assert re.search(r":\d+:\d+: ", done.stderr), done.stderr[-500:]       # line:column
            continue
        assert outcome != "accepted", door
        reasons = outcome if door.startswith("sources") else [outcome[1]]
        assert all(REFUSED.search(reason) for reason in reasons), (door, outcome)


@pytest.mark.exhaustive
@pytest.mark.parametrize("construct", chains.ALL, ids=lambda c: "%s (%s)" % (c.name, c.place))
def test_the_measured_costs_still_hold_for_the_installed_oxigraph(construct):
    """The table measured again (minutes a construct): what a level costs now is no more than
    the table says (a newer Oxigraph that takes more stack shows here first), and what read flat
    still does."""
    measured, _ = MEASURED[construct.name, construct.place]
    now = parser_stack.level_cost(construct)
    if measured is None:
        assert now["small"] is None, now
    else:
        assert now["bytes"] is not None and now["bytes"] <= measured * 1.1, now


def test_what_oxigraph_parses_of_a_registered_query_its_rewrite_is_checked_too(monkeypatch):
    """A registered query reaches Oxigraph rewritten, its windows wrapped in groups: that text
    is checked as well (here against a budget its rewrite cannot meet), at the user's position."""
    import rspstar.translator.validate as validate
    text = ("PREFIX ex: <http://example.org/>\nSELECT ?o FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S]\n"
            "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:p ?v } } }")
    validate.compile_query(text)
    monkeypatch.setattr(validate, "REWRITE_ALLOWANCE", stack_cost(text) - 2 * STACK_BUDGET)
    with pytest.raises(QuerySyntaxError, match="once its windows are rewritten: nested and chained") as e:
        validate.compile_query(text)
    assert e.value.line == 3


# The token pattern as first written, with character classes among its alternatives: the one
# the check uses lists every single character apart so that the engine can skip what starts no
# token; both must cut every text into the same tokens.
_CLASSES_PATTERN = (r'''"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'(?:[^'\\]|\\.|'(?!''))*\'\'\''''
                    r'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|#[^\r\n]*|<[^<>"{}|^`\\\s]*>'''
                    r'''|<<\(|<<|\{\||[({\[]|\)>>|>>|\|\}|[)}\]]''')


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet='"\'#<>(){}[]|\\\n\r a^`', max_size=60))
def test_the_rdf_check_cuts_every_text_into_the_tokens_the_plain_pattern_does(text):
    from rspstar.translator import nesting
    plain = re.compile(_CLASSES_PATTERN, re.S)
    assert [m.span() for m in nesting._TOKEN.finditer(text)] == [m.span() for m in plain.finditer(text)]
    data = text.encode()
    assert nesting._TOKEN_BYTES.findall(data) == re.compile(_CLASSES_PATTERN.encode(), re.S).findall(data)


# Pieces of SPARQL: every bracket, chaining keyword, separator, path and expression operator the
# walk charges, terms that cost nothing outside a collection, and `(` after words that call, after
# terms that start collections, and after other brackets.
_PLAIN_PIECES = ["{", "}", "[", "]", "<<", ">>", "{|", "|}", ")", ")>>", " UNION ", " union ", " OPTIONAL ",
                 " FILTER(", " BIND(", " STR(", "str (", "(", " (", "((", " a (", " A(", " ex:f(", " ?v(", " 1(",
                 "<<(", " <e>(", '"s"(', " x.y(", " IF (", "#x\n(", " && ", " < ", " > ", " >= ", " * ", " / ",
                 " optional ", " FILTER ", " GRAPH ", " MINUS ", " VALUES ", " BIND ", " SERVICE ", " WINDOW ",
                 " INSERT ", " DELETE ", " DATA ", " WHERE ", " CONSTRUCT ", ".", ";", ",", "/", "|", "^", "*",
                 "+", "?", "!", "-", "&&", "||", "!=", "<=", " ?x ", " $y ", " ex:p ", " <http://e/a.b> ", ' "s" ',
                 " 1 ", " -1.5 ", " a ", "#c\n", " < ", " @en ", "^^"]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PLAIN_PIECES), max_size=400), st.integers(1, 60), st.integers(1 << 10, 1 << 19),
       st.integers(0, 1 << 12))
def test_a_text_the_counts_let_through_is_within_every_bound_the_walk_checks(pieces, limit, budget, planning_budget):
    # The counts are a fast path past the walk: what they let through, the walk would have too.
    from rspstar.translator import nesting
    text = "".join(pieces)
    if not nesting.within_on_counts(text, limit, budget, planning_budget):
        return
    planned = [0]
    cost = nesting._sparql_cost(text, limit, budget, planning_budget, planned)     # refuses nothing
    assert cost <= budget and planned[0] <= planning_budget


def test_a_query_without_collections_is_checked_on_counts_without_walking_its_tokens(monkeypatch):
    from rspstar.translator import nesting
    from rspstar.translator.validate import compile_query
    walked = []
    walk = nesting._sparql_cost
    monkeypatch.setattr(nesting, "_sparql_cost", lambda text, *args: walked.append(text) or walk(text, *args))
    plain = """PREFIX ex: <http://example.org/>
SELECT ?o ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT10S STEP PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:sensor ex:s1 ; ex:value ?v } } }"""
    compile_query(plain)            # its text and its rewrite, both on counts
    compile_query(plain.replace("?v } }", "?v FILTER(?v > 1 && STR(?o) != \"x\") } }"))
    assert walked == []             # calls are no collections
    compile_query(plain.replace("ex:s1 ;", "( ex:s1 ) ;"))
    assert len(walked) == 2         # with a collection, both walked as before
    with pytest.raises(QuerySyntaxError):
        check_nesting("{" * (MAX_NESTING + 1), language="sparql")    # past the limit: walked, refused where
