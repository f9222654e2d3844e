"""MQTT ingestion against POST /streams on the same workload: the real `rspstar serve` (Spark,
on-disk store) fed the same elements once through an MQTT broker (mosquitto, QoS 1: each message
landed and fsynced before it is acknowledged) and once through POST /streams (each body landed
and fsynced before its 202), one element per message or request, then a hundred.

Each row: how long until the sender had every acknowledgement (for MQTT the broker's, which
does not wait for the engine), how long until the store held every element (GET /streams), and the engine's CPU (its process and Spark's JVM) per 1,000
elements over that time. Each path feeds a stream of its own.

Run by hand: python bench/mqtt_ingestion.py [--elements 10000] [--runs 2]
Needs Debian's mosquitto (tools/system-setup test installs it).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from common import Table, machine, process_tree_by_kind, publish, start_serve, stop_serve  # noqa: E402
from mqtt_broker import Broker, free_port  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TOKEN = "bench"
PROV = "<http://www.w3.org/ns/prov#generatedAtTime>"


def elements(tag: str, count: int, per: int) -> list[bytes]:
    """`count` elements as N-Quads, `per` to a message, event time now onwards by 1 ms."""
    start = time.time()
    lines = []
    for k in range(count):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start + k / 1000)) + ".%03dZ" % ((k % 1000))
        graph = "<http://example.org/%s/e%d>" % (tag, k)
        lines.append('%s %s "%s"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
                     '<http://example.org/o%d> <http://example.org/v> "%d" %s .\n' % (graph, PROV, stamp, k, k, graph))
    return ["".join(lines[k:k + per]).encode() for k in range(0, count, per)]


def stored(base: str, stream: str) -> int:
    for s in requests.get(base + "/streams", timeout=10).json()["streams"]:
        if s["stream"] == stream:
            return s["ingested"]
    return 0


def engine_cpu(pid: int) -> float:
    kinds = process_tree_by_kind(pid)
    return sum(k["cpu"] for k in kinds.values())


def feed_mqtt(broker: Broker, payloads: list[bytes]) -> None:
    publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    publisher.max_inflight_messages_set(100)          # a sensor gateway's, not one reading at a time
    publisher.connect("127.0.0.1", broker.port)
    publisher.loop_start()
    infos = [publisher.publish("bench/readings", p, qos=1) for p in payloads]
    for info in infos:
        info.wait_for_publish(120)
    publisher.disconnect()
    publisher.loop_stop()


def feed_posts(base: str, stream: str, payloads: list[bytes]) -> None:
    session = requests.Session()
    headers = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/n-quads"}
    for p in payloads:
        response = session.post(base + "/streams", params={"stream": stream}, data=p, headers=headers, timeout=60)
        assert response.status_code == 202, response.text


def run(count: int, runs: int) -> str:
    table = Table("MQTT ingestion against POST /streams, %d elements a row, real `rspstar serve` with Spark local[2] "
                  "(%s)" % (count, machine()),
                  ["run", "path", "elements per message", "messages", "s until the sender was acknowledged (MQTT: by the broker)",
                   "s until stored",
                   "messages/s", "elements/s", "engine CPU s per 1,000 elements"])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        broker = Broker(tmp / "broker").start()
        port = free_port()
        base = "http://127.0.0.1:%d" % port
        streams = {"mqtt": "http://example.org/stream/mqtt", "post": "http://example.org/stream/post"}
        (tmp / "engine.toml").write_text("""
[http]
token = "%s"
[[sources]]
name = "landing"
kind = "files"
stream = "%s"
trigger_seconds = 0.5
[[sources]]
name = "mqtt"
kind = "mqtt"
broker = "%s"
topic = "bench/#"
stream = "%s"
trigger_seconds = 0.5
""" % (TOKEN, streams["post"], broker.url, streams["mqtt"]))
        process = start_serve(tmp, port, tmp / "engine.toml")
        try:
            for run_number in range(1, runs + 1):
                for per in (1, 100):
                    n = count if per == 1 else count * 10
                    for path in ("mqtt", "post"):
                        payloads = elements("%s-%d-%d" % (path, per, run_number), n, per)
                        before = stored(base, streams[path])
                        cpu = engine_cpu(process.pid)
                        started = time.perf_counter()
                        feed_mqtt(broker, payloads) if path == "mqtt" else feed_posts(base, streams["post"], payloads)
                        acknowledged = time.perf_counter() - started
                        while stored(base, streams[path]) < before + n:
                            assert time.perf_counter() - started < 600, "not all stored"
                            time.sleep(0.05)
                        seconds = time.perf_counter() - started
                        used = engine_cpu(process.pid) - cpu
                        table.add(str(run_number), "MQTT (QoS 1)" if path == "mqtt" else "POST /streams", str(per),
                                  str(len(payloads)), acknowledged, seconds, len(payloads) / seconds, n / seconds,
                                  1000 * used / n)
        finally:
            stop_serve(process)
            broker.stop()
    return table.markdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--elements", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    publish("mqtt_ingestion", run(args.elements, args.runs))


if __name__ == "__main__":
    main()
