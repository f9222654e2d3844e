"""A full disk, for real: the data directory on a small tmpfs. Writes are refused with 507 and
the reason below the floor the engine keeps, a write that fails for want of space is a 507 that
leaves no partial file behind, /health and /metrics say how much is free, and once space comes
back writes are taken again."""
import os
import subprocess

import pytest

from http_app import AUTH
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.store.disk import DiskGuard

pytestmark = pytest.mark.slow
MIB = 1024 * 1024
ELEMENT = (b'<http://example.org/e%d> <http://www.w3.org/ns/prov#generatedAtTime> '
           b'"2026-03-01T08:00:01Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
           b'<http://example.org/o%d> <http://example.org/v> "%s" <http://example.org/e%d> .\n')


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    done = subprocess.run(sudo + ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    assert done.returncode == 0, "mounting a small tmpfs needs root (as CI has): %s" % done.stderr
    yield mount
    subprocess.run(sudo + ["umount", str(mount)], check=True)


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
