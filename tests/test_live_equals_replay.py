"""End to end: the real `rspstar serve` process (Spark simulator, on-disk store, scheduler, HTTP)
runs queries for a few windows (an RSP-QL* one; an EP-SPARQL one over both of the simulator's
streams, evaluated at every arrival; one that reads, under RDFS entailment, a background graph
the engine reloads every second); then `rspstar replay` over what the simulator recorded (and
the same graph) gives the same result at every evaluation."""
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

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
# EP-SPARQL (spec 6.12): an oxygen reading, then a temperature reading of the same sector, within 2 s.
EP_QUERY = """PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX rspu: <http://w3id.org/rsp/rspu#>
PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>
SELECT ?sector ?value ?temperature (getDURATION() AS ?after)
WHERE { STREAM <http://rspstar.example/stream/tvs/oxygen>
          { ?o sosa:hasSimpleResult ?value {| rspu:uncertainty ?u |} ; sosa:hasFeatureOfInterest ?sector }
        SEQ STREAM <http://rspstar.example/stream/tvs/temperature>
          { ?t sosa:hasSimpleResult ?temperature ; sosa:hasFeatureOfInterest ?sector } }
FILTER(getDURATION() < "PT2S"^^xsd:duration)
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
STREAMS = {"oxygen": ["http://rspstar.example/stream/tvs/oxygen"],
           "ep": ["http://rspstar.example/stream/tvs/oxygen", "http://rspstar.example/stream/tvs/temperature"],
           "entailed": ["http://rspstar.example/stream/tvs/oxygen"]}
# The engine both tests serve: the TVS simulator through Spark, evaluating on the watermark only.
SIMULATED = """
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
"""
WANTED = 5          # evaluations to compare
DEADLINE = 150      # seconds for Spark to start and the windows to pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

@contextlib.contextmanager
def serving(tmp_path, data):
    """`rspstar serve` on tmp_path/engine.toml, its log in serve.log; stopped with Ctrl-C at
    the end, after which it must exit 0."""
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "rspstar.endpoint.cli", "serve", "--config", str(tmp_path / "engine.toml"),
                                "--port", str(port := free_port()), "--data", str(data)], cwd=REPO, stdout=log,
                               stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        yield Served("http://127.0.0.1:%d" % port, process, tmp_path / "serve.log")
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    assert process.returncode == 0, (tmp_path / "serve.log").read_text()[-3000:]


@dataclass
class Served:
    base: str                   # the server's URL
    process: subprocess.Popen
    log: Path


def live_results(served: Served, names, enough: int) -> dict:
    """Each query's records (compact) once every one has more than `enough` evaluations with
    data, or what they have at DEADLINE."""
    live = {}
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        assert served.process.poll() is None, served.log.read_text()[-3000:]
        try:
            live = {name: [json.loads(line) for line in requests.get(
                served.base + "/queries/%s/results" % name, params={"format": "compact"}, timeout=5).text.splitlines()]
                    for name in names}
        except requests.ConnectionError:
            live = {}
        if live and all(len([r for r in records if r["bindings"]]) > enough for records in live.values()):
            break
        time.sleep(0.5)     # polling a live server process for its windows to pass
    return live



def test_live_results_equal_a_replay_of_the_recorded_input(tmp_path):
    (tmp_path / "q.rq").write_text(QUERY)
    (tmp_path / "ep.rq").write_text(EP_QUERY)
    (tmp_path / "entailed.rq").write_text(ENTAILED)
    (tmp_path / "tunnel.ttl").write_text(TUNNEL)
    prefixes, _, triples = TUNNEL.rpartition("@prefix ex: <http://rspstar.example/> .\n")
    (tmp_path / "tunnel.trig").write_text("%s@prefix ex: <http://rspstar.example/> .\n<http://rspstar.example/tunnel> {\n%s}\n"
                                          % (prefixes, triples))     # the same graph, for the replay
    (tmp_path / "engine.toml").write_text(SIMULATED + """[[queries]]
id = "oxygen"
file = "q.rq"
[[queries]]
id = "ep"
file = "ep.rq"
[[queries]]
id = "entailed"
file = "entailed.rq"
options = { entailment = "rdfs" }
[[background.graphs]]
graph = "http://rspstar.example/tunnel"
source = "tunnel.ttl"
refresh = "PT1S"
""")
    data = tmp_path / "data"
    with serving(tmp_path, data) as served:
        live = live_results(served, STREAMS, WANTED)
        streams = requests.get(served.base + "/streams", timeout=5).json()
        health = requests.get(served.base + "/health", timeout=5).json()
    assert "stopped cleanly" in (tmp_path / "serve.log").read_text()
    for stream in STREAMS["ep"]:
        assert any(s["stream"] == stream and s["quarantined"] == 0 for s in streams["streams"])
    assert health["background_graphs"] == 1 and health["background_failing"] == {}
    for query_id, file in (("oxygen", "q.rq"), ("ep", "ep.rq")):
        assert_replay_equals_live(tmp_path, data, query_id, file, live.get(query_id, []))
    compared = assert_replay_equals_live(tmp_path, data, "entailed", "entailed.rq", live.get("entailed", []),
                                         ["--background", str(tmp_path / "tunnel.trig"), "--option", "entailment=rdfs"])
    rows = [row for r in compared for row in r["bindings"]]
    assert len(rows) >= WANTED and {row.get("zone") for row in rows} == {'"north"', None}


def assert_replay_equals_live(tmp_path, data, query_id, file, live, options=()):
    """The replay of the recorded streams (with `options`, arguments of `rspstar replay`) gives
    what the live engine gave from its second evaluation with data on; what was compared."""
    with_data = [r for r in live if r["bindings"]]
    assert len(with_data) > WANTED, "%s: only %d evaluations with data before the deadline" % (query_id, len(with_data))
    assert all(r["trigger"] == "watermark" for r in live)
    # From the second evaluation with data (the first window may predate the first recorded
    # element) over every evaluation after it, empty ones included.
    first, last = with_data[1]["time"], with_data[WANTED]["time"]
    compared = [r for r in live if parse_instant(first) <= parse_instant(r["time"]) <= parse_instant(last)]
    arguments = []
    for stream in STREAMS[query_id]:
        recording = recording_path(data / "recording", stream)
        assert recording.is_file(), sorted(p.name for p in (data / "recording").iterdir())
        arguments += ["--stream", "%s=%s" % (stream, recording)]

    out = tmp_path / ("%s.jsonl" % query_id)
    start = format_instant(parse_instant(compared[0]["time"]) - 1)
    done = subprocess.run([sys.executable, "-m", "rspstar.endpoint.cli", "replay", str(tmp_path / file)] + arguments +
                          [*options, "--from", start, "--to", compared[-1]["time"], "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    replayed = [json.loads(line) for line in out.read_text().splitlines()]
    problems = compare_lines(compared, replayed, ordered=False)
    assert not problems, "%s:\n%s" % (query_id, "\n".join(problems[:10]))
    assert sum(len(r["bindings"]) for r in compared) >= WANTED
    return compared


WINDOWS_QUERIES = {
    # The latest reading of every sector (spec 6.9).
    "latest": """PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX sim: <http://rspstar.example/stream/>
PREFIX ex: <http://rspstar.example/>
SELECT ?sector ?value
FROM NAMED WINDOW ex:latest ON sim:tvs/oxygen [ELEMS 1 PARTITION BY sosa:hasFeatureOfInterest]
WHERE { WINDOW ex:latest { GRAPH ?g { ?o sosa:hasFeatureOfInterest ?sector ; sosa:hasSimpleResult ?value } } }
""",
    # Everything since the epoch (spec 6.10): the live store holds all it ingested, so does the recording.
    "landmark": """PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX sim: <http://rspstar.example/stream/>
PREFIX ex: <http://rspstar.example/>
SELECT ?sector (COUNT(?o) AS ?n) (MAX(?value) AS ?highest)
FROM NAMED WINDOW ex:all ON sim:tvs/oxygen [RANGE UNBOUNDED STEP PT1S]
WHERE { WINDOW ex:all { GRAPH ?g { ?o sosa:hasFeatureOfInterest ?sector ; sosa:hasSimpleResult ?value } } }
GROUP BY ?sector
""",
    # Sectors whose oxygen is high (spec 6.13): a fact opened by a reading above 0.19 and closed
    # by one at or below, so what holds depends on each sector's latest reading only (the
    # replay, starting later than the live query, reads every sector again before it compares).
    "high": """PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX sim: <http://rspstar.example/stream/>
PREFIX ex: <http://rspstar.example/>
SELECT ?sector
FROM NAMED WINDOW ex:high ON sim:tvs/oxygen [FACTS { ?sector ex:high true }
  SINCE { ?o sosa:hasFeatureOfInterest ?sector ; sosa:hasSimpleResult ?v FILTER(?v > 0.19) }
  TILL { ?o sosa:hasFeatureOfInterest ?sector ; sosa:hasSimpleResult ?v FILTER(?v <= 0.19) } STEP PT1S]
WHERE { WINDOW ex:high { ?sector ex:high true } }
""",
}


def test_partitioned_landmark_and_fact_windows_live_equal_a_replay(tmp_path):
    config = SIMULATED
    for name, text in WINDOWS_QUERIES.items():
        (tmp_path / (name + ".rq")).write_text(text)
        config += '[[queries]]\nid = "%s"\nfile = "%s.rq"\n' % (name, name)
    (tmp_path / "engine.toml").write_text(config)
    data = tmp_path / "data"
    with serving(tmp_path, data) as served:
        live = live_results(served, WINDOWS_QUERIES, WANTED + 3)
        statuses = {name: requests.get(served.base + "/queries/" + name, timeout=5).json()["status"] for name in WINDOWS_QUERIES}
    assert all(s["state"] == "running" for s in statuses.values()), statuses
    recording = recording_path(data / "recording", "http://rspstar.example/stream/tvs/oxygen")
    for name, records in live.items():
        with_data = [r for r in records if r["bindings"]]
        assert len(with_data) > WANTED + 3, "%s: only %d evaluations with data" % (name, len(with_data))
        assert all(r["trigger"] == "watermark" for r in records)
        # From the fourth evaluation with data on (the fact query's replay starts two seconds
        # before it: every sector reads again meanwhile), over every evaluation after it.
        first, last = with_data[3]["time"], with_data[WANTED + 3]["time"]
        compared = [r for r in records if parse_instant(first) <= parse_instant(r["time"]) <= parse_instant(last)]
        out = tmp_path / (name + ".jsonl")
        start = format_instant(parse_instant(compared[0]["time"]) - 2_000_000)
        done = subprocess.run([sys.executable, "-m", "rspstar.endpoint.cli", "replay", str(tmp_path / (name + ".rq")),
                               "--stream", "http://rspstar.example/stream/tvs/oxygen=%s" % recording,
                               "--from", start, "--to", compared[-1]["time"], "--out", str(out)],
                              cwd=REPO, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        replayed = [r for r in (json.loads(line) for line in out.read_text().splitlines())
                    if parse_instant(r["time"]) >= parse_instant(first)]
        problems = compare_lines(compared, replayed, ordered=False)
        assert not problems, "%s:\n%s" % (name, "\n".join(problems[:10]))
