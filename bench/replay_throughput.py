"""Replay throughput on a 100k-element single stream, against raw pyoxigraph in the same run.

Run by hand: python bench/replay_throughput.py [--elements N]
Prints elements/s and quads/s of `rspstar replay` (parse, index, insert, evaluate every
window close of a RANGE 10 s STEP 2 s filter query, evict) and of a raw pyoxigraph bulk
insert of the same quads, with their ratio.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pyoxigraph as ox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import OUT, Table, machine, peak_rss_mib, sensor_stream  # noqa: E402

from endpoint.replay import Replay, ReplayInput  # noqa: E402
from translator.temporal import parse_instant  # noqa: E402

QUERY = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S %s]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v FILTER(?v < 0.165) } } }
"""
WINDOWS = [("sliding RANGE 10 s STEP 2 s: each element in 5 windows", "STEP PT2S"),
           ("tumbling RANGE 10 s: each element in 1 window", "TUMBLING")]


def run(elements: int, seconds: int = 100) -> Table:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.trig"
        path.write_text(sensor_stream(elements, 1000, seconds))
        data = path.read_bytes()

        started = time.perf_counter()
        raw = ox.Store()
        raw.bulk_load(data, ox.RdfFormat.TRIG)
        raw_seconds = time.perf_counter() - started
        quads = len(raw)
        del raw  # measure ours without the raw store's memory still held

        table = Table("Replay throughput (%d elements, %d quads, %d s of event time)" % (elements, quads, seconds),
                      ["system", "seconds", "elements/s", "quads/s", "ratio to raw insert"])
        table.add("raw pyoxigraph bulk_load", raw_seconds, elements / raw_seconds, quads / raw_seconds, "1")
        for label, spec_text in WINDOWS:
            spec = ReplayInput.single(QUERY % spec_text, [("http://example.org/stream", path)],
                               parse_instant("2026-03-01T08:00:00Z"),
                               parse_instant("2026-03-01T08:00:00Z") + seconds * 1_000_000,
)
            started = time.perf_counter()
            replay = Replay(spec)
            loaded = time.perf_counter()
            evaluations = rows = 0
            for _, record in replay.run():
                evaluations += 1
                rows += len(record.get("bindings", []))
            ours = time.perf_counter() - started
            del replay
            table.add("rspstar replay, %s (%d evaluations, %d rows; %.0f%% staging)"
                      % (label, evaluations, rows, 100 * (loaded - started) / ours),
                      ours, elements / ours, quads / ours, "%.2f" % (raw_seconds / ours))
    table.add("peak RSS of this process (MiB)", "", "", "", "%.0f" % peak_rss_mib())
    return table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--elements", type=int, default=100_000)
    args = parser.parse_args()
    text = "Machine: %s\n\n%s" % (machine(), run(args.elements).markdown())
    print(text)
    OUT.mkdir(exist_ok=True)
    (OUT / "replay_throughput.md").write_text(text)


if __name__ == "__main__":
    main()
