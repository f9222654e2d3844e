"""End to end: the real `rspstar serve` process (Spark simulator, on-disk store, scheduler, HTTP)
runs a query for a few windows; then `rspstar replay` over what the simulator recorded gives
the same result at every evaluation. A second query reads, under RDFS entailment, a background
graph the engine reloads every second: its replay over the same graph agrees too."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import requests

from conftest import REPO, compare_lines
from rspstar.store.recordings import recording_path
from rspstar.translator.temporal import format_instant, parse_instant

pytestmark = pytest.mark.slow
QUERY = """PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX rspu: <http://w3id.org/rsp/rspu#>
PREFIX sim: <http://rspstar.example/stream/>
PREFIX ex: <http://rspstar.example/>
SELECT ?o ?value ?p
FROM NAMED WINDOW ex:w ON sim:tvs/oxygen [RANGE PT2S STEP PT1S]
WHERE {
  WINDOW ex:w { GRAPH ?g {
    ?o sosa:hasSimpleResult ?value .
    << ?o sosa:hasSimpleResult ?value >> rspu:uncertainty ?u .
    BIND(rspu:greaterThan(rspu:add(?u, ?value), 0.19) AS ?p)
  } }
}
"""
# Under entailment (spec 6.11) over a graph reloaded every second (6.14): observations made by
# (hence, by the graph's schema, observed by) an oxygen sensor, a gas sensor by subclass.
ENTAILED = """PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX sim: <http://rspstar.example/stream/>
PREFIX ex: <http://rspstar.example/>
SELECT ?o ?sensor ?zone
FROM <http://rspstar.example/tunnel>
FROM NAMED WINDOW ex:w ON sim:tvs/oxygen [RANGE PT2S STEP PT1S]
WHERE {
  WINDOW ex:w { GRAPH ?g { ?o ex:observedBy ?sensor . ?sensor a ex:GasSensor } }
  OPTIONAL { ?sensor ex:zone ?zone }
}
"""
TUNNEL = """@prefix sosa: <http://www.w3.org/ns/sosa/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix ex: <http://rspstar.example/> .
sosa:madeBySensor rdfs:subPropertyOf ex:observedBy ; rdfs:range ex:OxygenSensor .
ex:OxygenSensor rdfs:subClassOf ex:GasSensor .
<http://rspstar.example/sim/tvs/oxygen-sensor0> ex:zone "north" .
"""
WANTED = 5          # evaluations to compare
DEADLINE = 150      # seconds for Spark to start and the windows to pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_live_results_equal_a_replay_of_the_recorded_input(tmp_path):
    (tmp_path / "q.rq").write_text(QUERY)
    (tmp_path / "entailed.rq").write_text(ENTAILED)
    (tmp_path / "tunnel.ttl").write_text(TUNNEL)
    prefixes, _, triples = TUNNEL.rpartition("@prefix ex: <http://rspstar.example/> .\n")
    (tmp_path / "tunnel.trig").write_text("%s@prefix ex: <http://rspstar.example/> .\n<http://rspstar.example/tunnel> {\n%s}\n"
                                          % (prefixes, triples))     # the same graph, for the replay
    (tmp_path / "engine.toml").write_text("""
[engine]
max_delay = "PT60S"   # evaluate on the watermark only: complete input, as a replay sees it
[spark]
master = "local[2]"
[[sources]]
name = "tvs"
kind = "simulator"
scenario = "tvs"
size = 3
rate = 12
trigger_seconds = 0.5
[[queries]]
id = "oxygen"
file = "q.rq"
[[queries]]
id = "entailed"
file = "entailed.rq"
options = { entailment = "rdfs" }
[[background.graphs]]
graph = "http://rspstar.example/tunnel"
source = "tunnel.ttl"
refresh = "PT1S"
""")
    port = free_port()
    data = tmp_path / "data"
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "rspstar.endpoint.cli", "serve", "--config", str(tmp_path / "engine.toml"),
                                "--port", str(port), "--data", str(data)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = "http://127.0.0.1:%d" % port
    live, entailed = [], []
    try:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                text = requests.get(base + "/queries/oxygen/results", timeout=5).text
                entailed_text = requests.get(base + "/queries/entailed/results", timeout=5).text
            except requests.ConnectionError:
                text = entailed_text = ""
            live = [json.loads(line) for line in text.splitlines()]
            entailed = [json.loads(line) for line in entailed_text.splitlines()]
            if len([r for r in live if r["bindings"]]) > WANTED:
                break
            time.sleep(0.5)     # polling a live server process for its windows to pass
        streams = requests.get(base + "/streams", timeout=5).json()
        health = requests.get(base + "/health", timeout=5).json()
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    assert process.returncode == 0
    assert "stopped cleanly" in (tmp_path / "serve.log").read_text()

    with_data = [r for r in live if r["bindings"]]
    assert len(with_data) > WANTED, "only %d evaluations with data before the deadline" % len(with_data)
    assert all(r["trigger"] == "watermark" for r in live)
    # From the second evaluation with data (the first window may predate the first recorded
    # element) over every evaluation after it, empty ones included.
    first, last = with_data[1]["time"], with_data[WANTED]["time"]
    compared = [r for r in live if parse_instant(first) <= parse_instant(r["time"]) <= parse_instant(last)]
    recording = recording_path(data / "recording", "http://rspstar.example/stream/tvs/oxygen")
    assert recording.is_file(), sorted(p.name for p in (data / "recording").iterdir())
    assert any(s["stream"] == "http://rspstar.example/stream/tvs/oxygen" and s["quarantined"] == 0
               for s in streams["streams"])

    out = tmp_path / "replay.jsonl"
    start = format_instant(parse_instant(compared[0]["time"]) - 1)
    done = subprocess.run([sys.executable, "-m", "rspstar.endpoint.cli", "replay", str(tmp_path / "q.rq"),
                           "--stream", "http://rspstar.example/stream/tvs/oxygen=%s" % recording,
                           "--from", start, "--to", compared[-1]["time"], "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    replayed = [json.loads(line) for line in out.read_text().splitlines()]
    problems = compare_lines(compared, replayed, ordered=False)
    assert not problems, "\n".join(problems[:10])
    assert sum(len(r["bindings"]) for r in compared) >= WANTED

    assert health["background_graphs"] == 1 and health["background_failing"] == {}
    compared = [r for r in entailed if parse_instant(first) <= parse_instant(r["time"]) <= parse_instant(last)]
    assert all(r["trigger"] == "watermark" for r in compared)
    out = tmp_path / "entailed.jsonl"
    done = subprocess.run([sys.executable, "-m", "rspstar.endpoint.cli", "replay", str(tmp_path / "entailed.rq"),
                           "--stream", "http://rspstar.example/stream/tvs/oxygen=%s" % recording,
                           "--background", str(tmp_path / "tunnel.trig"), "--option", "entailment=rdfs",
                           "--from", start, "--to", compared[-1]["time"], "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    problems = compare_lines(compared, [json.loads(line) for line in out.read_text().splitlines()], ordered=False)
    assert not problems, "\n".join(problems[:10])
    rows = [row for r in compared for row in r["bindings"]]
    assert len(rows) >= WANTED and {row.get("zone") for row in rows} == {'"north"', None}
