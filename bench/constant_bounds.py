"""Where a group of queries differing in constants should apply its comparisons itself
(endpoint/engine/sharing.py, `SPLIT_FROM`): the time a group spends evaluating its ranges, its
members' comparisons made in the store (the table joined with the rows) against applied to the
rows by the index, for groups of 2 to 1,000 members.

Run by hand: python bench/constant_bounds.py [--elements N] [--rounds R]

Three shapes of member over the same stream (readings in [0.160, 0.210)): disjoint value bands
(`?v >= a && ?v < b`) splitting the readings (each row kept by one member), bands of a
thousandth of the range each (most rows kept by none: what the index reads for nothing), and
thresholds (`?v > c`, c spread over the readings: a row kept by half the members on average,
the home-care team's shape).
Each figure is the CPU time, in this process, of the group's evaluations over one replay (10
closes of RANGE 10 s STEP 2 s), summed over the replay: the median of the rounds with their range.
Rows are compared between the two ways. The machine may be shared: compare the ratios.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Table, machine, publish, sensor_stream  # noqa: E402

from rspstar.endpoint.engine import sharing  # noqa: E402
from rspstar.endpoint.engine.replay import Replay, ReplayInput  # noqa: E402
from rspstar.translator.temporal import parse_instant  # noqa: E402

BAND = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S STEP PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v FILTER(?v >= %.6f && ?v < %.6f) } } }
"""
THRESHOLD = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S STEP PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v FILTER(?v > %.6f) } } }
"""


def bands(count: int) -> dict[str, str]:
    width = 0.05 / count
    return {"q%04d" % k: BAND % (0.16 + k * width, 0.16 + (k + 1) * width) for k in range(count)}


def narrow(count: int) -> dict[str, str]:
    """Bands of a thousandth of the readings' range each, side by side: few rows kept."""
    width = 0.05 / 1000
    return {"q%04d" % k: BAND % (0.185 + k * width, 0.185 + (k + 1) * width) for k in range(count)}


def thresholds(count: int) -> dict[str, str]:
    return {"q%04d" % k: THRESHOLD % (0.16 + (k + 0.5) * 0.05 / count) for k in range(count)}


SHAPES = (("bands splitting the readings", bands), ("bands of a thousandth of them", narrow),
          ("thresholds", thresholds))


def group_time(queries: dict[str, str], path: Path, start: int, end: int, split: bool) -> tuple[float, int]:
    """(CPU seconds in the group's evaluations, rows) of one in-process replay."""
    spent = [0.0]
    real = sharing._ConstantGroup._evaluate

    def timed(self, *args):
        before = time.process_time()
        try:
            return real(self, *args)
        finally:
            spent[0] += time.process_time() - before
    saved = sharing.SPLIT_FROM
    sharing.SPLIT_FROM = 2 if split else 10 ** 9
    sharing._ConstantGroup._evaluate = timed
    try:
        run = Replay(ReplayInput(queries, [("http://example.org/stream", path)], start, end))
        rows = sum(len(record.get("bindings", [])) for _, record in run.run())
        if run.failures():
            raise SystemExit("the replay failed: %s" % (run.failures(),))
    finally:
        sharing._ConstantGroup._evaluate = real
        sharing.SPLIT_FROM = saved
    return spent[0], rows


def run(elements: int, seconds: int, counts=(2, 4, 8, 16, 32, 1000), rounds: int = 3) -> Table:
    start = parse_instant("2026-03-01T08:00:00Z")
    end = start + seconds * 1_000_000
    table = Table("A group's evaluations over one replay (%d elements, %d s, RANGE 10 s STEP 2 s), CPU seconds, "
                  "medians of %d rounds (range)" % (elements, seconds, rounds),
                  ["members", "shape", "comparisons in the store (s)", "applied by the index (s)",
                   "index / store", "rows"])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.trig"
        path.write_text(sensor_stream(elements, 1000, seconds))
        for count in counts:
            for title, shape in SHAPES:
                joined, split, rows = [], [], set()
                for _ in range(rounds):
                    for way, into in ((False, joined), (True, split)):
                        spent, found = group_time(shape(count), path, start, end, way)
                        into.append(spent)
                        rows.add(found)
                if len(rows) != 1:
                    raise SystemExit("%s, %d members: the two ways gave %s rows" % (title, count, sorted(rows)))
                ratios = sorted(s / j for s, j in zip(split, joined))
                table.add(count, title, "%.3f (%.3f-%.3f)" % (statistics.median(joined), min(joined), max(joined)),
                          "%.3f (%.3f-%.3f)" % (statistics.median(split), min(split), max(split)),
                          "%.2fx (%.2f-%.2f)" % (statistics.median(ratios), ratios[0], ratios[-1]), rows.pop())
    return table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--elements", type=int, default=20_000)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    table = run(args.elements, args.seconds, rounds=args.rounds)
    text = "%s\n\n%s\n" % (machine(), table.markdown())
    print(text)
    publish("constant_bounds", text)


if __name__ == "__main__":
    main()
