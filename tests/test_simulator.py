"""The simulator's scenarios, run as the simulator source writes a micro-batch's rows, over rows
with chosen timestamps (no streaming needed to see what they produce)."""
import pyoxigraph as ox
import pytest

from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.config import DEFAULT_CONFIG, load_config
from rspstar.endpoint.engine.runner import Runner, EngineConfig
from rspstar.store.simulator import EPISODE_CYCLE_SECONDS, EPISODE_SECONDS, HOMECARE, SCENARIOS, SENSORS, TVS, mix
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import parse_instant

S = 1_000_000
RATE = 15          # rows per second, as in the default configuration
PATIENTS = 3
T0 = parse_instant("2026-03-01T08:00:00Z")


def homecare_store(start: int, seconds: int) -> StreamStore:
    """`seconds` of the homecare scenario from `start` (µs, whole seconds), RATE rows each."""
    rows = [(value, start + (value // RATE) * S) for value in range(seconds * RATE)]
    store = StreamStore()
    for stream, texts in HOMECARE.documents(rows, PATIENTS, "homecare").items():
        store.publish(stream, store.documents.stage(stream, "\n".join(texts).encode(), ox.RdfFormat.TRIG,
                                                   "simulator").staged)
    config = load_config(DEFAULT_CONFIG)
    for name in config.settings.background.files:
        path = DEFAULT_CONFIG.parent / name
        store.background.load(path.read_bytes(), ox.RdfFormat.TURTLE, str(path))
    return store


def low_emergencies(store: StreamStore, start: int, seconds: int) -> list[dict]:
    """The example query's records at every close in (start, start + seconds]."""
    config = load_config(DEFAULT_CONFIG)
    entry = next(q for q in config.queries if q.id == "homecare-low-emergency")
    engine = Runner(store, VirtualClock(start), EngineConfig(max_delay=0))
    registered = engine.register(entry.text, entry.id, entry.sinks, entry.options)
    engine.clock.set(start + seconds * S)
    engine.tick()
    return registered.history.since()


def test_the_homecare_episode_makes_the_low_emergency_example_query_fire():
    # One cycle, with the minute before it: the windows wholly inside the episode (closes at
    # 30, 40, 50 s) find patient 0 sitting with a high heart rate and slow breathing; no
    # window reaching outside it does.
    cycle = parse_instant("2026-03-01T08:00:00Z")
    assert (cycle // S) % EPISODE_CYCLE_SECONDS == 0
    store = homecare_store(cycle - 60 * S, 60 + EPISODE_CYCLE_SECONDS)
    records = low_emergencies(store, cycle, EPISODE_CYCLE_SECONDS)
    firing = {r["time"]: r["triples"] for r in records if r["triples"]}
    assert sorted(firing) == ["2026-03-01T08:00:%02dZ" % s for s in range(30, EPISODE_SECONDS + 1, 10)]
    for triples in firing.values():
        assert "<http://rspstar.example/sim/homecare/patient0> " \
               "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://rspstar.example/LowEmergency> ." in triples
        assert not any("patient1" in t or "patient2" in t for t in triples)
    assert len(records) == EPISODE_CYCLE_SECONDS // 10


@pytest.mark.parametrize("scenario", [TVS, HOMECARE, SENSORS])
def test_each_row_is_one_timestamped_element_of_its_stream_the_same_every_time(scenario):
    rows = [(value, T0 + value * 1000) for value in range(40)]
    documents = scenario.documents(rows, 4, "sim")
    assert documents == scenario.documents(rows, 4, "sim")
    assert set(documents) <= set(scenario.streams) and sum(map(len, documents.values())) == 40
    graphs = set()
    for stream, texts in documents.items():
        quads = list(ox.parse("\n".join(texts).encode(), format=ox.RdfFormat.TRIG))
        stamps = {q.subject.value: q.object.value for q in quads if isinstance(q.graph_name, ox.DefaultGraph)}
        named = {q.graph_name.value for q in quads if not isinstance(q.graph_name, ox.DefaultGraph)}
        assert set(stamps) == named and len(named) == len(texts)
        for graph, stamp in stamps.items():
            value = int(graph.rsplit("/", 1)[1])
            assert parse_instant(stamp) == T0 + value * 1000
        graphs |= named
    assert len(graphs) == 40


def test_the_tvs_scenario_alternates_oxygen_with_uncertainty_and_temperature_within_their_ranges():
    documents = TVS.documents([(value, T0) for value in range(400)], 20, "tvs")
    oxygen, temperature = (ox.Store() for _ in range(2))
    oxygen.load("\n".join(documents[TVS.streams[0]]).encode(), ox.RdfFormat.TRIG)
    temperature.load("\n".join(documents[TVS.streams[1]]).encode(), ox.RdfFormat.TRIG)
    query = "SELECT ?v WHERE { GRAPH ?g { ?o <http://www.w3.org/ns/sosa/hasSimpleResult> ?v } }"
    fractions = [float(row["v"].value) for row in oxygen.query(query)]
    degrees = [float(row["v"].value) for row in temperature.query(query)]
    assert len(fractions) == len(degrees) == 200
    assert all(0.176 <= f < 0.216 for f in fractions) and all(15 <= d < 31.5 for d in degrees)
    assert len(set(fractions)) > 100          # spread over the range, not a constant
    sigmas = [row["d"].value for row in oxygen.query(
        "SELECT ?d WHERE { GRAPH ?g { ?r <http://w3id.org/rsp/rspu#uncertainty> ?d } }")]
    variances = [float(s[len("N(0, "):-1]) for s in sigmas if s.startswith("N(0, ") and s.endswith(")")]
    assert len(variances) == 200 and all(1e-6 <= v <= 2e-5 for v in variances) and len(set(variances)) == 20
    sectors = {row["s"].value for row in oxygen.query(
        "SELECT ?s WHERE { GRAPH ?g { ?o <http://www.w3.org/ns/sosa/hasFeatureOfInterest> ?s } }")}
    assert sectors == {"http://rspstar.example/sim/tvs/sector%d" % k for k in range(20)}


def test_the_mix_spreads_consecutive_values_and_keys():
    assert len({mix(value, 1) % 400 for value in range(20_000)}) == 400
    assert len({mix(value, k) for value in range(100) for k in range(11)}) == 1100
    assert all(0 <= mix(value, k) < 2 ** 64 for value in (0, 1, 2 ** 62, 2 ** 70) for k in range(11))
    assert set(SCENARIOS) == {"tvs", "homecare", "sensors"}
