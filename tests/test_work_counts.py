"""Work counted, not timed (tests/work.py): the store evaluations a fixed workload costs through
every door, for every fast path that saves some (docs/design.md, "Fast paths and the
differential test"). A change that loses a fast path through any door fails here, on any
machine."""
from __future__ import annotations

import json

import pytest

from rspstar.endpoint.cli import main as cli_main
from rspstar.endpoint.engine import sharing
from rspstar.store.codec import Payload
from rspstar.store.partitions import KeptStores, PlanRunner, key_group, keyed_elements
from rspstar.translator.partition import PartitionKey
from rspstar.translator.temporal import format_instant
from test_partitions import play     # the micro-batches as Spark runs them
from work import (
    DOORS, EX, REGISTERING, STREAM, S, T0, Work, Workload, drive, elements, python_api, rows, run, trig,
)

SOSA = "http://www.w3.org/ns/sosa/"
XSD = "http://www.w3.org/2001/XMLSchema#"

SENSOR = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S STEP PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:madeBySensor ex:s%d ; sosa:hasSimpleResult ?v } } }
"""
CLOSES = 11        # T0 + 2 s ... T0 + 22 s


def sensor_queries(count: int) -> dict[str, str]:
    return {"q%04d" % k: SENSOR % (k % 10) for k in range(count)}


@pytest.mark.parametrize("door", DOORS)
def test_queries_watching_one_sensor_each_cost_one_querys_evaluations_through_every_door(door, tmp_path):
    one_records, one = run(door, Workload(sensor_queries(1), elements()), tmp_path / "one")
    many_records, many = run(door, Workload(sensor_queries(10), elements()), tmp_path / "many")
    assert len(many_records) == 10 and all(len(r) == CLOSES for r in many_records.values())
    assert rows(many_records["q0000"]) == rows(one_records["q0000"])
    # One evaluation per time range for the ten, as for one: never ten times as many (nor
    # Oxigraph queries).
    assert one.evaluations > 0 and (many.evaluations, many.elements) == (one.evaluations, one.elements)
    assert many.oxigraph == one.oxigraph == one.evaluations


@pytest.mark.parametrize("door", DOORS)
def test_a_query_of_a_group_is_rewritten_once_and_asks_its_next_instant_once_an_evaluation_through_every_door(
        door, tmp_path):
    one_records, one = run(door, Workload(sensor_queries(1), elements()), tmp_path / "one")
    many_records, many = run(door, Workload(sensor_queries(10), elements()), tmp_path / "many")
    assert len(many_records) == 10 and all(len(r) == CLOSES for r in many_records.values())
    # Each further query is rewritten once, to be checked (its warnings read that rewrite): the
    # group's query serves its evaluations, and its ranges are keyed by its group and constants,
    # not by a text of its own (three rewrites a query before).
    assert many.templates - one.templates == 9
    # Its window's next instant is worked out about once per evaluation, not once for each time
    # a run, its record and its status ask (eight times an evaluation before).
    assert many.instants_asked <= 10 * (CLOSES + 2) and one.instants_asked <= CLOSES + 2


@pytest.mark.parametrize("door", DOORS)
def test_queries_differing_in_constants_are_parsed_once_and_read_their_constants_from_the_first_through_every_door(
        door, tmp_path):
    one_records, one = run(door, Workload(sensor_queries(1), elements()), tmp_path / "one")
    many_records, many = run(door, Workload(sensor_queries(10), elements()), tmp_path / "many")
    assert rows(many_records["q0000"]) == rows(one_records["q0000"])
    # The nine further texts take the first one's syntax tree over their own tokens (each is
    # still checked: its rewrite, by Oxigraph), and their constants are read from where the
    # first one's are. Parsed besides, in either run: the check that the group's query
    # compiles, and the group's query (its table of ten) or, for one query alone, its text again
    # when it evaluates alone.
    assert many.parsed == one.parsed == 3, (many.parsed, one.parsed)
    assert many.constants_worked_out == one.constants_worked_out > 0
    assert many.templates - one.templates == 9


@pytest.mark.parametrize("door", DOORS)
def test_the_members_of_a_group_take_their_windows_from_it_through_every_door(door, tmp_path):
    one_records, one = run(door, Workload(sensor_queries(1), elements()), tmp_path / "one")
    many_records, many = run(door, Workload(sensor_queries(10), elements()), tmp_path / "many")
    assert rows(many_records["q0003"]) != rows(many_records["q0000"]) == rows(one_records["q0000"])
    # One query alone reads its window's new range at each close itself; the ten of a group are
    # each given their window's rows, made once for all at each close from the group's ranges.
    assert one.ranges_read >= CLOSES and many.ranges_read == 0, (one.ranges_read, many.ranges_read)
    assert (many.evaluations, many.elements) == (one.evaluations, one.elements)


@pytest.mark.parametrize("door", [door for door in DOORS if door != "replay files"])
def test_a_group_catching_up_on_many_closes_at_once_costs_one_querys_evaluations_through_every_door(door, tmp_path):
    # Every close due at once (a backlog): each query evaluates several closes in a turn before
    # the next one does (the runner's MAX_EVALUATIONS_PER_RUN). The group kept fewer windows made
    # than a turn makes: each member after the first found its first windows gone, made them for
    # all again (each evicting one the others had still to take): 38 evaluations of the group's
    # query for ten members, 98 for thirty, where one query makes 11.
    one_records, one = run(door, Workload(sensor_queries(1), elements(), at_once=True), tmp_path / "one")
    many_records, many = run(door, Workload(sensor_queries(30), elements(), at_once=True), tmp_path / "many")
    assert len(many_records) == 30 and all(len(r) == CLOSES for r in many_records.values())
    assert rows(many_records["q0010"]) == rows(one_records["q0000"])
    assert (many.evaluations, many.elements) == (one.evaluations, one.elements), (many.evaluations, one.evaluations)


RELATIVE = """PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v
FROM NAMED WINDOW <http://example.org/w> ON <http://example.org/stream> [RANGE PT10S STEP PT2S]
WHERE { WINDOW <http://example.org/w> { GRAPH ?g { ?o sosa:madeBySensor <%s> ; sosa:hasSimpleResult ?v } } }
"""


def test_a_relative_iri_read_against_two_files_bases_means_two_iris_and_their_queries_do_not_share(tmp_path):
    # The same text in two folders names two sensors, a/sensor and b/sensor; b/qc.rq differs
    # from a/qa.rq in a constant only, but its <other> is b/other. Each is evaluated with its own
    # base: no range of one serves another.
    files = {"qa": tmp_path / "a" / "qa.rq", "qb": tmp_path / "b" / "qb.rq", "qc": tmp_path / "b" / "qc.rq"}
    for path, local in zip(files.values(), ("sensor", "sensor", "other")):
        path.parent.mkdir(exist_ok=True)
        path.write_text(RELATIVE % local)
    sensors = [(tmp_path / folder / local).as_uri()
               for folder, local in (("a", "sensor"), ("b", "sensor"), ("b", "other"))]
    items = elements(sensors=3)
    stream = tmp_path / "stream.trig"
    stream.write_text(trig(items, sensors))
    work = Work()
    with work.counting():
        assert cli_main(["replay", *map(str, files.values()), "--stream", "%s=%s" % (STREAM, stream),
                         "--from", format_instant(T0), "--to", format_instant(T0 + 22 * S),
                         "--out-dir", str(tmp_path / "out")]) == 0
    for k, query_id in enumerate(files):
        records = [json.loads(line) for line in (tmp_path / "out" / ("%s.jsonl" % query_id)).read_text().splitlines()]
        assert {b["o"] for r in records for b in r["bindings"]} == {"<%so%d>" % (EX, e.index) for e in items
                                                                      if e.index % 3 == k}
    assert work.evaluations == 3 * CLOSES


BAND = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S STEP PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v FILTER(?v >= %s && ?v < %s) } } }
"""


def band_queries(count: int) -> dict[str, str]:
    """Disjoint value bands of 0.005 from 0.160: ten of them hold every reading."""
    return {"b%04d" % k: BAND % (round(0.16 + k * 0.005, 3), round(0.165 + k * 0.005, 3)) for k in range(count)}


@pytest.mark.parametrize("door", DOORS)
def test_queries_watching_disjoint_value_bands_cost_one_querys_evaluations_through_every_door(door, tmp_path):
    one_records, one = run(door, Workload(band_queries(1), elements()), tmp_path / "one")
    many_records, many = run(door, Workload(band_queries(10), elements()), tmp_path / "many")
    assert rows(many_records["b0000"]) == rows(one_records["b0000"])
    # Each reading in its one band, in every window holding it.
    held = sum(1 for close in range(2, 23, 2) for e in elements() if close - 10 <= e.ms / 1000 < close)
    assert sum(len(r["bindings"]) for records in many_records.values() for r in records) == held == 900
    assert one.evaluations > 0 and (many.evaluations, many.elements) == (one.evaluations, one.elements)


def thousand_bands(count: int = 1000) -> dict[str, str]:
    """Disjoint value bands splitting [0.160, 0.210) into `count`: together they hold every
    reading, each in one band."""
    width = 0.05 / count
    return {"b%04d" % k: BAND % ("%.6f" % (0.16 + k * width), "%.6f" % (0.16 + (k + 1) * width)) for k in range(count)}


@pytest.mark.parametrize("door", DOORS)
def test_a_thousand_value_bands_cost_one_querys_evaluations_and_no_join_of_their_bounds_through_every_door(
        door, tmp_path):
    one_records, one = run(door, Workload(thousand_bands(1), elements()), tmp_path / "one")
    many_records, many = run(door, Workload(thousand_bands(), elements()), tmp_path / "many")
    held = sum(1 for close in range(2, 23, 2) for e in elements() if close - 10 <= e.ms / 1000 < close)
    assert sum(len(r["bindings"]) for r in one_records["b0000"]) == held
    assert sum(len(r["bindings"]) for records in many_records.values() for r in records) == held
    # The band of 0.160 holds the readings of 0.160 only (each band 0.00005 wide).
    assert {b["v"] for r in many_records["b0000"] for b in r["bindings"]} == {'"0.16"^^<%sdecimal>' % XSD}
    assert one.evaluations > 0 and (many.evaluations, many.elements) == (one.evaluations, one.elements)
    # The group's query holds no row per band: the bands' comparisons are applied to its rows by
    # an index (endpoint/engine/sharing.py), not joined with them in the store.
    assert many.table_rows == 1


def test_the_count_tells_sharing_from_none(tmp_path):
    # What the tests above count: with the constants not shared, each query its own ranges.
    _, one = run("python api", Workload(sensor_queries(1), elements()), tmp_path / "one")
    _, alone = run("python api", Workload(sensor_queries(10), elements(), options={"share_constants": "false"}),
                   tmp_path / "alone")
    assert alone.evaluations == 10 * one.evaluations
    # And the bands' comparisons: below the group size the index serves from, joined with a
    # table of a row per band.
    _, joined = run("python api", Workload(thousand_bands(sharing.SPLIT_FROM - 1), elements()), tmp_path / "joined")
    _, split = run("python api", Workload(thousand_bands(sharing.SPLIT_FROM), elements()), tmp_path / "split")
    assert (joined.table_rows, split.table_rows) == (sharing.SPLIT_FROM - 1, 1)


def equal_queries(count: int) -> dict[str, str]:
    """Equal queries but for what they do after their rows (R2S, the stream they register)."""
    heads = ["SELECT ?o ?v", "SELECT ISTREAM ?o ?v", "SELECT DSTREAM ?o ?v",
             "REGISTER RSTREAM <http://example.org/out> AS SELECT ?o ?v"]
    return {"e%04d" % k: (SENSOR % 3).replace("SELECT ?o ?v", heads[k % len(heads)]) for k in range(count)}


@pytest.mark.parametrize("door", DOORS)
def test_equal_queries_read_each_range_once_through_every_door(door, tmp_path):
    one_records, one = run(door, Workload(equal_queries(1), elements()), tmp_path / "one")
    many_records, many = run(door, Workload(equal_queries(8), elements()), tmp_path / "many")
    assert rows(many_records["e0004"]) == rows(one_records["e0000"])
    assert one.evaluations > 0 and (many.evaluations, many.elements) == (one.evaluations, one.elements)


SLIDING = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S STEP PT1S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v FILTER(?v < 0.175) } } }
"""


@pytest.mark.parametrize("door", DOORS)
def test_a_sliding_window_reads_each_element_once_through_every_door(door, tmp_path):
    # RANGE 10 s STEP 1 s: every reading is in ten windows, and evaluated in one time range.
    records, work = run(door, Workload({"sliding": SLIDING}, elements()), tmp_path / "on")
    assert len(records["sliding"]) == 22
    assert (work.evaluations, work.elements) == (22, 220)
    whole_records, whole = run(door, Workload({"sliding": SLIDING}, elements(), options={"incremental": "false"}),
                               tmp_path / "off")
    assert rows(whole_records["sliding"]) == rows(records["sliding"])
    assert (whole.evaluations, whole.elements) == (22, sum(min(10 * (s + 1), 100) for s in range(22)))


KEPT = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX rspu: <http://w3id.org/rsp/rspu#>
SELECT ?o ?p
FROM NAMED WINDOW ex:w ON ex:stream [ELEMS 20 STEP 10]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v {| rspu:uncertainty ?u |}
                                BIND(rspu:greaterThan(rspu:add(?u, ?v), 0.185) AS ?p) } } }
"""


@pytest.mark.parametrize("door", DOORS)
def test_a_count_window_computes_each_elements_rspu_call_once_through_every_door(door, tmp_path):
    # ELEMS 20 STEP 10, evaluated whole at each close (windows of 10, then 20 elements): every
    # element is in two windows, its two calls answered at the second from the answers the
    # first evaluation kept.
    records, work = run(door, Workload({"kept": KEPT}, elements()), tmp_path / "on")
    assert len(records["kept"]) == 22 and work.evaluations == 22
    held = 10 + 21 * 20
    assert work.rspu() == (2 * held, 2 * 220, 2 * (held - 220))
    _, uncached = run(door, Workload({"kept": KEPT}, elements(), options={"rspu_cache": "false"}), tmp_path / "off")
    assert uncached.rspu()[1] == 2 * held


LANDMARK = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>
SELECT %s
FROM NAMED WINDOW ex:w ON ex:stream [RANGE UNBOUNDED STEP PT2S START "2026-03-01T08:00:00Z"^^xsd:dateTime]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:madeBySensor ?s ; sosa:hasSimpleResult ?v FILTER(?v < 0.175) } } }
%s"""
LANDMARKS = {"rows": LANDMARK % ("?o ?v", ""),
             "aggregates": LANDMARK % ("?s (COUNT(*) AS ?n) (MAX(?v) AS ?top)", "GROUP BY ?s")}


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("kind", LANDMARKS)
def test_a_landmark_window_reads_each_element_once_through_every_door(door, kind, tmp_path):
    records, work = run(door, Workload({"landmark": LANDMARKS[kind]}, elements()), tmp_path / "on")
    assert len(records["landmark"]) == 11
    # Close by close: each close's new elements only (a window that grows to 220).
    assert (work.evaluations, work.elements) == (11, 220)
    whole_records, whole = run(door, Workload({"landmark": LANDMARKS[kind]}, elements(),
                                              options={"incremental": "false"}), tmp_path / "off")
    assert rows(whole_records["landmark"]) == rows(records["landmark"])
    assert whole.elements == sum(20 * k for k in range(1, 12))


PARTITIONED = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?s ?o ?v
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S STEP PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:madeBySensor ?s ; sosa:hasSimpleResult ?v FILTER(?v < 0.175) } } }
"""
KEY_GROUPS = 4


@pytest.mark.parametrize("door", REGISTERING)
def test_a_partitioned_query_evaluates_key_groups_not_keys_through_every_door(door, tmp_path):
    # Partitioned by sensor (docs/partitioned-queries.md), its ten sensors' elements fall in four
    # key groups: each group's store is built once and kept across micro-batches, and each
    # evaluates the instants its windows hold elements at. The executors' functions are played
    # in-process, one micro-batch every 2 s (tests/test_partitions.py); `rspstar replay` runs no
    # query partitioned.
    keys = {STREAM: PartitionKey(SOSA + "madeBySensor")}
    workload = Workload({"p": PARTITIONED}, elements(), options={"partition": "?s"},
                        settings={"partition_keys": keys, "key_groups": KEY_GROUPS})
    engine = REGISTERING[door](workload, tmp_path)
    feed = engine.engine.get("p").feed.subscribe(backlog=0)
    payload = Payload(STREAM, "trig", "stream.trig", trig(workload.items), 0)
    work, built = Work(), []
    store = PlanRunner._store
    with work.counting():
        PlanRunner._store = lambda runner, found: built.append(len(found)) or store(runner, found)
        try:
            batches, _ = play(PlanRunner(engine.engine.partition_plan("p"), KeptStores(8)),
                              keyed_elements([payload], keys), T0 + 22 * S, 2 * S)
        finally:
            PlanRunner._store = store
        for emitted in batches:
            engine.engine.accept_partitions("p", emitted)
    records = []
    while not feed.empty():
        records.append(feed.get_nowait())
    groups = {key_group(EX + "s%d" % sensor, KEY_GROUPS) for sensor in range(10)}
    assert len(records) == 11 and len(built) == len(groups) <= KEY_GROUPS
    # Each group evaluated whole at each close, never each sensor: at most 4 x 11, not 10 x 11.
    assert work.evaluations == 11 * len(groups) and work.elements == 900
    single = drive(python_api(Workload({"p": PARTITIONED}, elements()), tmp_path / "single"), workload)
    assert [(t, sorted(b)) for t, b in rows(records)] == [(t, sorted(b)) for t, b in rows(single["p"])]


@pytest.mark.parametrize("door", REGISTERING)
def test_queries_given_bases_of_their_own_share_unless_they_read_them(door, tmp_path):
    # Each query its own base (the option base; [[queries]] base): ten queries with every IRI in
    # full cost what one does.
    bases = {"q%04d" % k: "http://example.org/queries/%d/" % k for k in range(10)}
    _, one = run(door, Workload(sensor_queries(1), elements(), bases=bases), tmp_path / "one")
    _, many = run(door, Workload(sensor_queries(10), elements(), bases=bases), tmp_path / "many")
    assert (many.evaluations, many.elements) == (one.evaluations, one.elements)
    # <sensor> under http://example.org/a/ and under .../b/ are two sensors; <other> under b
    # differs from b's <sensor> in a constant only, and may be evaluated with it.
    relative = {"qa": RELATIVE % "sensor", "qb": RELATIVE % "sensor", "qc": RELATIVE % "other"}
    sensors = [EX + "a/sensor", EX + "b/sensor", EX + "b/other"]
    items = elements(sensors=3)
    records, work = run(door, Workload(relative, items, bases={"qa": EX + "a/", "qb": EX + "b/", "qc": EX + "b/"},
                                       sensors=sensors), tmp_path / "relative")
    for k, query_id in enumerate(relative):
        assert {b["o"] for r in records[query_id] for b in r["bindings"]} == {"<%so%d>" % (EX, e.index) for e in items
                                                                            if e.index % 3 == k}
    assert work.evaluations == 2 * CLOSES


JOINED = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?s ?v1 ?v2
FROM NAMED WINDOW ex:long ON ex:stream [RANGE PT10S STEP PT2S]
FROM NAMED WINDOW ex:short ON ex:stream [RANGE PT2S STEP PT2S]
WHERE { WINDOW ex:long { GRAPH ?g1 { ?o1 sosa:madeBySensor ?s ; sosa:hasSimpleResult ?v1 FILTER(?v1 > 0.2) } }
        WINDOW ex:short { GRAPH ?g2 { ?o2 sosa:madeBySensor ?s ; sosa:hasSimpleResult ?v2 FILTER(?v2 < 0.17) } } }
"""


@pytest.mark.parametrize("door", DOORS)
def test_a_join_of_windows_reads_each_windows_elements_once_through_every_door(door, tmp_path):
    records, work = run(door, Workload({"joined": JOINED}, elements()), tmp_path / "on")
    assert [r.evaluator.r2r.kind for r in work.registered] == ["joined"]
    # Each window's block by time ranges, each element once per window, then joined in Python.
    assert (work.evaluations, work.elements) == (2 * CLOSES, 2 * 220)
    whole_records, whole = run(door, Workload({"joined": JOINED}, elements(), options={"incremental": "false"}),
                               tmp_path / "off")
    assert [(t, sorted(b)) for t, b in rows(whole_records["joined"])] == \
        [(t, sorted(b)) for t, b in rows(records["joined"])] and any(b for _, b in rows(records["joined"]))
    assert (whole.evaluations, whole.elements) == (CLOSES, 900 + 220)


LAZY = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX rspu: <http://w3id.org/rsp/rspu#>
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S STEP PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v {| rspu:uncertainty ?u |} BIND(rspu:add(?u, ?v) AS ?d) } } }
"""
REPEATED = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX rspu: <http://w3id.org/rsp/rspu#>
SELECT ?o ?t
FROM NAMED WINDOW ex:w ON ex:stream [ELEMS 20 STEP 20]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v {| rspu:uncertainty ?u |} } }
        ?x ex:tag ?t FILTER(rspu:greaterThan(rspu:add(?u, ?v), 0.185) > 0.5) }
"""
TAGS = "@prefix ex: <http://example.org/> . ex:x1 ex:tag 1 . ex:x2 ex:tag 2 . ex:x3 ex:tag 3 .\n"


@pytest.mark.parametrize("door", DOORS)
def test_rspu_calls_nobody_reads_or_made_again_are_not_computed_through_every_door(door, tmp_path):
    # A BIND of an rspu: call whose variable nothing reads: no call (lazy binding).
    _, lazy = run(door, Workload({"lazy": LAZY}, elements()), tmp_path / "lazy")
    assert lazy.rspu() == (0, 0, 0)
    _, eager = run(door, Workload({"lazy": LAZY}, elements(), options={"lazy_bind": "false"}), tmp_path / "eager")
    assert eager.rspu()[1] == 220
    # One element's calls on several rows of an evaluation (joined with the background's three
    # tags), in tumbling count windows: computed once each, the repeats answered by the cache.
    _, cached = run(door, Workload({"repeated": REPEATED}, elements(), background=TAGS), tmp_path / "cached")
    calls, computed, _ = cached.rspu()
    assert computed == 2 * 220 < calls
    _, uncached = run(door, Workload({"repeated": REPEATED}, elements(), background=TAGS,
                                     options={"rspu_cache": "false"}), tmp_path / "uncached")
    assert uncached.rspu()[:2] == (calls, calls)


ENTAILED = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S STEP PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:madeBySensor ex:s%d ; ex:result ?v } } }
"""
SCHEMA = """@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix sosa: <http://www.w3.org/ns/sosa/> .
sosa:hasSimpleResult rdfs:subPropertyOf <http://example.org/result> .
"""


@pytest.mark.parametrize("door", DOORS)
def test_under_entailment_queries_of_one_shape_read_each_range_once_through_every_door(door, tmp_path):
    # ex:result is entailed from sosa:hasSimpleResult (entailment = rdfs): incremental ranges and
    # constant groups over the elements' closures.
    def workload(count):
        return Workload({"e%d" % k: ENTAILED % k for k in range(count)}, elements(),
                        options={"entailment": "rdfs"}, background=SCHEMA)
    one_records, one = run(door, workload(1), tmp_path / "one")
    many_records, many = run(door, workload(10), tmp_path / "many")
    assert rows(many_records["e0"]) == rows(one_records["e0"]) and any(b for _, b in rows(one_records["e0"]))
    assert (one.evaluations, one.elements) == (many.evaluations, many.elements) == (CLOSES, 220)


def test_compiling_a_query_that_calls_no_rspu_function_builds_none_of_them(monkeypatch):
    # Oxigraph checks the rewrite with the rspu: functions only when it calls them, as the store
    # runs it: a thousand queries without a call build no thousand tables of closures.
    from rspstar.translator.uncertainty.functions import FunctionLibrary
    from rspstar.translator.validate import compile_query
    built = []
    make = FunctionLibrary._function
    monkeypatch.setattr(FunctionLibrary, "_function", lambda self, *args: built.append(args[0]) or make(self, *args))
    compile_query(SENSOR % 1)
    compile_query(SENSOR.replace("?v } }", "?v FILTER(?v > 0.1) } }") % 1)
    assert built == []
    calling = SENSOR.replace("PREFIX sosa:", "PREFIX rspu: <http://w3id.org/rsp/rspu#>\nPREFIX sosa:").replace(
        "?v } }", "?v FILTER(rspu:greaterThan(?v, 0.1) > 0.5) } }")
    compile_query(calling % 1)
    assert "greaterThan" in built
