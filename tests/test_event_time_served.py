"""Issue 60's reproduction of a poisoned stream on a real engine: one MQTT message stamped
9999-12-31T23:59:59Z among a sensor's readings. It is set aside with the reason (counted for its
stream in GET /streams), the stream's watermark stays with the readings, the query on the stream
evaluates at its closes (not hundreds of thousands of empty windows) and reports the readings
that come after it; a post of an element stamped so, or in the year 10000, is refused naming it."""
from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import pytest
import requests

from mqtt_broker import Broker, client, publish_all
from served_engine import Served

pytestmark = pytest.mark.slow
STREAM = "http://example.org/stream/sensors"
QUERY = """PREFIX ex: <http://example.org/>
SELECT (COUNT(?g) AS ?n)
FROM NAMED WINDOW ex:w ON <%s> [RANGE PT5S STEP PT1S]
WHERE { WINDOW ex:w { GRAPH ?g { ?s ex:reading ?k } } }
""" % STREAM


def envelope(k: int, time: str | None = None) -> bytes:
    stamp = time or datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps({"time": stamp, "data": "<http://example.org/sensor/1> <http://example.org/reading> %d ." % k}
                      ).encode()


def test_a_reading_stamped_in_the_year_9999_is_set_aside_and_the_stream_goes_on(tmp_path):
    broker = Broker(tmp_path / "broker").start()
    (tmp_path / "count.rq").write_text(QUERY)
    served = Served(tmp_path, """
[http]
token = ""
[[sources]]
name = "sensors"
kind = "mqtt"
broker = "%(broker)s"
topic = "home/+/reading"
stream = "%(stream)s"
format = "jsonl"
trigger_seconds = 0.5
[[sources]]
name = "landing"
kind = "files"
stream = "%(stream)s"
trigger_seconds = 0.5
[[queries]]
id = "count"
file = "count.rq"
""" % {"broker": broker.url, "stream": STREAM})
    publisher = client(broker, client_id="sensor-1", clean=False)
    try:
        served.start()
        publish_all(publisher, "home/hall/reading", [envelope(0, "9999-12-31T23:59:59Z")])
        started = time.monotonic()
        for k in range(1, 11):
            publish_all(publisher, "home/kitchen/reading", [envelope(k)])
            time.sleep(0.5)     # the sensor's pace, two readings a second: they fall in several windows

        def stream() -> dict:
            found = [s for s in served.streams()["streams"] if s["stream"] == STREAM]
            return found[0] if found else {}
        served.wait_for(lambda: stream().get("ingested") == 10 and stream().get("quarantined") == 1, 120,
                        "the readings stored and the one from the year 9999 set aside")
        state = stream()
        assert state["late"] == 0 and not state["watermark"].startswith("9999")
        watermark = datetime.fromisoformat(state["watermark"].replace("Z", "+00:00"))
        assert watermark < datetime.now(timezone.utc) + timedelta(minutes=1)
        reasons = [json.loads(p.read_text()) for p in (served.data / "quarantine").glob("*.reason.json")]
        assert [r["stream"] for r in reasons] == [STREAM]
        assert "stamped 9999-12-31T23:59:59Z, more than PT60S ahead of the engine's clock" in reasons[0]["reason"]
        # The query counts the readings at its closes, once a second, not every window to 9999.
        def counts() -> list[int]:
            results = requests.get(served.base + "/queries/count/results", timeout=10).text.splitlines()
            return [int(r["results"]["bindings"][0]["n"]["value"]) for r in map(json.loads, results)]
        served.wait_for(lambda: max(counts(), default=0) >= 5, 60, "a close of the query counting the readings")
        query = requests.get(served.base + "/queries/count", timeout=10).json()
        elapsed = time.monotonic() - started
        assert query["status"]["state"] == "running"
        assert query["status"]["evaluations"] <= elapsed + 70
        # At the door: refused, naming the element, its time and the bound, or the year.
        for stamp, words in (("9999-12-31T23:59:59Z", "more than PT60S ahead of the engine's clock"),
                             ("10000-01-01T00:00:00Z", "outside the years 0001-9999")):
            refused = requests.post(served.base + "/streams", params={"stream": STREAM}, data=envelope(99, stamp),
                                    headers={"Content-Type": "application/x-ndjson"}, timeout=10)
            assert refused.status_code == 400 and words in refused.json()["message"]
        assert served.health()["status"] == "ok"
    finally:
        served.stop()
        publisher.loop_stop()
        broker.stop()
