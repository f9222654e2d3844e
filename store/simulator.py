"""Built-in sensor scenarios for the simulator source.

Spark's `rate-micro-batch` source releases rows (`value`, `timestamp`); each row becomes one
observation, a one-element TriG document, written here where the micro-batch is read (the
driver for the store, the executors for a partitioned query). Spark SQL wrote them before: its
planning and interpreting of the expressions were a large share of every micro-batch of the
main job's simulators (bench/out/NOTES.md#simulator-documents); here a row is a format string. Values are derived from a 64-bit mix of (value, k), so the same row
always gives the same observation; the row's timestamp (the micro-batch's trigger time, or a
fixed clock) is the observation's event time.

- `tvs` (the RSPU paper): tunnel sectors, each with an oxygen sensor (fraction, annotated with its
  measurement uncertainty `N(0, σ²)` as `rspu:distribution`) and a temperature sensor (°C);
  rows alternate between the two streams.
- `homecare` (the RSP-QL* paper): patients' heart rate, breathing rate, oxygen saturation, location and
  activity, five streams, each value annotated with a confidence; patient 0 plays the RSP-QL* paper's
  low-emergency scenario for the first 50 s of every two minutes.
- `sensors`: plain observations (sensor, value), one stream; the benchmarks' workload (a).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from rspstar.translator.temporal import MICROS, format_instant

SIM = "http://rspstar.example/sim/"
STREAMS = "http://rspstar.example/stream/"
SOSA = "http://www.w3.org/ns/sosa/"
RSPU = "http://w3id.org/rsp/rspu#"
_HEAD = ('<%s> <http://www.w3.org/ns/prov#generatedAtTime> "%s"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
         "<%s> { %s }")
_M64 = (1 << 64) - 1


def mix(value: int, k: int) -> int:
    """A non-negative 64-bit number that looks random in (value, k) and is the same every time:
    SplitMix64's finaliser over both."""
    x = (value * 0x9E3779B97F4A7C15 + k * 0xD1B54A32D192ED03) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


# (value, size, event time µs, source name) -> (index into the scenario's streams, graph IRI, graph body)
Observation = Callable[[int, int, int, str], tuple[int, str, str]]


@dataclass(frozen=True)
class Scenario:
    name: str
    streams: tuple[str, ...]
    observation: Observation

    def documents(self, rows: Iterable[tuple[int, int]], size: int, source: str) -> dict[str, list[str]]:
        """Rows (value, event time µs) as TriG documents of one element each, per stream, in
        row order."""
        documents: dict[str, list[str]] = {}
        stamped_at, stamp = None, ""
        for value, time in rows:
            if time != stamped_at:      # a micro-batch's rows share their time
                stamped_at, stamp = time, format_instant(time)
            kind, graph, body = self.observation(value, size, time, source)
            documents.setdefault(self.streams[kind], []).append(_HEAD % (graph, stamp, graph, body))
        return documents


def _tvs(value: int, size: int, time: int, source: str) -> tuple[int, str, str]:
    sector = (value // 2) % size
    if value % 2 == 0:
        return 0, "%s%s/oxygen/%d" % (SIM, source, value), (
            '<%s%s/obs/%d> <%shasSimpleResult> %.4f {| <%suncertainty> "N(0, %.1e)"^^<%sdistribution> |} ; '
            "<%shasFeatureOfInterest> <%stvs/sector%d> ; <%smadeBySensor> <%stvs/oxygen-sensor%d> ."
            % (SIM, source, value, SOSA, 0.176 + mix(value, 1) % 400 / 10000.0, RSPU,
               (1 + mix(value, 2) % 20) * 1e-6, RSPU, SOSA, SIM, sector, SOSA, SIM, sector))
    return 1, "%s%s/temperature/%d" % (SIM, source, value), (
        "<%s%s/obs/%d> <%shasSimpleResult> %.2f ; <%shasFeatureOfInterest> <%stvs/sector%d> ; "
        "<%smadeBySensor> <%stvs/temperature-sensor%d> ."
        % (SIM, source, value, SOSA, 15 + mix(value, 3) % 1650 / 100.0, SOSA, SIM, sector, SOSA, SIM, sector))


TVS = Scenario("tvs", (STREAMS + "tvs/oxygen", STREAMS + "tvs/temperature"), _tvs)

_HC_KINDS = ("heartrate", "breathingrate", "oxygensaturation", "location", "activity")
_HC_PREDICATES = ("heartRate", "breathingRate", "oxygenSaturation", "location", "activity")
_HC_ROOMS = ("livingroom", "kitchen", "bedroom", "bathroom", "outside")
_HC_ACTIVITIES = ("sitting", "walking", "sleeping", "cooking")
# the RSP-QL* paper's scenario, played now and then so the low-emergency example query has something to
# find: patient 0 sits, with a high heart rate and slow breathing read with high confidence,
# for the first EPISODE_SECONDS of every EPISODE_CYCLE_SECONDS of event time (UTC).
EPISODE_CYCLE_SECONDS = 120
EPISODE_SECONDS = 50


def _homecare_value(kind: int, value: int, episode: bool) -> str:
    if kind == 0:
        return str(95 + mix(value, 4) % 20 if episode else 55 + mix(value, 4) % 70)
    if kind == 1:
        return str(8 + mix(value, 5) % (4 if episode else 20))
    if kind == 2:
        return str(86 + mix(value, 6) % 14)
    if kind == 3:
        return "<%shomecare/%s>" % (SIM, "livingroom" if episode else _HC_ROOMS[mix(value, 7) % 5])
    return "<%shomecare/%s>" % (SIM, "sitting" if episode else _HC_ACTIVITIES[mix(value, 8) % 4])


def _homecare(value: int, size: int, time: int, source: str) -> tuple[int, str, str]:
    kind, patient = (value // size) % 5, value % size
    episode = patient == 0 and (time // MICROS) % EPISODE_CYCLE_SECONDS < EPISODE_SECONDS
    confidence = 0.8 + mix(value, 9) % 20 / 100.0 if episode else 0.5 + mix(value, 9) % 50 / 100.0
    return kind, "%s%s/%s/%d" % (SIM, source, _HC_KINDS[kind], value), (
        "<%shomecare/patient%d> <%shomecare/%s> %s {| <%shomecare/confidence> %.2f |} ."
        % (SIM, patient, SIM, _HC_PREDICATES[kind], _homecare_value(kind, value, episode), SIM, confidence))


HOMECARE = Scenario("homecare", tuple(STREAMS + "homecare/" + k for k in _HC_KINDS), _homecare)


def _sensors(value: int, size: int, time: int, source: str) -> tuple[int, str, str]:
    return 0, "%s%s/%d" % (SIM, source, value), (
        "<%s%s/obs/%d> <%smadeBySensor> <%ssensors/s%d> ; <%shasSimpleResult> %.3f ."
        % (SIM, source, value, SOSA, SIM, value % size, SOSA, 0.16 + mix(value, 10) % 50 / 1000.0))


SENSORS = Scenario("sensors", (STREAMS + "sensors",), _sensors)

SCENARIOS = {s.name: s for s in (TVS, HOMECARE, SENSORS)}
