"""The simulator's scenarios, run as the Spark SQL the simulator source uses, over a static
frame of rows with chosen timestamps (no streaming needed to see what they produce)."""
import pyoxigraph as ox
import pytest

from rspstar.endpoint.clock import VirtualClock
from rspstar.endpoint.config import DEFAULT_CONFIG, load_config
from rspstar.endpoint.engine import Engine, EngineConfig
from rspstar.store.ingestion import spark_session
from rspstar.store.simulator import EPISODE_CYCLE_SECONDS, EPISODE_SECONDS, HOMECARE
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import parse_instant

pytestmark = pytest.mark.slow
S = 1_000_000
RATE = 15          # rows per second, as in the default configuration
PATIENTS = 3


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[1]")
    yield session
    session.stop()


def homecare_store(spark, start: int, seconds: int) -> StreamStore:
    """`seconds` of the homecare scenario from `start` (µs, whole seconds), RATE rows each."""
    rows = spark.range(seconds * RATE).selectExpr(
        "id AS value", "timestamp_seconds(%d + id DIV %d) AS timestamp" % (start // S, RATE))
    documents = rows.selectExpr(*HOMECARE.expressions(PATIENTS, "homecare"), "timestamp").collect()
    store = StreamStore()
    by_stream: dict[str, list[str]] = {}
    for row in documents:
        by_stream.setdefault(row["stream"], []).append(row["text"])
    for stream, texts in by_stream.items():
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
    engine = Engine(store, VirtualClock(start), EngineConfig(max_delay=0))
    registered = engine.register(entry.text, entry.id, entry.sinks, entry.options)
    engine.clock.set(start + seconds * S)
    engine.tick()
    return registered.history.since()


def test_the_homecare_episode_makes_the_low_emergency_example_query_fire(spark):
    # One cycle, with the minute before it: the windows wholly inside the episode (closes at
    # 30, 40, 50 s) find patient 0 sitting with a high heart rate and slow breathing; no
    # window reaching outside it does.
    cycle = parse_instant("2026-03-01T08:00:00Z")
    assert (cycle // S) % EPISODE_CYCLE_SECONDS == 0
    store = homecare_store(spark, cycle - 60 * S, 60 + EPISODE_CYCLE_SECONDS)
    records = low_emergencies(store, cycle, EPISODE_CYCLE_SECONDS)
    firing = {r["time"]: r["triples"] for r in records if r["triples"]}
    assert sorted(firing) == ["2026-03-01T08:00:%02dZ" % s for s in range(30, EPISODE_SECONDS + 1, 10)]
    for triples in firing.values():
        assert "<http://rspstar.example/sim/homecare/patient0> " \
               "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://rspstar.example/LowEmergency> ." in triples
        assert not any("patient1" in t or "patient2" in t for t in triples)
    assert len(records) == EPISODE_CYCLE_SECONDS // 10
