"""A full disk against the whole engine, as the attack met it (issue 60): `rspstar serve` with its
data directory on a small tmpfs. A write that cannot fit is refused (507) before anything is
acknowledged, counting what it will cost on disk; an element answered 202 is stored whatever the
disk does after, once space is back, exactly once; and the engine starts on a full disk, read-only,
saying how much space it needs and where, and takes writes again by itself once it has it."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest
import requests

from served_engine import Served

pytestmark = pytest.mark.slow
MIB = 1 << 20
STREAM = "http://example.org/disk"
CONFIG = """
[http]
token = ""
[[sources]]
name = "landing"
kind = "files"
stream = "%s"
trigger_seconds = %s
"""


def nquads(first: int, count: int) -> bytes:
    return "".join('<http://example.org/e%d> <http://www.w3.org/ns/prov#generatedAtTime> '
                   '"2026-03-01T08:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
                   '<http://example.org/s%d> <http://example.org/value> "reading %d" <http://example.org/e%d> .\n'
                   % (k, k % 100, k, k) for k in range(first, first + count)).encode()


def turtle(count: int) -> bytes:
    """Background data in compact Turtle: a few bytes a triple here, tens in the store."""
    return (b"@prefix ex: <http://example.org/> .\n" +
            b"".join(b"ex:r%d ex:p%d ex:o%d .\n" % (k, k % 7, k % 1000) for k in range(count)))


@pytest.fixture
def disk(tmp_path):
    point = tmp_path / "disk"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=320m", "tmpfs", str(point)], check=True)
    yield point
    subprocess.run(["umount", "--lazy", str(point)], check=True)


class Filler:
    """Another process's files taking the disk's space."""

    def __init__(self, disk):
        self.disk = disk
        self.files = []

    def leave(self, free: int) -> None:
        """Take space until `free` bytes are left (or none are, with 0)."""
        have = shutil.disk_usage(self.disk).free
        if have > free:
            path = self.disk / ("filler%d" % len(self.files))
            with open(path, "wb") as f:
                try:
                    f.write(b"\0" * (have - free))
                except OSError:
                    pass               # the disk is full: what fits was written
            self.files.append(path)

    def give_back(self, size: int) -> None:
        """Free `size` bytes of what was taken."""
        path = self.files[-1]
        kept = path.stat().st_size - size
        os.truncate(path, max(0, kept))


def post(base, body):
    return requests.post(base + "/streams", params={"stream": STREAM}, data=body,
                         headers={"Content-Type": "application/n-quads"}, timeout=60)


def test_writes_that_cannot_fit_are_refused_and_what_was_acknowledged_is_stored_once_space_is_back(tmp_path, disk):
    served = Served(tmp_path, CONFIG % (STREAM, 5), data=disk / "data").start()
    filler = Filler(disk)
    try:
        assert post(served.base, nquads(0, 20_000)).status_code == 202
        served.wait_for(lambda: served.ingested(STREAM) == 20_000, 120, "the first elements")
        # (a) 82 MB free, the floor at 64 MiB: a 15.9 MB PUT /store used to pass the check on its
        # body and fill the disk (500 StoreError ENOSPC). It costs many times its body on disk.
        filler.leave(82_000_000)
        body = turtle(600_000)
        assert 10 * MIB < len(body) < 16 * MIB
        put = requests.put(served.base + "/store", params={"graph": "http://example.org/bg"}, data=body,
                           headers={"Content-Type": "text/turtle"}, timeout=120)
        assert put.status_code == 507, (put.status_code, put.text)
        assert "min_free_disk" in put.json()["message"]
        assert shutil.disk_usage(disk).free > 64 * MIB                  # nothing of it written
        # (b) An element answered 202, then the disk fills (another process) before Spark stores
        # it: its micro-batch fails for want of space, and Oxigraph refuses every write after one
        # failed. Before: space freed (less than the store's size) did not bring it back, and the
        # element was never stored.
        for attempt in range(5):
            expected = 20_000 + 5_000 * (attempt + 1)
            answer = post(served.base, nquads(100_000 + 5_000 * attempt, 5_000))
            assert answer.status_code == 202, answer.text
            filler.leave(3 * MIB)             # room for Spark's bookkeeping, not for the store's write
            time.sleep(8)
            if served.ingested(STREAM) < expected:
                break                                   # caught before Spark stored it
            filler.give_back(10**9)
        else:
            pytest.fail("Spark stored every post before the disk filled")
        served.wait_for(lambda: "No space left" in str(served.streams()["sources"]["landing"]["last_error"]), 60,
                        "the failed micro-batch")
        assert served.health()["status"] == "degraded"
        filler.give_back(48_000_000)                    # less than the store takes on disk
        served.wait_for(lambda: served.ingested(STREAM) >= expected, 240, "the acknowledged elements, once space is back")
        time.sleep(6)
        listed = {s["stream"]: s for s in served.streams()["streams"]}[STREAM]
        assert listed["ingested"] == expected and listed["quarantined"] == 0, listed
        served.wait_for(lambda: served.streams()["sources"]["landing"]["active"], 120, "the source up again")
    finally:
        log = served.stop()
    assert "stopped cleanly" in log, log[-3000:]


def test_the_engine_starts_on_a_full_disk_read_only_and_takes_writes_again_once_it_has_space(tmp_path, disk):
    served = Served(tmp_path, CONFIG % (STREAM, 1), data=disk / "data").start()
    try:
        assert post(served.base, nquads(0, 20_000)).status_code == 202
        served.wait_for(lambda: served.ingested(STREAM) == 20_000, 120, "the first elements")
    finally:
        assert "stopped cleanly" in served.stop()
    filler = Filler(disk)
    filler.leave(0)
    # Before: "IO error: No space left on device" at the store's open, and the engine did not start.
    served = Served(tmp_path, CONFIG % (STREAM, 1), data=disk / "data").start()
    try:
        health = served.health()
        assert health["status"] == "degraded", health
        store = health["disk"]["store"]
        assert store["writable"] is False and store["needs_bytes"] > 0, store
        assert str(disk / "data") in store["message"] and "read-only" in store["message"], store
        count = requests.get(served.base + "/sparql", timeout=30, params={
            "query": "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s <http://example.org/value> ?o } }"},
            headers={"Accept": "application/sparql-results+json"})
        assert count.status_code == 200 and count.json()["results"]["bindings"][0]["n"]["value"] == "20000"
        refused = post(served.base, nquads(20_000, 10))
        assert refused.status_code == 507 and "read-only" in refused.json()["message"], refused.text
        for path in filler.files:
            path.unlink()
        served.wait_for(lambda: post(served.base, nquads(20_000, 10)).status_code == 202, 60, "writes again")
        served.wait_for(lambda: served.ingested(STREAM) >= 20_010, 240, "the element after the restart")
        served.wait_for(lambda: served.health()["status"] == "ok", 120, "/health ok")
        assert served.health()["disk"]["store"]["writable"] is True
    finally:
        log = served.stop()
    assert "stopped cleanly" in log, log[-3000:]
