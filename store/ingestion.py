"""Spark Structured Streaming into the stream store (the only module that imports pyspark).

Each configured source is one streaming query whose micro-batches `foreachBatch` hands to a
`BatchWriter` (store/batches.py): the rows become stream elements exactly once, bad input
is quarantined, watermarks follow event time. The simulators sharing a trigger interval are
one streaming query together (named by their names joined with '+'): a micro-batch costs
Spark's JVM about the same whatever its size, so one query instead of two about halved the
main job's JVM time per element; the other kinds stay one query each, so a failing socket or
Kafka broker stops only its own. Spark contributes file discovery, sockets, the rate-driven
simulator, Kafka, and checkpoints that survive restarts; pointing `master` at a cluster scales
the sources out.

A partitioned query (docs/partitioned-queries.md) is a streaming query of its own over the
sources of its streams: elements keyed on the executors, kept and evaluated per key group in
Spark's state (store/partitions.py), the rows handed to the engine on the driver.

Sources (config `[[sources]]`, each bound to a stream IRI):
- `files`: a landing directory; `*.trig` documents are read whole, `*.nq` / `*.nquads` as
  N-Quads lines, `*.jsonl` as JSON envelopes (spec §1). Drop files atomically: write
  `.name.tmp`, then rename (names starting with '.' or '_' are ignored).
- `socket`: lines (N-Quads or JSON envelopes) from host:port; Spark is the client. No replay
  after a restart: for tests and demos.
- `simulator`: Spark's `rate-micro-batch` source, each row written as an observation
  (store/simulator.py) of the tunnel ventilation scenario (the RSPU paper), home-care
  monitoring (the RSP-QL* paper) or plain sensors:
  `rate` x `trigger_seconds` rows per micro-batch, stamped with the batch's trigger time (or,
  with the options `startTimestamp` [ms] and `advanceMillisPerBatch`, a fixed clock). A batch
  that takes longer than the trigger delays the next one, so the rate actually reached shows
  in the ingested counts instead of piling up.
- `kafka`: topic values as N-Quads lines or JSON envelopes; needs the connector jar.
- `mqtt`: messages from an MQTT broker's topics (store/mqtt.py), landed durably before they are
  acknowledged, then read by Spark from their landing directory like a files source.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable
from urllib.parse import unquote, urlsplit

from py4j.protocol import Py4JError
from pyspark.errors import AnalysisException, StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from rspstar.config.schema import Source, default

from . import formats
from .batches import BatchReport, BatchWriter
from .codec import ENCODED_SCHEMA, EncodeBatches, EventTimeBound, Payload
from .partitions import (
    EMITTED_SCHEMA, KEYED_SCHEMA, KEYLESS, Emitted, STATE_SCHEMA, KeyedFrames, PartitionFunction, PartitionPlan,
)
from .landing import LandedFiles, file_safe, finish_commits, replace_text, stream_of_landing_file
from .mqtt import MqttSettingsError, MqttSource, from_settings
from .recordings import Recordings
from .errors import StoreError
from .simulator import SCENARIOS
from .stream_store import StreamStore

log = logging.getLogger(__name__)
# A JVM that is gone shows as Py4JError, or as the connection error py4j meets converting it.
_JVM_GONE = (Py4JError, ConnectionError)

JAVA_MIN = 17
_JAVA_VERSION = re.compile(r'version "(?:1\.)?(\d+)')
# Without a cap the driver's heap may grow to a quarter of the machine's memory and, with the
# serial collector, keeps what it once took: resident memory crept for as long as the engine ran.
DRIVER_MEMORY = "512m"
# The heap a JVM starts with, which it never gives back: by default a sixty-fourth of the
# machine's memory, several times the live heap, whose pages micro-batches' garbage touched one
# after another. Started small, the heap grows when it must and gives back at the
# next full collection (not over four) what it holds free beyond Java's ratio
# (bench/out/NOTES.md#jvm-heap-size).
HEAP_START = "64m"
_FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss4m -Xms%s -XX:-ShrinkHeapInSteps" % HEAP_START
# Spark's driver asks its JVM for a full collection this often (ContextCleaner's periodic GC; 30
# minutes by default). Micro-batches leave garbage that survives a young collection: the old
# generation filled with it while the live heap stayed flat, touching new pages for hours before
# a collection would reuse them, so resident memory crept upwards; a full collection of a heap
# this small is cheap (bench/out/NOTES.md#jvm-periodic-gc).
PERIODIC_GC = "10min"
# What Spark remembers of finished jobs, stages, tasks and SQL executions for its UI and status
# API, even with the UI off. Micro-batches are jobs: at Spark's own limits the driver's heap
# grew for as long as the engine ran; at these it stays flat
# (bench/out/NOTES.md#spark-retained-status).
RETAINED_STATUS = 20
_STATUS_LIMITS = {"spark.ui.retainedJobs": RETAINED_STATUS, "spark.ui.retainedStages": RETAINED_STATUS,
                  "spark.ui.retainedTasks": 10 * RETAINED_STATUS, "spark.sql.ui.retainedExecutions": RETAINED_STATUS,
                  "spark.ui.dagGraph.retainedRootRDDs": RETAINED_STATUS}
_LOG4J = """rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# Stopping a streaming query between batches makes Spark warn that it found no job to cancel.
logger.dag.name = org.apache.spark.scheduler.DAGScheduler
logger.dag.level = error
# Spark runs on the JVM's own code paths when Hadoop's native library is absent, as it is here.
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
"""
# Spark's checkpoints through Hadoop's FileSystem, on its raw local file system: the default
# (FileContext over the checksummed local file system) ran a `chmod` or `readlink` command for
# every checkpoint file, without Hadoop's native library, and wrote a checksum file beside each:
# about a quarter of the JVM's CPU per micro-batch of a small stream
# (bench/out/NOTES.md#spark-checkpoint-files). Renames on a local disk are atomic either way.
_LOCAL_CHECKPOINTS = {
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
}
# A simulator's rows per partition before a second partition (task) pays for itself: each task
# costs the JVM a fixed share of every micro-batch.
SIMULATOR_ROWS_PER_PARTITION = 2000
KAFKA_HELP = ("the Kafka source needs Spark's Kafka connector (org.apache.spark:spark-sql-kafka-0-10_2.13 "
              "matching your Spark version, with its kafka-clients dependency). Put the jars in a folder and "
              "set spark.jars to them in [spark] of the configuration, or set spark.jars.packages where the "
              "machine can reach a Maven repository.")
# decode = "auto": a micro-batch is parsed on Spark's executors when the batch before it, of the
# same streaming query, brought at least this many elements; below, in the engine's process,
# where a batch costs no Python task on the executors (bench/out/NOTES.md#executor-decoding).
DECODE_ON_EXECUTORS_FROM = 2000
RESTART_FIRST_SECONDS = 1.0
RESTART_MAX_SECONDS = 60.0
# A micro-batch that was in progress this many times when Spark's JVM died (or ran out of
# memory) has its landing files set aside: the first death may have had any cause (a kill), the
# second on the same files says they are more than the JVM can take, and every restart would
# die on them again (Spark replays a micro-batch with exactly its files).
FAILURES_BEFORE_SET_ASIDE = 2
PARTITIONED_PREFIX = "partitioned-"


@dataclass
class SourceHealth:
    restarts: int = 0
    last_error: str | None = None
    backoff: float = RESTART_FIRST_SECONDS
    next_restart: float | None = None     # when a stopped source is started again
    # Why its latest micro-batch could not be written (a full disk): down until one is, though
    # Spark's query runs again between the failures.
    write_error: str | None = None


@dataclass
class JvmHealth:
    """Spark's JVM itself: started again (a new session, every streaming query from its
    checkpoint) after a back-off once it is gone or out of memory."""
    restarts: int = 0
    trouble: str | None = None            # why it is being started again
    backoff: float = RESTART_FIRST_SECONDS
    next_restart: float | None = None


class IngestionError(StoreError):
    """A source that cannot be started, with what to do about it."""


# One [[sources]] entry of the configuration, its keys declared in rspstar.config.schema.
SourceConfig = Source


def _java_major(java: Path) -> int | None:
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _JAVA_VERSION.search(done.stderr + done.stdout)
    return int(found.group(1)) if found else None


def find_java_home(installed: Path = Path("/usr/lib/jvm")) -> Path:
    """A Java home whose `java` is 17 or newer: JAVA_HOME, else the `java` on the PATH, else
    the newest under `installed`. IngestionError in one line when there is none."""
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(on_path).resolve().parent.parent)
    if installed.is_dir():
        candidates += sorted((p for p in installed.iterdir() if p.is_dir()), reverse=True)
    seen = []
    for home in candidates:
        major = _java_major(home / "bin" / "java")
        if major is not None and major >= JAVA_MIN:
            return home
        if major is not None:
            seen.append("Java %d at %s" % (major, home))
    raise IngestionError("Spark needs Java %d or newer and found %s: install it (Debian/Ubuntu: "
                         "apt-get install openjdk-17-jre-headless) or point JAVA_HOME at one"
                         % (JAVA_MIN, ", ".join(seen) or "none"))


def spark_session(master: str = "local[2]", conf: dict[str, str] | None = None) -> SparkSession:
    """A Spark session set up as measured in docs/spark.md: Java 17+, loopback, quiet logs,
    no UI, a JVM tuned for start-up and small batches, UTC."""
    os.environ["JAVA_HOME"] = str(find_java_home())
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    log4j = Path(tempfile.gettempdir()) / "rspstar-log4j2.properties"
    log4j.write_text(_LOG4J)
    java_options = "%s -Dlog4j2.configurationFile=file:%s" % (_FAST_JVM, log4j)
    builder = (SparkSession.builder.master(master).appName("rspstar")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.adaptive.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", DRIVER_MEMORY)
               .config("spark.cleaner.periodicGC.interval", PERIODIC_GC)
               # Generated code inlines each micro-batch's timestamp, so every batch compiled
               # new classes that only a full collection unloads, and compiling cost more CPU
               # than interpreting a small batch saves (bench/out/NOTES.md#spark-codegen).
               .config("spark.sql.codegen.wholeStage", "false")
               .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
               .config(map={key: str(value) for key, value in _STATUS_LIMITS.items()})
               .config(map=_LOCAL_CHECKPOINTS)
               .config("spark.driver.extraJavaOptions", java_options)
               .config("spark.executor.extraJavaOptions", java_options))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def _micros(column) -> F.Column:
    return F.unix_micros(column)


class SourceKind:
    """One kind of [[sources]] entry: how Spark reads it (`frame`: rows of stream, origin, text
    and ingest_time, or the simulator's rows), which streams it feeds, how a micro-batch's rows
    become payloads for the codec, and what runs beside Spark for it (an MQTT subscriber
    landing messages). SOURCE_KINDS is the place to add one (docs/design.md, "Adding a source
    or sink kind"); config/schema.py names the kinds a configuration may ask for."""

    reads_lines = False          # one element per line: a TriG document cannot be cut into lines
    shares_a_query = False       # sources of this kind run in one streaming query (simulators)
    receives_posts = False       # POST /streams lands posted elements in its directory (rspstar serve)

    def placed(self, source: SourceConfig, data_dir: Path) -> SourceConfig:
        """The source with what it writes placed under `rspstar serve`'s data directory."""
        return source

    def frame(self, spark: SparkSession, source: SourceConfig) -> DataFrame:
        raise NotImplementedError

    def streams(self, source: SourceConfig) -> tuple[str, ...]:
        return (source.stream,) if source.stream else ()

    def payloads(self, source: SourceConfig, rows) -> list[Payload]:
        """One payload per line (a row)."""
        return [Payload(row["stream"], source.format, row["origin"], row["text"], row["ingest_time"], line=k + 1)
                for k, row in enumerate(rows) if row["text"] and row["text"].strip()]

    def subscriber(self, source: SourceConfig, quarantine, landed: LandedFiles | None, max_streams: int | None = None,
                   stored_streams=tuple) -> MqttSource | None:
        """What runs beside Spark for the source (None: nothing); `landed` counts what it lands,
        `max_streams` bounds the streams it may name beside the store's (`stored_streams`)."""
        return None


class FilesKind(SourceKind):
    """Files dropped in a landing directory (POST /streams writes there too)."""

    names_its_stream = True      # (a landing file may name its own, under the stream's folder)
    receives_posts = True

    def placed(self, source, data_dir):
        return replace(source, path=str(data_dir / source.path))

    def frame(self, spark, source):
        if not source.path or not (source.stream or not self.names_its_stream):
            raise IngestionError("source %s: files needs path and stream" % source.name)
        Path(source.path).mkdir(parents=True, exist_ok=True)
        reader = spark.readStream
        if not {"maxFilesPerTrigger", "maxBytesPerTrigger"} & set(source.options):
            # Micro-batches bounded by their files' bytes (Spark refuses both bounds at once).
            reader = reader.option("maxBytesPerTrigger", str(source.max_batch_bytes))
        for option, value in source.options.items():     # Spark's own, e.g. maxFilesPerTrigger
            reader = reader.option(option, value)
        return (reader.format("text").option("wholetext", "true").option("recursiveFileLookup", "true")
                .load(source.path)
                .select(F.lit(source.stream).alias("stream"), F.col("_metadata.file_path").alias("origin"),
                        # The bytes as they are: the codec reads them as UTF-8, strictly.
                        F.col("value").cast("binary").alias("text"),
                        _micros(F.current_timestamp()).alias("ingest_time")))

    def payloads(self, source, rows):
        payloads = []
        root = Path(source.path).resolve()
        for row in rows:
            origin = unquote(urlsplit(row["origin"]).path)   # Spark gives file:/path, percent-encoded
            stream = stream_of_landing_file(root, Path(origin), row["stream"])
            fmt = formats.by_path(origin)
            if fmt.rdf is None:
                payloads += [Payload(stream, fmt.name, origin, line, row["ingest_time"], line=k + 1)
                             for k, line in enumerate(row["text"].split(b"\n")) if line.strip()]
            else:
                payloads.append(Payload(stream, fmt.name, origin, row["text"], row["ingest_time"],
                                        line=1 if fmt.line_based else None))
        return payloads


class MqttKind(FilesKind):
    """An MQTT subscriber lands the broker's messages in the source's landing directory (it
    acknowledges a message once landed), where Spark reads them as files."""

    names_its_stream = False     # a table of topics names the stream of each
    receives_posts = False

    def placed(self, source, data_dir):
        """Its landing directory is its own, DATA/mqtt/NAME."""
        return replace(source, path=str(data_dir / "mqtt" / file_safe(source.name)))

    def streams(self, source):
        if isinstance(source.topic, dict):
            return tuple(dict.fromkeys(source.topic.values()))
        return super().streams(source)

    def subscriber(self, source, quarantine, landed, max_streams=None, stored_streams=tuple):
        return from_settings(source, quarantine, landed=landed, max_streams=max_streams, stored_streams=stored_streams)


class SocketKind(SourceKind):
    """Lines from a TCP server Spark connects to."""

    reads_lines = True

    def frame(self, spark, source):
        frame = spark.readStream.format("socket").option("host", source.host).option("port", source.port).load()
        return frame.select(F.lit(source.stream).alias("stream"),
                            F.lit("socket:%s:%d" % (source.host, source.port)).alias("origin"),
                            F.col("value").cast("binary").alias("text"),
                            _micros(F.current_timestamp()).alias("ingest_time"))


class SimulatorKind(SourceKind):
    """The built-in simulators: rows Spark releases at a fixed rate, each turned into an
    observation of the scenario where the rows are read."""

    shares_a_query = True

    def streams(self, source):
        scenario = SCENARIOS.get(source.scenario)
        return scenario.streams if scenario else ()

    def frame(self, spark, source):
        if SCENARIOS.get(source.scenario) is None:
            raise IngestionError("source %s: unknown scenario %r (known: %s)"
                                 % (source.name, source.scenario, ", ".join(SCENARIOS)))
        # rate-micro-batch releases a fixed number of rows every trigger, so event time moves
        # with each micro-batch; the `rate` source releases whole seconds only, which held
        # every window close back by a second (bench/out/live_tvs.md).
        per_batch = source.options.get("rowsPerBatch") or str(max(1, round(source.rate * source.trigger_seconds)))
        # One task per batch at small rates (Spark would make one per core).
        partitions = source.options.get("numPartitions") or str(min(
            spark.sparkContext.defaultParallelism, -(-int(per_batch) // SIMULATOR_ROWS_PER_PARTITION)))
        rate = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", per_batch) \
            .option("numPartitions", partitions)
        fixed_clock = "startTimestamp" in source.options
        if fixed_clock:
            rate = rate.option("startTimestamp", source.options["startTimestamp"]).option(
                "advanceMillisPerBatch", source.options.get("advanceMillisPerBatch",
                                                            str(round(source.trigger_seconds * 1000))))
        rows = rate.load()
        if not fixed_clock:
            # The batch's own timestamp (kept in Spark's offset log, so a replayed batch
            # gets the same one): observations are sampled when the batch is triggered.
            rows = rows.withColumn("timestamp", F.current_timestamp())
        # The documents are written where the rows are read (payloads_of): in Spark SQL
        # they cost the JVM about a third of each micro-batch.
        return rows.select("value", _micros(F.col("timestamp")).alias("event_time"),
                           _micros(F.current_timestamp()).alias("ingest_time"))

    def payloads(self, source, rows):
        # Each row's document is self-contained, with full IRIs: one document per stream and
        # batch parses in one call instead of one per observation.
        texts = SCENARIOS[source.scenario].documents(((int(row["value"]), int(row["event_time"])) for row in rows),
                                                     source.size, source.name)
        return [Payload(stream, "trig", "simulator:%s" % source.name, "\n".join(t), int(rows[0]["ingest_time"]))
                for stream, t in texts.items()]


class KafkaKind(SourceKind):
    """A Kafka topic's records, one element per record (needs Spark's Kafka connector)."""

    reads_lines = True

    def frame(self, spark, source):
        if not isinstance(source.topic, str) or not source.topic:
            raise IngestionError("source %s: kafka needs topic, one Kafka topic" % source.name)
        try:
            frame = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", source.bootstrap_servers)
                     .option("subscribe", source.topic).load())
        except AnalysisException as e:
            if "kafka" in str(e).lower():
                raise IngestionError("source %s: %s" % (source.name, KAFKA_HELP)) from None
            raise
        return frame.select(F.lit(source.stream).alias("stream"),
                            F.lit("kafka:%s" % source.topic).alias("origin"),
                            F.col("value").alias("text"),
                            _micros(F.current_timestamp()).alias("ingest_time"))


SOURCE_KINDS: dict[str, SourceKind] = {
    "files": FilesKind(), "mqtt": MqttKind(), "socket": SocketKind(), "simulator": SimulatorKind(), "kafka": KafkaKind(),
}


class SparkIngestion:
    """The streaming queries of all configured sources, writing into one store."""

    def __init__(self, spark: SparkSession, store: StreamStore, sources: list[SourceConfig],
                 checkpoint_dir: Path, quarantine_dir: Path, recordings: Recordings | None = None,
                 quarantine_max_bytes: int = default("quarantine.max_bytes"), landed: LandedFiles | None = None,
                 executors_from: int = DECODE_ON_EXECUTORS_FROM, max_streams: int | None = None,
                 session: Callable[[], SparkSession] | None = None, event_time: EventTimeBound | None = None):
        names = [s.name for s in sources]
        if len(set(names)) != len(names):
            raise IngestionError("source names must be unique, got %s" % names)
        self.spark = spark
        # How to start Spark again when its JVM is gone (None: it is not started again).
        self.session = session
        self.jvm = JvmHealth()
        self.store = store
        self.sources = sources
        self.checkpoint_dir = checkpoint_dir
        self.recordings = recordings
        self.groups = _query_groups(sources)
        self.query_of = {s.name: name for name, group in self.groups.items() for s in group}
        self.writers = {s.name: BatchWriter(store, s.name, quarantine_dir, s.allowed_lateness,
                                            query=None if self.query_of[s.name] == s.name else self.query_of[s.name],
                                            quarantine_max_bytes=quarantine_max_bytes, acknowledged=landed,
                                            max_streams=max_streams, event_time=event_time)
                        for s in sources}
        self.queries: dict = {}                 # streaming queries by name (a source's or a group's)
        # How to start a partitioned query's streaming query again (named PARTITIONED_PREFIX + id).
        self._restarts: dict[str, Callable[[], None]] = {}
        self.quarantine_dir = quarantine_dir
        self.quarantine_max_bytes = quarantine_max_bytes
        self.batches: dict[str, int] = {s.name: 0 for s in sources}
        self.health: dict[str, SourceHealth] = {name: SourceHealth() for name in self.groups}
        # decode = "auto": the elements each streaming query's latest micro-batch brought.
        self.executors_from = executors_from
        self._last_batch_elements: dict[str, int] = {name: 0 for name in self.groups}
        self.decoded_on_executors: dict[str, int] = {name: 0 for name in self.groups}   # batches, per query
        self._supervised = False     # live runs restart stopped queries; available-now runs end
        for source in sources:
            if source.kind == "files" and source.path:
                # A post's files that a crash left half revealed appear whole before Spark looks.
                finish_commits(Path(source.path))
        # MQTT subscribers (live runs only), built now so that bad settings fail before Spark runs.
        self.mqtt: dict[str, MqttSource] = {}
        for source in sources:
            try:
                subscriber = SOURCE_KINDS[source.kind].subscriber(source, self.writers[source.name].quarantine, landed,
                                                                  max_streams, store.streams)
            except MqttSettingsError as e:
                raise IngestionError(str(e)) from None
            if subscriber is not None:
                self.mqtt[source.name] = subscriber

    # -- sources as DataFrames of (stream, format, origin, text, ingest_time, line) ----------
    def _frame(self, source: SourceConfig) -> DataFrame:
        kind = SOURCE_KINDS.get(source.kind)
        if kind is None:
            raise IngestionError("source %s: unknown kind %r (%s)" % (source.name, source.kind, ", ".join(SOURCE_KINDS)))
        if kind.reads_lines and source.format == "trig":
            raise IngestionError("source %s: %s reads lines: format nquads or jsonl" % (source.name, source.kind))
        return kind.frame(self.spark, source)

    # -- micro-batches --------------------------------------------------------------------------
    def _batch_function(self, name: str, group: list[SourceConfig]):
        def write(frame: DataFrame, batch_id: int) -> None:
            encoded = self._on_executors(name, group)
            if encoded:
                frame = self._encoded(frame, group)
                self.decoded_on_executors[name] += 1
            # Through Arrow: about half the driver's time of collect()'s pickled rows.
            rows = frame.toArrow().to_pylist()
            by_source: dict[str, list] = {}
            for row in rows:
                by_source.setdefault(row["source"], []).append(row)
            # Each source's share is written with its own marker: a replayed micro-batch skips
            # the shares already stored and writes the rest.
            elements = 0
            for source in group:
                if source.name in by_source:
                    report = self._write(source, batch_id, by_source[source.name], encoded)
                    elements += sum(report.stored.values()) + sum(report.quarantined.values())
            self._last_batch_elements[name] = elements

        return write

    def _on_executors(self, name: str, group: list[SourceConfig]) -> bool:
        """Whether this micro-batch of the streaming query `name` is parsed on the executors: as its
        sources' `decode` says, or under "auto" when the batch before brought executors_from
        elements or more (a group shares one `decode`: _query_groups)."""
        decode = group[0].decode
        if decode == "auto":
            return self._last_batch_elements[name] >= self.executors_from
        return decode == "executors"

    def _encoded(self, frame: DataFrame, group: list[SourceConfig]) -> DataFrame:
        """A micro-batch's rows decoded where they are (codec.encode's rows, each source's own
        payloads), tagged with their source: the driver stores them without parsing."""
        if len(group) == 1:
            frames = [(group[0], frame.drop("source"))]
        else:
            frames = [(source, frame.where(F.col("source") == source.name).drop("source")) for source in group]
        encoded = [rows.mapInArrow(EncodeBatches(functools.partial(payloads_of, source)), ENCODED_SCHEMA)
                   .withColumn("source", F.lit(source.name)) for source, rows in frames]
        return functools.reduce(DataFrame.unionByName, encoded)

    def _write(self, source: SourceConfig, batch_id: int, rows: list, encoded: bool) -> BatchReport:
        writer = self.writers[source.name]
        health = self.health[self.query_of[source.name]]
        try:
            report = writer.write_encoded(batch_id, rows) if encoded else \
                writer.write(batch_id, payloads_of(source, rows))
        except (OSError, StoreError) as e:
            # Not written (one transaction: nothing of it is): Spark runs the batch again once
            # the query is restarted. Down until then, though the query itself runs meanwhile.
            health.write_error = "batch %d could not be written: %s" % (batch_id, _cause(str(e)))
            raise
        health.write_error = None
        self.batches[source.name] = batch_id
        if self.recordings is not None and not report.skipped:
            try:
                self.recordings.record(report.canonical())
            except OSError as e:     # the elements are stored: a full disk must not stop the source
                log.error("%s batch %d: stored but not recorded: %s", source.name, batch_id, e)
        if report.stored or report.quarantined:
            log.debug("%s batch %d: stored %s, late %s, quarantined %s", source.name, batch_id,
                      report.stored, report.late, report.quarantined)
        return report

    def start(self, available_now: bool = False) -> None:
        self._supervised = not available_now
        for name in self.groups:
            self._start_query(name, available_now)
        if not available_now:
            for subscriber in self.mqtt.values():
                subscriber.start()

    def _start_query(self, name: str, available_now: bool = False) -> None:
        group = self.groups[name]
        frames = [self._frame(source).withColumn("source", F.lit(source.name)) for source in group]
        frame = functools.reduce(DataFrame.unionByName, frames)
        writer = (frame.writeStream.foreachBatch(self._batch_function(name, group))
                  .option("checkpointLocation", str(self.checkpoint_dir / name))
                  .queryName("rspstar-" + name))
        writer = writer.trigger(availableNow=True) if available_now else \
            writer.trigger(processingTime="%g seconds" % group[0].trigger_seconds)
        self.queries[name] = writer.start()

    # -- partitioned queries (docs/partitioned-queries.md) ------------------------------------
    def start_partitioned(self, plan: PartitionPlan, deliver: Callable[[str, list[tuple]], object],
                          trigger_seconds: float | None = None) -> None:
        """Run a partitioned query on the executors: the sources of its streams read again (a
        streaming query of its own, checkpointed under `partitioned/<query id>`), each element
        keyed as it is parsed, the keys' elements kept in Spark's state and evaluated there; each
        micro-batch's output goes to `deliver(query id, rows)` on the driver, elements without
        a key to the quarantine."""
        name = PARTITIONED_PREFIX + plan.query_id
        self.stop_partitioned(plan.query_id)
        self._supervised = True
        self._restarts[name] = functools.partial(self.start_partitioned, plan, deliver, trigger_seconds)
        self.health.setdefault(name, SourceHealth())
        sources = [s for s in self.sources if set(_streams_of(s)) & set(plan.keys)]
        if not sources:
            raise IngestionError("partitioned query %s: no source feeds %s" % (plan.query_id, ", ".join(plan.streams())))
        keyed = None
        for source in sources:
            frame = (self._frame(source).mapInPandas(KeyedFrames(functools.partial(payloads_of, source), plan.keys, plan.key_groups),
                                                     KEYED_SCHEMA)
                     .withWatermark("event_time", "%d milliseconds" % (source.allowed_lateness // 1000)))
            keyed = frame if keyed is None else keyed.unionByName(frame)
        emitted = keyed.groupBy("key_group").applyInPandasWithState(
            PartitionFunction(plan), EMITTED_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.ProcessingTimeTimeout)
        quarantine = BatchWriter(self.store, name, self.quarantine_dir, quarantine_max_bytes=self.quarantine_max_bytes)

        def write(frame: DataFrame, batch_id: int) -> None:
            rows = [Emitted(*row) for row in frame.collect()]
            for row in rows:
                if row.kind == KEYLESS:     # its key is the stream, its payload the element
                    described = json.loads(row.payload)
                    quarantine.quarantine(Payload(row.key, "nquads", described["graph"], described["nquads"], 0),
                                          described["reason"])
            deliver(plan.query_id, [row for row in rows if row.kind != KEYLESS])

        seconds = trigger_seconds or min(s.trigger_seconds for s in sources)
        self.queries[name] = (
            emitted.writeStream.outputMode("append").foreachBatch(write)
            .option("checkpointLocation", str(self._partitioned_checkpoint(plan.query_id) / str(plan.key_groups)))
            .queryName("rspstar-" + name).trigger(processingTime="%g seconds" % seconds).start())

    def stop_partitioned(self, query_id: str, forget: bool = False) -> None:
        """Stop a partitioned query's streaming query between micro-batches; with `forget`, its
        checkpoint goes too (the query was removed: a new one under its id starts afresh)."""
        name = PARTITIONED_PREFIX + query_id
        query = self.queries.pop(name, None)
        if query is not None:
            _stop_between_batches(query)
        if forget:
            self._restarts.pop(name, None)
            self.health.pop(name, None)
            shutil.rmtree(self._partitioned_checkpoint(query_id), ignore_errors=True)

    def _partitioned_checkpoint(self, query_id: str) -> Path:
        """Where a partitioned query's checkpoints are, one per number of key groups: its state
        holds each key's elements in one group, so another number starts afresh."""
        return self.checkpoint_dir / "partitioned" / file_safe(query_id)

    def supervise(self, now: float) -> list[str]:
        """Restart the streaming queries that have stopped (from their checkpoints, so
        nothing is lost or stored twice), after a back-off that doubles with each restart,
        from RESTART_FIRST_SECONDS to RESTART_MAX_SECONDS. `now` is a monotonic clock in
        seconds. Returns the names of the queries restarted now (a source's own name, or its
        group's)."""
        if self._supervised and self.session is not None:
            trouble = self.jvm.trouble or self._jvm_trouble()
            if trouble is not None:
                return self._restart_jvm(trouble, now)
        restarted = []
        for name in [*self.groups, *self._restarts] if self._supervised else []:
            health = self.health[name]
            if name not in self.queries or self._active(name):
                continue
            if health.next_restart is None:
                health.last_error = self._failure(name)
                health.next_restart = now + health.backoff
                log.error("source %s stopped (%s); restarting in %g s", name, health.last_error, health.backoff)
                continue
            if now < health.next_restart:
                continue
            try:
                self._restarts[name]() if name in self._restarts else self._start_query(name)
            except Exception as e:  # tried again after the next back-off
                health.last_error = "restart failed: %s" % _cause(str(e))
                log.error("source %s: %s", name, health.last_error)
            else:
                health.restarts += 1
                restarted.append(name)
                log.warning("source %s restarted (restart %d)", name, health.restarts)
            health.backoff = min(2 * health.backoff, RESTART_MAX_SECONDS)
            health.next_restart = None if name in restarted else now + health.backoff
        return restarted

    # -- Spark's JVM ----------------------------------------------------------------------------
    def _jvm_trouble(self) -> str | None:
        """Why Spark's JVM must be started again: it is gone, its context stopped, or a
        streaming query failed for want of its memory (which leaves a JVM that cannot be trusted)."""
        try:
            context = self.spark.sparkContext._jsc
            if context is None or context.sc().isStopped():
                return "Spark's context stopped"
        except _JVM_GONE:
            return "Spark's JVM is gone"
        for query in list(self.queries.values()):
            try:
                if query.isActive:
                    continue
                error = query.exception()
            except _JVM_GONE:
                return "Spark's JVM is gone"
            if error is not None and "OutOfMemoryError" in str(error):
                return "Spark's JVM ran out of memory (%s)" % _cause(str(error))
        return None

    def _restart_jvm(self, trouble: str, now: float) -> list[str]:
        """Start Spark again after a back-off, every streaming query from its checkpoint (Spark
        replays the micro-batch each was in, exactly once: the batch markers); when the trouble
        is first seen, the micro-batches in progress are counted against their files
        (FAILURES_BEFORE_SET_ASIDE)."""
        jvm = self.jvm
        if jvm.trouble is None:
            jvm.trouble = trouble
            jvm.next_restart = now + jvm.backoff
            log.error("%s; starting Spark again in %g s", trouble, jvm.backoff)
            for name in [*self.groups, *self._restarts]:
                self.health[name].last_error = trouble
            for name in self.groups:
                self._count_failure(name, trouble)
            return []
        if now < jvm.next_restart:
            return []
        jvm.backoff = min(2 * jvm.backoff, RESTART_MAX_SECONDS)
        try:
            forget_session(self.spark)
            self.spark = self.session()
            self.queries.clear()
            for name in self.groups:
                self._start_query(name)
            for restart in list(self._restarts.values()):
                restart()
        except Exception as e:  # tried again after the next back-off
            jvm.next_restart = now + jvm.backoff
            log.error("starting Spark again failed (%s); trying again in %g s", _cause(str(e)), jvm.backoff)
            return []
        jvm.trouble = jvm.next_restart = None
        jvm.restarts += 1
        restarted = [*self.groups, *self._restarts]
        for name in restarted:
            self.health[name].restarts += 1
            self.health[name].next_restart = None
        log.warning("Spark started again (JVM restart %d); its streaming queries resume from their checkpoints",
                    jvm.restarts)
        return restarted

    def _failures_path(self, name: str) -> Path:
        return self.checkpoint_dir / ("%s.failures.json" % file_safe(name))

    def _count_failure(self, name: str, trouble: str) -> None:
        """Count the trouble against the micro-batch the streaming query `name` had in progress
        (planned in its checkpoint, not committed), kept beside the checkpoint so that a restart
        of the engine counts on; at FAILURES_BEFORE_SET_ASIDE its landing files are set aside."""
        group = self.groups[name]
        if len(group) != 1 or not group[0].path or group[0].kind not in ("files", "mqtt"):
            return
        batch = pending_batch(self.checkpoint_dir / name)
        if batch is None:
            return
        record = self._failures_path(name)
        try:
            previous = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            previous = {}
        failures = previous.get("failures", 0) + 1 if previous.get("batch") == batch else 1
        files = batch_files(self.checkpoint_dir / name, batch)
        if failures < FAILURES_BEFORE_SET_ASIDE:
            try:
                replace_text(record, json.dumps({"batch": batch, "failures": failures, "trouble": trouble}))
            except OSError as e:
                log.error("source %s: could not count the failure of micro-batch %d: %s", name, batch, e)
            return
        size = sum(f.stat().st_size for f in files if f.exists())
        reason = ("Spark's JVM failed %d times while a micro-batch held this file (batch %d, %d file(s), %d bytes; "
                  "last: %s): set aside so that it is not read again; what one micro-batch may hold is bounded by "
                  "[[sources]] max_batch_bytes and Spark's heap (spark.driver.memory under [spark])"
                  % (failures, batch, len(files), size, trouble))
        writer = self.writers[group[0].name]
        for landed in files:
            if landed.exists() and landed.stat().st_size:
                writer.set_aside_file(landed, stream_of_landing_file(Path(group[0].path), landed,
                                                                     group[0].stream or ""), reason)
        record.unlink(missing_ok=True)

    def _failure(self, name: str) -> str:
        try:
            error = self.queries[name].exception()
        except _JVM_GONE:
            return "Spark's JVM is gone"
        return _cause(str(error)) if error is not None else "stopped without an error"

    def await_termination(self, timeout: float | None = None) -> None:
        """Wait for every query (available-now runs end by themselves); a failed source raises
        IngestionError."""
        for name, query in self.queries.items():
            try:
                query.awaitTermination(timeout)
            except StreamingQueryException as e:
                raise IngestionError("source %s failed: %s" % (name, _cause(str(e)))) from None

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every query between batches (stopping inside a JVM call can crash the stream
        thread, docs/spark.md). A JVM already gone (a signal sent to the whole process
        group) leaves nothing to stop: what it committed is in the store."""
        self._supervised = False
        for subscriber in self.mqtt.values():     # what they acknowledged is landed: Spark reads it next time
            subscriber.stop()
        try:
            for query in self.queries.values():
                _stop_between_batches(query, timeout)
        except _JVM_GONE:
            log.warning("Spark's JVM stopped before its streaming queries did")
        finally:
            self.queries.clear()

    def _active(self, name: str) -> bool:
        try:
            return name in self.queries and self.queries[name].isActive
        except _JVM_GONE:
            return False

    def status(self) -> dict:
        """Per source: whether it ingests (`active`: its query runs and its latest micro-batch
        was written), its restarts, the last error, its last batch and what it set aside."""
        sources = {}
        for name in self.writers:
            health = self.health[self.query_of[name]]
            sources[name] = {"last_batch": self.batches[name], "quarantined": dict(self.writers[name].quarantined),
                             "query": self.query_of[name],
                             "active": self._active(self.query_of[name]) and health.write_error is None,
                             "restarts": health.restarts, "last_error": health.write_error or health.last_error}
        for name, subscriber in self.mqtt.items():
            # Down while its broker is: nothing arrives meanwhile (the broker keeps it).
            sources[name]["mqtt"] = subscriber.describe()
            sources[name]["active"] = sources[name]["active"] and subscriber.status.connected
            if not subscriber.status.connected:
                sources[name]["last_error"] = subscriber.status.last_error or "not connected to its broker yet"
        partitioned = {name: {"query": name, "active": self._active(name), "restarts": self.health[name].restarts,
                              "last_error": self.health[name].last_error}
                       for name in self._restarts}
        return {**sources, **partitioned}


def payloads_of(source: SourceConfig, rows) -> list[Payload]:
    """A micro-batch's rows of one source as payloads for the codec (rows are mappings)."""
    return SOURCE_KINDS[source.kind].payloads(source, rows)


def _stop_between_batches(query, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


def _streams_of(source: SourceConfig) -> tuple[str, ...]:
    return SOURCE_KINDS[source.kind].streams(source)


def _query_groups(sources: list[SourceConfig]) -> dict[str, list[SourceConfig]]:
    """The streaming queries to run, by name: simulators with the same trigger interval (and decoding)
    together, named by their names joined with '+' (so another set of simulators is another
    query, with its own checkpoint and batch markers: Spark refuses a checkpoint made for other
    sources); a simulator alone and every other source alone under its own name."""
    simulators: dict[tuple[float, str], list[SourceConfig]] = {}
    groups: dict[str, list[SourceConfig]] = {}
    for source in sources:
        if SOURCE_KINDS[source.kind].shares_a_query:
            # One `decode` per streaming query: its micro-batches are parsed in one place.
            simulators.setdefault((source.trigger_seconds, source.decode), []).append(source)
        else:
            groups[source.name] = [source]
    for group in simulators.values():
        name = "+".join(sorted(source.name for source in group))
        if len(group) > 1 and name in groups:
            raise IngestionError("source name %r is taken by the simulators' streaming query: rename the source" % name)
        groups[name] = group
    return groups


def stop_session(session: SparkSession) -> None:
    """Stop Spark, whether or not its JVM is still there."""
    try:
        session.stop()
    except _JVM_GONE:
        log.warning("Spark's JVM had already stopped")


def _cause(message: str) -> str:
    """The Python error inside a streaming failure's long report, else its first line."""
    causes = re.findall(r"^\s*(\w+(?:Error|Exception): .*)$", message, re.M)
    return causes[-1].strip() if causes else message.split("\n")[0][:500]


def pending_batch(checkpoint: Path) -> int | None:
    """The micro-batch a streaming query planned (its offsets logged) and did not commit."""
    def ids(folder: str) -> set[int]:
        directory = checkpoint / folder
        return {int(p.name) for p in directory.iterdir() if p.name.isdigit()} if directory.is_dir() else set()
    planned = ids("offsets")
    if not planned:
        return None
    last = max(planned)
    return None if last in ids("commits") else last


def batch_files(checkpoint: Path, batch: int) -> list[Path]:
    """The files a file stream's micro-batch `batch` reads, from its checkpoint's file log (a
    batch's own entry, or the compacted log that holds it)."""
    log_dir = checkpoint / "sources" / "0"
    for name in (str(batch), "%d.compact" % batch):
        try:
            lines = (log_dir / name).read_text(encoding="utf-8").splitlines()[1:]
        except OSError:
            continue
        entries = [json.loads(line) for line in lines if line.strip()]
        return [Path(unquote(urlsplit(e["path"]).path)) for e in entries if e.get("batchId") == batch]
    return []


def forget_session(session: SparkSession) -> None:
    """Let go of a Spark session whose JVM is gone (or is to be), so that the next one starts a
    JVM of its own: PySpark keeps the first session, its context and its gateway for the
    process, and would hand back the dead ones."""
    from pyspark import SparkContext
    gateway = SparkContext._gateway
    try:
        session.stop()
    except Exception:  # the JVM is gone: nothing to stop there
        pass
    if gateway is not None:
        try:
            gateway.shutdown()
        except Exception:  # the JVM is gone
            pass
        process = getattr(gateway, "proc", None)
        if process is not None:
            try:
                process.kill()
                process.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                pass
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
