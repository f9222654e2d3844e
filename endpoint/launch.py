"""The `rspstar` command's entry point: a command that runs under jemalloc (endpoint/allocator.py)
starts again under it before the command line and the engine are imported, so a server does not
pay for importing them twice."""
from __future__ import annotations

import logging
import os
import sys

from .allocator import UNDER_JEMALLOC, use_jemalloc

# The commands whose process ends as soon as they return, their output flushed, without freeing
# what they hold object by object: a replay's store goes with its process, and freeing it at
# the interpreter's exit was a visible part of a large replay (bench/out/NOTES.md#replay-exit).
ENDS_AT_ONCE = {"replay"}


def main() -> int:
    command = sys.argv[1] if len(sys.argv) > 1 else None
    if command in UNDER_JEMALLOC:
        use_jemalloc()
    from .cli import main as run
    code = run(sys.argv[1:])
    if command in ENDS_AT_ONCE:
        end_now(code)
    return code


def end_now(code: int) -> None:
    """End the process with `code`, what it wrote flushed (its files are closed and renamed
    into place before the command returns)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # the reader is gone: nothing more can reach it
            pass
    os._exit(code)
