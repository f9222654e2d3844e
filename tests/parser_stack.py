"""What each construct of tests/chains.py costs Oxigraph's stack, by experiment: the depth at
which parsing it (and evaluating what it parses to, as the engine does) overflows a thread's
stack, bisected in a process of its own at two small stack sizes; the difference of the two
sizes over the difference of the depths is what one more level costs. Small stacks make slow
constructs (Oxigraph plans long joins in more than linear time) overflow while they are still
quick to plan, and the cost of a level does not depend on the stack's size.

    python tests/parser_stack.py [NAME-OR-PLACE ...]      prints the table test_parser_limits.py keeps
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SMALL, LARGE = 64 << 10, 256 << 10          # the two stack sizes, bytes
PROBE_SECONDS = 60
_PROBE = r"""
import sys, threading
sys.path.insert(0, %r)
import chains
name, place, route, n, stack = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
construct = chains.by_name(name, place)
text = construct.text(n, route)
def run():
    try:
        chains.parse(construct, text, route)
    except Exception as e:
        print("error", type(e).__name__, str(e)[:200])
threading.stack_size(stack)
thread = threading.Thread(target=run)
thread.start()
thread.join()
print("done")
""" % str(TESTS)


def survives(construct, n: int, stack: int, route: str | None = None) -> bool | None:
    """Whether parsing `construct` n deep on a thread of `stack` bytes ends (True), overflows
    (False), or takes longer than PROBE_SECONDS (None)."""
    import chains
    route = route or chains.routes(construct)[0]
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, construct.name, construct.place, route, str(n), str(stack)],
                              capture_output=True, text=True, timeout=PROBE_SECONDS)
    except subprocess.TimeoutExpired:
        return None
    return done.returncode == 0 and done.stdout.rstrip().endswith("done")


def overflow_depth(construct, stack: int, top: int = 1 << 17) -> int | None:
    """The least depth that overflows a `stack`-byte thread (within 1%), None when none up to
    `top` does or a probe gets too slow first."""
    n = 2
    while survives(construct, n, stack):
        n *= 2
        if n > top:
            return None
    if survives(construct, n, stack) is None:
        return None
    low, high = n // 2, n
    while high - low > max(1, low // 100):
        middle = (low + high) // 2
        outcome = survives(construct, middle, stack)
        if outcome is None:
            return None
        low, high = (middle, high) if outcome else (low, middle)
    return high


def level_cost(construct) -> dict:
    """Bytes of stack one level costs, from the overflow depths at the two stack sizes."""
    small, large = overflow_depth(construct, SMALL), overflow_depth(construct, LARGE)
    if small is None or large is None or large <= small:
        return {"small": small, "large": large, "bytes": None}
    return {"small": small, "large": large, "bytes": round((LARGE - SMALL) / (large - small))}


def main(names: list[str]) -> None:
    import chains
    for construct in chains.ALL:
        if names and construct.name not in names and construct.place not in names:
            continue
        print(json.dumps({"name": construct.name, "place": construct.place, **level_cost(construct)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
