"""What evaluating every continuous query in a worker process costs (issue 60: a server's
evaluations run where they can be stopped, `isolate_evaluations = always`), on the workloads of
bench/replay_throughput.py.

Run by hand: python bench/isolation_cost.py [--elements N] [--rounds R]

Each workload is replayed three ways over the same input, its records compared:
- `rspstar replay` as users run it: an in-memory store, every evaluation on the replaying thread
  (replay is a batch job over the user's own files: it keeps this path, unchanged);
- the server's evaluation path before: an on-disk store, a query's first evaluations in a worker,
  the proven ones on the engine's thread (`isolate_evaluations = new`);
- the server's evaluation path now: the same store, every evaluation in a worker process over a
  read-only view that the worker keeps while the store is not written (`always`).
The store is flushed once loaded, as a live engine's is between its micro-batches; a replay
writes nothing afterwards, so each worker opens its view once: the figure is the price of
sending each evaluation to a worker and its rows back, not of opening the store (which a live
engine pays once per micro-batch and worker: bench/out/NOTES.md#evaluation-isolation). The
seconds are the replay's evaluation phase (the load excluded), medians of `rounds` with their
range. Into bench/out/isolation_cost.md.
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
from replay_throughput import QUERY, SENSOR_QUERY  # noqa: E402

from rspstar.endpoint.engine.replay import Replay, ReplayInput  # noqa: E402
from rspstar.endpoint.engine.runner import EngineConfig, Runner  # noqa: E402
from rspstar.store.isolation import EvaluationWorkers  # noqa: E402
from rspstar.store.stream_store import StreamStore  # noqa: E402
from rspstar.translator.temporal import parse_instant  # noqa: E402

STREAM = "http://example.org/stream"
START = parse_instant("2026-03-01T08:00:00Z")


class ServerPath(Replay):
    """A replay whose evaluations take a live server's path: an on-disk store, the time limit
    set, evaluations in worker processes as `isolation` says."""

    def __init__(self, spec: ReplayInput, directory: Path, workers: EvaluationWorkers, isolation: str):
        self.directory, self.workers, self.isolation = directory, workers, isolation
        super().__init__(spec)
        self.store.oxigraph.flush()

    def _new_store(self) -> StreamStore:
        return StreamStore(tempfile.mkdtemp(dir=self.directory), compact_after=2**62, remove_evicted=False)

    def _runner(self) -> Runner:
        return Runner(self.store, self.clock, EngineConfig(
            max_delay=0, max_range=2**62, max_reports_per_second=float("inf"), history=0, federation_allowed=None,
            landmark_elements=2**62, max_result_rows=None, evaluation_timeout=600_000_000,
            isolate_evaluations=self.isolation), workers=self.workers)


def replayed(make, queries: dict[str, str], path: Path, seconds: int, options: dict) -> tuple[float, int, int, list]:
    """(seconds of the evaluation phase, evaluations, rows, the records) of one replay."""
    spec = ReplayInput(queries, [(STREAM, path)], START, START + seconds * 1_000_000, options=options)
    replay = make(spec)
    started = time.perf_counter()
    records = list(replay.run())
    took = time.perf_counter() - started
    evaluations = sum(r.status.evaluations for r in replay.registered.values())
    rows = sum(len(record.get("bindings", [])) for _, record in records)
    if isinstance(replay, ServerPath):
        replay.store.close()
    return took, evaluations, rows, records


def run(elements: int, seconds: int, rounds: int) -> Table:
    table = Table("Every evaluation in a worker process: replay_throughput's workloads (%d elements, %d s of "
                  "event time, medians of %d rounds with their range)" % (elements, seconds, rounds),
                  ["workload", "evaluations", "replay, in memory (s)", "server path before: proven on a thread (s)",
                   "server path now: every evaluation in a worker (s)", "now / before (rounds)",
                   "cost per evaluation now (ms)", "same records"])
    workloads = [
        ("sliding RANGE 10 s STEP 2 s filter", {"q": QUERY % "STEP PT2S"}, {}),
        ("tumbling RANGE 10 s filter", {"q": QUERY % "TUMBLING"}, {}),
        ("sliding, every window from scratch", {"q": QUERY % "STEP PT2S"}, {"incremental": "false"}),
        ("50 thresholds, constants shared", {"q%d" % k: (QUERY.replace("0.165", "%s") % ("STEP PT2S", "%s"))
                                             % round(0.16 + k * 0.001, 3) for k in range(50)}, {}),
        ("50 thresholds, each query alone", {"q%d" % k: (QUERY.replace("0.165", "%s") % ("STEP PT2S", "%s"))
                                             % round(0.16 + k * 0.001, 3) for k in range(50)},
         {"share_constants": "false"}),
        ("50 queries each watching a sensor, alone", {"q%d" % k: SENSOR_QUERY % k for k in range(50)},
         {"share_constants": "false"}),
    ]
    workers = EvaluationWorkers()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.trig"
        path.write_text(sensor_stream(elements, 1000, seconds))
        # The workers started (and their interpreters warm) before anything is timed.
        replayed(lambda spec: ServerPath(spec, Path(tmp), workers, "always"), workloads[0][1], path, seconds, {})
        for label, queries, options in workloads:
            timings: dict[str, list[float]] = {"memory": [], "new": [], "always": []}
            found = {}
            for _ in range(rounds):
                for mode in ("memory", "new", "always"):
                    make = Replay if mode == "memory" else \
                        (lambda spec, mode=mode: ServerPath(spec, Path(tmp), workers, mode))
                    took, evaluations, rows, records = replayed(make, queries, path, seconds, options)
                    timings[mode].append(took)
                    found[mode] = (evaluations, rows, records)
            ratios = sorted(a / n for a, n in zip(timings["always"], timings["new"]))
            median = {mode: statistics.median(values) for mode, values in timings.items()}
            evaluations = found["always"][0]
            same = found["memory"][2] == found["new"][2] == found["always"][2]
            table.add(label, evaluations, "%.2f" % median["memory"], "%.2f" % median["new"], "%.2f" % median["always"],
                      "%.2fx (%.2f-%.2f)" % (median["always"] / median["new"], ratios[0], ratios[-1]),
                      "%.2f" % (1000 * (median["always"] - median["new"]) / max(evaluations, 1)),
                      "yes (%d rows)" % found["always"][1] if same else "NO")
    workers.close()
    return table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--elements", type=int, default=20_000)
    parser.add_argument("--seconds", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    publish("isolation_cost", "Machine: %s\n\n%s" % (machine(), run(args.elements, args.seconds, args.rounds)
                                                     .markdown()))


if __name__ == "__main__":
    main()
