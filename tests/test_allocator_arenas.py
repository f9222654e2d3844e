"""The C allocator of `rspstar serve`: at most two malloc arenas however many threads allocate
(each thread took an arena of its own, each keeping its requests' high-water mark)."""
import subprocess
import sys

from conftest import REPO

PROBE = r"""
import ctypes, sys, threading
from rspstar.endpoint.allocator import limit_arenas
if sys.argv[1] == "limited":
    assert limit_arenas()
ready = threading.Barrier(9)
def work():
    ready.wait()                              # every thread alive at once: none reuses another's arena
    blocks = [bytearray(4096) for _ in range(100)]
    ready.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
ready.wait(); ready.wait()
for t in threads: t.join()
ctypes.CDLL("libc.so.6").malloc_stats()
"""


def arenas(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stderr.count("Arena ")


def test_serve_limits_malloc_to_two_arenas_however_many_threads_allocate():
    assert arenas("default") > 2              # the C library's default: an arena per thread, up to 8 per core
    assert arenas("limited") == 2

