"""Spark Structured Streaming into the store, with a real local Spark session (shared by the
module): deterministic micro-batches, quarantine, restart from checkpoint after a crash
between the store write and Spark's commit, late data, simulator output, Kafka refusal."""
import dataclasses
import json
import os
import time
from pathlib import Path

import pyoxigraph as ox
import pytest

from rspstar.store.ingestion import (  # noqa: E402
    PERIODIC_GC, RETAINED_STATUS, IngestionError, SourceConfig, SparkIngestion, _query_groups, find_java_home, spark_session,
)
from pyspark.sql import functions as F  # noqa: E402
from rspstar.translator.vocabulary import BATCHES_GRAPH  # noqa: E402
from rspstar.store.recordings import Recordings, recording_path  # noqa: E402
from rspstar.store.simulator import HOMECARE, TVS  # noqa: E402
from rspstar.store.stream_store import StreamStore  # noqa: E402
from rspstar.translator.temporal import parse_instant  # noqa: E402

pytestmark = pytest.mark.slow
S = 1_000_000
T0 = parse_instant("2026-03-01T08:00:00Z")
STREAM = "http://example.org/hr"
REIFIES = ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#reifies")

@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[1]")
    yield session
    session.stop()

def drop(directory: Path, name: str, text: str) -> None:
    """Drop a file atomically, as the landing directory expects."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / ("." + name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, directory / name)

def trig(*seconds) -> str:
    lines = ["@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> ."]
    for s in seconds:
        lines.append('ex:e%d prov:generatedAtTime "2026-03-01T08:00:%02dZ"^^<http://www.w3.org/2001/XMLSchema#dateTime> . '
                     "ex:e%d { ex:rut ex:heartRate %d {| ex:confidence 0.9 |} . }" % (s, s, s, 60 + s))
    return "\n".join(lines) + "\n"

def test_spark_remembers_a_bounded_number_of_finished_jobs(spark):
    # Every micro-batch is a job: what the status store keeps of them must not grow with time.
    for _ in range(3 * RETAINED_STATUS):
        spark.range(3).count()
    remembered = spark.sparkContext.statusTracker().getJobIdsForGroup()
    assert 0 < len(remembered) <= RETAINED_STATUS + 1

def test_the_driver_collects_its_whole_heap_periodically(spark):
    # Without it the old generation fills with micro-batches' garbage for hours, touching new
    # pages all the while (the soak bench measures what that does to resident memory).
    assert spark.sparkContext.getConf().get("spark.cleaner.periodicGC.interval") == PERIODIC_GC

def test_the_drivers_heap_starts_small_and_gives_back_at_the_next_full_collection(spark):
    # A JVM otherwise starts with a sixty-fourth of the machine's memory as its heap (384 MiB
    # here), never goes below it, and gives back what a burst took over four full collections:
    # micro-batches' garbage touched its pages one after another (bench/out/NOTES.md#jvm-heap-size).
    jvm = spark._jvm
    diagnostic = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    assert int(diagnostic.getVMOption("InitialHeapSize").getValue()) == 64 * 2**20
    assert diagnostic.getVMOption("ShrinkHeapInSteps").getValue() == "false"
    jvm.java.lang.System.gc()
    assert jvm.java.lang.Runtime.getRuntime().totalMemory() < 200 * 2**20


def run(spark, store, tmp_path, sources, recording=None):
    ingestion = SparkIngestion(spark, store, sources, tmp_path / "checkpoints", tmp_path / "quarantine",
                               None if recording is None else Recordings(recording))
    ingestion.start(available_now=True)
    ingestion.await_termination(120)
    return ingestion

def assert_recording_replays_what_was_stored(recorded: Path, store: StreamStore) -> None:
    """Read back, each stream's recording gives the elements the store holds, quad for quad."""
    for stream, stats in store.streams().items():
        path = recording_path(recorded, stream)
        again = StreamStore()
        again.publish(stream, again.documents.stage(stream, path.read_bytes(), ox.RdfFormat.N_QUADS, str(path)).staged)
        graphs = store.elements_in(stream, 0, 2**62)
        assert again.elements_in(stream, 0, 2**62) == graphs and again.streams()[stream].ingested == stats.ingested
        for graph in graphs:
            name = ox.NamedNode(graph)
            assert len(list(again.oxigraph.quads_for_pattern(None, None, None, name))) == \
                len(list(store.oxigraph.quads_for_pattern(None, None, None, name)))


def files_source(tmp_path, lateness=0):
    return SourceConfig("landing", "files", stream=STREAM, path=str(tmp_path / "landing"), allowed_lateness=lateness)

@pytest.mark.parametrize("decode", ["driver", "executors"])
def test_files_of_every_format_land_and_bad_ones_are_quarantined(spark, tmp_path, decode):
    land = tmp_path / "landing"
    drop(land, "a.trig", trig(0, 1, 2))
    drop(land, "b.nq", "\n".join([
        '<http://example.org/n3> <http://www.w3.org/ns/prov#generatedAtTime> "2026-03-01T08:00:03Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .',
        "<http://example.org/broken> <http://example.org/v> .",
        '<http://example.org/x3> <http://example.org/v> "3"^^<http://www.w3.org/2001/XMLSchema#integer> <http://example.org/n3> .']))
    drop(land, "c.jsonl", json.dumps({"time": "2026-03-01T08:00:04Z", "graph": "http://example.org/j4",
                                      "data": "<http://example.org/x4> <http://example.org/v> 4 ."}) + "\nnot json\n")
    drop(land, "d.trig", "@prefix ex: <http://example.org/> .\nex:g { ex:a ex:b }\n")
    # A Latin-1 byte: set aside with its line, never read with a replacement character.
    (land / ".e.nq.tmp").write_bytes(b'<http://example.org/x5> <http://example.org/v> "caf\xe9" <http://example.org/n3> .\n')
    os.replace(land / ".e.nq.tmp", land / "e.nq")
    store = StreamStore()
    source = dataclasses.replace(files_source(tmp_path), decode=decode)
    ingestion = run(spark, store, tmp_path, [source], recording=tmp_path / "recorded")
    assert_recording_replays_what_was_stored(tmp_path / "recorded", store)
    graphs = store.elements_in(STREAM, T0, T0 + 10 * S)
    assert sorted(graphs) == sorted(["http://example.org/e0", "http://example.org/e1", "http://example.org/e2",
                                     "http://example.org/n3", "http://example.org/j4"])
    reasons = sorted((Path(json.loads(p.read_text())["origin"]).name, json.loads(p.read_text())["line"])
                     for p in (tmp_path / "quarantine").glob("*.reason.json"))
    assert reasons == [("b.nq", 2), ("c.jsonl", 2), ("d.trig", 2), ("e.nq", 1)]
    [latin] = [p for p in (tmp_path / "quarantine").glob("*.reason.json")
               if "not UTF-8: byte 0xE9" in json.loads(p.read_text())["reason"]]
    assert b'"caf\xe9"' in latin.with_name(latin.name.replace(".reason.json", ".data")).read_bytes()   # as it came
    assert ingestion.status()["landing"]["quarantined"] == {STREAM: 4}
    assert store.watermark(STREAM) == T0 + 4 * S

def test_a_poison_envelope_does_not_stop_the_source(spark, tmp_path):
    # {"time": 5} used to raise inside the batch function, which terminated the Spark query.
    store = StreamStore()
    drop(tmp_path / "landing", "poison.jsonl",
         json.dumps({"time": 5, "data": "<http://a> <http://b> <http://c> ."}) + "\n")
    drop(tmp_path / "landing", "a.trig", trig(1, 2))
    ingestion = run(spark, store, tmp_path, [files_source(tmp_path)])
    assert store.streams()[STREAM].ingested == 2
    assert ingestion.status()["landing"]["quarantined"] == {STREAM: 1}


def test_a_source_that_stops_is_restarted_after_a_back_off_and_goes_on_from_its_checkpoint(spark, tmp_path):
    store = StreamStore()
    ingestion = SparkIngestion(spark, store, [files_source(tmp_path)], tmp_path / "checkpoints", tmp_path / "q")
    ingestion.start()
    try:
        drop(tmp_path / "landing", "a.trig", trig(1))
        wait_for(lambda: store.streams().get(STREAM) and store.streams()[STREAM].ingested == 1)
        ingestion.queries["landing"].stop()                  # the source dies
        assert ingestion.supervise(100.0) == []              # noticed: back-off of a second
        status = ingestion.status()["landing"]
        assert not status["active"] and status["last_error"] == "stopped without an error"
        assert ingestion.supervise(100.5) == []
        assert ingestion.supervise(101.0) == ["landing"]
        assert ingestion.status()["landing"]["active"] and ingestion.status()["landing"]["restarts"] == 1
        drop(tmp_path / "landing", "b.trig", trig(2))
        wait_for(lambda: store.streams()[STREAM].ingested == 2)   # a.trig is not read twice
        # Spark writes a micro-batch's commit after the batch function returns: a stop before
        # that would leave the batch to be run again at the next start (as it should), not committed.
        commits = tmp_path / "checkpoints" / "landing" / "commits"
        wait_for(lambda: (commits / "1").exists())
        ingestion.queries["landing"].stop()
        ingestion.supervise(200.0)
        assert ingestion.supervise(201.5) == [] and ingestion.supervise(202.0) == ["landing"]   # two seconds now
    finally:
        ingestion.stop()
    # The checkpoint is written through the raw local file system: no checksum file beside each
    # log file (and no command run per file to set its permissions).
    checkpoint = tmp_path / "checkpoints" / "landing"
    assert {"0", "1"} <= {p.name for p in commits.iterdir()}
    assert list(checkpoint.rglob("*.crc")) == []


def wait_for(condition, seconds: float = 60.0) -> None:
    """Spark runs on its own threads; its progress is polled, not slept for."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "Spark did not get there in %g s" % seconds
        time.sleep(0.1)


@pytest.mark.parametrize("decode", ["driver", "executors"])
def test_restart_after_a_crash_between_store_write_and_commit_stores_nothing_twice(spark, tmp_path, decode):
    land = tmp_path / "landing"
    drop(land, "a.trig", trig(0, 1))
    db = str(tmp_path / "db")
    store = StreamStore(db)
    source = dataclasses.replace(files_source(tmp_path), decode=decode)
    ingestion = SparkIngestion(spark, store, [source], tmp_path / "checkpoints", tmp_path / "quarantine")
    writer = ingestion.writers["landing"]
    name = "write" if decode == "driver" else "write_encoded"
    original = getattr(writer, name)

    def write_then_crash(batch_id, payloads):
        original(batch_id, payloads)
        raise RuntimeError("simulated crash after the store write, before Spark commits the batch")

    setattr(writer, name, write_then_crash)
    ingestion.start(available_now=True)
    with pytest.raises(IngestionError, match="simulated crash"):
        ingestion.await_termination(120)
    ingestion.stop()
    store.close()

    store = StreamStore(db)                     # the process restarts: store reopened from disk
    before = len(store.oxigraph)
    drop(land, "b.trig", trig(2))
    run(spark, store, tmp_path, [source])
    assert sorted(store.elements_in(STREAM, T0, T0 + 10 * S)) == [
        "http://example.org/e0", "http://example.org/e1", "http://example.org/e2"]
    assert len(list(store.oxigraph.quads_for_pattern(None, REIFIES, None, None))) == 3
    assert len(store.oxigraph) > before
    # A further run finds nothing new.
    count = len(store.oxigraph)
    run(spark, store, tmp_path, [source])
    assert len(store.oxigraph) == count

def test_auto_decoding_parses_a_batch_on_the_executors_when_the_batch_before_was_large(spark, tmp_path):
    # The default: a trickle is parsed in the engine's process, where a batch costs no Python
    # task on the executors; thousands of elements a batch are parsed on the executors, off the
    # engine's lock. The same elements and recordings either way.
    land = tmp_path / "landing"
    store = StreamStore()
    source = dataclasses.replace(files_source(tmp_path), trigger_seconds=0.2)
    assert source.decode == "auto"
    ingestion = SparkIngestion(spark, store, [source], tmp_path / "checkpoints", tmp_path / "quarantine",
                               Recordings(tmp_path / "recorded"), executors_from=3)
    ingestion.start()
    try:
        on_executors = []
        for name, seconds, total in (("a.trig", (0, 1, 2, 3), 4), ("b.trig", (4,), 5), ("c.trig", (5,), 6)):
            drop(land, name, trig(*seconds))
            wait_for(lambda: store.streams().get(STREAM) and store.streams()[STREAM].ingested == total)
            on_executors.append(ingestion.decoded_on_executors["landing"])
    finally:
        ingestion.stop()
    # The first batch has none before it; the second follows four elements, the third one.
    assert on_executors == [0, 1, 1]
    assert sorted(store.elements_in(STREAM, T0, T0 + 10 * S)) == ["http://example.org/e%d" % k for k in range(6)]
    assert len(list(store.oxigraph.quads_for_pattern(None, REIFIES, None, None))) == 6
    assert_recording_replays_what_was_stored(tmp_path / "recorded", store)


def test_the_auto_decoding_threshold_is_the_one_the_configuration_documents():
    from rspstar.config.schema import SETTINGS
    from rspstar.store.ingestion import DECODE_ON_EXECUTORS_FROM
    [setting] = [s for s in SETTINGS if (s.table, s.key) == ("sources", "decode")]
    assert "%s elements" % format(DECODE_ON_EXECUTORS_FROM, ",") in setting.help


def test_late_files_are_stored_and_counted(spark, tmp_path):
    land = tmp_path / "landing"
    store = StreamStore()
    drop(land, "a.trig", trig(10, 11))
    run(spark, store, tmp_path, [files_source(tmp_path, lateness=S)])
    assert store.watermark(STREAM) == T0 + 10 * S
    drop(land, "b.trig", trig(3, 12))
    run(spark, store, tmp_path, [files_source(tmp_path, lateness=S)])
    assert store.streams()[STREAM].late == 1
    assert len(store.elements_in(STREAM, T0, T0 + 20 * S)) == 4

@pytest.mark.parametrize("decode", ["driver", "executors"])
@pytest.mark.parametrize("scenario,streams", [(TVS, 2), (HOMECARE, 5)])
def test_simulator_emits_annotated_observations_in_event_time(spark, tmp_path, scenario, streams, decode):
    store = StreamStore()
    source = SourceConfig("sim", "simulator", scenario=scenario.name, size=2, decode=decode,
                          options={"rowsPerBatch": "20", "startTimestamp": str(T0 // 1000),
                                   "advanceMillisPerBatch": "1000"})
    run(spark, store, tmp_path, [source], recording=tmp_path / "recorded")
    stats = store.streams()
    assert sorted(stats) == sorted(scenario.streams[:streams])
    assert sum(s.ingested for s in stats.values()) == 20
    assert all(s.latest == T0 for s in stats.values())
    annotated = list(store.oxigraph.quads_for_pattern(None, REIFIES, None, None))
    expected_annotations = 10 if scenario is TVS else 20   # TVS: oxygen only; homecare: every value
    assert len(annotated) == expected_annotations
    assert len(list((tmp_path / "recorded").iterdir())) == streams
    assert_recording_replays_what_was_stored(tmp_path / "recorded", store)

def test_simulator_releases_rate_times_trigger_rows_stamped_at_the_batch_time(spark, tmp_path):
    # Without a fixed clock each micro-batch carries rate x trigger rows sampled at its trigger
    # time, so event time advances with every batch (not a second at a time).
    store = StreamStore()
    source = SourceConfig("sim", "simulator", scenario="sensors", size=5, rate=40, trigger_seconds=0.25)
    before = time.time_ns() // 1000
    run(spark, store, tmp_path, [source])
    after = time.time_ns() // 1000
    stats = store.streams()["http://rspstar.example/stream/sensors"]
    assert stats.ingested == 10
    assert before <= stats.latest <= after
    assert store.watermark("http://rspstar.example/stream/sensors") == stats.latest
    assert len(store.elements_in("http://rspstar.example/stream/sensors", stats.latest, stats.latest + 1)) == 10

def fixed_clock_simulator(name, scenario, rows=10, decode="auto"):
    return SourceConfig(name, "simulator", scenario=scenario, size=2, decode=decode,
                        options={"rowsPerBatch": str(rows), "startTimestamp": str(T0 // 1000),
                                 "advanceMillisPerBatch": "1000"})

@pytest.mark.parametrize("decode", ["auto", "executors"])
def test_simulators_share_one_streaming_query_each_with_its_own_batch_markers(spark, tmp_path, decode):
    # A micro-batch costs the JVM about the same whatever its size: the main job's two
    # simulators run as one query, and each source's share of a batch lands exactly once,
    # parsed in the engine's process (a first batch under "auto") or each on the executors.
    store = StreamStore()
    sources = [fixed_clock_simulator("tvs", "tvs", decode=decode), fixed_clock_simulator("care", "homecare", decode=decode),
               files_source(tmp_path)]
    ingestion = run(spark, store, tmp_path, sources)
    assert ingestion.decoded_on_executors["care+tvs"] == (1 if decode == "executors" else 0)
    assert sorted(ingestion.queries) == ["care+tvs", "landing"]
    status = ingestion.status()
    assert (status["tvs"]["query"], status["care"]["query"], status["landing"]["query"]) == (
        "care+tvs", "care+tvs", "landing")
    stats = store.streams()
    assert sum(stats[s].ingested for s in TVS.streams) == 10 and sum(stats[s].ingested for s in HOMECARE.streams) == 10
    markers = sorted(q.subject.value for q in store.oxigraph.quads_for_pattern(None, None, None, ox.NamedNode(BATCHES_GRAPH)))
    assert markers == ["urn:rspstar:batch:care_tvs/care/0", "urn:rspstar:batch:care_tvs/tvs/0"]

def test_a_replayed_group_batch_writes_only_the_shares_not_yet_stored(spark, tmp_path):
    # A crash may come between two sources' writes of one micro-batch: Spark replays the
    # batch, the share already stored is skipped (not quarantined as sent twice), the other written.
    sources = [fixed_clock_simulator("tvs", "tvs", rows=4), fixed_clock_simulator("care", "homecare", rows=5)]
    rows = first_batch_rows(spark, sources, tmp_path)
    assert sorted({r["source"] for r in rows}) == ["care", "tvs"] and len(rows) == 9
    store = StreamStore()
    ingestion = SparkIngestion(spark, store, sources, tmp_path / "c", tmp_path / "q")
    ingestion._write(sources[0], 0, [r for r in rows if r["source"] == "tvs"], False)   # stored before the crash
    assert sum(v.ingested for v in store.streams().values()) == 4
    write = ingestion._batch_function("care+tvs", sources)
    for _ in range(2):                                                              # replayed, and again
        write(spark.createDataFrame(rows), 0)
    assert sum(v.ingested for v in store.streams().values()) == 9
    assert ingestion.status()["tvs"]["quarantined"] == {} and ingestion.status()["care"]["quarantined"] == {}

def first_batch_rows(spark, sources, tmp_path):
    """The rows of the simulators' first micro-batch, as their streaming query sees them."""
    ingestion = SparkIngestion(spark, StreamStore(), sources, tmp_path / "probe-c", tmp_path / "probe-q")
    seen = []
    frames = [ingestion._frame(s).withColumn("source", F.lit(s.name)) for s in sources]
    union = frames[0].unionByName(frames[1])
    query = (union.writeStream.foreachBatch(lambda frame, batch_id: seen.extend(r.asDict() for r in frame.collect())
                                            if batch_id == 0 else None)
             .option("checkpointLocation", str(tmp_path / "probe-checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    return seen

@pytest.mark.parametrize("sources,groups", [
    ([("a", "simulator", 1.0), ("b", "simulator", 1.0), ("f", "files", 1.0)], {"a+b": ["a", "b"], "f": ["f"]}),
    ([("a", "simulator", 1.0)], {"a": ["a"]}),
    ([("a", "simulator", 1.0), ("c", "simulator", 0.5), ("b", "simulator", 0.5)], {"a": ["a"], "b+c": ["c", "b"]}),
])
def test_simulators_with_one_trigger_interval_form_one_query(sources, groups):
    configs = [SourceConfig(n, kind, trigger_seconds=t) for n, kind, t in sources]
    assert {name: [s.name for s in group] for name, group in _query_groups(configs).items()} == groups

def test_a_source_named_like_the_simulators_query_is_refused():
    configs = [SourceConfig("a+b", "files"), SourceConfig("a", "simulator"), SourceConfig("b", "simulator")]
    with pytest.raises(IngestionError, match="taken by the simulators"):
        _query_groups(configs)

def test_kafka_without_its_connector_fails_with_instructions(spark, tmp_path):
    source = SourceConfig("events", "kafka", stream=STREAM, bootstrap_servers="127.0.0.1:9092", topic="t")
    with pytest.raises(IngestionError, match="Kafka connector"):
        SparkIngestion(spark, StreamStore(), [source], tmp_path / "c", tmp_path / "q").start(available_now=True)

def test_source_names_must_be_unique(spark, tmp_path):
    with pytest.raises(IngestionError, match="unique"):
        SparkIngestion(spark, StreamStore(), [files_source(tmp_path), files_source(tmp_path)], tmp_path, tmp_path)


def test_files_in_stream_subfolders_belong_to_that_stream(spark, tmp_path):
    from rspstar.store.landing import drop_file
    land = tmp_path / "landing"
    drop_file(land, "http://example.org/other", trig(7).encode(), ".trig")
    drop(land, "own.trig", trig(8))
    store = StreamStore()
    run(spark, store, tmp_path, [files_source(tmp_path)])
    assert store.elements_in("http://example.org/other", T0, T0 + 10 * S) == ["http://example.org/e7"]
    assert store.elements_in(STREAM, T0, T0 + 10 * S) == ["http://example.org/e8"]


def test_socket_source_reads_lines_and_quarantines_bad_ones(spark, tmp_path):
    import socket
    import threading
    import time
    lines = [
        '<http://example.org/k1> <http://www.w3.org/ns/prov#generatedAtTime> "2026-03-01T08:00:01Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .',
        '<http://example.org/x1> <http://example.org/v> "1" <http://example.org/k1> .',
        "not a quad",
    ]
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    connections = []

    def serve():
        connection, _ = server.accept()
        connections.append(connection)
        connection.sendall(("\n".join(lines) + "\n").encode())

    threading.Thread(target=serve, daemon=True).start()
    store = StreamStore()
    source = SourceConfig("sock", "socket", stream=STREAM, host="127.0.0.1", port=port, trigger_seconds=0.2)
    ingestion = SparkIngestion(spark, store, [source], tmp_path / "c", tmp_path / "q",
                               Recordings(tmp_path / "recorded"))
    ingestion.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (store.elements_in(STREAM, T0, T0 + 10 * S)
                                                    and ingestion.status()["sock"]["quarantined"]):
            time.sleep(0.2)   # waiting for Spark to read the socket, not for a window
    finally:
        ingestion.stop()
        for connection in connections:
            connection.close()
        server.close()
    assert store.elements_in(STREAM, T0, T0 + 10 * S) == ["http://example.org/k1"]
    assert ingestion.status()["sock"]["quarantined"] == {STREAM: 1}
    assert_recording_replays_what_was_stored(tmp_path / "recorded", store)


CHILD = """
import sys, time
from pathlib import Path
from rspstar.store.ingestion import SourceConfig, SparkIngestion, spark_session
from rspstar.store.stream_store import StreamStore
root = Path(sys.argv[1])
store = StreamStore(str(root / "db"))
source = SourceConfig("landing", "files", stream="http://example.org/hr", path=str(root / "landing"))
ingestion = SparkIngestion(spark_session("local[1]"), store, [source], root / "checkpoints", root / "quarantine")
writer = ingestion.writers["landing"]
original = writer.write
def write_then_hang(batch_id, payloads):
    original(batch_id, payloads)
    (root / "written").write_text(str(batch_id))
    time.sleep(600)   # killed here: stored, not yet committed by Spark
writer.write = write_then_hang
ingestion.start()
time.sleep(600)
"""


def test_kill_9_between_store_write_and_commit_then_restart_loses_and_duplicates_nothing(spark, tmp_path):
    import signal
    import subprocess
    import sys
    import time
    from conftest import REPO
    drop(tmp_path / "landing", "a.trig", trig(0, 1, 2))
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], cwd=REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "written").exists():
            assert time.monotonic() < deadline and child.poll() is None, "the child never stored its batch"
            time.sleep(0.2)   # waiting for the child's Spark to store the batch
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    store = StreamStore(str(tmp_path / "db"))
    assert len(store.elements_in(STREAM, T0, T0 + 10 * S)) == 3          # the write survived the kill
    drop(tmp_path / "landing", "b.trig", trig(3))
    ingestion = SparkIngestion(spark, store, [files_source(tmp_path)], tmp_path / "checkpoints", tmp_path / "quarantine")
    ingestion.start(available_now=True)
    ingestion.await_termination(120)
    assert sorted(store.elements_in(STREAM, T0, T0 + 10 * S)) == ["http://example.org/e%d" % i for i in range(4)]
    assert len(list(store.oxigraph.quads_for_pattern(None, REIFIES, None, None))) == 4
    assert ingestion.status()["landing"]["quarantined"] == {}


def fake_java(home: Path, version: str) -> Path:
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text('#!/bin/sh\necho \'openjdk version "%s" 2020-01-01\' >&2\n' % version)
    java.chmod(0o755)
    return home


def test_java_is_found_by_version_and_a_missing_or_old_one_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path / "old", "11.0.2")))
    installed = tmp_path / "jvm"
    installed.mkdir()
    with pytest.raises(IngestionError, match=r"Spark needs Java 17 or newer and found Java 11 at .*old: install it"):
        find_java_home(installed)
    monkeypatch.delenv("JAVA_HOME")
    with pytest.raises(IngestionError, match="found none"):
        find_java_home(installed)
    fake_java(installed / "java-8", "1.8.0_392")
    newer = fake_java(installed / "java-21", "21.0.5")
    assert find_java_home(installed) == newer


def test_every_source_kind_the_configuration_names_has_its_implementation():
    from rspstar.config.schema import SOURCE_KINDS as CONFIGURED
    from rspstar.store.ingestion import SOURCE_KINDS
    assert sorted(SOURCE_KINDS) == sorted(CONFIGURED)
