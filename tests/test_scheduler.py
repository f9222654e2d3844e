"""The APScheduler layer: one job per query, watermark-driven runs, missed runs."""
import datetime

from rspstar.endpoint.clock import VirtualClock
from rspstar.endpoint.engine import Engine, EngineConfig
from rspstar.endpoint.scheduler import DELIVERY_JOB, RETENTION_JOB, LiveScheduler
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import parse_instant

T0 = parse_instant("2026-03-01T08:00:00Z")
QUERY = """PREFIX ex: <http://example.org/>
SELECT ?o FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S] WHERE { WINDOW ex:w { GRAPH ?g { ?o ?p ?v } } }
"""


def test_one_job_per_query_without_overlap_and_with_coalescing():
    engine = Engine(StreamStore(), VirtualClock(T0), EngineConfig(max_delay=0))
    engine.register(QUERY, "a")
    scheduler = LiveScheduler(engine)
    try:
        engine.register(QUERY, "b")
        assert scheduler.job_ids() == sorted(["query:a", "query:b", DELIVERY_JOB, RETENTION_JOB])
        job = scheduler.scheduler.get_job("query:a")
        assert (job.max_instances, job.coalesce) == (1, True)
        engine.remove("a")
        assert "query:a" not in scheduler.job_ids()
        engine.clock.set(T0 + 2 * 1_000_000)
        job = scheduler.scheduler.get_job("query:b")
        job.func(*job.args)                      # what the job does when it fires
        assert engine.get("b").status.evaluations == 1
    finally:
        scheduler.shutdown()


def test_a_watermark_passing_the_next_close_runs_the_query_job_at_once():
    engine = Engine(StreamStore(), VirtualClock(T0), EngineConfig(max_delay=60_000_000))
    engine.register(QUERY, "a")
    scheduler = LiveScheduler(engine, interval=3600)
    scheduler.scheduler.start(paused=True)     # jobs keep their next run time while paused
    try:
        job = lambda: scheduler.scheduler.get_job("query:a")
        polled = job().next_run_time
        engine.store.advance_watermark("http://example.org/s", T0 + 1_000_000)   # before the close
        engine.store.advance_watermark("http://example.org/other", T0 + 9_000_000)
        assert job().next_run_time == polled
        engine.store.advance_watermark("http://example.org/s", T0 + 2_000_000)
        assert job().next_run_time < polled - datetime.timedelta(seconds=3000)
    finally:
        scheduler.shutdown()
    assert not engine.store.subscribed(scheduler._on_watermark)


def test_a_run_that_finds_the_query_busy_counts_a_missed_run():
    engine = Engine(StreamStore(), VirtualClock(T0), EngineConfig(max_delay=0))
    q = engine.register(QUERY, "a")
    with q.lock:
        assert engine.run_query("a") == 0
    assert q.status.missed_runs == 1
