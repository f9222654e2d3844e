"""The allocator `rspstar serve` runs under, where the system has it (Debian: libjemalloc2):
a program run of it executes itself again under jemalloc.

Oxigraph's and RocksDB's allocations from Spark's callback threads fragment glibc's per-thread
arenas, so a live engine's memory grew much faster under glibc's malloc than under jemalloc,
which hands freed memory back (bench/out/NOTES.md#jemalloc). A replay, one process
that ends with its store, runs under glibc's malloc: its time is Oxigraph's load of the file,
which is slower under jemalloc (bench/out/NOTES.md#replay-allocator).

Under glibc's malloc (no jemalloc, or RSPSTAR_ALLOCATOR=system) each thread that allocates at
once gets an arena of its own, up to eight per core, each keeping what is freed in it: a server
whose worker threads read large bodies side by side ended with each worker's arena at the
high-water mark of its requests, growing in steps over many rounds, where two arenas level off
at the first (bench/out/NOTES.md#malloc-arenas). `rspstar serve` limits the arenas before its
threads start (unless MALLOC_ARENA_MAX says otherwise), and the HTTP body budget asks the
allocator to give back what is free after each large body (`trimmer`). Under jemalloc, or a C
library without these calls, both change nothing."""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import sys
from pathlib import Path
from typing import Callable

JEMALLOC_PATTERNS = ("/usr/lib/*/libjemalloc.so.2", "/usr/lib/libjemalloc.so.2", "/usr/lib64/libjemalloc.so.2",
                     "/usr/local/lib/libjemalloc.so.2")
ALLOCATOR_VARIABLE = "RSPSTAR_ALLOCATOR"     # "system" keeps glibc's malloc


def allocator_environment(environ: dict[str, str], loaded: str) -> dict[str, str] | None:
    """The environment to run the process again under jemalloc, or None to go on as is:
    jemalloc is already loaded (`loaded` is the process's memory map), not installed, or
    turned off."""
    if environ.get(ALLOCATOR_VARIABLE, "jemalloc") == "system" or "jemalloc" in loaded:
        return None
    found = sorted(path for pattern in JEMALLOC_PATTERNS for path in glob.glob(pattern))
    if not found:
        return None
    preload = " ".join(p for p in (found[0], environ.get("LD_PRELOAD", "")) if p)
    return dict(environ, LD_PRELOAD=preload)


def use_jemalloc() -> None:
    """Run this process again under jemalloc when the system has it (see JEMALLOC_PATTERNS)."""
    maps = Path("/proc/self/maps")
    if not maps.exists():    # LD_PRELOAD is the Linux loader's
        return
    environment = allocator_environment(dict(os.environ), maps.read_text())
    if environment is not None:
        os.execve(sys.executable, sys.orig_argv, environment)


# The commands a program run executes again under jemalloc (the `rspstar` command before it
# imports the command line, endpoint/launch.py; `python -m rspstar.endpoint.cli` in cli.main); a
# call of cli.main with arguments (a test, a library) runs in its caller's process as it is. Not
# replay: Oxigraph loads its files faster under glibc's malloc, and its process ends with its
# store (bench/out/NOTES.md#replay-allocator).
UNDER_JEMALLOC = {"serve"}


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
