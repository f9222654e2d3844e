"""What nested OPTIONALs cost Oxigraph's planner, against what the nesting check counts for them
(translator/nesting.py: 2**k for an OPTIONAL nested k deep, PLANNING_BUDGET in all).

Run by hand: python bench/planning.py [--rounds R]

Each shape is `groups` chains of OPTIONALs `depth` deep, every chain sharing its variables with
the ones before it (what makes the planner's work double with each level), planned by `query()`
on an empty store; the time is the median of `rounds` with its range. Shapes past the budget are
refused before they reach Oxigraph; the slowest ones are planned once, in a process of their own
that is stopped at TIMEOUT seconds. Into bench/out/planning.md.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pyoxigraph as ox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Table, machine, publish  # noqa: E402

from rspstar.translator.errors import QuerySyntaxError  # noqa: E402
from rspstar.translator.nesting import PLANNING_BUDGET, check_nesting, planning_cost  # noqa: E402

TIMEOUT = 120
ACCEPTED = [(1, 15), (2, 10), (2, 12), (2, 14), (4, 13), (8, 12), (16, 11), (32, 10), (60, 1), (8, 4)]
REFUSED = [(2, 16), (2, 18), (2, 20), (36, 20)]


def text(groups: int, depth: int) -> str:
    chain = "".join("OPTIONAL { ?a%d <http://example.org/p> ?a%d " % (k, k + 1) for k in range(depth)) + "}" * depth
    return "SELECT * WHERE { ?s <http://example.org/p> ?a0 %s }" % " ".join([chain] * groups)


def planned(query: str) -> float:
    started = time.perf_counter()
    ox.Store().query(query)
    return time.perf_counter() - started


def planned_apart(query: str) -> str:
    script = ("import sys, time, pyoxigraph as ox\nt = time.perf_counter()\nox.Store().query(sys.stdin.read())\n"
              "print(time.perf_counter() - t)")
    try:
        done = subprocess.run([sys.executable, "-c", script], input=query, capture_output=True, text=True,
                              timeout=TIMEOUT)
        return "%.2f" % float(done.stdout)
    except subprocess.TimeoutExpired:
        return "> %d" % TIMEOUT


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    table = Table("Planning nested OPTIONALs on an empty store (budget %d; medians of %d rounds)"
                  % (PLANNING_BUDGET, args.rounds),
                  ["chains x depth", "bytes", "counted cost", "the check", "planning (s)"])
    for groups, depth in ACCEPTED + REFUSED:
        query = text(groups, depth)
        try:
            check_nesting(query, language="sparql")
            verdict = "passes"
        except QuerySyntaxError as e:
            verdict = "refused (%s)" % ("planning" if "to plan" in e.message else "stack")
        if (groups, depth) in REFUSED:
            seconds = planned_apart(query)
        else:
            times = sorted(planned(query) for _ in range(args.rounds))
            seconds = "%.3f (%.3f-%.3f)" % (statistics.median(times), times[0], times[-1])
        table.add("%d x %d" % (groups, depth), len(query), planning_cost(query), verdict, seconds)
    publish("planning", "Machine: %s\n\n%s" % (machine(), table.markdown()))


if __name__ == "__main__":
    main()
