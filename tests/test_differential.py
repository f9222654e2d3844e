"""No fast path may change an answer (docs/design.md, "Fast paths"): SQLancer's NoREC idea for a
stream engine. Whole RSP-QL* queries drawn from the grammar the engine accepts, with streams and
background data (tests/differential/strategies.py), are evaluated three ways and compared at
every instant:

(a) the engine as it runs by default, every optimisation on, the drawn query registered beside
    a copy under another R2S operator and a copy with other constants, so that they share the
    runner's ranges and constant groups;
(b) the engine with every optimisation off (rspu_cache, lazy_bind, h4, fuse_rspu, incremental,
    share_constants false), the query alone;
(c) a naive reference written from the specification alone (tests/differential/reference.py):
    windows from the spec's formulas, a fresh Oxigraph store per evaluation, the query's WINDOW
    patterns written out as the spec defines their datasets, R2S and report policies per spec.

Records compare as the conformance suite compares them (tests/conformance/compare.py). Failing
examples are kept in tests/differential/examples (hypothesis's database, committed), so that one
comes back at every run until it is fixed. The long run (tens of thousands of examples) is
marked `differential_long` and collected only when -m names it (tests/conftest.py): `pytest -m
differential_long tests/test_differential.py` (DIFFERENTIAL_EXAMPLES sets how many).

Which examples reach which fast path is written down in FAST_PATH_EXAMPLES below, each checked
to reach it; the drawn examples of the normal run are checked to reach every one of them.
"""
import collections
import dataclasses
import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, reject, settings, strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from conftest import compare_lines
from rspstar.store.isolation import EvaluationWorkers
from differential.model import (
    EX, T0, Aggregates, Background, BackgroundData, Binary, Bind, Call, Case, ContentBlock, CountWindow, Declaration,
    Element, EventGroup, EventPattern, EventQuery, FactBlock, FactWindow, Filter, KeyTriple, LandmarkWindow, MS, Num,
    PartitionedWindow, PastWindow, Query, TimeWindow, TypeTriple, ValueTriple, Var, WindowBlock,
)
from rspstar.translator.temporal import parse_instant as instant
from differential.reference import Reference, first_close, start_of
from differential.runs import FAST_PATHS, OFF, Reached, Refused, optimised_queries, partitioned, replay
from differential.strategies import bound_cases, cases

DATABASE = DirectoryBasedExampleDatabase(str(Path(__file__).parent / "differential" / "examples"))
NORMAL_EXAMPLES = 600


def check(case: Case, reached: Reached | None = None) -> list[dict]:
    """The three evaluations of the case agree at every instant; the reference's records."""
    queries = optimised_queries(case.query)
    before = reached["evaluated with the rspu table"] if reached is not None else 0
    try:
        if reached is not None:
            reached.entailment = case.query.entailment
        optimised = replay(case, queries, {}, reached)
    except Refused as refusal:
        why = refusal_asked_for(case.query)
        assert why, "the engine refuses a query the specification accepts: %s\n%s" % (refusal, case.query.text())
        reject()
    finally:
        if reached is not None:
            reached.entailment = False
    if reached is not None:
        reached.spellings(case.query, before)
    plain = replay(case, {"q": case.query}, OFF)
    expected = Reference(case).records(list(queries.values()))
    problems = differences(expected[0], plain["q"], "all optimisations off")
    for k, qid in enumerate(queries):
        problems += differences(expected[k], optimised[qid], "all optimisations on, query %r" % qid)
    assert not problems, "\n".join(problems[:12]) + "\n\n" + "\n\n".join(
        "%s:\n%s" % (qid, q.text()) for qid, q in queries.items()) + "\n\n%r" % case
    return expected[0]


def differences(expected: list, actual: list, what: str) -> list[str]:
    found = ["%s: %s" % (what, p) for p in compare_lines(expected, actual, False)]
    for e, a in zip(expected, actual):
        if set(e["windows"]) != set(a.get("windows", {})):
            found.append("%s: %s: windows listed %s, expected %s" % (what, e["time"], sorted(a.get("windows", {})),
                                                                        sorted(e["windows"])))
    return found


def refusal_asked_for(query: Query) -> str | None:
    """Why the specification asks to refuse the query (section 6.6: strategies whose instants
    never meet), or None."""
    decls = {d.index: d for d in query.declarations}
    progressions = []
    for s in query.policy:
        if s.kind == "close" and s.window is not None and first_close(decls[s.window]) is not None:
            progressions.append(first_close(decls[s.window]))
        elif s.kind == "periodic":
            period = (s.period if s.period is not None else query.every) * MS
            starts = [t0 for d in decls.values() if (t0 := start_of(d)) is not None]
            progressions.append((min(starts) if starts else 0, period))
    # Two progressions first + k·step meet iff their firsts differ by a multiple of gcd(steps);
    # all of them meet iff every pair does and the combined one meets the rest.
    combined = None
    for first, step in progressions:
        if combined is None:
            combined = (first, step)
            continue
        f, s = combined
        g = math.gcd(s, step)
        if (first - f) % g:
            return "the instants of its close and periodic strategies never meet"
        lcm = s // g * step
        x = next(f + k * s for k in range(step // g) if (f + k * s - first) % step == 0)
        combined = (x, lcm)
    return None


SETTINGS = dict(deadline=None, database=DATABASE, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.filter_too_much])
# The normal run draws the same examples on every machine and run (a seed from each test's code, and
# the Hypothesis release pinned in pyproject.toml): which fast paths it reaches is then a fact
# of the code, not of the day's draw. The long run draws afresh.
FIXED = dict(SETTINGS, derandomize=True, database=None)


def test_the_optimised_engine_the_plain_engine_and_the_reference_agree_and_every_fast_path_is_reached():
    reached = Reached()
    readings = collections.Counter()

    @settings(max_examples=NORMAL_EXAMPLES, **FIXED)
    @given(cases())
    def agree(case):
        records = check(case, reached)
        if holds_content_block(case.query):
            # Spec 6.15: the blocks holding no GRAPH pattern, by the option's value, and how
            # many of those examples answered something.
            readings[case.query.default_graph] += 1
            readings["answered"] += any(r.get("bindings") or r.get("triples") or r.get("boolean") for r in records)

    with reached.counting():
        agree()
    missing = [path for path in FAST_PATHS if not reached[path]]
    assert not missing, "fast paths the drawn examples did not reach: %s (reached: %s)" % (missing, dict(reached))
    assert readings[None] >= 40 and readings["union"] and readings["timestamps"] and readings["answered"] >= 10, \
        "too few GRAPH-less window blocks drawn: %s" % dict(readings)


BOUND_EXAMPLES = 120


def test_groups_of_queries_differing_in_numbers_compared_with_a_variable_agree_at_the_boundaries():
    """Each drawn query registered beside copies spelling its compared numbers other ways
    (runs.optimised_queries), over values at those numbers' boundaries: the group applying the
    bounds by its index answers each query as every optimisation off and the reference do."""
    reached = Reached()

    @settings(max_examples=BOUND_EXAMPLES, **FIXED)
    @given(bound_cases())
    def agree(case):
        check(case, reached)

    with reached.counting():
        agree()
    assert reached["constant bounds"] >= BOUND_EXAMPLES // 2, dict(reached)


def holds_content_block(node) -> bool:
    """Whether a WINDOW block holding no GRAPH pattern (model.ContentBlock) stands in the query."""
    if isinstance(node, ContentBlock):
        return True
    if isinstance(node, tuple):
        return any(holds_content_block(n) for n in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return any(holds_content_block(getattr(node, f.name)) for f in dataclasses.fields(node))
    return False


def keyed(case: Case) -> Case:
    """The case with every GRAPH block keying its observation by ?k (what partitioned queries
    need: docs/partitioned-queries.md, rule "binds")."""
    def keying(item):
        if isinstance(item, WindowBlock) and not any(isinstance(i, KeyTriple) and i.constant is None
                                                     and i.predicate == "key" for i in item.inner):
            return dataclasses.replace(item, inner=(KeyTriple(),) + item.inner)
        return item
    return dataclasses.replace(case, query=dataclasses.replace(case.query, where=tuple(map(keying, case.query.where))))


def test_partitioned_evaluation_agrees_with_the_reference():
    # Partitioned evaluation's per-group work driven in-process through the executors' own
    # functions (runs.partitioned); tests/test_partitions_spark.py runs it on Spark. A
    # partitioned query reports no instant while none of its key groups holds elements (test
    # below): when none holds any at the end, its records are the reference's up to where it
    # stopped; otherwise all of them.
    evaluated = []

    @settings(max_examples=60, **FIXED)
    @given(st.one_of(cases("distributive"), cases("joined")).map(keyed), st.integers(1, 4))
    def agree(case, batch_seconds):
        run = partitioned(case, case.query, batch_seconds * 1_000_000)
        if run is None:
            reject()
        records, held = run
        expected = Reference(case).records([case.query])[0]
        if not held:
            expected = expected[:len(records)]
        problems = differences(expected, records, "partitioned")
        assert not problems, "\n".join(problems[:12]) + "\n(a key group held elements at the end: %s, micro-batches " \
            "of %d s)\n%r" % (held, batch_seconds, case)
        evaluated.append(len(records))

    agree()
    assert sum(evaluated) > 100      # instants evaluated partitioned, not refusals


def test_a_partitioned_query_reports_its_instants_while_no_key_group_holds_elements(tmp_path):
    # A partitioned query's instants come from its key groups' reports, and no group reports
    # while none holds elements: before the first element, and live after they all expired
    # until the next comes. The engine evaluates those instants itself when they are due by
    # max_delay, empty (DStream: the rows that left), as the single store does. Played live
    # (test_partitions.play_live: a micro-batch a second on a virtual clock, elements stamped
    # on arrival) beside the single store fed the same elements: the same records as the
    # reference's, the same triggers as the single store's.
    from rspstar.endpoint.engine.clock import VirtualClock
    from rspstar.endpoint.engine.runner import EngineConfig, Runner
    from rspstar.store.codec import Payload
    from rspstar.store.partitions import KeptStores, PlanRunner
    from rspstar.store.stream_store import StreamStore
    from rspstar.translator.partition import PartitionKey
    from differential.model import EX, T0, stream_file
    from test_partitions import play_live

    case = keyed(_select((WindowBlock(1, (KeyTriple(), ValueTriple())),), projection=("k", "v1"),
                         declarations=(Declaration(1, 1, TimeWindow(2000, start=1000)),), r2s="DSTREAM",
                         r2s_written="keyword"))
    query = case.query
    keys = {EX + "s1": PartitionKey(EX + "key")}
    # No element at all; one that no window ever holds (stamped before the windows start), whose
    # key group drops it at once; one whose rows leave at 5 s, then none until 10.5 s.
    for elements in ((), _elements((1, 0, 1, 3, None)), (Element(1, 1500, 1, 3, None), Element(1, 10_500, 2, 4, None))):
        run = dataclasses.replace(case, elements=elements, end=14_000)
        expected = Reference(run).records([query])[0]
        assert [r["time"] for r in expected][:2] == ["2026-03-01T08:00:03Z", "2026-03-01T08:00:05Z"]
        clock = VirtualClock(T0)
        config = EngineConfig(partition_keys=keys, federation_allowed=None, data_dir=tmp_path / str(len(elements)))
        engine = Runner(StreamStore(), clock, config)
        single = Runner(StreamStore(), clock)
        partitioned = engine.register(query.text(), "q", options=dict(query.options(), partition="?k"))
        alone = single.register(query.text(), "q", options=query.options())
        payloads = [Payload(EX + "s1", "trig", "s1.trig", stream_file(list(elements), 1), 0)]
        play_live(engine, "q", PlanRunner(engine.partition_plan("q"), KeptStores(8)), payloads, keys,
                  T0 + (run.end + 3000) * MS, 1_000_000, single)
        records = [r for r in partitioned.history.since() if r["time"] <= expected[-1]["time"]]
        assert not differences(expected, [{k: v for k, v in r.items() if k not in ("trigger", "latency_ms")}
                                          for r in records], "partitioned")
        assert [(r["time"], r["trigger"]) for r in records] == \
            [(r["time"], r["trigger"]) for r in alone.history.since() if r["time"] <= expected[-1]["time"]]


ISOLATED_EXAMPLES = 6


def test_evaluations_in_worker_processes_over_an_on_disk_store_give_the_same_records():
    # Not an optimisation, a second way of computing the same records (store/isolation.py): a
    # sample of drawn cases replayed over an on-disk store with every evaluation in a worker
    # process (isolate_evaluations = always), compared with the reference.
    workers = EvaluationWorkers()
    evaluated = []
    try:
        @settings(max_examples=ISOLATED_EXAMPLES, **FIXED)
        @given(cases())
        def agree(case):
            try:
                records = replay(case, {"q": case.query}, {}, isolated=workers)["q"]
            except Refused:
                reject()
            problems = differences(Reference(case).records([case.query])[0], records, "isolated")
            assert not problems, "\n".join(problems[:12]) + "\n%r" % case
            evaluated.append(len(records))

        agree()
    finally:
        workers.close()
    assert workers.calls > 0 and sum(evaluated) > 0


@pytest.mark.differential_long
def test_the_long_differential_run():
    @settings(max_examples=int(os.environ.get("DIFFERENTIAL_EXAMPLES", "20000")),
              phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink], **SETTINGS)
    @given(cases())
    def agree(case):
        check(case, reached=None)

    agree()


# -- which examples reach which fast path ------------------------------------------------------------
def _elements(*spec):
    """Elements (stream, second, key, value, uncertainty)."""
    return tuple(Element(s, at * 1000, k, v, u) for s, at, k, v, u in spec)


STREAM = _elements((1, 0, 1, 3, "N(0,1)"), (1, 1, 2, 7, "N(1,4)"), (1, 2, 1, 5, None), (1, 2, 3, 8, "U(-1,1)"),
                   (1, 4, 2, 1, "N(0,1)"), (1, 5, 1, 9, "N(0,1)"), (1, 7, 3, 4, "N(0,1)"), (1, 9, 1, 6, None),
                   (2, 1, 1, 2, "N(0,1)"), (2, 3, 2, 8, None), (2, 6, 1, 5, "N(0,1)"), (2, 8, 3, 3, "N(0,1)"))
BACKGROUND = BackgroundData(limits=(4, 6, None), distributions=("N(0,1)", "N(2,2)", None), sensor="N(0,1)",
                            labels=(1, 2))
SLIDING = Declaration(1, 1, TimeWindow(4000, 1000))
OBSERVATION = (KeyTriple(), ValueTriple("annotated"))


def _select(where, projection=("k", "v1"), declarations=(SLIDING,), background=BACKGROUND, elements=STREAM, **more):
    return Case(Query("SELECT", declarations, where, projection=projection, **more), elements, background, end=12_000)


def _greater(distribution, threshold, spelling="rspu"):
    return Binary(">", Call("greaterThan", (distribution, Num(threshold)), spelling), Num("0.1"))


# The issue's reproduction: a nested rspu: call over a background value in a top-level FILTER.
BACKGROUND_CALL = _select((Background("sensor"), WindowBlock(1, OBSERVATION),
                           Filter(Binary(">=", Call("greaterThan", (Call("add", (Var("mu"), Var("v", 1))), Num("5"))),
                                         Num("0.1")))), projection=("v1",))

# A landmark from T0 closing every 2 s, over integers, decimals and a string (SUM over it: unbound).
LANDMARK = Declaration(1, 1, LandmarkWindow(2000, start=0))
MIXED = tuple(dataclasses.replace(e, value={1: "2.5", 4: '"x"', 6: "0.25"}.get(n, e.value)) for n, e in enumerate(STREAM))
ODD = tuple(dataclasses.replace(e, value={0: "4.0", 2: "4e0", 3: '"NaN"^^xsd:double', 5: '"INF"^^xsd:double',
                                           7: '"abc"^^xsd:integer', 8: '"4.5"^^xsd:float'}.get(n, e.value))
            for n, e in enumerate(MIXED))
# A schema (spec 6.11): ex:v under ex:measure, ex:key's domain ex:Obs under ex:Thing, ex:limit under ex:bound.
SCHEMA = dataclasses.replace(BACKGROUND, schema=(("ex:v", "subPropertyOf", "ex:measure"), ("ex:key", "domain", "ex:Obs"),
                                                 ("ex:Obs", "subClassOf", "ex:Thing"),
                                                 ("ex:limit", "subPropertyOf", "ex:bound")))
ENTAILED = (KeyTriple(), ValueTriple("none", "measure"), TypeTriple("o", "Thing"))

FAST_PATH_EXAMPLES = {
    # A SELECT over one sliding time window, one GRAPH block: its ranges evaluated once.
    "incremental ranges": _select((WindowBlock(1, OBSERVATION),)),
    # The same block registered twice (the copy under another R2S operator): ranges read once.
    "shared ranges": _select((WindowBlock(1, OBSERVATION),)),
    # A row-wise FILTER's literal: the copy with other constants joins the query's group.
    "constant groups": _select((WindowBlock(1, OBSERVATION, side=(Filter(Binary(">", Var("v"), Num("4"))),)),)),
    # Numbers compared with ?v: the copies spelling them other ways form a group applying its
    # bounds itself, over integers, decimals, a string and the values below.
    "constant bounds": _select((WindowBlock(1, OBSERVATION, side=(
        Filter(Binary("<=", Num("4"), Var("v"))), Filter(Binary("<", Var("v"), Num("7"))))),), elements=ODD),
    # The same rspu: call with the same arguments on several rows of one evaluation.
    "rspu cache": _select((WindowBlock(1, OBSERVATION), Background("sensor"), Filter(_greater(Var("mu"), "-1"))),
                          declarations=(Declaration(1, 1, CountWindow(3)),)),
    # A window evaluated whole at each close (a count window): an element's rspu: call at one
    # close is answered at the next from the answers kept.
    "rspu cache across evaluations": _select((WindowBlock(1, OBSERVATION, side=(Filter(_greater(Var("u"), "2")),)),),
                                             declarations=(Declaration(1, 1, CountWindow(3)),)),
    # A BIND of an rspu: call whose variable nothing reads.
    "lazy binding": _select((WindowBlock(1, OBSERVATION + (Bind(Call("add", (Var("u"), Var("v")))),)),)),
    # An rspu: FILTER that may run after the joins (in a query evaluated whole: a count window):
    # the chooser tries both plans, then probes.
    "H4 deferred": _select((WindowBlock(1, OBSERVATION, side=(Filter(_greater(Var("u"), "2")),)), Background("limit")),
                           declarations=(Declaration(1, 1, CountWindow(3)),)),
    "H4 in place": _select((WindowBlock(1, OBSERVATION, side=(Filter(_greater(Var("u"), "2")),)), Background("limit")),
                           declarations=(Declaration(1, 1, CountWindow(3)),)),
    # A nested call, one fused call (and the issue's case: over a background value).
    "fused calls": BACKGROUND_CALL,
    # Queries calling no rspu: function are evaluated without the table.
    "evaluated without the rspu table": _select((WindowBlock(1, OBSERVATION),),
                                                declarations=(Declaration(1, 2, PastWindow(5000, 2000, 2000)),)),
    "evaluated with the rspu table": BACKGROUND_CALL,
    "rspu IRI prefixed": _select((WindowBlock(1, OBSERVATION, side=(Filter(_greater(Var("u"), "2", "rspu")),)),)),
    "rspu IRI full": _select((WindowBlock(1, OBSERVATION, side=(Filter(_greater(Var("u"), "2", "full")),)),)),
    "rspu IRI base-relative": _select((WindowBlock(1, OBSERVATION, side=(Filter(_greater(Var("u"), "2", "base")),)),)),
    "rspu IRI other prefix": _select((WindowBlock(1, OBSERVATION, side=(Filter(_greater(Var("u"), "2", "other")),)),)),
    # Two windows joined on ?k with the background: each window's block by ranges, then joined.
    "joined windows": _select((WindowBlock(1, OBSERVATION), WindowBlock(2, (KeyTriple(), ValueTriple())),
                               Background("limit")), projection=("k", "v1", "v2", "l"),
                              declarations=(SLIDING, Declaration(2, 2, TimeWindow(3000, 1000)))),
    # A distributive query over a landmark: the rows of each close's new elements added.
    "landmark rows": _select((WindowBlock(1, OBSERVATION),), declarations=(LANDMARK,), elements=MIXED),
    # COUNT(*), SUM, MIN and MAX per key over a landmark: each close's combined with the ones before.
    "landmark aggregates": _select((WindowBlock(1, OBSERVATION),), projection=None, declarations=(LANDMARK,),
                                   elements=MIXED, aggregates=Aggregates(True, functions=(
                                       ("COUNT", "*"), ("SUM", "v1"), ("MIN", "v1"), ("MAX", "v1")))),
    # The same fast paths over what a schema entails.
    "incremental ranges under entailment": _select((WindowBlock(1, ENTAILED),), background=SCHEMA, entailment=True),
    "constant groups under entailment": _select((WindowBlock(1, ENTAILED, side=(Filter(Binary(">", Var("v"), Num("4"))),)),),
                                                background=SCHEMA, entailment=True),
    # The copy with other constants is parsed as the query was, and joins its group with the
    # constants read from the query's.
    "constants parsed once": _select((WindowBlock(1, OBSERVATION, side=(Filter(Binary(">", Var("v"), Num("4"))),)),)),
    "constants read from their shape": _select((WindowBlock(1, OBSERVATION, side=(
        Filter(Binary(">", Var("v"), Num("4"))),)),)),
    "joined windows under entailment": _select((WindowBlock(1, ENTAILED), WindowBlock(2, (KeyTriple(), ValueTriple())),
                                                Background("bound")), projection=("k", "v1", "v2", "l"),
                                               declarations=(SLIDING, Declaration(2, 2, TimeWindow(3000, 1000))),
                                               background=SCHEMA, entailment=True),
}


def test_every_fast_path_has_an_example():
    assert set(FAST_PATH_EXAMPLES) == set(FAST_PATHS)


@pytest.mark.parametrize("path", FAST_PATHS)
def test_the_example_of_each_fast_path_reaches_it_and_agrees(path):
    reached = Reached()
    with reached.counting():
        check(FAST_PATH_EXAMPLES[path], reached)
    assert reached[path], "not reached: %s (reached: %s)" % (path, dict(reached))


def test_the_issues_reproduction_answers_as_the_reference_does():
    # Issue 43: refused as unknown function <urn:rspstar:rspu-fused:greaterThan(add(_,_),_)>.
    check(BACKGROUND_CALL)
    records = Reference(BACKGROUND_CALL).records([BACKGROUND_CALL.query])[0]
    assert any(r["bindings"] for r in records) and any(not r["bindings"] for r in records)


# -- the reference reads the specification as its worked examples do ---------------------------------
# (each case is also run through the engine, optimised and plain: `check`)
def _rows(records, *names) -> dict[int, list]:
    """Per evaluation (seconds after T0), the rows' values of `names` (local names, '-' unbound)."""
    def short(term):
        return term.split('"')[1] if term.startswith('"') else term.rsplit("/", 1)[-1].rstrip(">")
    return {(instant(r["time"]) - T0) // 1_000_000: sorted(tuple(short(row[n]) if n in row else "-" for n in names)
                                                          for row in r["bindings"]) for r in records}


def _moves(*spec):
    """Elements (second, key, "enter" | "leave", room) on stream 1."""
    return tuple(Element(1, at * 1000, key, 0, None, (), (verb, room)) for at, key, verb, room in spec)


# Spec 6.13's example (seed 004 Q9): Axel (k1) enters A (r1) at 2, Darko (k2) enters A at 3, Axel
# leaves A and enters B (r2) at 6, Darko leaves A and enters B at 8.
SEED_Q9 = _moves((2, 1, "enter", 1), (3, 2, "enter", 1), (6, 1, "leave", 1), (6, 1, "enter", 2), (8, 2, "leave", 1),
                 (8, 2, "enter", 2))


def test_the_reference_gives_the_fact_windows_worked_example():
    presence = Declaration(1, 1, FactWindow("presence", 3000, start=0))
    case = Case(Query("SELECT", (presence,), (FactBlock(1, ("?k", "ex:in", "?r")),), projection=("k", "r")),
                SEED_Q9, BACKGROUND, end=10_000)
    records = Reference(case).records([case.query])[0]
    # "counting per room every 3 s from 0 gives A 2 at 3; A 1 and B 1 at 6; B 2 at 9"
    assert _rows(records, "k", "r") == {3: [("k1", "r1"), ("k2", "r1")], 6: [("k1", "r2"), ("k2", "r1")],
                                        9: [("k1", "r2"), ("k2", "r2")]}
    assert records[0]["windows"] == {EX + "w1": ["2026-03-01T08:00:03Z"] * 2}
    check(case)
    # Without STEP: at every instant a fact opens or closes, each annotated with its start; Axel
    # entering B again at 9 opens nothing new and triggers nothing.
    since = Declaration(1, 1, FactWindow("presence"))
    case = Case(Query("SELECT", (since,), (FactBlock(1, ("?k", "ex:in", "?r"), annotated=True),),
                      projection=("k", "r", "s1")), SEED_Q9 + _moves((9, 1, "enter", 2)), BACKGROUND, end=10_000)
    records = Reference(case).records([case.query])[0]
    assert _rows(records, "k", "r", "s1") == {
        2: [("k1", "r1", "2026-03-01T08:00:02Z")],
        3: [("k1", "r1", "2026-03-01T08:00:02Z"), ("k2", "r1", "2026-03-01T08:00:03Z")],
        6: [("k1", "r2", "2026-03-01T08:00:06Z"), ("k2", "r1", "2026-03-01T08:00:03Z")],
        8: [("k1", "r2", "2026-03-01T08:00:06Z"), ("k2", "r2", "2026-03-01T08:00:08Z")]}
    check(case)


def test_the_reference_reads_ep_sparql_operators_as_worked_out_by_hand():
    # A: key 1's readings 1 at 1 and 3 at 4; B: key 2's 2 at 2, 4 at 4, 5 at 6; bound < 3 s
    # (tests/test_ep_sparql.py works the same stream out by hand from spec 6.12).
    elements = _elements((1, 1, 1, 1, None), (1, 2, 2, 2, None), (1, 4, 1, 3, None), (1, 4, 2, 4, None),
                         (1, 6, 2, 5, None))
    a, b = EventPattern(1, (KeyTriple(1), ValueTriple())), EventPattern(1, (KeyTriple(2), ValueTriple()))
    worked = {
        "SEQ": {1: [], 2: [("1", "2")], 4: [], 6: [("3", "5")]},
        "EQUALS": {1: [], 2: [], 4: [("3", "4")], 6: []},
        "AND": {1: [], 2: [("1", "2")], 4: [("3", "2"), ("3", "4")], 6: [("3", "5")]},
        "OR": {1: [("1", "-")], 2: [("-", "2")], 4: [("-", "4"), ("3", "-")], 6: [("-", "5")]},
        "OPTIONALSEQ": {1: [("1", "-")], 2: [("1", "2")], 4: [("3", "-")], 6: [("3", "5")]},
        "EQUALSOPTIONAL": {1: [("1", "-")], 2: [], 4: [("3", "4")], 6: []},
    }
    for operator, rows in worked.items():
        case = Case(EventQuery(EventGroup((a, b), (operator,)), 3000, projection=("v1", "v2")), elements, BACKGROUND,
                    end=6_000)
        records = Reference(case).records([case.query])[0]
        assert _rows(records, "v1", "v2") == rows, operator
        assert records[0]["windows"] == {EX + "s1": ["2026-03-01T07:59:58Z", "2026-03-01T08:00:01Z"]}
        check(case)


def test_the_reference_reads_partitioned_and_landmark_windows_as_the_spec_defines_them():
    # 6.9: ties in arrival order; an element with two key values in each partition, held once;
    # one with none in none; closes at every τ of an element with a key.
    elements = tuple(Element(1, at * 1000, 1, n, None, tags) for n, (at, tags) in enumerate(
        [(1, (1,)), (2, (2,)), (2, (1,)), (3, ()), (4, (1, 3)), (4, (1,))]))
    case = Case(Query("SELECT", (), ()), elements, BACKGROUND)
    reference = Reference(case)
    two, one = Declaration(1, 1, PartitionedWindow(2, ("tag",))), Declaration(1, 1, PartitionedWindow(1, ("tag",)))
    held = reference.content(two, case.query, T0 + 4_000_000, False)
    assert held.elements == [1, 4, 5] and held.shown == (T0 + 2_000_000, T0 + 4_000_000)
    assert reference.content(two, case.query, T0 + 2_000_000, False).elements == [0, 1, 2]
    assert reference.content(one, case.query, T0 + 2_000_000, False).elements == [1, 2]
    assert reference.content(one, case.query, T0 + 999_999, False) is None
    assert reference.closes(one, case.query, T0, T0 + 10_000_000) == {T0 + s * 1_000_000 for s in (1, 2, 4)}
    # 6.10: closes at τ0 + i·β, i >= 1 (none at τ0), holding [τ0, x_i), listed [τ0, x_i].
    landmark = Declaration(1, 1, LandmarkWindow(2000, start=1000))
    assert reference.closes(landmark, case.query, T0, T0 + 6_000_000) == {T0 + 3_000_000, T0 + 5_000_000}
    content = reference.content(landmark, case.query, T0 + 4_000_000, False)
    assert content.elements == [0, 1, 2] and content.shown == (T0 + 1_000_000, T0 + 3_000_000)
    assert reference.content(landmark, case.query, T0 + 2_999_999, False) is None
    for declaration in (two, landmark):
        check(Case(Query("SELECT", (declaration,), (WindowBlock(1, (KeyTriple(), ValueTriple())),),
                         projection=("k", "v1")), elements, BACKGROUND, end=6_000))


def test_the_reference_gives_an_inferred_triple_no_annotation():
    # 6.11: ex:v under ex:measure; the element's ex:measure triples are inferred, not annotated.
    plain = WindowBlock(1, (KeyTriple(), ValueTriple("none", "measure")))
    annotated = WindowBlock(1, (KeyTriple(), ValueTriple("annotated", "measure")))
    for block, rows in ((plain, True), (annotated, False)):
        case = _select((block,), background=SCHEMA, entailment=True)
        records = Reference(case).records([case.query])[0]
        assert any(r["bindings"] for r in records) == rows
        check(case)
