"""Landmark windows `[RANGE UNBOUNDED STEP β START τ0]` (spec §6.10): their syntax, closes and
contents, the setting that bounds them, the refusal of a START before evicted data, and the
close-by-close evaluation (r2r.LandmarkRanges) against evaluating the whole window every time
(option incremental=false), over drawn streams."""
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.s2r import ReadWindows
from rspstar.endpoint.engine.replay import Replay, ReplayInput
from rspstar.endpoint.engine.runner import EngineConfig, Runner
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore
from rspstar.translator.admission import LandmarkTooEarly
from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.model import LandmarkWindow
from rspstar.translator.options import QueryOptions, r2r_plan
from rspstar.translator.parser import parse_query
from rspstar.translator.policy import report_policy
from rspstar.translator.temporal import parse_instant
from rspstar.translator.validate import compile_query

import pyoxigraph as ox

S = 1_000_000
T0 = parse_instant("2026-03-01T08:00:00Z")
EX = "http://example.org/"
PREFIXES = "PREFIX ex: <http://example.org/>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"


def query(spec: str, select: str = "(COUNT(*) AS ?n) (SUM(?v) AS ?sum)", modifiers: str = "") -> str:
    return (PREFIXES + "SELECT %s\nFROM NAMED WINDOW ex:w ON ex:s [%s]\n"
            "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:key ?k ; ex:v ?v } } } %s" % (select, spec, modifiers))


def test_a_landmark_closes_every_step_after_its_start_and_holds_everything_since():
    q = parse_query(query('RANGE UNBOUNDED STEP PT10S START "2026-03-01T08:00:00Z"^^xsd:dateTime'))
    w = q.windows[EX + "w"]
    assert isinstance(w, LandmarkWindow) and w.step == 10 * S and w.start == T0
    policy = report_policy(q)
    # No close at τ0 itself: the first is τ0 + β.
    assert ReadWindows(policy, None).next_instant(T0 - 1) == T0 + 10 * S
    assert ReadWindows(policy, None).next_instant(T0 + 10 * S) == T0 + 20 * S
    assert w.content_at(T0 + 25 * S, None).opens == T0 and w.content_at(T0 + 25 * S, None).closes == T0 + 20 * S
    assert w.content_at(T0 + 25 * S, None).shown == (T0, T0 + 20 * S)
    assert w.content_at(T0 + 9 * S, None) is None
    # Without START: the epoch, so everything the stream has.
    epoch = parse_query(query("RANGE UNBOUNDED STEP PT1H")).windows[EX + "w"]
    assert epoch.start == 0 and epoch.earliest_reachable(T0) == 0
    assert epoch.describe()["kind"] == "landmark" and "epoch" in epoch.describe()["explained"]


@pytest.mark.parametrize("spec, message", [
    ("RANGE UNBOUNDED", "needs STEP"),
    ("RANGE UNBOUNDED TUMBLING", "needs STEP"),
    ('RANGE UNBOUNDED START "2026-03-01T08:00:00Z"^^xsd:dateTime', "needs STEP"),
    ("RANGE UNBOUNDED STEP PT0S", "STEP must be positive"),
    ("RANGE UNBOUNDED STEP PT1S PT2S", "expected START or ']'"),
])
def test_a_landmark_without_a_proper_step_is_refused_with_a_position(spec, message):
    with pytest.raises(QuerySyntaxError) as e:
        parse_query(query(spec))
    assert message in e.value.message and e.value.line == 4


def _element(store: StreamStore, n: int, second: float, key: int = 1, value: int = 1) -> None:
    graph = EX + "e%d" % n
    t = T0 + int(second * S)
    quads = [ox.Quad(ox.NamedNode(EX + "o%d" % n), ox.NamedNode(EX + "key"), ox.Literal(str(key), datatype=ox.NamedNode(
        "http://www.w3.org/2001/XMLSchema#integer")), ox.NamedNode(graph)),
             ox.Quad(ox.NamedNode(EX + "o%d" % n), ox.NamedNode(EX + "v"), ox.Literal(str(value), datatype=ox.NamedNode(
                 "http://www.w3.org/2001/XMLSchema#integer")), ox.NamedNode(graph))]
    store.add_elements(EX + "s", [Element(graph, t, instant_literal(t), quads)])


def test_past_landmark_elements_the_query_fails_naming_the_setting():
    store = StreamStore()
    clock = VirtualClock(T0)
    engine = Runner(store, clock, EngineConfig(landmark_elements=3))
    registered = engine.register(query("RANGE UNBOUNDED STEP PT2S"), "q")
    for n in range(5):
        _element(store, n, n + 0.5)
    for t in (2, 4, 6):
        store.advance_watermark(EX + "s", T0 + t * S)
        clock.set(T0 + t * S)
        engine.tick()
    status = registered.status
    assert status.state == "failed"
    assert "landmark_elements = 3" in status.last_error and "holds 4 elements" in status.last_error
    assert status.failed_at == T0 + 4 * S
    # Its 2 s evaluation, within the setting, had run.
    assert [r["bindings"][0]["n"] for r in registered.history.since()] == ['"2"^^<http://www.w3.org/2001/XMLSchema#integer>']


def test_a_landmark_starting_before_evicted_elements_is_refused_naming_the_oldest_instant():
    store = StreamStore()
    clock = VirtualClock(T0 + 100 * S)
    engine = Runner(store, clock, EngineConfig(idle_retention=10 * S))
    for n in range(20):
        _element(store, n, 5 * n)
    engine.evict()          # read by no query: kept for idle_retention (10 s) only
    oldest = store.evicted_before(EX + "s")
    assert oldest == T0 + 85 * S
    with pytest.raises(LandmarkTooEarly) as e:
        engine.register(query("RANGE UNBOUNDED STEP PT10S"), "from-the-epoch")
    assert "2026-03-01T08:01:25Z" in str(e.value) and "oldest instant it can start from" in str(e.value)
    with pytest.raises(LandmarkTooEarly):
        engine.register(query('RANGE UNBOUNDED STEP PT10S START "2026-03-01T08:01:00Z"^^xsd:dateTime'), "early")
    late = engine.register(query('RANGE UNBOUNDED STEP PT10S START "2026-03-01T08:01:25Z"^^xsd:dateTime'), "ok")
    assert late.id == "ok"
    # A stream with nothing evicted takes a landmark from the epoch.
    assert engine.register(query("RANGE UNBOUNDED STEP PT10S").replace("ex:s ", "ex:other "), "other").id == "other"


def test_the_store_keeps_what_a_landmark_holds():
    store = StreamStore()
    clock = VirtualClock(T0)
    engine = Runner(store, clock, EngineConfig(idle_retention=1 * S))
    engine.register(query("RANGE UNBOUNDED STEP PT5S"), "q")
    for n in range(30):
        _element(store, n, n)
        store.advance_watermark(EX + "s", T0 + (n + 1) * S)
        clock.set(T0 + (n + 1) * S)
        engine.tick()
    assert store.streams()[EX + "s"].elements == 30 and store.evicted_before(EX + "s") is None
    last = engine.get("q").history.since()[-1]
    assert last["time"] == "2026-03-01T08:00:30Z" and last["bindings"][0]["n"].startswith('"30"')


@pytest.mark.parametrize("select, modifiers, kind", [
    ("(COUNT(*) AS ?n) (SUM(?v) AS ?sum)", "", "landmark"),
    ("?k (COUNT(?v) AS ?n) (MIN(?v) AS ?lo) (MAX(?v) AS ?hi)", "GROUP BY ?k", "landmark"),
    ("?o ?v", "", "landmark"),
    ("(AVG(?v) AS ?a)", "", "whole"),
    ("(COUNT(DISTINCT ?v) AS ?n)", "", "whole"),
    ("?k (SUM(?v) AS ?sum)", "GROUP BY ?k HAVING (SUM(?v) > 3)", "whole"),
    ("?k (SUM(?v) AS ?sum)", "GROUP BY ?k ORDER BY ?k", "whole"),
    ("(SUM(?v * 2) AS ?sum)", "", "whole"),
])
def test_which_landmark_queries_are_evaluated_close_by_close(select, modifiers, kind):
    q = compile_query(query("RANGE UNBOUNDED STEP PT2S", select, modifiers))
    plan = r2r_plan(q, report_policy(q), QueryOptions())
    assert plan.kind == kind, plan.describe()
    assert r2r_plan(q, report_policy(q), QueryOptions(incremental=False)).kind == "whole"


SELECTS = [
    ("(COUNT(*) AS ?n) (SUM(?v) AS ?sum)", ""),
    ("?k (COUNT(?v) AS ?n) (SUM(?v) AS ?sum) (MIN(?v) AS ?lo) (MAX(?v) AS ?hi)", "GROUP BY ?k"),
    ("(MIN(?v) AS ?lo) (MAX(?v) AS ?hi) (COUNT(*) AS ?n)", ""),
    ("?k ?v", ""),
    ("?k (SUM(?v) AS ?sum)", "GROUP BY ?k"),
]
# Values: integers, decimals and a string (SUM over it is an error: unbound, as in one evaluation).
VALUES = st.sampled_from(["1", "2", "7", "-3", "2.5", "0.25", '"x"'])
element = st.tuples(st.integers(0, 24), st.integers(0, 2), VALUES)


def _stream_file(elements) -> str:
    lines = ["@prefix ex: <http://example.org/> .", "@prefix prov: <http://www.w3.org/ns/prov#> .",
             "@prefix xsd: <http://www.w3.org/2001/XMLSchema#> ."]
    for n, (second, key, value) in enumerate(elements):
        lines.append('ex:e%d prov:generatedAtTime "2026-03-01T08:00:%02dZ"^^xsd:dateTime .' % (n, second))
        lines.append("ex:e%d { ex:o%d ex:key %d ; ex:v %s . }" % (n, n, key, value))
    return "\n".join(lines) + "\n"


def _replay(text, path, options, start=T0):
    replay = Replay(ReplayInput.single(text, [(EX + "s", path)], start, T0 + 30 * S, options=options))
    records = []
    for _, record in replay.run():
        record["bindings"] = sorted(tuple(sorted(row.items())) for row in record["bindings"])
        records.append(record)
    assert replay.registered["replay"].status.state == "running", replay.registered["replay"].status.last_error
    return records, replay.registered["replay"].evaluator.r2r.kind


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(elements=st.lists(element, max_size=16), select=st.sampled_from(SELECTS), step=st.integers(1, 7),
       start=st.integers(-5, 8), r2s=st.sampled_from(["", "ISTREAM", "DSTREAM"]),
       report=st.sampled_from([None, "non-empty", "periodic(PT3S)"]))
def test_a_landmark_close_by_close_gives_what_the_whole_window_gives(elements, select, step, start, r2s, report):
    origin = T0 + start * S
    from rspstar.translator.temporal import format_instant
    text = query('RANGE UNBOUNDED STEP PT%dS START "%s"^^xsd:dateTime' % (step, format_instant(origin)),
                 r2s + " " + select[0], select[1])
    options = {"report": report} if report else {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.trig"
        path.write_text(_stream_file(elements))
        fast, kind = _replay(text, path, dict(options, incremental="true"))
        whole, whole_kind = _replay(text, path, dict(options, incremental="false"))
    assert kind == "landmark" and whole_kind == "whole"
    assert fast == whole


@pytest.mark.parametrize("incremental", ["true", "false"])
def test_a_late_element_counts_at_the_next_close_either_way(incremental):
    store = StreamStore()
    clock = VirtualClock(T0)
    engine = Runner(store, clock)
    registered = engine.register(query("RANGE UNBOUNDED STEP PT2S", "?k (SUM(?v) AS ?sum)", "GROUP BY ?k"), "q",
                                 options={"incremental": incremental})
    _element(store, 0, 0.5, key=1, value=10)
    _element(store, 1, 2.5, key=2, value=20)
    for t in (2, 4):
        store.advance_watermark(EX + "s", T0 + t * S)
        clock.set(T0 + t * S)
        engine.tick()
    _element(store, 2, 1.0, key=1, value=5)        # late: below the watermark, in a range already read
    _element(store, 3, 4.5, key=2, value=1)
    store.advance_watermark(EX + "s", T0 + 6 * S)
    clock.set(T0 + 6 * S)
    engine.tick()
    sums = [sorted((row["k"], row["sum"]) for row in r["bindings"]) for r in registered.history.since()]
    integer = lambda n: '"%d"^^<http://www.w3.org/2001/XMLSchema#integer>' % n
    assert sums == [[(integer(1), integer(10))],
                    [(integer(1), integer(10)), (integer(2), integer(20))],
                    [(integer(1), integer(15)), (integer(2), integer(21))]]
    assert registered.status.late_elements == 1


def test_rspstar_check_explains_each_window_in_words(tmp_path, capsys):
    import json
    from rspstar.endpoint.cli import main
    text = (PREFIXES + "SELECT ?k (COUNT(?v) AS ?n)\n"
            "FROM NAMED WINDOW ex:w ON ex:s [RANGE UNBOUNDED STEP PT1H]\n"
            "FROM NAMED WINDOW ex:p ON ex:s [ELEMS 2 PARTITION BY ex:key]\n"
            "FROM NAMED WINDOW ex:f ON ex:s [FACTS { ?k ex:on true } SINCE { ?o ex:key ?k } TILL { ?o ex:off ?k }]\n"
            "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:key ?k ; ex:v ?v } } } GROUP BY ?k")
    path = tmp_path / "q.rq"
    path.write_text(text)
    assert main(["check", str(path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    explained = {w["kind"]: w["explained"] for w in summary["windows"]}
    assert explained["landmark"].startswith("everything since the epoch") and "PT3600S" in explained["landmark"]
    assert "the last 2 elements of that partition" in explained["partitioned"]
    assert "whenever a fact opens or closes" in explained["facts"]
    assert summary["report"] == "at every window close"
