"""The store against a full disk, for real (a small tmpfs): after a write that failed for want
of space it is read-only and takes writes again in place once the disk has a little room (not
room for a copy of everything, as a rebuild took); it opens read-only on a full disk, saying how
much it needs and where; and a write to it that fails for want of space is a 507, not a 500."""
import os
import shutil
import subprocess

import pytest

from rspstar.store.batches import BatchWriter
from rspstar.store.codec import Payload
from rspstar.store.disk import DiskGuard
from rspstar.store.errors import DiskFull
from rspstar.store.stream_store import StreamStore
from test_disk_full import body, mount_disk  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow
MIB = 1 << 20
STREAM = "http://example.org/s"


def fill(disk, leave: int = 0):
    path = disk / ("filler%d" % len(list(disk.glob("filler*"))))
    with open(path, "wb") as f:
        try:
            f.write(b"\0" * max(0, shutil.disk_usage(disk).free - leave))
        except OSError:
            pass
    return path


def test_a_store_that_met_a_full_disk_writes_again_with_less_room_than_a_copy_of_it_takes(mount_disk):
    # Before: the next write rebuilt the store into a new generation, a copy of everything:
    # with 48 MB freed of a full disk and a larger store, never, and nothing acknowledged after
    # was stored.
    disk = mount_disk("160m")
    store = StreamStore(str(disk / "store"))
    writer = BatchWriter(store, "landing", disk / "quarantine")
    for batch in range(6):
        writer.write(batch, [Payload(STREAM, "nquads", "a%d" % batch, body(batch * 5000, 5000), 0)])
        store.generations.current.flush()        # as a long-running store is: most of it in tables
    held = store.generations.disk_bytes()
    filler = fill(disk)
    with pytest.raises(OSError, match="No space left"):
        writer.write(6, [Payload(STREAM, "nquads", "b", body(30_000, 10_000), 0)])
    assert store.streams()[STREAM].elements == 30_000                   # reads go on
    # Room for what opening it again writes (its write-ahead log as tables, and a few MB), far
    # less than a copy of it.
    room = sum(f.stat().st_size for f in (disk / "store" / "gen-1").glob("*.log")) + 5 * MIB
    assert room < held / 2, (room, held)
    os.truncate(filler, filler.stat().st_size - room)
    writer.write(6, [Payload(STREAM, "nquads", "b", body(30_000, 10_000), 0)])
    assert store.streams()[STREAM].ingested == 40_000 and store.generations.read_only is None
    assert sorted(p.name for p in (disk / "store").iterdir()) == ["gen-1"]
    store.close()
    again = StreamStore(str(disk / "store"))
    assert again.streams()[STREAM].elements == 40_000
    again.close()


def test_a_store_opens_read_only_on_a_full_disk_says_what_it_needs_and_takes_writes_once_it_has_it(mount_disk):
    # Before: "IO error: No space left on device" at the open, and the engine did not start.
    disk = mount_disk("64m")
    store = StreamStore(str(disk / "store"))
    BatchWriter(store, "landing", disk / "quarantine").write(0, [Payload(STREAM, "nquads", "a", body(0, 3000), 0)])
    store.close()
    filler = fill(disk)
    store = StreamStore(str(disk / "store"))
    assert store.streams()[STREAM].elements == 3000
    guard = DiskGuard(disk, 0, store=store.generations)
    described = guard.describe()
    assert described["ok"] is False and described["store"]["writable"] is False
    assert described["store"]["needs_bytes"] > 0 and str(disk / "store") in described["store"]["message"]
    with pytest.raises(DiskFull, match="read-only"):
        guard.check("POST /streams")
    writer = BatchWriter(store, "landing", disk / "quarantine")
    with pytest.raises(OSError, match="read-only"):
        writer.write(1, [Payload(STREAM, "nquads", "b", body(3000, 10), 0)])
    filler.unlink()
    store.generations._tried = 0.0            # (the next try is at most a second away)
    guard.check("POST /streams")              # asks the store, which takes writes again
    assert guard.describe()["store"]["writable"] is True
    writer.write(1, [Payload(STREAM, "nquads", "b", body(3000, 10), 0)])
    assert store.streams()[STREAM].ingested == 3010
    store.close()


def test_a_background_write_that_meets_a_full_disk_is_disk_full_not_a_store_failure(mount_disk):
    import pyoxigraph as ox
    disk = mount_disk("16m")
    store = StreamStore(str(disk / "store"))
    fill(disk, 64 * 1024)
    data = "".join('<http://example.org/s%d> <http://example.org/p> "%s" .\n' % (k, "x" * 200) for k in range(20000))
    with pytest.raises(DiskFull, match="no space left"):
        store.background.write("http://example.org/g", data, ox.RdfFormat.N_TRIPLES, "body", replace=True)
    store.close()
