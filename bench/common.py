"""Shared pieces of the benchmarks: machine description, workload generators, table output."""
from __future__ import annotations

import os
import platform
import random
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"
PREFIXES = """@prefix ex: <http://example.org/> .
@prefix sosa: <http://www.w3.org/ns/sosa/> .
@prefix prov: <http://www.w3.org/ns/prov#> .
@prefix rspu: <http://w3id.org/rsp/rspu#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
"""


def publish(name: str, text: str) -> None:
    """Print a benchmark's report and keep it as bench/out/<name>.md."""
    print(text)
    OUT.mkdir(exist_ok=True)
    (OUT / (name + ".md")).write_text(text)


def machine() -> str:
    import pyoxigraph
    cpu = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return "%s, %d cores, Python %s, pyoxigraph %s" % (cpu, os.cpu_count() or 0, platform.python_version(),
                                                       pyoxigraph.__version__)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def process_tree_by_kind(root: int | None = None) -> dict[str, dict[str, float]]:
    """Resident memory (MiB, "rss") and CPU time used so far (seconds, "cpu", with that of the
    children each has reaped) of a process (this one by default) and its live descendants now,
    by kind: the root process itself ("root"), Java processes (Spark's JVM) and every other
    descendant."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    cpu: dict[int, float] = {}
    names: dict[int, str] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pid = int(entry.name)
        parents[pid] = int(fields.get("PPid", "0").strip())
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0])
        names[pid] = fields.get("Name", "").strip()
        times = stat.rsplit(")", 1)[1].split()
        # utime, stime, and cutime, cstime: the children it has reaped, such as the short
        # commands Hadoop's local file system runs for Spark's checkpoints.
        cpu[pid] = sum(int(t) for t in times[11:15]) / tick
    top = os.getpid() if root is None else root
    tree = {top}
    grew = True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in tree} - tree
        grew = bool(children)
        tree |= children
    kinds = {k: {"rss": 0.0, "cpu": 0.0} for k in ("root", "java", "other")}
    for pid in tree:
        kind = "root" if pid == top else "java" if names.get(pid) == "java" else "other"
        kinds[kind]["rss"] += rss.get(pid, 0) / 1024
        kinds[kind]["cpu"] += cpu.get(pid, 0.0)
    return kinds


def process_tree_rss_by_kind(root: int | None = None) -> dict[str, float]:
    """Resident memory (MiB) of a process tree by kind (see `process_tree_by_kind`)."""
    return {kind: measured["rss"] for kind, measured in process_tree_by_kind(root).items()}


def process_tree_rss_mib(root: int | None = None) -> float:
    """Resident memory (MiB) of a process (this one by default) and its descendants (Spark's JVM
    among them) now."""
    return sum(process_tree_rss_by_kind(root).values())


def iso(t0: float, offset_ms: int) -> str:
    seconds, ms = divmod(offset_ms, 1000)
    base = time.gmtime(t0 + seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%S", base) + (".%03dZ" % ms)


def oxygen_fraction(rng: random.Random) -> float:
    """The sensor streams' usual reading: an oxygen fraction drawn from [0.16, 0.21]."""
    return round(rng.uniform(0.16, 0.21), 3)


def sensor_stream(elements: int, sensors: int, seconds: int, seed: int = 1,
                  uncertainty: bool = True, value=oxygen_fraction) -> str:
    """A TriG stream: one observation per element, spread evenly over `seconds` of event
    time, each with a normal measurement uncertainty as an annotation (unless `uncertainty`
    is false); `value` draws each reading."""
    rng = random.Random(seed)
    t0 = 1772352000  # 2026-03-01T08:00:00Z
    step_ms = seconds * 1000 / elements
    parts = [PREFIXES]
    for i in range(elements):
        stamp = iso(t0, int(i * step_ms))
        reading = value(rng)
        sensor = i % sensors
        parts.append('ex:e%d prov:generatedAtTime "%s"^^xsd:dateTime .\n' % (i, stamp))
        body = "ex:o%d sosa:madeBySensor ex:s%d ; sosa:hasSimpleResult %s" % (i, sensor, reading)
        if uncertainty:
            body += ' {| rspu:uncertainty "N(0, %s)"^^rspu:distribution |}' % round(rng.uniform(2e-5, 1e-4), 6)
        parts.append("ex:e%d { %s . }\n" % (i, body))
    return "".join(parts)


class Table:
    def __init__(self, title: str, columns: list[str]):
        self.title = title
        self.columns = columns
        self.rows: list[list[str]] = []

    def add(self, *cells) -> None:
        self.rows.append([c if isinstance(c, str) else ("%.3g" % c if isinstance(c, float) else str(c)) for c in cells])

    def markdown(self) -> str:
        lines = ["### " + self.title, "", "| " + " | ".join(self.columns) + " |",
                 "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(lines) + "\n"


def free_port() -> int:
    """A loopback TCP port that nothing listens on now, for a server a benchmark starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(directory: Path, port: int, config: Path | None = None, timeout: float = 180) -> subprocess.Popen:
    """`rspstar serve` on `port` with its data in directory/data and its log in
    directory/serve.log, in a process group of its own (Spark's JVM with it), once its /health
    says ok."""
    import requests
    command = [sys.executable, "-m", "rspstar.endpoint.cli", "serve", "--port", str(port), "--data",
               str(directory / "data")] + (["--config", str(config)] if config is not None else [])
    log = directory / "serve.log"
    process = subprocess.Popen(command, cwd=Path(__file__).resolve().parents[1], stdout=log.open("w"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if requests.get("http://127.0.0.1:%d/health" % port, timeout=2).json()["status"] == "ok":
                return process
        except (requests.RequestException, ValueError):
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            stop_serve(process)
            raise RuntimeError("rspstar serve did not become healthy:\n" + log.read_text()[-3000:])
        time.sleep(0.5)


def stop_serve(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(120)
