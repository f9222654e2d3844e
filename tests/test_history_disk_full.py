"""A query's result history on a full disk (issue 60): its file could not be appended to at any
evaluation, and the scheduler logged a traceback at every one. The history keeps its records in
memory, says once that its file cannot be written and once that it is written again (whole, from
memory), and counts the records the file missed in the query's status; the evaluations go on.
The data directory is a small tmpfs, filled by another file."""
import json
import logging
import os
import subprocess

import pytest

from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import EngineConfig, Runner
from rspstar.endpoint.engine.scheduler import INLINE, LiveScheduler
from rspstar.endpoint.engine.sinks import ResultHistory
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import format_instant, parse_instant

pytestmark = pytest.mark.slow        # as every test on a tmpfs: mounting one needs root
S = 1_000_000
T0 = parse_instant("2026-03-01T08:00:00Z")
STREAM = "http://example.org/s"


@pytest.fixture
def disk(tmp_path):
    point = tmp_path / "disk"
    point.mkdir()
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    done = subprocess.run(sudo + ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(point)], capture_output=True,
                          text=True)
    assert done.returncode == 0, "mounting a small tmpfs needs root (as CI has): %s" % done.stderr
    yield point
    subprocess.run(sudo + ["umount", "--lazy", str(point)], check=True)


def fill(disk) -> os.PathLike:
    """Take every byte left on the disk with another file; returns it."""
    filler = disk / "filler"
    with open(filler, "ab", buffering=0) as f:
        for size in (65536, 4096, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass
    return filler


def record(k: int) -> dict:
    # A kilobyte a record: a page of a tmpfs file takes four, after which an append needs room.
    return {"time": format_instant(T0 + k * S), "bindings": [{"v": '"%d %s"' % (k, "x" * 1000)}]}


def test_a_history_on_a_full_disk_keeps_its_records_says_so_once_and_writes_them_once_it_can(disk, caplog):
    path = disk / "history" / "q.jsonl"
    history = ResultHistory(100, path)
    history.append(T0, record(0))
    filler = fill(disk)
    with caplog.at_level(logging.WARNING):
        for k in range(1, 41):
            history.append(T0 + k * S, record(k))      # never raises
    assert [r["time"] for r in history.since()] == [format_instant(T0 + k * S) for k in range(41)]
    assert 35 <= history.write_failures <= 40 and "No space left" in history.write_error
    failing = [r for r in caplog.records if "cannot be written" in r.getMessage()]
    assert len(failing) == 1 and failing[0].levelno == logging.ERROR and failing[0].exc_info is None
    assert history.describe() == {"history_write_failures": history.write_failures,
                                  "history_write_error": history.write_error}
    os.unlink(filler)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        k = 41
        while history.write_error is not None:
            history.append(T0 + k * S, record(k))
            k += 1
            assert k < 41 + 65, "the history's file was not written again"
    assert [r.getMessage() for r in caplog.records if "written again" in r.getMessage()] == [
        "the result history %s is written again (%d records could not be written meanwhile)"
        % (path, history.write_failures)]
    # The file holds what memory holds, every record whole, and a restart reads them all back.
    assert [json.loads(line) for line in path.read_text().splitlines()] == history.since()
    assert ResultHistory(100, path).since() == history.since()
    history.append(T0 + k * S, record(k))
    assert ResultHistory(100, path).since() == history.since()


QUERY = """PREFIX ex: <http://example.org/>
SELECT ?v FROM NAMED WINDOW ex:w ON <%s> [RANGE PT2S STEP PT1S] WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }
""" % STREAM


class Monotonic:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_an_engine_whose_data_directory_is_full_evaluates_on_without_a_traceback_per_evaluation(disk, caplog):
    store = StreamStore()
    engine = Runner(store, VirtualClock(T0), EngineConfig(max_delay=0, data_dir=disk / "engine"))
    registered = engine.register(QUERY, "q")
    clock = Monotonic()
    scheduler = LiveScheduler(engine, monotonic=clock, executor=INLINE)
    fill(disk)
    try:
        with caplog.at_level(logging.INFO):
            for k in range(1, 21):
                store.add_elements(STREAM, [Element("http://example.org/e%d" % k, T0 + k * S - 1,
                                                    instant_literal(T0 + k * S - 1))])
                engine.clock.set(T0 + k * S)
                clock.now += 1
                scheduler.step()
    finally:
        scheduler.shutdown()
    assert registered.status.evaluations == 20 and registered.status.state == "running"
    assert [r["time"] for r in registered.history.since()] == [format_instant(T0 + k * S) for k in range(1, 21)]
    status = registered.describe()["status"]
    assert status["history_write_failures"] == 20 and "No space left" in status["history_write_error"]
    assert not [r for r in caplog.records if r.exc_info is not None], "a traceback was logged"
    assert len([r for r in caplog.records if "result history" in r.getMessage()]) == 1
