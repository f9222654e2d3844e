"""Partitioned windows `[ELEMS n PARTITION BY p1, p2]` (spec §6.9): the last n elements of every
key, ties in arrival order, an element with two key values in each partition, one with none in
none, a close at every τ of an element with a key, and what the store keeps for them."""
import pyoxigraph as ox
import pytest

from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.s2r import ReadWindows
from rspstar.endpoint.engine.runner import Runner
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore
from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.model import PartitionedWindow
from rspstar.translator.parser import parse_query
from rspstar.translator.policy import report_policy
from rspstar.translator.temporal import parse_instant

S = 1_000_000
T0 = parse_instant("2026-03-01T08:00:00Z")
EX = "http://example.org/"
QUERY = """PREFIX ex: <http://example.org/>
SELECT ?sensor ?v
FROM NAMED WINDOW ex:latest ON ex:s [%s]
WHERE { WINDOW ex:latest { GRAPH ?g { ?o ex:sensor ?sensor ; ex:v ?v } } }"""


def add(store, n, second, sensors=(), floors=(), value=0):
    graph = EX + "e%d" % n
    t = T0 + int(second * S)
    o = ox.NamedNode(EX + "o%d" % n)
    quads = [ox.Quad(o, ox.NamedNode(EX + "sensor"), ox.NamedNode(EX + s), ox.NamedNode(graph)) for s in sensors]
    quads += [ox.Quad(o, ox.NamedNode(EX + "floor"), ox.Literal(str(f)), ox.NamedNode(graph)) for f in floors]
    quads.append(ox.Quad(o, ox.NamedNode(EX + "v"), ox.Literal(str(value)), ox.NamedNode(graph)))
    store.add_elements(EX + "s", [Element(graph, t, instant_literal(t), quads)])


def graphs(content):
    return [g.rsplit("/", 1)[-1] for g in content.graphs]


def test_the_window_holds_the_last_n_elements_of_every_key():
    store = StreamStore()
    w = parse_query(QUERY % "ELEMS 2 PARTITION BY ex:sensor").windows[EX + "latest"]
    assert isinstance(w, PartitionedWindow) and w.keys == (EX + "sensor",) and w.size == 2
    add(store, 1, 1, ["a"])
    add(store, 2, 2, ["b"])
    add(store, 3, 2, ["a"])             # same τ as e2, arrived after it
    add(store, 4, 3, [])                # no key: never enters
    add(store, 5, 4, ["a", "c"])        # two values: in a's partition and c's
    add(store, 6, 4, ["a"])
    assert w.content_at(T0, store) is None
    assert graphs(w.content_at(T0 + 2 * S, store)) == ["e1", "e2", "e3"]
    at4 = w.content_at(T0 + 4 * S, store)
    assert graphs(at4) == ["e2", "e5", "e6"]          # a: e5, e6; b: e2; c: e5 (once)
    assert at4.shown == (T0 + 2 * S, T0 + 4 * S)
    one = parse_query(QUERY % "ELEMS 1 PARTITION BY ex:sensor").windows[EX + "latest"]
    assert graphs(one.content_at(T0 + 2 * S, store)) == ["e2", "e3"]   # ties: the later arrival is the last
    # Closes at every τ of an element with a key (not at 3: e4 has none).
    policy = report_policy(parse_query(QUERY % "ELEMS 1 PARTITION BY ex:sensor"))
    instants, t = [], T0 - 1
    while (t := ReadWindows(policy, store).next_instant(t)) is not None:
        instants.append((t - T0) // S)
    assert instants == [1, 2, 4]


def test_a_key_of_two_predicates_is_every_combination_of_their_values():
    store = StreamStore()
    w = parse_query(QUERY % "ELEMS 1 PARTITION BY ex:sensor, ex:floor").windows[EX + "latest"]
    add(store, 1, 1, ["a"], [1])
    add(store, 2, 2, ["a"], [])          # no floor: no key
    add(store, 3, 3, ["a", "b"], [1])    # (a, 1) and (b, 1)
    add(store, 4, 4, ["b"], [2])
    assert graphs(w.content_at(T0 + 2 * S, store)) == ["e1"]
    assert graphs(w.content_at(T0 + 4 * S, store)) == ["e3", "e4"]


@pytest.mark.parametrize("spec, message", [
    ("ELEMS 1 PARTITION ex:sensor", "expected BY"),
    ("ELEMS 1 PARTITION BY", "key predicate"),
    ("ELEMS 1 PARTITION BY ex:sensor STEP 2", "no STEP"),
    ("ELEMS 1 STEP 2 PARTITION BY ex:sensor", "no STEP"),
    ("ELEMS 1 PARTITION BY ex:sensor, ex:sensor", "named twice"),
    ("ELEMS 0 PARTITION BY ex:sensor", "positive whole number"),
])
def test_malformed_partitioned_windows_are_refused_with_a_position(spec, message):
    with pytest.raises(QuerySyntaxError) as e:
        parse_query(QUERY % spec)
    assert message in e.value.message and e.value.line == 3


def test_the_latest_reading_of_every_sensor_live_and_what_the_store_keeps():
    store = StreamStore()
    clock = VirtualClock(T0)
    engine = Runner(store, clock)
    registered = engine.register(QUERY % "ELEMS 1 PARTITION BY ex:sensor", "latest")
    for n in range(1, 31):
        add(store, n, n, ["s%d" % (n % 3)], value=n)
        store.advance_watermark(EX + "s", T0 + n * S + 1)
        clock.set(T0 + n * S)
        engine.tick()
    last = registered.history.since()[-1]
    assert sorted((r["sensor"], r["v"]) for r in last["bindings"]) == [
        ("<%ss0>" % EX, '"30"'), ("<%ss1>" % EX, '"28"'), ("<%ss2>" % EX, '"29"')]
    assert registered.status.evaluations == 30
    # Only the latest element of each sensor is needed: the rest is evicted.
    assert store.streams()[EX + "s"].elements <= 4
    described = registered.describe()["windows"][0]
    assert described["kind"] == "partitioned" and described["partition_by"] == [EX + "sensor"]


def test_a_partitioned_window_is_held_to_max_elements_per_key():
    from rspstar.endpoint.engine.runner import EngineConfig
    from rspstar.translator.admission import QueryOverLimits, admit
    limits = EngineConfig(max_range=10**12, max_reports_per_second=10.0, max_elements=5)   # what admission reads
    assert admit(QUERY % "ELEMS 5 PARTITION BY ex:sensor", limits).query.windows[EX + "latest"].size == 5
    with pytest.raises(QueryOverLimits) as e:
        admit(QUERY % "ELEMS 6 PARTITION BY ex:sensor", limits)
    assert "max_elements" in str(e.value)


@pytest.mark.parametrize("spec, kind", [("RANGE UNBOUNDED STEP PT1S", "landmark"),
                                        ("FACTS { ?o ex:on true } SINCE { ?o ex:sensor ?sensor } TILL { ?o ex:v ?v }",
                                         "fact")])
def test_landmark_and_fact_windows_do_not_run_partitioned_on_spark(spec, kind):
    from rspstar.translator.partition import PartitionError, PartitionKey, check_partitioned
    from rspstar.translator.validate import compile_query
    q = compile_query(QUERY % spec)
    with pytest.raises(PartitionError) as e:
        check_partitioned(q, "?sensor", {EX + "s": PartitionKey(EX + "sensor")}, report_policy(q))
    assert e.value.rule == "window" and "a %s window, which runs on the single store only" % kind in str(e.value)


TWO = """PREFIX ex: <http://example.org/>
SELECT ?sensor ?v ?w
FROM NAMED WINDOW ex:latest ON ex:s [ELEMS 1 PARTITION BY ex:sensor]
FROM NAMED WINDOW ex:other ON ex:t [%s]
WHERE { WINDOW ex:latest { GRAPH ?g { ?o ex:sensor ?sensor ; ex:v ?v } }
        WINDOW ex:other { GRAPH ?h { ?p ex:sensor ?sensor ; ex:v ?w } } }"""


@pytest.mark.parametrize("text, key, report", [
    (QUERY % "ELEMS 1 PARTITION BY ex:sensor", "<http://example.org/sensor>", None),
    (QUERY % "ELEMS 3 PARTITION BY ex:floor, ex:sensor", "<http://example.org/sensor>", "close and non-empty"),
    (QUERY % "ELEMS 1 PARTITION BY ex:sensor", "<http://example.org/sensor>", "periodic(PT5S)"),
    (TWO % "ELEMS 2 PARTITION BY ex:sensor", "<http://example.org/sensor>", "close and non-empty(ex:other)"),
])
def test_a_partitioned_window_runs_partitioned_on_spark_when_its_key_includes_the_stream_s(text, key, report):
    # Each window partition's elements all have one value of the stream's key: they are in one
    # key group, which evaluates the window there as the single store does.
    from rspstar.translator.partition import PartitionKey, check_partitioned
    from rspstar.translator.validate import compile_query
    q = compile_query(text)
    keys = {EX + "s": PartitionKey.parse(key), EX + "t": PartitionKey.parse(key)}
    check_partitioned(q, "?sensor", keys, report_policy(q, report))


@pytest.mark.parametrize("text, key, report, message", [
    (QUERY % "ELEMS 1 PARTITION BY ex:floor", "<http://example.org/sensor>", None,
     "window <http://example.org/latest> is partitioned by <http://example.org/floor>, which does not include its "
     "stream's partition key <http://example.org/sensor>"),
    (QUERY % "ELEMS 1 PARTITION BY ex:sensor", "^<http://example.org/sensor>", None,
     "does not include its stream's partition key ^<http://example.org/sensor>"),
    (TWO % "RANGE PT10S STEP PT2S", "<http://example.org/sensor>", None,
     "window <http://example.org/latest> is a partitioned window beside windows of other kinds"),
    (QUERY % "ELEMS 1 PARTITION BY ex:sensor", "<http://example.org/sensor>", "content-change",
     "report policy 'content-change' takes its instants from the elements"),
    # A late element of one key group may add an instant before those already due, and the
    # other groups say what they held as of their latest close, which would not be that
    # instant's when some closes are not instants.
    (TWO % "ELEMS 2 PARTITION BY ex:sensor", "<http://example.org/sensor>", "close(ex:other)",
     "report policy 'close(<http://example.org/other>)' reports at the closes of some of the partitioned windows"),
    (TWO % "ELEMS 2 PARTITION BY ex:sensor", "<http://example.org/sensor>", "close(ex:latest) and close(ex:other)",
     "reports at the closes of some of the partitioned windows only"),
])
def test_a_partitioned_window_that_spark_cannot_run_as_the_spec_says_is_refused_naming_the_rule(
        text, key, report, message):
    from rspstar.translator.partition import PartitionError, PartitionKey, check_partitioned
    from rspstar.translator.validate import compile_query
    q = compile_query(text)
    keys = {EX + "s": PartitionKey.parse(key), EX + "t": PartitionKey.parse(key)}
    with pytest.raises(PartitionError) as e:
        check_partitioned(q, "?sensor", keys, report_policy(q, report))
    assert message in str(e.value) and str(e.value).startswith("partition rule '%s'" % e.value.rule)
