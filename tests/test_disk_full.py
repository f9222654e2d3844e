"""A full disk, for real: the data directory on a small tmpfs. Writes are refused with 507 and
the reason below the floor the engine keeps, a write that fails for want of space is a 507 that
leaves no partial file behind, /health and /metrics say how much is free, and once space comes
back writes are taken again. The floor also keeps room for storing what was acknowledged and
not yet stored, and a source whose writes fail for want of space is down until one succeeds."""
import os
import subprocess
import time

import pytest

from http_app import AUTH
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.store.batches import BatchWriter
from rspstar.store.codec import Payload
from rspstar.store.disk import INGEST_FACTOR, DiskGuard
from rspstar.store.landing import LandedFiles
from rspstar.store.stream_store import StreamStore

pytestmark = pytest.mark.slow
MIB = 1024 * 1024
STREAM = "http://example.org/s"
ELEMENT = (b'<http://example.org/e%d> <http://www.w3.org/ns/prov#generatedAtTime> '
           b'"2026-03-01T08:00:01Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
           b'<http://example.org/o%d> <http://example.org/v> "%s" <http://example.org/e%d> .\n')


@pytest.fixture
def mount_disk(tmp_path):
    """Mount a tmpfs of a given size under tmp_path; unmounted after the test."""
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    mounted = []

    def mount(size: str):
        point = tmp_path / ("disk%d" % len(mounted))
        point.mkdir()
        done = subprocess.run(sudo + ["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", str(point)],
                              capture_output=True, text=True)
        assert done.returncode == 0, "mounting a small tmpfs needs root (as CI has): %s" % done.stderr
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(sudo + ["umount", "--lazy", str(point)], check=True)


@pytest.fixture
def small_disk(mount_disk):
    return mount_disk("4m")


def post(client, k, size=10):
    return client.post("/streams?stream=http://example.org/s", data=ELEMENT % (k, k, b"x" * size, k),
                       content_type="application/n-quads", headers=AUTH)


def test_a_full_disk_is_a_507_with_its_reason_and_nothing_half_written(engine, small_disk):
    landing = small_disk / "landing"
    disk = DiskGuard(small_disk, 1 * MIB)
    client = create_app(engine, HttpSettings(token="s3cret", landing_dir=landing), disk=disk).test_client()
    first = post(client, 1)
    assert first.status_code == 202, first.get_json()
    health = client.get("/health").get_json()
    assert health["status"] == "ok" and health["disk"]["free_bytes"] > MIB
    # Fill the disk past the floor with a file of our own.
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (disk.free() - MIB // 2))
    refused = post(client, 2)
    assert refused.status_code == 507 and "min_free_disk" in refused.get_json()["message"]
    health = client.get("/health")
    assert health.status_code == 503 and health.get_json()["status"] == "degraded"
    assert not health.get_json()["disk"]["ok"]
    assert "rspstar_disk_free_bytes" in client.get("/metrics").get_data(as_text=True)
    # With no floor the write itself meets the full disk: a 507, and no .tmp file left behind.
    unguarded = create_app(engine, HttpSettings(token="s3cret", landing_dir=landing),
                           disk=DiskGuard(small_disk, 0)).test_client()
    failed = post(unguarded, 3, size=2 * MIB)
    assert failed.status_code == 507 and "no space left" in failed.get_json()["message"]
    assert not [p for p in landing.rglob("*") if p.name.endswith(".tmp")]
    # Space back: writes are taken again.
    filler.unlink()
    assert post(client, 4).status_code == 202
    assert client.get("/health").get_json()["status"] == "ok"
    assert len([p for p in landing.rglob("*.nq")]) == 2


def body(first: int, count: int, size: int = 40) -> bytes:
    return b"".join(ELEMENT % (k, k, b"x" * size, k) for k in range(first, first + count))


def test_the_floor_keeps_room_for_storing_what_was_acknowledged(engine, mount_disk):
    """Posts are acknowledged once landed; storing them later takes several times their size
    on disk. With the reserve counted, every acknowledged element is stored on the same disk
    (before: the posts went on to the floor, and storing them met a full disk)."""
    disk = mount_disk("24m")
    landing = disk / "landing"
    store = StreamStore(str(disk / "store"))
    landed = LandedFiles()
    guard = DiskGuard(disk, 2 * MIB, landed)
    client = create_app(engine, HttpSettings(token="s3cret", landing_dir=landing), disk=guard).test_client()
    acknowledged, first = 0, 0
    while True:
        answer = client.post("/streams?stream=" + STREAM, data=body(first, 1000), content_type="application/n-quads",
                             headers=AUTH)
        if answer.status_code == 507:
            break
        assert answer.status_code == 202, answer.get_json()
        acknowledged += answer.get_json()["elements"]
        first += 1000
    message = answer.get_json()["message"]
    assert "reserved for storing what was acknowledged" in message and "min_free_disk" in message, message
    assert acknowledged and landed.bytes() > 0
    assert guard.describe()["reserved_bytes"] == INGEST_FACTOR * landed.bytes()
    # Spark's turn: the landing files stored as its files source does, one micro-batch each.
    writer = BatchWriter(store, "landing", disk / "quarantine", acknowledged=landed)
    for batch, path in enumerate(sorted(landing.rglob("*.nq"), key=lambda p: p.stat().st_mtime_ns)):
        writer.write(batch, [Payload(STREAM, "nquads", str(path), path.read_bytes(), 0)])
    assert store.streams()[STREAM].ingested == acknowledged
    assert landed.bytes() == 0 and guard.describe()["reserved_bytes"] == 0
    store.close()


def test_a_store_that_met_a_full_disk_takes_writes_again_once_space_is_back(mount_disk):
    """Oxigraph refuses every write after one failed for want of space, space or not, until it
    is opened again: the store is opened again, in place, at the next write once there is room
    (it was rebuilt into a new generation, which takes room for a copy of everything)."""
    disk = mount_disk("32m")
    store = StreamStore(str(disk / "store"))
    writer = BatchWriter(store, "landing", disk / "quarantine")
    writer.write(0, [Payload(STREAM, "nquads", "a", body(0, 10), 0)])
    filler = disk / "filler"
    filler.write_bytes(b"\0" * (DiskGuard(disk, 0).free() - 64 * 1024))
    for _ in range(2):          # the second attempt's rebuild does not fit either
        with pytest.raises(OSError, match="No space left"):
            writer.write(1, [Payload(STREAM, "nquads", "b", body(10, 4000), 0)])
    filler.unlink()
    writer.write(1, [Payload(STREAM, "nquads", "b", body(10, 4000), 0)])
    assert store.streams()[STREAM].ingested == 4010 and store.write_error is None
    assert sorted(p.name for p in (disk / "store").iterdir()) == ["gen-1"]
    store.close()
    again = StreamStore(str(disk / "store"))
    assert again.streams()[STREAM].elements == 4010
    again.close()


@pytest.fixture(scope="module")
def spark():
    from rspstar.store.ingestion import spark_session
    session = spark_session("local[1]")
    yield session
    session.stop()


def wait_for(condition, seconds: float = 60.0) -> None:
    """Spark runs on its own threads; its progress is polled, not slept for."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "Spark did not get there in %g s" % seconds
        time.sleep(0.1)


def test_a_source_that_cannot_write_for_want_of_space_is_down_until_it_can(engine, tmp_path, mount_disk, spark):
    from rspstar.store.ingestion import SourceConfig, SparkIngestion
    disk = mount_disk("32m")
    store = StreamStore(str(disk / "store"))
    source = SourceConfig("landing", "files", stream=STREAM, path=str(tmp_path / "landing"))
    ingestion = SparkIngestion(spark, store, [source], tmp_path / "checkpoints", tmp_path / "quarantine")
    client = create_app(engine, HttpSettings(token="s3cret"), ingestion_status=ingestion.status).test_client()
    filler = disk / "filler"
    ingestion.start()
    try:
        (tmp_path / "landing").mkdir(exist_ok=True)
        (tmp_path / "landing" / "a.nq").write_bytes(body(0, 10))
        wait_for(lambda: STREAM in store.streams() and store.streams()[STREAM].ingested == 10)
        assert client.get("/health").get_json()["sources_down"] == []
        filler.write_bytes(b"\0" * (DiskGuard(disk, 0).free() - 64 * 1024))
        (tmp_path / "landing" / ".b.nq.tmp").write_bytes(body(10, 4000))
        os.replace(tmp_path / "landing" / ".b.nq.tmp", tmp_path / "landing" / "b.nq")
        query_stopped = lambda: not ingestion.queries["landing"].isActive     # noqa: E731
        wait_for(query_stopped)     # its micro-batch failed: Spark stopped the query
        now = 1000.0
        assert ingestion.supervise(now) == []          # noticed; restarted after a back-off
        for _ in range(2):
            now += 120
            assert ingestion.supervise(now) == ["landing"]
            # Spark's query runs again, but the source has not written: still down.
            status = ingestion.status()["landing"]
            assert not status["active"] and "No space left" in status["last_error"], status
            health = client.get("/health")
            assert health.status_code == 503 and health.get_json()["sources_down"] == ["landing"]
            wait_for(query_stopped)                    # the batch failed again
            assert ingestion.supervise(now) == []
        filler.unlink()
        now += 120
        assert ingestion.supervise(now) == ["landing"]
        wait_for(lambda: store.streams()[STREAM].ingested == 4010)     # nothing lost
        wait_for(lambda: ingestion.status()["landing"]["active"])
        assert client.get("/health").get_json()["sources_down"] == []
    finally:
        ingestion.stop()
        store.close()
