"""The live scheduler: each query asked at its close (plus max_delay) or when a watermark passes
it, due queries handed to workers in the order they became due, a slow query behind the others,
the periodic jobs. Stepped by hand: a virtual engine clock, a fake monotonic clock, inline runs."""
import time

from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import MAX_EVALUATIONS_PER_RUN, Runner, EngineConfig
from rspstar.endpoint.engine.scheduler import DELIVERY_JOB, INLINE, RETENTION_JOB, LiveScheduler
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import parse_instant

T0 = parse_instant("2026-03-01T08:00:00Z")
S = 1_000_000
QUERY = """PREFIX ex: <http://example.org/>
SELECT ?o FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S] WHERE { WINDOW ex:w { GRAPH ?g { ?o ?p ?v } } }
"""


class Monotonic:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def scheduled(max_delay: int, *ids: str):
    engine = Runner(StreamStore(), VirtualClock(T0), EngineConfig(max_delay=max_delay))
    for query_id in ids:
        engine.register(QUERY, query_id)
    clock = Monotonic()
    return engine, clock, LiveScheduler(engine, monotonic=clock, executor=INLINE)


def test_a_query_is_asked_at_its_close_plus_max_delay_and_not_before():
    engine, clock, scheduler = scheduled(5 * S, "a")
    try:
        assert scheduler.step() == ["a"]              # registered: asked once at once
        assert engine.get("a").status.evaluations == 0  # nothing is due yet
        # Its first close is T0 + 2 s; with max_delay 5 s it is asked 7 s from the engine's now.
        assert scheduler.planned("a") == clock.now + 7
        clock.now += 6.9
        assert scheduler.step() == []
        clock.now += 0.1
        engine.clock.set(T0 + 7 * S)
        assert scheduler.step() == ["a"]
        assert engine.get("a").status.evaluations == 1 and engine.get("a").status.last_trigger == "max_delay"
        assert scheduler.job_ids() == sorted([DELIVERY_JOB, RETENTION_JOB])
    finally:
        scheduler.shutdown()


def test_a_watermark_passing_the_next_close_asks_the_query_at_once():
    engine, clock, scheduler = scheduled(60 * S, "a")
    try:
        scheduler.step()
        waiting = scheduler.planned("a")
        assert waiting == clock.now + 62
        engine.store.advance_watermark("http://example.org/s", T0 + 1 * S)       # before the close
        engine.store.advance_watermark("http://example.org/other", T0 + 9 * S)   # not its stream
        assert scheduler.planned("a") == waiting
        engine.store.advance_watermark("http://example.org/s", T0 + 2 * S)
        assert scheduler.planned("a") == clock.now
        assert scheduler.step() == ["a"] and engine.get("a").status.last_trigger == "watermark"
    finally:
        scheduler.shutdown()
    assert not engine.store.subscribed(scheduler._on_watermark)


def test_a_query_far_behind_takes_turns_with_the_queries_due():
    engine, clock, scheduler = scheduled(0, "behind", "other")
    try:
        scheduler.step()
        engine.clock.set(T0 + 100 * S)               # "behind" owes 50 evaluations (RANGE 2 s)
        engine.remove("other")
        engine.register(QUERY, "other", resume_after=T0 + 98 * S)   # owes one
        order = []
        real = engine.run_query
        engine.run_query = lambda query_id: order.append(query_id) or real(query_id)
        clock.now += 0.1
        scheduler.plan("behind", clock.now - 1)      # due first
        scheduler.step()
        # One turn of MAX_EVALUATIONS_PER_RUN, then the slow query waits behind the other.
        assert order == ["behind", "other"]
        assert engine.get("behind").status.evaluations == MAX_EVALUATIONS_PER_RUN
        assert scheduler.planned("behind") == clock.now
        while scheduler.step():
            pass
        assert engine.get("behind").status.evaluations == 50 and engine.get("other").status.evaluations == 1
    finally:
        scheduler.shutdown()


def test_a_query_asked_while_it_runs_is_asked_again_after_and_counted():
    engine, clock, scheduler = scheduled(0, "a")
    try:
        scheduler._running.add("a")                  # its evaluation is under way
        assert scheduler.step() == []
        assert engine.get("a").status.missed_runs == 1
        scheduler._running.discard("a")
        scheduler._asked_while_running.discard("a")
    finally:
        scheduler.shutdown()


def test_removed_queries_are_not_asked_and_new_ones_are():
    engine, clock, scheduler = scheduled(0, "a", "b")
    try:
        engine.remove("a")
        engine.register(QUERY, "c")
        assert sorted(scheduler.step()) == ["b", "c"]
    finally:
        scheduler.shutdown()


def test_the_dispatcher_thread_runs_due_queries_with_real_workers():
    engine = Runner(StreamStore(), VirtualClock(T0 + 10 * S), EngineConfig(max_delay=0))
    scheduler = LiveScheduler(engine)
    scheduler.start()
    try:
        engine.register(QUERY, "a", resume_after=T0)
        # The query is due at once (its closes are behind the engine's clock): the workers run
        # it without waiting for any window; this only waits for the threads to be scheduled.
        done = engine.get("a").status
        for _ in range(200):
            if done.evaluations:
                break
            time.sleep(0.01)
        assert done.evaluations >= 1
    finally:
        scheduler.shutdown()


def test_a_run_that_finds_the_query_busy_counts_a_missed_run():
    engine = Runner(StreamStore(), VirtualClock(T0), EngineConfig(max_delay=0))
    q = engine.register(QUERY, "a")
    with q.lock:
        assert engine.run_query("a") == 0
    assert q.status.missed_runs == 1


def test_a_partitioned_query_is_asked_at_its_close_plus_max_delay_while_no_key_group_holds_elements():
    # Its key groups report its instants (Runner.accept_partitions); while none holds elements
    # none reports, and the scheduler asks the query at its close plus max_delay, as any other.
    from rspstar.store.partitions import MARK, Emitted, mark_payload
    from rspstar.endpoint.engine.scheduler import UNKNOWN_NEXT_SECONDS
    from rspstar.translator.partition import PartitionKey
    keyed = """PREFIX ex: <http://example.org/>
SELECT ?o ?k FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S] WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:key ?k } } }
"""
    engine = Runner(StreamStore(), VirtualClock(T0), EngineConfig(
        max_delay=5 * S, partition_keys={"http://example.org/s": PartitionKey("http://example.org/key")}))
    engine.register(keyed, "p", options={"partition": "?k"})
    clock = Monotonic()
    scheduler = LiveScheduler(engine, monotonic=clock, executor=INLINE)
    try:
        assert scheduler.step() == ["p"] and scheduler.planned("p") == clock.now + 7
        clock.now += 7
        engine.clock.set(T0 + 7 * S)
        assert scheduler.step() == ["p"]
        status = engine.get("p").status
        assert status.evaluations == 1 and status.last_trigger == "max_delay"
        # A group holds elements now: it reports, and the query is asked now and then in case it stops.
        engine.accept_partitions("p", [Emitted(MARK, T0 + 2 * S, "7", mark_payload(True, T0 + S), 0)])
        clock.now += 9
        engine.clock.set(T0 + 16 * S)
        assert scheduler.step() == ["p"] and status.evaluations == 1
        assert scheduler.planned("p") == clock.now + UNKNOWN_NEXT_SECONDS
    finally:
        scheduler.shutdown()
