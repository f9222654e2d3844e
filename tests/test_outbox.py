"""A sink's outbox (endpoint/engine/sinks.py) bounded on disk and in memory (issue 60): a delivered
record leaves the disk at once and memory holds none, a receiver that is down or slow fills the
outbox to `[engine] outbox_bytes` and no further (the oldest waiting records dropped, counted in the
query's status, /metrics and the dashboard), the outbox goes with its query, and a registration
under the same id starts clean. Records held for event-stream clients that do not read are
bounded too (`[http] event_backlog_bytes`), and such a client is let go. Time is a virtual clock."""
from __future__ import annotations

import gc
import json
import socket
import threading
import time
import tracemalloc
from pathlib import Path

import pyoxigraph as ox

from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import EngineConfig, Runner
from rspstar.endpoint.engine.sinks import BLOCK, EventFeed, HttpSink
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.endpoint.http.server import HttpServer
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import format_instant, parse_instant

from interrupts import in_child, interrupted_on_waking

S = 1_000_000
T0 = parse_instant("2026-03-01T08:00:00Z")
EX = "http://example.org/"
SINK = "http://receiver.test/in"
QUERY = """PREFIX ex: <http://example.org/>
SELECT ?o ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S STEP PT1S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }"""


class Receiver:
    """A sink's poster that answers `status` (200: taken) and keeps the instants of what it took."""

    def __init__(self, status: int = 200):
        self.status = status
        self.taken: list[str] = []

    def __call__(self, url: str, body: bytes, headers: dict) -> int:
        if 200 <= self.status < 300:
            self.taken.append(json.loads(body)["time"])
        return self.status


def disk_of(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.exists() else 0


def engine_with(tmp_path, receiver: Receiver, **config) -> tuple[Runner, VirtualClock]:
    clock = VirtualClock(T0)
    engine = Runner(StreamStore(), clock, EngineConfig(data_dir=tmp_path / "data", max_delay=0,
                                                       allowed_sinks=["http://receiver.test"], **config),
                    post=receiver)
    return engine, clock


def evaluate_seconds(engine: Runner, clock: VirtualClock, seconds: range, rows: int = 20) -> None:
    """One element a second holding `rows` triples with a 200-character literal each (a record of
    about 6 KB), the clock at each close, the engine ticked (evaluations, deliveries)."""
    for second in seconds:
        at = T0 + second * S
        graph = EX + "e%d" % second
        quads = [ox.Quad(ox.NamedNode(EX + "o%d-%d" % (second, k)), ox.NamedNode(EX + "v"),
                         ox.Literal("%d %s" % (k, "x" * 200)), ox.NamedNode(graph)) for k in range(rows)]
        engine.store.add_elements(EX + "s", [Element(graph, at, instant_literal(at), quads)])
        engine.store.advance_watermark(EX + "s", at + S)
        clock.set(at + S)
        engine.tick()


def test_a_delivered_record_leaves_the_disk_at_once_and_memory_holds_no_record(tmp_path):
    receiver = Receiver(200)
    sink = HttpSink("q", SINK, tmp_path / "outbox", receiver)
    record = {"time": "", "windows": {}, "bindings": [{"v": '"%s"' % ("x" * 100_000)}]}     # 100 KB each
    sink.enqueue(dict(record, time=format_instant(T0)))
    sink.deliver(0)
    gc.collect()
    # What the sink's own code allocated and still holds (a whole-process count would also see
    # threads that earlier tests of this process left running), less the interpreter's table of
    # interned strings, which pathlib adds each new file name to and which grows in steps of
    # megabytes whoever fills it.
    mine = [tracemalloc.Filter(True, "*/engine/sinks.py", all_frames=True), tracemalloc.Filter(False, "*/pathlib.py")]
    tracemalloc.start(25)
    try:
        before = tracemalloc.take_snapshot().filter_traces(mine)
        for k in range(1, 101):                       # 10 MB of records, each delivered as it comes
            sink.enqueue(dict(record, time=format_instant(T0 + k * S)))
            assert sink.deliver(k * S) == 1
        gc.collect()
        after = tracemalloc.take_snapshot().filter_traces(mine)
    finally:
        tracemalloc.stop()
    held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert len(receiver.taken) == 101 and receiver.taken[-1] == format_instant(T0 + 100 * S)
    assert disk_of(tmp_path / "outbox") == 0           # nothing delivered stays on disk
    assert held < 1_000_000, "the sink holds %d bytes after delivering everything" % held
    assert sink.describe()["pending"] == 0 and sink.describe()["pending_bytes"] == 0


def test_a_receiver_that_is_down_fills_the_outbox_to_its_bound_and_no_further_the_oldest_dropped_and_shown(tmp_path):
    receiver = Receiver(503)
    bound = 20 * BLOCK
    engine, clock = engine_with(tmp_path, receiver, outbox_bytes=bound)
    engine.register(QUERY, "q", sinks=[SINK])
    evaluate_seconds(engine, clock, range(0, 30))       # 30 records of about 6 KB (two blocks each)
    outbox = tmp_path / "data" / "outbox"
    assert disk_of(outbox) <= bound
    status = engine.get("q").describe()["sink_outboxes"][0]
    assert status["pending_bytes"] <= bound and status["pending"] == 10 and status["dropped"] == 20
    assert status["last_dropped"] == format_instant(T0 + 20 * S)     # the 20th evaluation, at 20 s
    assert status["last_error"] == "HTTP 503"
    client = create_app(engine).test_client()
    assert client.get("/queries/q").get_json()["sink_outboxes"][0]["dropped"] == 20
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'rspstar_sink_dropped_total{query="q",sink="%s"} 20.0' % SINK in metrics
    assert 'rspstar_sink_backlog{query="q",sink="%s"} 10.0' % SINK in metrics
    assert 'rspstar_sink_outbox_bytes{query="q",sink="%s"} %r' % (SINK, float(status["pending_bytes"])) in metrics
    # The receiver comes back: the newest ten go out, in order, and the outbox is empty on disk.
    receiver.status = 200
    clock.advance(120 * S)                              # past any backoff
    engine.deliver()
    assert receiver.taken == [format_instant(T0 + k * S) for k in range(21, 31)]
    assert disk_of(outbox) == 0


def test_an_outbox_kept_across_a_restart_keeps_its_bound_and_its_order(tmp_path):
    receiver = Receiver(503)
    engine, clock = engine_with(tmp_path, receiver, outbox_bytes=8 * BLOCK)
    engine.register(QUERY, "q", sinks=[SINK])
    evaluate_seconds(engine, clock, range(0, 3))
    engine.close()
    engine = Runner(engine.store, clock, engine.config, post=receiver)      # restart: the outbox is read again
    assert engine.get("q").describe()["sink_outboxes"][0]["pending"] == 3
    evaluate_seconds(engine, clock, range(3, 6))
    status = engine.get("q").describe()["sink_outboxes"][0]
    assert (status["pending"], status["dropped"]) == (4, 2)
    receiver.status = 200
    clock.advance(120 * S)
    engine.deliver()
    assert receiver.taken == [format_instant(T0 + k * S) for k in range(3, 7)]


def test_delete_removes_the_outbox_and_a_registration_under_the_same_id_starts_clean(tmp_path):
    receiver = Receiver(503)
    engine, clock = engine_with(tmp_path, receiver)
    engine.register(QUERY, "q", sinks=[SINK])
    evaluate_seconds(engine, clock, range(0, 5))
    outbox = tmp_path / "data" / "outbox"
    assert engine.get("q").describe()["sink_backlog"] == {SINK: 5} and disk_of(outbox) > 0
    assert create_app(engine).test_client().delete("/queries/q").status_code == 204
    assert disk_of(outbox) == 0 and not any(outbox.iterdir())
    clock.advance(120 * S)
    engine.register(QUERY, "q", sinks=[SINK])           # at 125 s: its first close is 126 s
    assert engine.get("q").describe()["sink_backlog"] == {SINK: 0}
    receiver.status = 200
    evaluate_seconds(engine, clock, range(130, 131))
    assert receiver.taken == [format_instant(T0 + k * S) for k in range(126, 132)]


def test_a_new_registration_does_not_deliver_what_an_earlier_query_of_that_id_left(tmp_path):
    # An outbox left behind (the query deleted while the engine was down, or an earlier version
    # that kept outboxes after DELETE) is not read by a new registration.
    receiver = Receiver(503)
    old = HttpSink("q", SINK, tmp_path / "data" / "outbox", receiver)
    for k in range(3):
        old.enqueue({"time": format_instant(T0 + k * S), "windows": {}, "bindings": []})
    legacy = tmp_path / "data" / "outbox" / (old.outbox.name + ".jsonl")
    legacy.write_text('{"time": "2026-03-01T07:00:00Z", "windows": {}, "bindings": []}\n')
    receiver.status = 200
    engine, clock = engine_with(tmp_path, receiver)
    engine.register(QUERY, "q", sinks=[SINK])
    assert engine.deliver() == 0 and receiver.taken == []
    assert not legacy.exists()


def test_an_outbox_an_earlier_version_wrote_is_delivered_from_its_cursor_and_then_removed(tmp_path):
    directory = tmp_path / "outbox"
    probe = HttpSink("q", SINK, directory, Receiver())
    probe.outbox.rmdir()
    lines = ['{"time": "2026-03-01T08:00:0%dZ", "windows": {}, "bindings": []}' % k for k in range(4)]
    (directory / (probe.outbox.name + ".jsonl")).write_text("\n".join(lines) + "\n" + '{"time": "cut sh')
    (directory / (probe.outbox.name + ".cursor")).write_text("1")
    receiver = Receiver(200)
    sink = HttpSink("q", SINK, directory, receiver)
    assert sink.deliver(0) == 3
    assert receiver.taken == ["2026-03-01T08:00:0%dZ" % k for k in (1, 2, 3)]
    assert sorted(p.name for p in directory.iterdir()) == [probe.outbox.name] and disk_of(directory) == 0


def test_an_evaluation_adds_its_record_while_a_slow_receiver_is_being_sent_one(tmp_path):
    sending, go_on = threading.Event(), threading.Event()

    def slow(url, body, headers):
        sending.set()
        go_on.wait(10)
        return 200
    sink = HttpSink("q", SINK, tmp_path / "outbox", slow)
    sink.enqueue({"time": format_instant(T0), "windows": {}, "bindings": []})
    delivery = threading.Thread(target=sink.deliver, args=(0,))
    delivery.start()
    try:
        assert sending.wait(10)
        added = threading.Thread(target=sink.enqueue, args=({"time": format_instant(T0 + S), "windows": {},
                                                             "bindings": []},))
        added.start()
        added.join(2)
        assert not added.is_alive(), "the evaluation's record waited for the receiver"
        assert sink.describe()["pending"] == 2
    finally:
        go_on.set()
        delivery.join(10)
    assert sink.describe()["pending"] == 0 and sink.describe()["delivered"] == 2


# -- event-stream clients -------------------------------------------------------------------------
def test_a_subscriber_that_does_not_read_holds_at_most_its_bytes_and_hears_what_it_missed():
    feed = EventFeed()
    subscription = feed.subscribe(backlog=256, max_bytes=50_000)
    for k in range(100):                      # 100 records of about 10 KB
        feed.publish({"time": format_instant(T0 + k * S), "bindings": [{"v": "x" * 10_000}]})
    assert subscription.held_bytes <= 50_000
    assert subscription.dropped == 100 - 4
    assert [subscription.get(0)["time"] for _ in range(4)] == [format_instant(T0 + k * S) for k in range(96, 100)]
    huge = {"time": format_instant(T0 + 200 * S), "bindings": [{"v": "x" * 100_000}]}
    feed.publish(huge)                        # the newest is kept, however large
    assert subscription.get(0) is huge


def test_an_interrupt_while_a_subscriber_takes_its_lock_back_leaves_the_publisher_holding_it():
    # A notebook following a query (the Python API's follow) waits in its subscription on the
    # main thread while another thread evaluates and publishes; Ctrl-C may come as the record
    # published wakes it, while it takes the subscription's lock back from the publisher. The
    # interrupt is the caller's: the publisher keeps its lock, and the subscription goes on.
    in_child("test_outbox", "subscriber_interrupted_on_waking")


def subscriber_interrupted_on_waking():
    feed = EventFeed()
    subscription = feed.subscribe(backlog=0)
    assert interrupted_on_waking(subscription._changed, subscription._changed.notify, lambda: subscription.get(30)) == []
    feed.publish({"time": format_instant(T0)})
    assert subscription.get(0) == {"time": format_instant(T0)}


def test_an_event_stream_client_that_does_not_read_is_let_go_and_the_server_holds_its_bound(tmp_path):
    engine, clock = engine_with(tmp_path, Receiver())
    registered = engine.register(QUERY, "q")
    settings = HttpSettings(event_backlog_bytes=2_000_000, idle_timeout=2.0, event_keepalive=0.2)
    app = create_app(engine, settings)
    server = HttpServer(app, "127.0.0.1", 0, threads=4, connection_limit=100, idle_timeout=2.0,
                        request_timeout=5.0, max_body=1 << 20)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        client.connect(("127.0.0.1", server.port))
        client.sendall(b"GET /queries/q/events HTTP/1.1\r\nHost: x\r\n\r\n")          # and never reads
        streams = app.extensions["rspstar"].event_streams
        deadline = time.monotonic() + 10
        while streams.count == 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        subscription = next(iter(registered.feed._subscribers))
        record = {"time": "", "windows": {}, "bindings": [{"v": '"%s"' % ("x" * 1_000_000)}]}     # 1 MB each
        for k in range(60):              # 60 MB: more than waitress holds for a client (16 MiB)
            registered.feed.publish(dict(record, time=format_instant(T0 + k * S)))
            assert subscription.held_bytes <= 2_000_000 + 1_100_000
        assert subscription.dropped > 0
        # It took nothing for idle_timeout: the server closes it, and its slot is free again.
        deadline = time.monotonic() + 15
        while streams.count:
            assert time.monotonic() < deadline, "a client that does not read keeps its event stream"
            time.sleep(0.1)
        assert registered.feed._subscribers == set()
    finally:
        client.close()
        server.shutdown(5)
