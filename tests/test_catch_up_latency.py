"""A restart's catch-up is not latency: the evaluations of closes the engine was stopped for are
counted apart (status `caught_up`) and left out of `close_to_result_ms`, which the dashboard's
latency column shows; the closes after the start count as ever."""
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import EngineConfig, Runner
from rspstar.store.stream_store import StreamStore
from http_app import S, T0

QUERY = ("PREFIX ex: <http://example.org/> SELECT ?o FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S] "
         "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }")


def run_until_caught_up(engine: Runner) -> None:
    while engine.tick():
        pass


def live_until(engine: Runner, seconds: int) -> None:
    """The clock moving a second at a time, each close evaluated as it passes."""
    while engine.clock.now() < T0 + seconds * S:
        engine.clock.set(engine.clock.now() + S)
        run_until_caught_up(engine)


def test_the_evaluations_a_restart_catches_up_on_are_counted_apart_from_latency(tmp_path):
    store = StreamStore()
    config = EngineConfig(data_dir=tmp_path, max_delay=0)
    first = Runner(store, VirtualClock(T0), config)
    first.register(QUERY, "q")
    live_until(first, 5)
    status = first.get("q").describe()["status"]
    assert status["evaluations"] == 5 and status["caught_up"] == 0 and status["close_to_result_ms"]["p99"] == 0
    first.close()

    # Stopped for 195 s: the engine starts again at 200 s and evaluates 6 ... 200 in order.
    restarted = Runner(store, VirtualClock(T0 + 200 * S), config)
    run_until_caught_up(restarted)
    status = restarted.get("q").describe()["status"]
    assert status["evaluations"] == 200 and status["caught_up"] == 195
    assert "close_to_result_ms" not in status             # none measured yet: not 195,000 ms
    records = restarted.get("q").history.since()
    assert records[-1]["latency_ms"] == 0 and records[-195]["latency_ms"] == 194_000     # the records say it
    live_until(restarted, 203)
    status = restarted.get("q").describe()["status"]
    assert status["caught_up"] == 195 and status["close_to_result_ms"]["p99"] == 0
