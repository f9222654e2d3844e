"""Built-in sensor scenarios for the simulator source, as Spark SQL over the
`rate-micro-batch` source.

Each rate row (`timestamp`, `value`) becomes one observation, written as a one-element TriG
document in Spark SQL (no Python UDF, so it runs where Spark runs). Values are derived from
`hash(value, k)`, so the same row always gives the same observation; the row's timestamp (the
micro-batch's trigger time, or a fixed clock) is the observation's event time.

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

SIM = "http://rspstar.example/sim/"
STREAMS = "http://rspstar.example/stream/"
XSD = "http://www.w3.org/2001/XMLSchema#"
PROV_TIME = "<http://www.w3.org/ns/prov#generatedAtTime>"
SOSA = "http://www.w3.org/ns/sosa/"
_TS = "date_format(timestamp, \"yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'\")"


@dataclass(frozen=True)
class Scenario:
    name: str
    streams: tuple[str, ...]
    kind: str       # SQL: which of `streams` a row feeds (0-based index)
    document: str   # SQL: the TriG text of the row's element; may use `k` (the kind) and {size}

    def expressions(self, size: int, source: str) -> list[str]:
        """selectExpr arguments giving (stream, origin, text)."""
        cases = " ".join("WHEN %d THEN '%s'" % (i, s) for i, s in enumerate(self.streams))
        kind = self.kind.format(size=size)
        document = self.document.format(size=size, source=source, kind=kind)
        return ["CASE %s %s END AS stream" % (kind, cases), "'simulator:%s' AS origin" % source,
                "%s AS text" % document]


def _element(graph: str, body: str, args: str) -> str:
    """format_string building `<g> prov:generatedAtTime "ts" . <g> { body }`."""
    return ("format_string('<%s> " + PROV_TIME + " \"%s\"^^<" + XSD + "dateTime> .\\n<%s> {{ " + body + " }}', "
            + graph + ", " + _TS + ", " + graph + ", " + args + ")")


_TVS_GRAPH = "concat('" + SIM + "{source}/', CASE {kind} WHEN 0 THEN 'oxygen/' ELSE 'temperature/' END, value)"
_TVS_SECTOR = "pmod(value DIV 2, {size})"
TVS = Scenario(
    "tvs",
    (STREAMS + "tvs/oxygen", STREAMS + "tvs/temperature"),
    "pmod(value, 2)",
    "CASE {kind} WHEN 0 THEN "
    + _element(_TVS_GRAPH,
               "<" + SIM + "{source}/obs/%s> <" + SOSA + "hasSimpleResult> %.4f {{| <http://w3id.org/rsp/rspu#uncertainty> "
               "\"N(0, %.1e)\"^^<http://w3id.org/rsp/rspu#distribution> |}} ; <" + SOSA + "hasFeatureOfInterest> <"
               + SIM + "tvs/sector%s> ; <" + SOSA + "madeBySensor> <" + SIM + "tvs/oxygen-sensor%s> .",
               "value, cast(0.176 + pmod(hash(value, 1), 400) / 10000.0 AS double), (1 + pmod(hash(value, 2), 20)) * 1e-6, "
               + _TVS_SECTOR + ", " + _TVS_SECTOR)
    + " ELSE "
    + _element(_TVS_GRAPH,
               "<" + SIM + "{source}/obs/%s> <" + SOSA + "hasSimpleResult> %.2f ; <" + SOSA
               + "hasFeatureOfInterest> <" + SIM + "tvs/sector%s> ; <" + SOSA + "madeBySensor> <"
               + SIM + "tvs/temperature-sensor%s> .",
               "value, cast(15 + pmod(hash(value, 3), 1650) / 100.0 AS double), " + _TVS_SECTOR + ", " + _TVS_SECTOR)
    + " END",
)

_HC_KINDS = ("heartrate", "breathingrate", "oxygensaturation", "location", "activity")
_HC_GRAPH = ("concat('" + SIM + "{source}/', element_at(array(" + ", ".join("'%s'" % k for k in _HC_KINDS)
             + "), cast({kind} AS int) + 1), '/', value)")
_HC_PATIENT = "pmod(value, {size})"
# the RSP-QL* paper's scenario, played now and then so the low-emergency example query has something to
# find: patient 0 sits, with a high heart rate and slow breathing read with high confidence,
# for the first EPISODE_SECONDS of every EPISODE_CYCLE_SECONDS of event time (UTC).
EPISODE_CYCLE_SECONDS = 120
EPISODE_SECONDS = 50
_HC_EPISODE = "(pmod(value, {size}) = 0 AND pmod(unix_seconds(timestamp), %d) < %d)" % (
    EPISODE_CYCLE_SECONDS, EPISODE_SECONDS)


def _episode(during: str, otherwise: str) -> str:
    return "CASE WHEN %s THEN %s ELSE %s END" % (_HC_EPISODE, during, otherwise)


_HC_CONFIDENCE = "cast(%s AS double)" % _episode("0.8 + pmod(hash(value, 9), 20) / 100.0",
                                                  "0.5 + pmod(hash(value, 9), 50) / 100.0")
_HC_VALUES = [
    ("<" + SIM + "homecare/patient%s> <" + SIM + "homecare/heartRate> %s {{| <" + SIM
     + "homecare/confidence> %.2f |}} .", _episode("95 + pmod(hash(value, 4), 20)", "55 + pmod(hash(value, 4), 70)")),
    ("<" + SIM + "homecare/patient%s> <" + SIM + "homecare/breathingRate> %s {{| <" + SIM
     + "homecare/confidence> %.2f |}} .", _episode("8 + pmod(hash(value, 5), 4)", "8 + pmod(hash(value, 5), 20)")),
    ("<" + SIM + "homecare/patient%s> <" + SIM + "homecare/oxygenSaturation> %s {{| <" + SIM
     + "homecare/confidence> %.2f |}} .", "86 + pmod(hash(value, 6), 14)"),
    ("<" + SIM + "homecare/patient%s> <" + SIM + "homecare/location> <" + SIM + "homecare/%s> {{| <" + SIM
     + "homecare/confidence> %.2f |}} .",
     _episode("'livingroom'",
              "element_at(array('livingroom', 'kitchen', 'bedroom', 'bathroom', 'outside'), 1 + pmod(hash(value, 7), 5))")),
    ("<" + SIM + "homecare/patient%s> <" + SIM + "homecare/activity> <" + SIM + "homecare/%s> {{| <" + SIM
     + "homecare/confidence> %.2f |}} .",
     _episode("'sitting'", "element_at(array('sitting', 'walking', 'sleeping', 'cooking'), 1 + pmod(hash(value, 8), 4))")),
]
HOMECARE = Scenario(
    "homecare",
    tuple(STREAMS + "homecare/" + k for k in _HC_KINDS),
    "pmod(value DIV {size}, 5)",
    "CASE {kind} "
    + " ".join("WHEN %d THEN %s" % (i, _element(_HC_GRAPH, body, _HC_PATIENT + ", " + value + ", " + _HC_CONFIDENCE))
               for i, (body, value) in enumerate(_HC_VALUES))
    + " END",
)

_SENSOR_GRAPH = "concat('" + SIM + "{source}/', value)"
SENSORS = Scenario(
    "sensors",
    (STREAMS + "sensors",),
    "0",
    _element(_SENSOR_GRAPH,
             "<" + SIM + "{source}/obs/%s> <" + SOSA + "madeBySensor> <" + SIM + "sensors/s%s> ; <" + SOSA
             + "hasSimpleResult> %.3f .",
             "value, pmod(value, {size}), cast(0.16 + pmod(hash(value, 10), 50) / 1000.0 AS double)"),
)

SCENARIOS = {s.name: s for s in (TVS, HOMECARE, SENSORS)}
