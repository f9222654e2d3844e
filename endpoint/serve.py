"""`rspstar serve`: the whole engine in one process.

The Oxigraph store on disk, Spark ingestion (local master by default), the scheduler and the
HTTP endpoint with its dashboard, all from one TOML configuration. The HTTP server stays in
the Spark driver's process because one process owns the on-disk store (docs/spark.md).
Ctrl-C (or SIGTERM) stops everything cleanly; a restart with the same data directory
continues where it stopped (stored elements, queries and their last evaluation, outboxes,
Spark checkpoints).
"""
from __future__ import annotations

import hashlib
import logging
import os
import secrets
import signal
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import pyoxigraph as ox

from rspstar.store.codec import EventTimeBound
from rspstar.store.rdf_input import format_for_path
from rspstar.store.disk import DiskGuard
from rspstar.store.landing import LandedFiles
from rspstar.store.heap import settle_heap
from rspstar.store.recordings import Recordings
from rspstar.store.stream_store import StreamStore
from rspstar.translator.vocabulary import BATCHES_GRAPH

from .engine.clock import WallClock
from .config import Config, ConfigError, background_refresh, load_config, register_configured
from .engine.runner import Runner, UnknownQuery
from .http import HttpSettings, Readiness, create_app
from .http.server import HttpServer
from .allocator import limit_arenas, trimmer
from .engine.scheduler import LiveScheduler

log = logging.getLogger("rspstar")
PROGRESS_SECONDS = 10
PROGRESS_QUERIES = 8        # named one by one on the progress line up to this many
SIGNAL_CHECK_SECONDS = 0.5  # how long a stop signal taken by another thread waits for its handler
# An evaluation calls from Oxigraph into Python (the rspu: functions) tens of thousands of
# times, taking the GIL back each time; a busy ingestion thread would keep it for Python's
# default 5 ms at every turn, and evaluations take longer than their CPU time
# (bench/out/NOTES.md#gil-switch-interval).
GIL_SWITCH_SECONDS = 0.0005


# Every thread of the engine (HTTP workers, evaluations, sources) gets a stack of this size,
# whatever the environment's limit (`ulimit -s`; unlimited gives threads less): the bound on
# what a text may take a parser's stack (translator/nesting.py) is proven against it.
THREAD_STACK_BYTES = 8 << 20


def configure_process() -> None:
    """Process-wide settings of a live engine (ingestion and evaluations in one process), made
    before any thread starts."""
    sys.setswitchinterval(GIL_SWITCH_SECONDS)
    threading.stack_size(THREAD_STACK_BYTES)
    limit_arenas()


def source_configs(config: Config, data_dir: Path) -> list:
    """`[[sources]]`, each with what it writes placed under the data directory as its kind says
    (store.ingestion's SOURCE_KINDS: a files source's landing directory, an MQTT source's
    DATA/mqtt/NAME). Spark ingests every source: where there are some, pyspark is there
    (`spark_module`)."""
    sources = config.settings.sources
    if not sources:
        return []
    from rspstar.store.ingestion import SOURCE_KINDS
    return [SOURCE_KINDS[source.kind].placed(source, data_dir) for source in sources]


def load_background_once(store: StreamStore, config: Config) -> None:
    """Background files load on the first start only (a marker per file content), so a
    restart does not add their blank nodes again."""
    for name in config.settings.background.files:
        path = config.relative(name)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ConfigError("%s [background]: cannot read %s: %s" % (config.path, path, e.strerror)) from None
        marker = ox.Quad(ox.NamedNode("urn:rspstar:background:" + hashlib.blake2b(data, digest_size=16).hexdigest()),
                         ox.NamedNode("urn:rspstar:loaded"), ox.Literal(str(path)), ox.NamedNode(BATCHES_GRAPH))
        if marker in store.oxigraph:
            continue
        count = store.background.load(data, format_for_path(path), str(path))
        store.add_marker(marker)
        log.info("loaded %d background quads from %s", count, path)


def write_token(config: Config, data_dir: Path) -> str | None:
    """The bearer token writes need: `[http] token` when set (an empty string turns tokens
    off), else the one in DATA/token, made and announced once at the first start."""
    configured = config.settings.http.token
    if configured is not None:
        return configured or None
    path = data_dir / "token"
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    token = secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    log.info("writes (registration, deletion, updates, stream posts) need 'Authorization: Bearer %s' "
             "(kept in %s; set [http] token = \"\" to turn tokens off)", token, path)
    return token


def recordings(config: Config, data_dir: Path) -> Recordings | None:
    """DATA/recording within `[recording] max_bytes` (0 records nothing)."""
    budget = config.settings.recording.max_bytes
    return Recordings(data_dir / "recording", budget) if budget else None


def http_settings(config: Config, landing: Path | None, token: str | None) -> HttpSettings:
    """The app's settings: every [http] setting, and the token and landing directory serve decided."""
    return HttpSettings(**{**asdict(config.settings.http), "token": token}, landing_dir=landing)


def progress_line(engine: Runner) -> str:
    """One short console line: streams, then each query's evaluations/results (and its state
    when it is not running); the dashboard and GET /queries have the rest."""
    streams = engine.store.streams()
    ingested = sum(s.ingested for s in streams.values())
    held = sum(s.elements for s in streams.values())
    registered = engine.queries()
    if len(registered) > PROGRESS_QUERIES:
        # Hundreds of queries would make a line of kilobytes every few seconds: totals, and
        # the queries that need a look.
        failed = [q.id for q in registered if q.status.state != "running"]
        queries = "%d queries, %d/%d in all%s" % (
            len(registered), sum(q.status.evaluations for q in registered),
            sum(q.status.results_emitted for q in registered),
            "" if not failed else "; FAILED: %s%s" % (", ".join(failed[:5]), " and %d more" % (len(failed) - 5)
                                                       if len(failed) > 5 else ""))
    else:
        queries = ", ".join("%s %d/%d%s" % (q.id, q.status.evaluations, q.status.results_emitted,
                                            "" if q.status.state == "running" else " " + q.status.state.upper())
                            for q in registered)
    return "%d streams, %d elements ingested, %d held | evaluations/results: %s" % (
        len(streams), ingested, held, queries or "no queries")


def progress_reporter(engine: Runner, give_back: Callable[[], object] = lambda: None) -> Callable[[], None]:
    """What runs every PROGRESS_SECONDS: a line on the console, and the stream counters saved
    (a crash loses at most this long of their increments); after queries were removed,
    `give_back` returns the memory they held to the system (malloc keeps what was freed for
    the process: bench/out/NOTES.md#figures-from-comments)."""
    removals_seen = engine.removals

    saving_failed = False

    def report() -> None:
        nonlocal removals_seen, saving_failed
        log.info(progress_line(engine))
        try:
            engine.store.save_stats()
        except OSError as e:        # a full disk: said once, saved again once it can be
            if not saving_failed:
                log.error("the streams' counters cannot be saved (%s)", e)
            saving_failed = True
        else:
            saving_failed = False
        if engine.removals != removals_seen:
            removals_seen = engine.removals
            give_back()
    return report


def run_partitioned(engine: Runner, ingestion) -> None:
    """Partitioned queries run on Spark's executors: started now and as they are registered,
    stopped (their checkpoint forgotten) as they are removed, restarted with a fresh copy of
    the background when it changes."""
    def start(query_id: str) -> None:
        try:
            ingestion.start_partitioned(engine.partition_plan(query_id), engine.accept_partitions)
        except Exception as e:  # the query stays registered, its status says why it is idle
            registered = engine.get(query_id)
            registered.status.state = "failed"
            registered.status.last_error = "partitioned evaluation did not start: %s" % e
            log.error("query %s: %s", query_id, registered.status.last_error)

    def on_change(event: str, query_id: str) -> None:
        if event == "removed":
            ingestion.stop_partitioned(query_id, forget=True)
            return
        try:
            partitioned = engine.get(query_id).partitioned
        except UnknownQuery:     # removed meanwhile
            return
        if partitioned:
            start(query_id)

    for registered in engine.queries():
        if registered.partitioned:
            start(registered.id)
    engine.listeners.append(on_change)


# What installs Spark beside the library (pyproject.toml's optional dependencies).
SPARK_EXTRA = "pip install 'rspstar[spark]'"


def spark_module(sources: list, config_path: Path):
    """The Spark ingestion module (store.ingestion), or None when pyspark is not installed and no
    source needs it; ConfigError naming the extra when sources need it and it is missing."""
    try:
        from rspstar.store import ingestion
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in ("pyspark", "py4j"):
            raise
        if sources:
            raise ConfigError("%s configures sources (%s), which Spark ingests, and pyspark is not installed: %s "
                              "(make run and the Docker image do)" % (config_path, ", ".join(
                                  "%s (%s)" % (s.name, s.kind) for s in sources), SPARK_EXTRA)) from None
        return None
    return ingestion


class WithoutSpark:
    """What partitioned queries start on when the engine runs without Spark: each is marked
    failed with the reason (it evaluates on Spark's executors)."""

    def start_partitioned(self, plan, accept) -> None:
        raise RuntimeError("it runs on Spark's executors and pyspark is not installed: %s" % SPARK_EXTRA)

    def stop_partitioned(self, query_id: str, forget: bool = False) -> None:
        pass


def serve(config_path: Path, data_dir: Path, overrides: dict[str, object] | None = None) -> int:
    """Run the engine from `config_path` with `overrides` ("table.key": value, from the command
    line) until a stop signal."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("apscheduler", "werkzeug", "py4j", "waitress"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # A query's poll that finds its previous evaluation still running, or comes late, is
    # expected and counted (status missed_runs); APScheduler would warn ten times a second.
    for skipped_runs in ("apscheduler.scheduler", "apscheduler.executors.default"):
        logging.getLogger(skipped_runs).setLevel(logging.ERROR)
    configure_process()
    data_dir.mkdir(parents=True, exist_ok=True)
    config = load_config(config_path, data_dir / "engine", overrides)
    spark = spark_module(config.settings.sources, config_path)
    sources = source_configs(config, data_dir)
    if spark is not None:
        spark.find_java_home()   # before anything is opened: a missing Java is one line, not a traceback
    recorded = recordings(config, data_dir)
    quarantine_budget = config.settings.quarantine.max_bytes
    host, port = config.settings.http.host, config.settings.http.port
    store = StreamStore(str(data_dir / "store"))
    load_background_once(store, config)
    engine = Runner(store, WallClock(), config.engine)
    kinds = {} if spark is None else spark.SOURCE_KINDS         # (no source without Spark)
    fed = {stream for source in sources for stream in kinds[source.kind].streams(source)}
    engine.fed_streams = lambda: fed
    engine.background_refresh = background_refresh(config, engine, engine.clock)
    if engine.background_refresh is not None:
        engine.background_refresh.run_due()         # loaded before the first evaluation
    restored = [q.id for q in engine.queries()]
    registered = register_configured(engine, config)
    log.info("queries: %s restored, %s registered from %s", restored or "none", registered or "none", config_path)

    landing = next((Path(s.path) for s in sources if kinds[s.kind].receives_posts), None)
    if landing is None:
        log.warning("no files source is configured: POST /streams answers 503 (add a [[sources]] of kind "
                    "\"files\" to accept posted elements)")
    # HTTP is served at once, before Spark starts (seconds to tens of seconds): /health says
    # "starting", reads are answered, writes get 503 with Retry-After until ingestion is up.
    ingestion = None
    readiness = Readiness(ready=False)
    # Landing files acknowledged (posts, MQTT messages) and not yet stored: the disk's floor
    # keeps room for storing them.
    landing_source = next((s for s in sources if s.kind == "files"), None)
    landed = LandedFiles(config.settings.engine.max_landed_bytes,
                         landing_source.max_batch_bytes if landing_source is not None else None)
    app = create_app(engine, http_settings(config, landing, write_token(config, data_dir)),
                     ingestion_status=lambda: ingestion.status() if ingestion is not None else {},
                     readiness=readiness, disk=DiskGuard(data_dir, config.settings.engine.min_free_disk, landed,
                                                         store.generations))
    http_config = config.settings.http
    server = HttpServer(app, host, port, threads=http_config.threads, connection_limit=http_config.connection_limit,
                        idle_timeout=http_config.idle_timeout, request_timeout=http_config.request_timeout,
                        max_body=http_config.max_body)
    scheduler = LiveScheduler(engine)
    scheduler.scheduler.add_job(progress_reporter(engine, trimmer()), "interval", seconds=PROGRESS_SECONDS,
                                id="console:progress", max_instances=1, coalesce=True)
    stopping = threading.Event()

    def stop(signum, frame):
        if not stopping.is_set():
            stopping.set()
            log.info("stopping (signal %d)", signum)

            def stopping_work():
                # The queries and updates in flight end now (their workers killed), so the HTTP
                # server's shutdown does not wait out their time limits.
                app.extensions["rspstar"].adhoc.close()
                server.shutdown()
            threading.Thread(target=stopping_work, daemon=True).start()

    def handle_stop_signals():
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)

    handle_stop_signals()
    http = threading.Thread(target=server.serve_forever, name="http")
    session = None
    try:
        http.start()
        log.info("dashboard and API on http://%s:%d/ (data in %s)", host, server.port, data_dir)
        scheduler.start()
        if spark is None:
            log.info("no source is configured and pyspark is not installed: the engine runs without Spark "
                     "(sources and partitioned queries need it: %s)", SPARK_EXTRA)
            run_partitioned(engine, WithoutSpark())
            readiness.set()
        else:
            master = config.settings.spark.master
            log.info("starting Spark (%s)", master)

            def new_session():
                return spark.spark_session(master, config.settings.spark.settings)

            session = new_session()
            # Spark's context takes SIGINT for itself (it cancels jobs and raises KeyboardInterrupt
            # in whatever the main thread is doing): the engine stops in its own order instead.
            handle_stop_signals()
            ingestion = spark.SparkIngestion(session, store, sources, data_dir / "checkpoints", data_dir / "quarantine",
                                             recorded, quarantine_budget, landed,
                                             max_streams=config.settings.engine.max_streams, session=new_session,
                                             event_time=EventTimeBound(engine.clock, config.engine.max_event_ahead))
            if not stopping.is_set():
                ingestion.start()
                run_partitioned(engine, ingestion)
                settle_heap()
                scheduler.scheduler.add_job(lambda: ingestion.supervise(time.monotonic()), "interval", seconds=1,
                                            id="ingestion:supervise", max_instances=1, coalesce=True)
                readiness.set()
                log.info("ingestion is up: writes are taken")
        # In steps, not one unbounded join: a stop signal the kernel gives another thread (any
        # thread not blocking it may take it) has its handler run on the main thread only when
        # that thread runs Python again, which a join with no timeout never does.
        while http.is_alive():
            http.join(SIGNAL_CHECK_SECONDS)
    finally:
        if http.is_alive():
            server.shutdown()
            http.join()
        try:
            app.extensions["rspstar"].adhoc.close()
            scheduler.shutdown()
            engine.close()
            if ingestion is not None:
                ingestion.stop()
            if session is not None:      # the latest session: the engine starts another if its JVM dies
                spark.stop_session(ingestion.spark if ingestion is not None else session)
        finally:
            store.close()
        log.info("stopped cleanly")
    return 0
