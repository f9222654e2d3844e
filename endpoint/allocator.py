"""The allocator `rspstar serve` and `rspstar replay` run under, where the system has it
(Debian: libjemalloc2): a program run of either executes itself again under jemalloc.

Oxigraph's and RocksDB's allocations from Spark's callback threads fragment glibc's per-thread
arenas, so a live engine's memory grew three times as fast under glibc's malloc as under
jemalloc, which hands freed memory back; a replay, whose Python work makes and drops an object
per quad read, is faster under it too (bench/out/NOTES.md#jemalloc)."""
from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

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
