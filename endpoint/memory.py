"""The C allocator of a long-running server: what it keeps of memory freed by requests.

glibc's malloc gives each thread that allocates at once an arena of its own, up to eight per
core, and keeps what is freed in them for reuse. A server whose worker threads read large bodies
side by side ends with each worker's arena holding the high-water mark of its requests:
rounds of large posts grew the process in steps that took many rounds to level off, where two
arenas level off at the first round (bench/out/NOTES.md#malloc-arenas). `rspstar serve` limits
the arenas before its threads start, unless MALLOC_ARENA_MAX says otherwise, and the body
budget asks the allocator to give back what is free after each large body.

Where the C library is not glibc (musl, macOS) or another allocator is preloaded, both are
no-ops or harmless.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Callable

# glibc's mallopt parameter for the most arenas.
_M_ARENA_MAX = -8
ARENAS = 2


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most `arenas` malloc arenas for threads started from now on (unless the environment
    sets MALLOC_ARENA_MAX); whether the C library took it."""
    libc = _libc()
    if os.environ.get("MALLOC_ARENA_MAX") or libc is None or not hasattr(libc, "mallopt"):
        return False
    libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return libc.mallopt(_M_ARENA_MAX, arenas) == 1


def trimmer() -> Callable[[], object]:
    """A call that gives the memory malloc holds free back to the system (`malloc_trim(0)`),
    or does nothing where there is no such call."""
    libc = _libc()
    if libc is None or not hasattr(libc, "malloc_trim"):
        return lambda: None
    trim = libc.malloc_trim
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0)
