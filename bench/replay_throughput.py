"""Replay throughput on a 100k-element single stream, against raw pyoxigraph in the same run.

Run by hand: python bench/replay_throughput.py [--elements N] [--bulk | --sliding | --readings | --thousand ROUNDS]
Checked in seconds (every table small, rows and counts asserted, nothing timed): --check, which
`make bench-check` runs.

The first table (`--bulk`: only it, into bench/out/replay_bulk.md) times `rspstar replay`
(parse, index, insert, evaluate every window close of a filter query, evict) against a bare
pyoxigraph `bulk_load` of the same file: in this process, and end to end, as commands, each a
process of its own (`rspstar replay` of a query file as users run it against a script that only
bulk-loads the file); three rounds, every round's ratio shown.

A second table times sliding windows against what a user gets with raw pyoxigraph: the file
loaded with `Store.load`, then the same SPARQL per window with `VALUES ?g { elements }` from a
sorted (timestamp, graph) list; ours with incremental evaluation on and off, rows compared, in
this process and as commands (`--sliding`: only it, into bench/out/replay_sliding.md). The same
over plain readings (`--readings`, into bench/out/replay_sliding_readings.md): one sensor reading
per element, no annotation, three quads per element instead of five, so a window's SPARQL
weighs more against the load. The last two replay several queries in one `rspstar replay`
command, each a file of its own as users keep them: differing in a threshold, and a thousand
queries each watching one sensor or one band of values (`--thousand ROUNDS`: only it, into
bench/out/replay_thousand.md), with the store evaluations of the same replay counted.
"""
from __future__ import annotations

import argparse
import bisect
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, NamedTuple

import pyoxigraph as ox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Table, machine, peak_rss_mib, publish, sensor_stream  # noqa: E402

from rspstar.endpoint.engine.replay import Replay, ReplayInput  # noqa: E402
from rspstar.endpoint.allocator import use_jemalloc  # noqa: E402
from rspstar.translator.temporal import format_instant, parse_instant  # noqa: E402
from rspstar.translator.validate import compile_query  # noqa: E402

QUERY = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S %s]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v FILTER(?v < 0.165) } } }
"""
WINDOWS = [("sliding RANGE 10 s STEP 2 s: each element in 5 windows", "STEP PT2S"),
           ("tumbling RANGE 10 s: each element in 1 window", "TUMBLING")]
# Plain readings counted: how many readings of each tumbling window are above 90.
COUNT_QUERY = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT (COUNT(?v) AS ?n)
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S %s]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v FILTER(?v > 90) } } }
"""


class BulkWorkload(NamedTuple):
    """A stream file and the queries replayed over it against a bare `bulk_load` of it."""
    title: str
    stream: Callable[[int, int], str]       # (elements, seconds of event time) -> TriG
    seconds_per_element: float
    windows: list[tuple[str, str]]          # (label, query text)


def run(elements: int, seconds: int | None = None, rounds: int = 3, workload: "BulkWorkload | None" = None) -> Table:
    """Each window's replay against a bare `bulk_load` of the same file: in this process (the
    file read, the interpreter started), and end to end as commands, each a process of its own
    (`rspstar replay` as users run it, against a script that only bulk-loads the file), by the
    clock and by the CPU time each command took (its threads together: what is its own on a
    machine others share). Every round's ratio is shown; the seconds are medians."""
    workload = workload or BULK_ANNOTATED
    seconds = seconds or max(1, round(elements * workload.seconds_per_element))
    start = parse_instant("2026-03-01T08:00:00Z")
    end = start + seconds * 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.trig"
        path.write_text(workload.stream(elements, seconds))
        data = path.read_bytes()
        (Path(tmp) / "query.rq").write_text(workload.windows[0][1])
        cache_bytecode(Path(tmp) / "query.rq")
        timings: dict[str, list[float]] = {}
        described: dict[str, str] = {}
        for _ in range(rounds):
            # Every round from a heap without the last round's garbage: each replay is timed as
            # the first thing its process does, as a command's is.
            gc.collect()
            started = time.perf_counter()
            raw = ox.Store()
            raw.bulk_load(data, ox.RdfFormat.TRIG)
            timings.setdefault("bulk_load", []).append(time.perf_counter() - started)
            quads = len(raw)
            del raw  # measure ours without the raw store's memory still held
            bulk_seconds, bulk_cpu = timed_cpu([sys.executable, "-c", BULK_SCRIPT, str(path)])
            timings.setdefault("bulk command", []).append(bulk_seconds)
            timings.setdefault("bulk command cpu", []).append(bulk_cpu)
            for label, query_text in workload.windows:
                gc.collect()
                spec = ReplayInput.single(query_text, [("http://example.org/stream", path)], start, end)
                started = time.perf_counter()
                replay = Replay(spec)
                loaded = time.perf_counter()
                evaluations = rows = 0
                for _, record in replay.run():
                    evaluations += 1
                    rows += len(record.get("bindings", []))
                ours = time.perf_counter() - started
                del replay
                timings.setdefault(label, []).append(ours)
                command_seconds, command_rows, command_cpu = replay_command(path, query_text, start, end, Path(tmp))
                timings.setdefault(label + " command", []).append(command_seconds)
                timings.setdefault(label + " command cpu", []).append(command_cpu)
                if command_rows != rows:
                    raise SystemExit("%s: the command gave %d rows, the replay in this process %d" % (label, command_rows, rows))
                described[label] = "%d evaluations, %d rows; %.0f%% staging" % (
                    evaluations, rows, 100 * (loaded - started) / ours)
    median = {key: statistics.median(values) for key, values in timings.items()}
    table = Table("Replay against a bare bulk_load: %s (%d elements, %d quads, %d s of event time, medians of %d "
                  "rounds)" % (workload.title, elements, quads, seconds, rounds),
                  ["window", "bulk_load (s)", "rspstar replay (s)", "ratio in this process (each round)",
                   "bulk_load script (s)", "`rspstar replay` command (s)", "ratio end to end (each round)",
                   "CPU: script / command (s)", "CPU ratio (each round)"])
    for label, _ in workload.windows:
        table.add("%s (%s)" % (label, described[label]), "%.2f" % median["bulk_load"], "%.2f" % median[label],
                  _ratios(timings["bulk_load"], timings[label]), "%.2f" % median["bulk command"],
                  "%.2f" % median[label + " command"], _ratios(timings["bulk command"], timings[label + " command"]),
                  "%.2f / %.2f" % (median["bulk command cpu"], median[label + " command cpu"]),
                  _ratios(timings["bulk command cpu"], timings[label + " command cpu"]))
    table.add("peak RSS of this process (MiB)", "", "%.0f" % peak_rss_mib(), "", "", "", "", "", "")
    return table


def _rounds(theirs: list[float], ours: list[float]) -> str:
    """Their time over ours in each round: the median and the range."""
    each = sorted(t / o for t, o in zip(theirs, ours))
    return "%.2fx (%.2f-%.2f)" % (statistics.median(each), each[0], each[-1])


def _ratios(theirs: list[float], ours: list[float]) -> str:
    """Their time over ours (>1: ours is faster): the median round's, then every round's in order."""
    each = [t / o for t, o in zip(theirs, ours)]
    return "%.2fx (%s)" % (statistics.median(each), ", ".join("%.2f" % r for r in each))


# A bare bulk_load of the file, as its own process: what the store alone costs end to end.
BULK_SCRIPT = """import sys
import pyoxigraph as ox
ox.Store().bulk_load(path=sys.argv[1], format=ox.RdfFormat.TRIG)
"""
# The raw script's load alone, as its own process: what any command that loads the file into one
# Oxigraph store pays before its first window.
LOAD_SCRIPT = """import sys
import pyoxigraph as ox
ox.Store().load(path=sys.argv[1], format=ox.RdfFormat.TRIG)
"""


def rspstar_command() -> list[str]:
    """The `rspstar` command installed beside this interpreter, as users run it; `python -m`
    where it is not installed."""
    installed = Path(sys.executable).with_name("rspstar")
    return [str(installed)] if installed.exists() else [sys.executable, "-m", "rspstar.endpoint.cli"]


def cache_bytecode(query: Path) -> None:
    """Let one start of the command write Python's compiled bytecode for its modules, as an
    installed program has it. An environment with PYTHONDONTWRITEBYTECODE set (this machine's
    shells have it) would otherwise compile every module of the engine again at every start
    (0.1 s; bench/out/NOTES.md#replay-exit)."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(rspstar_command() + ["check", str(query)], check=True, capture_output=True, env=environment)


def timed(command: list[str]) -> float:
    return timed_cpu(command)[0]


def timed_cpu(command: list[str]) -> tuple[float, float]:
    """(seconds, CPU seconds) of a command run as a process of its own, as a user runs it
    (without the allocator this process runs under): its CPU time is user and system time of
    all its threads."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=users_environment())
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def users_environment() -> dict[str, str]:
    """This process's environment without the jemalloc it runs again under (main): the commands
    timed run as users run them (`rspstar replay` under glibc's malloc, endpoint/launch.py)."""
    environment = dict(os.environ)
    preload = " ".join(p for p in environment.pop("LD_PRELOAD", "").split() if "jemalloc" not in p)
    if preload:
        environment["LD_PRELOAD"] = preload
    return environment


def replay_command(path: Path, query_text: str, start: int, end: int, tmp: Path) -> tuple[float, int, float]:
    """(seconds, rows, CPU seconds) of `rspstar replay` of the query over the file, as a process
    of its own."""
    query = tmp / "query.rq"
    query.write_text(query_text)
    out = tmp / "records.jsonl"
    seconds, cpu = timed_cpu(rspstar_command() + [
        "replay", str(query), "--stream", "http://example.org/stream=%s" % path,
        "--from", format_instant(start), "--to", format_instant(end), "--out", str(out)])
    return seconds, sum(len(json.loads(line).get("bindings", [])) for line in out.read_text().splitlines()), cpu


RAW_QUERY = """PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v WHERE { GRAPH ?g { ?o sosa:hasSimpleResult ?v FILTER(?v < 0.165) } VALUES ?g { %s } }"""
SLIDING = [("RANGE 10 s STEP 1 s: each element in 10 windows", "STEP PT1S"),
           ("RANGE 10 s STEP 2 s: each element in 5 windows", "STEP PT2S")]


class Workload(NamedTuple):
    """A stream file, the filter query over it (`%s`: the window's STEP) and the same filter as a
    user writes it with raw pyoxigraph (`%s`: the window's graphs)."""
    title: str
    stream: Callable[[int, int], str]       # (elements, seconds of event time) -> TriG
    query: str
    raw_query: str


def reading_near_75(rng) -> float:
    """A reading drawn around 75: about one in fifteen is above 90."""
    return round(rng.gauss(75, 10), 1)


ANNOTATED = Workload("annotated observations", lambda elements, seconds: sensor_stream(elements, 1000, seconds),
                     QUERY, RAW_QUERY)
READINGS = Workload("plain readings (one sensor reading per element, no annotation, FILTER(?v > 90))",
                    lambda elements, seconds: sensor_stream(elements, 1000, seconds, uncertainty=False,
                                                            value=reading_near_75),
                    QUERY.replace("?v < 0.165", "?v > 90"), RAW_QUERY.replace("?v < 0.165", "?v > 90"))


BULK_ANNOTATED = BulkWorkload("annotated observations (five quads per element, 1,000 elements/s)",
                              ANNOTATED.stream, 0.001, [(label, QUERY % spec) for label, spec in WINDOWS])
BULK_READINGS = BulkWorkload(
    "plain readings (three quads per element, 100 elements/s; the readings above 90 counted, or listed)",
    READINGS.stream, 0.01,
    [("tumbling RANGE 10 s, COUNT: each element in 1 window", COUNT_QUERY % "TUMBLING"),
     ("sliding RANGE 10 s STEP 2 s, FILTER: each element in 5 windows", READINGS.query % "STEP PT2S")])


def raw_per_window(data: bytes, query_text: str, raw_query: str, start: int, end: int) -> tuple[float, int]:
    """(seconds, rows): load, then every window's SPARQL over its elements."""
    started = time.perf_counter()
    store = ox.Store()
    store.load(data, ox.RdfFormat.TRIG)
    stamps = sorted((parse_instant(q.object.value), q.subject.value) for q in store.quads_for_pattern(
        None, ox.NamedNode("http://www.w3.org/ns/prov#generatedAtTime"), None, ox.DefaultGraph()))
    window = compile_query(query_text).windows["http://example.org/w"]
    rows = 0
    for close in window.closes_between(start, end):
        lo, hi = window.bounds_at(close)
        first, last = bisect.bisect_left(stamps, (lo,)), bisect.bisect_left(stamps, (hi,))
        graphs = " ".join("<%s>" % g for _, g in stamps[first:last])
        rows += sum(1 for _ in store.query(raw_query % graphs))
    return time.perf_counter() - started, rows


# What a user writes with raw pyoxigraph, run as its own process: load the file, sort the
# elements by timestamp, run the query once per window over that window's graphs.
RAW_SCRIPT = """import bisect, datetime, json, sys
import pyoxigraph as ox
path, query, windows = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
store = ox.Store()
store.load(path=path, format=ox.RdfFormat.TRIG)
def micros(text):
    return round(datetime.datetime.fromisoformat(text).timestamp() * 1_000_000)
stamps = sorted((micros(q.object.value), q.subject.value) for q in store.quads_for_pattern(
    None, ox.NamedNode("http://www.w3.org/ns/prov#generatedAtTime"), None, ox.DefaultGraph()))
rows = 0
for lo, hi in windows:
    first, last = bisect.bisect_left(stamps, (lo,)), bisect.bisect_left(stamps, (hi,))
    rows += sum(1 for _ in store.query(query % " ".join("<%s>" % g for _, g in stamps[first:last])))
print(rows)
"""


def commands(path: Path, query_text: str, raw_query: str, start: int, end: int,
             tmp: Path) -> tuple[float, int, float, int, float, float]:
    """(seconds, rows) of `rspstar replay` and of the raw script, each as a process of its own
    (what a user times: start-up, reading the file, every window, writing the records)."""
    command_seconds, command_rows, command_cpu = replay_command(path, query_text, start, end, tmp)
    window = compile_query(query_text).windows["http://example.org/w"]
    windows = [window.bounds_at(close) for close in window.closes_between(start, end)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", RAW_SCRIPT, str(path), raw_query, json.dumps(windows)], check=True,
                          capture_output=True, text=True, env=users_environment())
    raw_seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    raw_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return command_seconds, command_rows, raw_seconds, int(done.stdout), command_cpu, raw_cpu


def replayed(queries: dict[str, str], path: Path, start: int, end: int, options: dict[str, str]) -> tuple[float, int]:
    """(seconds, rows) of one replay of `queries` over the stream file, in one pass, in this
    process (no query file: no base)."""
    started = time.perf_counter()
    spec = ReplayInput(queries, [("http://example.org/stream", path)], start, end, options=options)
    rows = sum(len(record.get("bindings", [])) for _, record in Replay(spec).run())
    return time.perf_counter() - started, rows


def replay_arguments(files: list[Path], path: Path, start: int, end: int, out: Path,
                     options: dict[str, str] | None = None) -> list[str]:
    """`rspstar replay`'s arguments for these query files over the stream file, one
    <stem>.jsonl each in `out`."""
    return ["replay", *map(str, files), "--stream", "http://example.org/stream=%s" % path,
            "--from", format_instant(start), "--to", format_instant(end), "--out-dir", str(out)] + \
        [a for k, v in (options or {}).items() for a in ("--option", "%s=%s" % (k, v))]


def query_files(queries: dict[str, str], folder: Path) -> list[Path]:
    """One <id>.rq per query in `folder` (emptied first), as a user keeps them."""
    if folder.exists():
        for old in folder.iterdir():
            old.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for query_id, text in queries.items():
        files.append(folder / ("%s.rq" % query_id))
        files[-1].write_text(text)
    return files


def rows_written(out: Path, ids) -> dict[str, int]:
    """Each query's rows, from the <id>.jsonl a replay wrote."""
    return {query_id: sum(len(json.loads(line).get("bindings", [])) for line in
                          (out / ("%s.jsonl" % query_id)).read_text().splitlines()) for query_id in ids}


def replayed_files(queries: dict[str, str], path: Path, start: int, end: int, options: dict[str, str],
                   tmp: Path) -> tuple[float, dict[str, int]]:
    """(seconds, rows per query) of `rspstar replay q0000.rq q0001.rq ... --out-dir`, each query a
    file of its own, as a process of its own: what a user runs and times."""
    seconds, _, _, rows = replayed_files_cpu(queries, path, start, end, options, tmp)
    return seconds, rows


def replayed_files_cpu(queries: dict[str, str], path: Path, start: int, end: int, options: dict[str, str],
                       tmp: Path) -> tuple[float, float, float, dict[str, int]]:
    """`replayed_files`, with the CPU seconds the command took in user space and in the kernel
    (its threads together): on a machine others share, the part of its time that is its own."""
    files = query_files(queries, tmp / "queries")
    out = tmp / "out"
    # Each command writes into an empty folder, the disk settled first: replacing the last
    # command's outputs would have this one's kernel time include freeing them, in some rounds
    # and not others (bench/out/NOTES.md#thousand-files-engine-and-disk).
    shutil.rmtree(out, ignore_errors=True)
    os.sync()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = timed(rspstar_command() + replay_arguments(files, path, start, end, out, options))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, rows_written(out, queries)


def file_system(folder: str) -> str:
    """The type of the file system `folder` is on (ext4, tmpfs...), as /proc/mounts names it."""
    found, best = "unknown", ""
    target = os.path.realpath(folder)
    with open("/proc/mounts") as mounts:
        for line in mounts:
            _, mount_point, kind = line.split()[:3]
            inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
            if inside and len(mount_point) > len(best):
                found, best = kind, mount_point
    return found


def file_creation_seconds(count: int, tmp: Path) -> float:
    """Kernel CPU seconds this process takes to create `count` empty files in a fresh directory
    of `tmp` (what a replay writing one output per query pays for its files alone, whatever
    the engine does: bench/out/NOTES.md#thousand-files-per-query-work)."""
    folder = Path(tempfile.mkdtemp(dir=tmp))
    before = os.times().system
    for k in range(count):
        os.close(os.open(folder / ("f%04d" % k), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    taken = os.times().system - before
    shutil.rmtree(folder)
    return taken


def ours(path: Path, query_text: str, start: int, end: int, incremental: bool) -> tuple[float, int]:
    return replayed({"replay": query_text}, path, start, end,
                    {"incremental": "true" if incremental else "false"})


def run_sliding(elements: int, seconds: int = 100, rounds: int = 3, workload: Workload = ANNOTATED) -> Table:
    """Each figure the median of `rounds` rounds, each round timing raw, the load, ours and ours
    from scratch one after the other (the machine's speed drifts: a ratio of one round's two
    figures is fairer than of two rounds'); the ratio's range over the rounds is shown. In the
    same round, `rspstar replay` and the raw script are timed as commands, each a process of
    its own, as a user runs them."""
    start = parse_instant("2026-03-01T08:00:00Z")
    end = start + seconds * 1_000_000
    table = Table("Sliding windows against raw per-window evaluation: %s (%d elements, %d s of event time, "
                  "medians of %d rounds)" % (workload.title, elements, seconds, rounds),
                  ["window", "raw Store.load + SPARQL per window (s)", "Store.load alone (s)",
                   "rspstar replay, incremental (s)", "rspstar replay, every window from scratch (s)",
                   "ratio to raw: incremental (rounds)", "from scratch", "ceiling: raw / load alone",
                   "commands: raw script / `rspstar replay` (s)", "ratio of the commands (rounds)",
                   "ceiling of the commands: raw script / a script that only loads the file",
                   "CPU of the commands: raw script / `rspstar replay` (s)", "CPU ratio (rounds)", "same rows"])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.trig"
        path.write_text(workload.stream(elements, seconds))
        data = path.read_bytes()
        (Path(tmp) / "query.rq").write_text(workload.query % SLIDING[0][1])
        cache_bytecode(Path(tmp) / "query.rq")
        for label, spec_text in SLIDING:
            query_text = workload.query % spec_text
            timings: dict[str, list[float]] = {"raw": [], "load": [], "on": [], "off": [], "raw command": [],
                                               "command": [], "load command": [], "raw cpu": [], "cpu": []}
            rows = set()
            for _ in range(rounds):
                gc.collect()      # each timing in this process from a heap without the last one's garbage
                raw_seconds, raw_rows = raw_per_window(data, query_text, workload.raw_query, start, end)
                # What every system here pays first, and one Oxigraph store cannot go under.
                gc.collect()
                started = time.perf_counter()
                ox.Store().load(data, ox.RdfFormat.TRIG)
                load_seconds = time.perf_counter() - started
                gc.collect()
                on_seconds, on_rows = ours(path, query_text, start, end, True)
                gc.collect()
                off_seconds, off_rows = ours(path, query_text, start, end, False)
                command_seconds, command_rows, raw_command_seconds, raw_command_rows, command_cpu, raw_cpu = commands(
                    path, query_text, workload.raw_query, start, end, Path(tmp))
                load_command_seconds = timed([sys.executable, "-c", LOAD_SCRIPT, str(path)])
                for key, value in (("raw", raw_seconds), ("load", load_seconds), ("on", on_seconds), ("off", off_seconds),
                                   ("raw command", raw_command_seconds), ("command", command_seconds),
                                   ("load command", load_command_seconds), ("raw cpu", raw_cpu), ("cpu", command_cpu)):
                    timings[key].append(value)
                rows.add((raw_rows, on_rows, off_rows, command_rows, raw_command_rows))
            median = {key: statistics.median(values) for key, values in timings.items()}
            [(raw_rows, on_rows, off_rows, command_rows, raw_command_rows)] = rows
            table.add(label, "%.2f" % median["raw"], "%.2f" % median["load"], "%.2f" % median["on"],
                      "%.2f" % median["off"], _rounds(timings["raw"], timings["on"]),
                      "%.2fx" % (median["raw"] / median["off"]), "%.2fx" % (median["raw"] / median["load"]),
                      "%.2f / %.2f" % (median["raw command"], median["command"]),
                      _rounds(timings["raw command"], timings["command"]),
                      "%.2fx" % (median["raw command"] / median["load command"]),
                      "%.2f / %.2f" % (median["raw cpu"], median["cpu"]), _rounds(timings["raw cpu"], timings["cpu"]),
                      "yes (%d)" % raw_rows if raw_rows == on_rows == off_rows == command_rows == raw_command_rows else
                      "NO: raw %d, incremental %d, from scratch %d, command %d, raw script %d"
                      % (raw_rows, on_rows, off_rows, command_rows, raw_command_rows))
    return table


def run_many(elements: int, seconds: int, counts=(1, 10, 50)) -> Table:
    """Filter queries differing only in their threshold, each a file of its own, replayed together
    by one `rspstar replay` command: with the queries' constants shared (one evaluation of each
    range for all), each query evaluating its own ranges, and every window from scratch. The
    thresholds run from 0.160 up by 0.001 over values drawn from [0.16, 0.21], so the first
    query returns nothing; the last line is one query at the median threshold, returning half
    the elements (what the fifty average)."""
    start = parse_instant("2026-03-01T08:00:00Z")
    end = start + seconds * 1_000_000
    text = QUERY.replace("0.165", "%s") % ("STEP PT2S", "%s")
    modes = (("shared", {}), ("alone", {"share_constants": "false"}), ("scratch", {"incremental": "false"}))
    table = Table("Several queries in one `rspstar replay` command, one file each (%d elements, %d s, RANGE 10 s "
                  "STEP 2 s filters)" % (elements, seconds),
                  ["queries", "incremental, constants shared (s)", "ratio to one query",
                   "incremental, each query alone (s)", "ratio to one query",
                   "every window from scratch (s)", "ratio to one query", "rows"])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.trig"
        path.write_text(sensor_stream(elements, 1000, seconds))
        (Path(tmp) / "cache.rq").write_text(text % 0.16)
        cache_bytecode(Path(tmp) / "cache.rq")
        single: dict[str, float] = {}
        for count, first in [(count, 0.16) for count in counts] + [(1, 0.185)]:
            queries = {"q%04d" % k: text % round(first + k * 0.001, 3) for k in range(count)}
            timings, rows = {}, set()
            for mode, options in modes:
                timings[mode], found = replayed_files(queries, path, start, end, options, Path(tmp))
                rows.add(tuple(sorted(found.items())))
            if len(rows) != 1:
                raise SystemExit("%d queries: the modes gave different rows" % count)
            single = single or timings
            label = str(count) if first == 0.16 else "1 (threshold %s: the median)" % first
            cells = [cell for m, _ in modes for cell in ("%.2f" % timings[m], "%.1fx" % (timings[m] / single[m]))]
            table.add(label, *cells, sum(n for _, n in rows.pop()))
    return table


SENSOR_QUERY = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S STEP PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:madeBySensor ex:s%d ; sosa:hasSimpleResult ?v } } }
"""
BAND_QUERY = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S STEP PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v FILTER(?v >= %s && ?v < %s) } } }
"""


def sensor_queries(count: int) -> dict[str, str]:
    """Queries each watching one of the stream's sensors (a triple pattern's object)."""
    return {"q%04d" % k: SENSOR_QUERY % k for k in range(count)}


def band_queries(count: int) -> dict[str, str]:
    """Queries splitting the readings' range [0.160, 0.210) into `count` disjoint bands (a FILTER's
    two constants): together they return every reading, one query as many as a thousand."""
    width = 0.05 / count
    return {"q%04d" % k: BAND_QUERY % ("%.6f" % (0.16 + k * width), "%.6f" % (0.16 + (k + 1) * width))
            for k in range(count)}


SHAPES = (("queries each watching one of 1,000 sensors", sensor_queries),
          ("queries splitting the readings into disjoint value bands", band_queries))


def store_evaluations(queries: dict[str, str], path: Path, start: int, end: int,
                      tmp: Path) -> tuple[int, dict[str, int]]:
    """(store evaluations, rows per query) of the same replay of query files, in this process
    through the command line's own code, counted (tests/work.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from work import Work
    from rspstar.endpoint.cli import main as cli_main
    files = query_files(queries, tmp / "counted")
    out = tmp / "counted-out"
    work = Work()
    with work.counting():
        if cli_main(replay_arguments(files, path, start, end, out)) != 0:
            raise SystemExit("the replay of %d query files failed" % len(files))
    return work.evaluations, rows_written(out, queries)


def run_thousand(elements: int, seconds: int, counts=(1, 50, 1000), rounds: int = 3, where: str | None = None) -> Table:
    """`rspstar replay` of one query file against 50 and 1,000 (a command each, as a user runs
    it: 1,000 files on its command line), for queries watching one sensor each and for queries
    splitting the readings into bands; each round times every count one after the other, and the
    ratio to one file is each round's (median and range shown), of the wall-clock time and of
    the CPU time the command took. The store evaluations of the same replay are counted once,
    in this process: constants shared, a thousand files cost what one does. `where`: the folder
    the files go in (the system's temporary folder when None; a tmpfs takes the disk's cost of
    creating a thousand outputs out of the figures)."""
    start = parse_instant("2026-03-01T08:00:00Z")
    end = start + seconds * 1_000_000
    table = Table("A thousand query files in one `rspstar replay` (%d elements from 1,000 sensors, %d s, RANGE 10 s "
                  "STEP 2 s; medians of %d rounds)" % (elements, seconds, rounds),
                  ["queries", "files", "`rspstar replay` (s)", "ratio to one file (rounds)", "its CPU (s)",
                   "CPU ratio to one file (rounds)", "of which in the kernel (s)", "user CPU ratio (rounds)",
                   "creating as many files alone: kernel (s)", "rows", "store evaluations (counted)"])
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        path = Path(tmp) / "stream.trig"
        path.write_text(sensor_stream(elements, 1000, seconds))
        (Path(tmp) / "cache.rq").write_text(SENSOR_QUERY % 0)
        cache_bytecode(Path(tmp) / "cache.rq")
        for title, shape in SHAPES:
            timings: dict[int, list[float]] = {count: [] for count in counts}
            cpu: dict[int, list[float]] = {count: [] for count in counts}
            user: dict[int, list[float]] = {count: [] for count in counts}
            kernel: dict[int, list[float]] = {count: [] for count in counts}
            creating: dict[int, list[float]] = {count: [] for count in counts}
            rows: dict[int, set] = {count: set() for count in counts}
            for _ in range(rounds):
                for count in counts:
                    seconds_taken, user_taken, kernel_taken, found = replayed_files_cpu(
                        shape(count), path, start, end, {}, Path(tmp))
                    timings[count].append(seconds_taken)
                    cpu[count].append(user_taken + kernel_taken)
                    user[count].append(user_taken)
                    kernel[count].append(kernel_taken)
                    creating[count].append(file_creation_seconds(count, Path(tmp)))
                    rows[count].add(sum(found.values()))
            for count in counts:
                evaluations, counted = store_evaluations(shape(count), path, start, end, Path(tmp))
                if rows[count] != {sum(counted.values())}:
                    raise SystemExit("%s, %d files: the command gave %s rows, the counted replay %d"
                                     % (title, count, sorted(rows[count]), sum(counted.values())))
                ratios = sorted(t / o for t, o in zip(timings[count], timings[counts[0]]))
                cpu_ratios = sorted(t / o for t, o in zip(cpu[count], cpu[counts[0]]))
                user_ratios = sorted(t / o for t, o in zip(user[count], user[counts[0]]))
                table.add(title, count, "%.2f" % statistics.median(timings[count]),
                          "%.2fx (%.2f-%.2f)" % (statistics.median(ratios), ratios[0], ratios[-1]),
                          "%.2f" % statistics.median(cpu[count]),
                          "%.2fx (%.2f-%.2f)" % (statistics.median(cpu_ratios), cpu_ratios[0], cpu_ratios[-1]),
                          "%.2f" % statistics.median(kernel[count]),
                          "%.2fx (%.2f-%.2f)" % (statistics.median(user_ratios), user_ratios[0], user_ratios[-1]),
                          "%.2f" % statistics.median(creating[count]), rows[count].pop(), evaluations)
    return table


def run_breakdown(elements: int, rounds: int = 3, workload: "BulkWorkload | None" = None,
                  raw: "Workload | None" = None, step: str = "STEP PT1S") -> Table:
    """Where a replay's time goes against a bare `bulk_load`, in CPU seconds (medians of
    `rounds`; CPU time is what is a command's own on a machine others share): each step of
    staging measured alone, one pass of `pyoxigraph.parse` over the file (every quad taken
    into Python and dropped: the least any scan in Python costs), the replay's main thread
    while it stages and while it runs the windows, all its threads, and the command's start-up
    (`rspstar replay` of a file of a hundred elements). The last rows are the ratios those
    figures allow: where the command has one core (its threads' CPU adds up), and where it
    has two free cores (the main thread's staging and windows against the load beside them).
    With `raw`, the replay is of its sliding query (`step`) and the ratios are against its raw
    per-window script (RAW_SCRIPT, as a command, less a bare script's start-up) instead."""
    from rspstar.store.document_parts import iter_document_parts
    from rspstar.store.documents import PART_BYTES
    from rspstar.store.rdf_input import check_rdf_nesting, scan_document

    workload = workload or BULK_READINGS
    label, query_text = workload.windows[0]
    seconds = max(1, round(elements * workload.seconds_per_element))
    if raw is not None:
        label, query_text, seconds = "sliding RANGE 10 s %s" % step, raw.query % step, max(20, elements // 1000)
    start = parse_instant("2026-03-01T08:00:00Z")
    end = start + seconds * 1_000_000
    trig = ox.RdfFormat.TRIG
    cpu: dict[str, list[float]] = {}

    def timed_here(key: str, action) -> None:
        gc.collect()
        before = time.process_time()
        action()
        cpu.setdefault(key, []).append(time.process_time() - before)

    def parse_pass(data: bytes) -> None:
        for _ in ox.parse(data, format=trig, rename_blank_nodes=True):
            pass

    with tempfile.TemporaryDirectory() as tmp:
        path, tiny = Path(tmp) / "stream.trig", Path(tmp) / "tiny.trig"
        path.write_text((raw or workload).stream(elements, seconds))
        tiny.write_text((raw or workload).stream(100, 1))
        (Path(tmp) / "query.rq").write_text(query_text)
        cache_bytecode(Path(tmp) / "query.rq")
        data = path.read_bytes()
        parts = list(iter_document_parts(data, trig, PART_BYTES))
        for _ in range(rounds):
            timed_here("bulk_load", lambda: ox.Store().bulk_load(data, trig))
            timed_here("load", lambda: ox.Store().load(data, trig, to_graph=ox.NamedNode("urn:x:timestamps")))
            timed_here("parse", lambda: parse_pass(data))
            timed_here("cut", lambda: list(iter_document_parts(data, trig, PART_BYTES)))
            timed_here("nesting", lambda: [check_rdf_nesting(part, "bench", trig) for part in parts])
            timed_here("scan", lambda: [scan_document(part, trig, "bench", nesting_checked=True) for part in parts])
            gc.collect()
            spec = ReplayInput.single(query_text, [("http://example.org/stream", path)], start, end)
            process, main = time.process_time(), time.thread_time()
            replay = Replay(spec)
            staged = time.thread_time()
            for _ in replay.run():
                pass
            cpu.setdefault("staging main", []).append(staged - main)
            cpu.setdefault("windows main", []).append(time.thread_time() - staged)
            cpu.setdefault("replay all", []).append(time.process_time() - process)
            del replay
            _, _, startup = replay_command(tiny, query_text, start, start + 1_000_000, Path(tmp))
            cpu.setdefault("start-up", []).append(startup)
            cpu.setdefault("bare start-up", []).append(timed_cpu([sys.executable, "-c", BULK_SCRIPT, str(tiny)])[1])
            if raw is not None:
                window = compile_query(query_text).windows["http://example.org/w"]
                windows = json.dumps([window.bounds_at(close) for close in window.closes_between(start, end)])
                cpu.setdefault("raw script", []).append(timed_cpu(
                    [sys.executable, "-c", RAW_SCRIPT, str(path), raw.raw_query, windows])[1])
    m = {key: statistics.median(values) for key, values in cpu.items()}
    title = raw.title if raw is not None else workload.title
    table = Table("Where a replay's time goes: %s, %s (%d elements, %d s of event time, %d parts; CPU seconds, "
                  "medians of %d rounds)" % (title, label, elements, seconds, len(parts), rounds),
                  ["what", "CPU (s)", "note"])
    rows = [("bulk_load", "`Store.bulk_load` of the file: what the ratio is against"),
            ("load", "`Store.load` of the file: what the replay's writer runs, part by part, on a thread of its own"),
            ("parse", "one pass of `pyoxigraph.parse` over the file, each quad taken into Python and dropped: the "
                      "least a scan in Python costs"),
            ("cut", "cutting the file into parts (store/document_parts.py)"),
            ("nesting", "the nesting check of every part, before Oxigraph parses it"),
            ("scan", "the scan of every part (store/rdf_input.scan_document): timestamps and graph names"),
            ("staging main", "the replay's main thread while it stages the file (cut, checks, scan, the elements "
                             "in time order), the load beside it"),
            ("windows main", "the replay's main thread while it publishes, evaluates every window and makes the "
                             "records"),
            ("replay all", "the replay in this process, all its threads"),
            ("start-up", "`rspstar replay` of a hundred elements as a command: interpreter, engine, query"),
            ("bare start-up", "a script that bulk-loads the same hundred elements")]
    if raw is not None:
        rows.append(("raw script", "the raw per-window script as a command: `Store.load`, then the same SPARQL per "
                                   "window over its elements"))
    for key, note in rows:
        table.add(key, "%.2f" % m[key], note)
    reference = m["raw script"] - m["bare start-up"] if raw is not None else m["bulk_load"]
    against = "the raw script (less a bare start-up)" if raw is not None else "bulk_load"
    extra = m["start-up"] - m["bare start-up"]
    now = m["replay all"] + extra
    table.add("one core: now", "%.2fx" % (reference / now),
              "%s / (the replay's threads + the command's extra start-up)" % against)
    table.add("one core: the scan at its floor", "%.2fx" % (reference / (now - m["scan"] + m["parse"])),
              "the same with the scan costing one bare parse pass")
    table.add("one core: no staging in Python at all", "%.2fx" % (reference / (now - m["staging main"])),
              "the same with the main thread's staging costing nothing")
    main = extra + m["staging main"] + m["windows main"]
    table.add("two free cores: now", "%.2fx" % (reference / max(main, extra + m["load"])),
              "%s / the longer of the main thread (start-up, staging, windows) and the load beside it" % against)
    table.add("two free cores: the scan at its floor", "%.2fx" % (
        reference / max(main - m["scan"] + m["parse"], extra + m["load"])), "the same with the scan at its floor")
    return table


def check() -> None:
    """Every table at a size that takes seconds, its rows and counts asserted, no time: what
    `make bench-check` runs (tests/test_bench_check.py), so that no table rots between runs."""
    tables = [run(2000, seconds=10, rounds=1), run(2000, seconds=20, rounds=1, workload=BULK_READINGS),
              run_sliding(2000, 20, rounds=1),
              run_sliding(2000, 20, rounds=1, workload=READINGS), run_many(2000, 20, counts=(1, 5)),
              run_breakdown(2000, rounds=1), run_breakdown(2000, rounds=1, raw=READINGS)]
    for table in tables[2:4]:
        if not all(row[-1].startswith("yes") for row in table.rows):
            raise SystemExit("the sliding table's runs disagree:\n" + table.markdown())
    thousand = run_thousand(2000, 20, counts=(1, 20), rounds=1)
    tables.append(thousand)
    for title, _ in SHAPES:
        found = [row for row in thousand.rows if row[0] == title]
        evaluations = {row[-1] for row in found}
        # Twenty files cost one file's store evaluations; the bands return every reading however many.
        if len(found) != 2 or len(evaluations) != 1 or evaluations == {"0"}:
            raise SystemExit("%s: store evaluations %s for 1 and 20 files" % (title, [row[-1] for row in found]))
        if title.startswith("queries splitting") and len({row[-2] for row in found}) != 1:
            raise SystemExit("%s: rows %s for 1 and 20 files" % (title, [row[-2] for row in found]))
    print("\n".join(table.markdown() for table in tables))


def main() -> None:
    # Under glibc's malloc this process slowed as it went (one replay 2.8 -> 3.8 s over six
    # runs of it and raw, so a figure depended on what ran before it); under jemalloc it held
    # 2.7-2.8 s. RSPSTAR_ALLOCATOR=system measures under glibc.
    use_jemalloc()
    parser = argparse.ArgumentParser()
    parser.add_argument("--elements", type=int, default=100_000)
    parser.add_argument("--thousand", type=int, metavar="ROUNDS",
                        help="only the table of 1, 50 and 1,000 query files in one `rspstar replay` (queries each "
                             "watching one sensor, and disjoint value bands), this many rounds, into "
                             "bench/out/replay_thousand.md")
    parser.add_argument("--where", metavar="FOLDER",
                        help="with --thousand: the folder its query files and outputs go in (default: the system's "
                             "temporary folder); a tmpfs such as /dev/shm leaves the disk's cost of creating files out, "
                             "into bench/out/replay_thousand_<folder's file system>.md")
    parser.add_argument("--bulk", action="store_true",
                        help="only the tables of replays against a bare bulk_load, in-process and as commands, over "
                             "annotated observations and over plain readings, into bench/out/replay_bulk.md")
    parser.add_argument("--workload", choices=("annotated", "readings"),
                        help="with --bulk: only this workload's table")
    parser.add_argument("--sliding", action="store_true",
                        help="only the table of sliding windows against raw per-window evaluation, in-process and as "
                             "commands, into bench/out/replay_sliding.md")
    parser.add_argument("--readings", action="store_true",
                        help="only that table over plain readings (one sensor reading per element, no annotation), "
                             "into bench/out/replay_sliding_readings.md")
    parser.add_argument("--breakdown", action="store_true",
                        help="only the tables of where a replay of plain readings spends its CPU time, against a "
                             "bare bulk_load (tumbling COUNT) and against the raw per-window script (sliding STEP 1 "
                             "s), and the ratios that allows, into bench/out/replay_breakdown.md")
    parser.add_argument("--check", action="store_true",
                        help="every table small (seconds), rows and counts asserted, nothing timed or written: "
                             "make bench-check")
    args = parser.parse_args()
    if args.check:
        check()
        return
    if args.bulk:
        workloads = [w for name, w in (("annotated", BULK_ANNOTATED), ("readings", BULK_READINGS))
                     if args.workload in (None, name)]
        publish("replay_bulk" if args.workload is None else "replay_bulk_%s" % args.workload, "Machine: %s\n\n%s" % (
            machine(), "\n".join(run(args.elements, workload=w).markdown() for w in workloads)))
        return
    if args.breakdown:
        publish("replay_breakdown", "Machine: %s\n\n%s\n%s" % (machine(), run_breakdown(args.elements).markdown(),
                                                                run_breakdown(args.elements, raw=READINGS).markdown()))
        return
    if args.sliding:
        publish("replay_sliding", "Machine: %s\n\n%s" % (machine(), run_sliding(args.elements).markdown()))
        return
    if args.readings:
        publish("replay_sliding_readings", "Machine: %s\n\n%s" % (
            machine(), run_sliding(args.elements, workload=READINGS).markdown()))
        return
    if args.thousand:
        name = "replay_thousand" if args.where is None else "replay_thousand_%s" % file_system(args.where)
        publish(name, "Machine: %s\n\n%s" % (
            machine(), run_thousand(args.elements // 5, 20, rounds=args.thousand, where=args.where).markdown()))
        return
    text = "Machine: %s\n\n%s\n%s\n%s\n%s" % (machine(), run(args.elements).markdown(), run_sliding(args.elements).markdown(),
                                               run_many(args.elements // 5, 20).markdown(),
                                               run_thousand(args.elements // 5, 20).markdown())
    publish("replay_throughput", text)


if __name__ == "__main__":
    main()
