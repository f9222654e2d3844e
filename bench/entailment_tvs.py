"""RDFS entailment (spec §6.11) on the RSPU paper's TVS Listing 2 written against a 3-level sensor
class hierarchy: the query with `option entailment = rdfs` over raw elements, against the same
query without entailment over elements that hold every entailed triple already (materialised
data). The issue asks for at most 1.5x.

Run by hand: nice python bench/entailment_tvs.py [--sectors 10 100] [--methods]
With --methods it also measures the ways entailment could be done, which chose the engine's:
rewriting each `?s a C` into `?s a ?c VALUES ?c { subclasses of C }` (the cheapest rewrite:
property paths over the schema cost more, and domains, ranges and subproperties add a UNION
each), closing an element in Python (store/entailment.py), and closing it with the reasoner
libraries owlrl and reasonable when they are importable (they are not dependencies: point
PYTHONPATH at a directory where they were installed to include them).

Each sector has an oxygen and a temperature sensor reporting once a second; every element
describes its observation and the sensor that made it (`ex:ox-sensor-3 a ex:GalvanicOxygenSensor`);
the schema is in the background default graph.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import pyoxigraph as ox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import PREFIXES, Table, iso, machine, publish  # noqa: E402

from rspstar.endpoint.engine.evaluation import QueryEvaluator  # noqa: E402
from rspstar.store.entailment import Closure, element_closure  # noqa: E402
from rspstar.store.stream_store import StreamStore  # noqa: E402
from rspstar.translator.options import QueryOptions  # noqa: E402
from rspstar.translator.policy import report_policy  # noqa: E402
from rspstar.translator.temporal import parse_instant  # noqa: E402
from rspstar.translator.validate import compile_query  # noqa: E402

SCHEMA = """@prefix ex: <http://example.org/> .
@prefix sosa: <http://www.w3.org/ns/sosa/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:GalvanicOxygenSensor rdfs:subClassOf ex:OxygenSensor .
ex:OxygenSensor rdfs:subClassOf ex:GasSensor .
ex:GasSensor rdfs:subClassOf sosa:Sensor .
ex:Pt100Sensor rdfs:subClassOf ex:ResistanceThermometer .
ex:ResistanceThermometer rdfs:subClassOf ex:TemperatureSensor .
ex:TemperatureSensor rdfs:subClassOf sosa:Sensor .
sosa:madeBySensor rdfs:range sosa:Sensor .
"""
# What the schema entails about each sensor: the materialised data states it.
OXYGEN_TYPES = ["ex:GalvanicOxygenSensor", "ex:OxygenSensor", "ex:GasSensor", "sosa:Sensor"]
TEMPERATURE_TYPES = ["ex:Pt100Sensor", "ex:ResistanceThermometer", "ex:TemperatureSensor", "sosa:Sensor"]

QUERY = """PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX rspu: <http://w3id.org/rsp/rspu#>
PREFIX ex: <http://example.org/>
REGISTER STREAM ex:warning/tvs COMPUTED EVERY PT4S AS
SELECT ?location ?oxValue ?tempValue
FROM NAMED WINDOW ex:w1 ON ex:stream/oxygen [RANGE PT10S STEP PT1S]
FROM NAMED WINDOW ex:w2 ON ex:stream/temperature [RANGE PT10S STEP PT1S]
WHERE {
  WINDOW ex:w1 { GRAPH ?g1 {
      ?o1 sosa:madeBySensor ?s1 . ?s1 a ex:GasSensor .
      ?o1 sosa:hasSimpleResult ?oxValue ; sosa:hasFeatureOfInterest ?location .
      << ?o1 sosa:hasSimpleResult ?oxValue >> rspu:uncertainty ?unc .
      FILTER(rspu:lessThan(rspu:add(?unc, ?oxValue), 0.18) >= 0.80) } }
  WINDOW ex:w2 { GRAPH ?g2 {
      ?o2 sosa:madeBySensor ?s2 . ?s2 a ex:TemperatureSensor .
      ?o2 sosa:hasSimpleResult ?tempValue ; sosa:hasFeatureOfInterest ?location .
      FILTER(?tempValue > 30) } }
}"""
# The rewrite a query could be given instead of entailment, for this schema.
REWRITTEN = QUERY.replace("?s1 a ex:GasSensor", "?s1 a ?c1 VALUES ?c1 { ex:GalvanicOxygenSensor ex:OxygenSensor "
                          "ex:GasSensor }").replace(
    "?s2 a ex:TemperatureSensor", "?s2 a ?c2 VALUES ?c2 { ex:Pt100Sensor ex:ResistanceThermometer ex:TemperatureSensor }")
START = parse_instant("2026-03-01T08:00:00Z")
SECONDS = 30
OXYGEN, TEMPERATURE = "http://example.org/stream/oxygen", "http://example.org/stream/temperature"


def streams(sectors: int, materialised: bool, seed: int = 2) -> list[tuple[str, str]]:
    """Per second, oxygen and temperature TriG (bench/uncertainty_tvs.py's readings), each
    element naming its sensor and the sensor's most specific class, or all its classes
    (`materialised`)."""
    rng = random.Random(seed)
    t0 = START // 1_000_000
    ox_types = OXYGEN_TYPES if materialised else OXYGEN_TYPES[:1]
    temp_types = TEMPERATURE_TYPES if materialised else TEMPERATURE_TYPES[:1]
    seconds = []
    for tick in range(SECONDS):
        oxygen, temperature = [PREFIXES], [PREFIXES]
        stamp = iso(t0, tick * 1000)
        for sector in range(sectors):
            value = round(rng.uniform(0.172, 0.178) if rng.random() < 0.05 else rng.uniform(0.185, 0.21), 4)
            variance = round(rng.uniform(1e-6, 2e-5), 8)
            oxygen.append('ex:ox-%d-%d prov:generatedAtTime "%s"^^xsd:dateTime .\nex:ox-%d-%d { ex:oxo-%d-%d '
                          'sosa:madeBySensor ex:ox-sensor-%d ; sosa:hasSimpleResult %s {| rspu:uncertainty '
                          '"N(0, %s)"^^rspu:distribution |} ; sosa:hasFeatureOfInterest ex:sector%d . '
                          'ex:ox-sensor-%d a %s . }\n'
                          % (sector, tick, stamp, sector, tick, sector, tick, sector, value, variance, sector,
                             sector, ", ".join(ox_types)))
            temp = round(rng.uniform(30.5, 35) if rng.random() < 0.05 else rng.uniform(15, 29), 2)
            temperature.append('ex:t-%d-%d prov:generatedAtTime "%s"^^xsd:dateTime .\nex:t-%d-%d { ex:to-%d-%d '
                               'sosa:madeBySensor ex:t-sensor-%d ; sosa:hasSimpleResult %s ; '
                               'sosa:hasFeatureOfInterest ex:sector%d . ex:t-sensor-%d a %s . }\n'
                               % (sector, tick, stamp, sector, tick, sector, tick, sector, temp, sector, sector,
                                  ", ".join(temp_types)))
        seconds.append(("".join(oxygen), "".join(temperature)))
    return seconds


def measure(sectors: int, materialised: bool, text: str, options: QueryOptions) -> tuple[float, float, float, list]:
    """Live, second by second: each second's elements published (and, under entailment, closed
    as they are), then the query evaluated at its PT4S instants once its windows are full.
    (median ms per evaluation, seconds evaluating in all, seconds publishing in all, rows)."""
    store = StreamStore()
    store.background.load(SCHEMA.encode(), ox.RdfFormat.TURTLE, "schema")
    query = compile_query(text)
    evaluator = QueryEvaluator(query, store, options)
    instants = set(report_policy(query).fixed_instants(START + 10 * 1_000_000, START + SECONDS * 1_000_000))
    times, rows, publishing = [], [], 0.0
    for tick, chunks in enumerate(streams(sectors, materialised)):
        started = time.perf_counter()
        for stream, data in zip((OXYGEN, TEMPERATURE), chunks):
            result = store.documents.stage(stream, data.encode(), ox.RdfFormat.TRIG, stream)
            store.publish(stream, result.staged)
            store.advance_watermark(stream, START + (tick + 1) * 1_000_000)
        publishing += time.perf_counter() - started
        instant = START + (tick + 1) * 1_000_000
        if instant in instants:
            started = time.perf_counter()
            evaluation = evaluator.evaluate(instant)
            times.append(time.perf_counter() - started)
            rows.append(sorted(tuple(sorted(r.items())) for r in evaluation.rows))
    return statistics.median(times) * 1000, sum(times), publishing, rows


def element_triples(sectors: int) -> tuple[list, list]:
    """One raw oxygen element's triples and the schema's, as pyoxigraph terms."""
    oxygen, _ = streams(1, False)[0]
    quads = [q for q in ox.parse(oxygen.encode(), format=ox.RdfFormat.TRIG) if q.graph_name != ox.DefaultGraph()]
    schema = [(t.subject, t.predicate, t.object) for t in ox.parse(SCHEMA.encode(), format=ox.RdfFormat.TURTLE)]
    return [(q.subject, q.predicate, q.object) for q in quads if q.graph_name == quads[0].graph_name], schema


def closure_costs(repeat: int = 2000) -> Table:
    """Microseconds to close one element with the schema, per method."""
    table = Table("Closing one element (%d triples) under the schema, microseconds each" % len(element_triples(1)[0]),
                  ["method", "µs / element", "triples out"])
    graph, schema = element_triples(1)
    base = Closure(schema)
    started = time.perf_counter()
    for _ in range(repeat):
        out = element_closure(graph, base)
    table.add("store/entailment.py (Python, over the schema's closure made once)",
              "%.0f" % ((time.perf_counter() - started) / repeat * 1e6), len(out))
    try:
        import rdflib
    except ImportError:
        rdflib = None
    try:
        import owlrl
    except ImportError:
        owlrl = None
    try:
        import reasonable
    except ImportError:
        reasonable = None

    def to_rdflib(term):
        if isinstance(term, ox.NamedNode):
            return rdflib.URIRef(term.value)
        if isinstance(term, ox.BlankNode):
            return rdflib.BNode(term.value)
        if isinstance(term, ox.Literal):
            return rdflib.Literal(term.value, datatype=rdflib.URIRef(term.datatype.value))
        return rdflib.Literal(str(term))        # a triple term: rdflib has none

    def rdflib_graph():
        g = rdflib.Graph()
        for t in graph + schema:
            g.add(tuple(map(to_rdflib, t)))
        return g
    n = max(repeat // 20, 10)
    if rdflib is None or owlrl is None:
        table.add("owlrl (RDFS semantics)", "not installed", "")
    else:
        started = time.perf_counter()
        for _ in range(n):
            g = rdflib_graph()
            owlrl.DeductiveClosure(owlrl.RDFS_Semantics, axiomatic_triples=False).expand(g)
        table.add("owlrl, RDFS semantics (rdflib graph, axioms off; adds rules 4, 6, 8, 10...)",
                  "%.0f" % ((time.perf_counter() - started) / n * 1e6), len(g))
    if rdflib is None or reasonable is None:
        table.add("reasonable (OWL 2 RL)", "not installed", "")
    else:
        started = time.perf_counter()
        for _ in range(n):
            r = reasonable.PyReasoner()
            r.from_graph(rdflib_graph())
            out = r.reason()
        table.add("reasonable, OWL 2 RL (more rules than RDFS's six)",
                  "%.0f" % ((time.perf_counter() - started) / n * 1e6), len(out))
    return table


def run(sector_counts: list[int], methods: bool) -> str:
    out = ["Machine: %s (shared with other work: figures are indicative)\n" % machine()]
    for sectors in sector_counts:
        table = Table("TVS Listing 2 over a 3-level sensor class hierarchy, %d sectors (%d elements/s), COMPUTED "
                      "EVERY PT4S over RANGE 10 s windows, %d s live" % (sectors, 2 * sectors, SECONDS),
                      ["query", "data", "ms / evaluation (median)", "ratio", "s evaluating", "s publishing",
                       "ratio of both", "same rows"])
        ms0, total0, publishing0, rows0 = measure(sectors, True, QUERY, QueryOptions())
        table.add("no entailment", "materialised", "%.1f" % ms0, "1.00", "%.2f" % total0, "%.2f" % publishing0,
                  "1.00", "")
        cases = [("entailment = rdfs", False, QUERY, QueryOptions(entailment="rdfs")),
                 ("entailment = rdfs, incremental off", False, QUERY, QueryOptions(entailment="rdfs", incremental=False))]
        if methods:
            cases += [("rewritten: ?s a ?c VALUES ?c { subclasses }", False, REWRITTEN, QueryOptions()),
                      ("no entailment, incremental off", True, QUERY, QueryOptions(incremental=False))]
        for label, materialised, text, options in cases:
            ms, total, publishing, rows = measure(sectors, materialised, text, options)
            table.add(label, "materialised" if materialised else "raw", "%.1f" % ms, "%.2f" % (ms / ms0),
                      "%.2f" % total, "%.2f" % publishing, "%.2f" % ((total + publishing) / (total0 + publishing0)),
                      "yes" if rows == rows0 else "NO")
        out.append(table.markdown())
    if methods:
        out.append(closure_costs().markdown())
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sectors", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--methods", action="store_true", help="also the other ways entailment could be done")
    args = parser.parse_args()
    publish("entailment_tvs", run(args.sectors, args.methods))


if __name__ == "__main__":
    main()
