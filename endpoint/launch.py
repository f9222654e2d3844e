"""The `rspstar` command's entry point: a command that runs under jemalloc (endpoint/allocator.py)
starts again under it before the command line and the engine are imported, so a replay or a
server does not pay for importing them twice."""
from __future__ import annotations

import sys

from .allocator import use_jemalloc

# The commands a program run executes again under jemalloc; a call of cli.main with arguments
# (a test, a library) runs in its caller's process as it is.
UNDER_JEMALLOC = {"serve", "replay"}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] in UNDER_JEMALLOC:
        use_jemalloc()
    from .cli import main as run
    return run(sys.argv[1:])
