"""End to end with a real broker: `rspstar serve` takes sensor readings from an MQTT topic and
publishes a query's results to another; a kill -9 of the engine and a broker restart mid-stream
leave every acknowledged reading counted exactly once."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

import pytest
import requests

from conftest import REPO
from mqtt_broker import Broker, client, free_port

pytestmark = pytest.mark.slow
STREAM = "http://example.org/stream/sensors"
QUERY = """PREFIX ex: <http://example.org/>
SELECT (COUNT(?g) AS ?n) (COUNT(DISTINCT ?k) AS ?distinct)
FROM NAMED WINDOW ex:w ON <%s> [RANGE PT1H STEP PT1S]
WHERE { WINDOW ex:w { GRAPH ?g { ?s ex:reading ?k } } }
""" % STREAM
READINGS = 1200


def envelope(k: int) -> bytes:
    # No graph name: a reading stored twice would be counted twice.
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps({"time": now, "data": '<http://example.org/sensor/1> <http://example.org/reading> %d .' % k}).encode()


def wait_for(condition, timeout: float, what: str, process=None, log=None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process is not None:
            assert process.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "timed out waiting for %s" % what
        time.sleep(0.2)


def number(record: dict, name: str) -> int:
    return int(record["results"]["bindings"][0][name]["value"])     # SPARQL Query Results JSON


def healthy(base: str) -> bool:
    try:
        return requests.get(base + "/health", timeout=2).json()["status"] == "ok"
    except (requests.RequestException, ValueError):
        return False


def test_readings_over_mqtt_are_counted_once_through_a_kill_and_a_broker_restart(tmp_path):
    broker = Broker(tmp_path / "broker").start()
    (tmp_path / "count.rq").write_text(QUERY)
    (tmp_path / "engine.toml").write_text("""
[sinks]
allowed = ["%(broker)s"]
[[sources]]
name = "sensors"
kind = "mqtt"
broker = "%(broker)s"
topic = "home/+/reading"
stream = "%(stream)s"
format = "jsonl"
trigger_seconds = 0.5
[[queries]]
id = "count"
file = "count.rq"
sinks = ["%(broker)s/results/count"]
""" % {"broker": broker.url, "stream": STREAM})
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    log_path = tmp_path / "serve.log"

    def engine() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "rspstar.endpoint.cli", "serve", "--config",
                                 str(tmp_path / "engine.toml"), "--port", str(port), "--data", str(tmp_path / "data")],
                                cwd=REPO, stdout=log_path.open("a"), stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})

    results: list[dict] = []
    reader = client(broker, on_message=lambda c, u, message: results.append(json.loads(message.payload)),
                    subscribe="results/count")
    assert reader.subscribed.wait(10)
    publisher = client(broker, client_id="sensor-1", clean=False)
    acknowledged: set[int] = set()
    publisher.on_publish = lambda c, userdata, mid, reason, properties: acknowledged.add(mid)

    def publish():
        for k in range(READINGS):
            publisher.publish("home/kitchen/reading", envelope(k), qos=1)
            time.sleep(0.005)

    process = engine()
    try:
        wait_for(lambda: healthy(base), 150, "the engine", process, log_path)
        sources = requests.get(base + "/streams", timeout=5).json()["sources"]
        assert sources["sensors"]["mqtt"]["connected"] and sources["sensors"]["mqtt"]["broker"] == broker.url
        feeding = threading.Thread(target=publish)
        feeding.start()
        wait_for(lambda: any(r["results"]["bindings"] and number(r, "n") > 100 for r in results), 60,
                 "the first results on the sink topic", process, log_path)
        os.killpg(process.pid, signal.SIGKILL)           # the engine, its Spark JVM with it
        process.wait()
        broker.stop()                                    # the broker too, while the engine is down
        broker.start()
        process = engine()
        feeding.join()
        wait_for(lambda: healthy(base), 150, "the engine after the kill", process, log_path)
        wait_for(lambda: len(acknowledged) == READINGS, 60, "the broker's acknowledgements")

        def counted() -> int:
            return max([number(r, "n") for r in results if r["results"]["bindings"]] or [0])
        wait_for(lambda: counted() >= READINGS, 120, "every reading counted", process, log_path)
        time.sleep(3)                                   # a reading stored twice would show by now
        last = [r for r in results if r["results"]["bindings"]][-1]
        assert number(last, "n") == READINGS and number(last, "distinct") == READINGS
        assert counted() == READINGS
        streams = {s["stream"]: s for s in requests.get(base + "/streams", timeout=5).json()["streams"]}
        assert streams[STREAM]["quarantined"] == 0
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(60)
        reader.loop_stop()
        publisher.loop_stop()
        broker.stop()
    assert "stopped cleanly" in log_path.read_text()
