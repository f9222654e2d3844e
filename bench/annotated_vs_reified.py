"""Workload (c), the RSP-QL* paper's comparison: statement-level metadata as RDF 1.2 annotations versus
RDF reification, for 1 to 10 annotated statements per element: bytes on the wire (TriG) and
query time per evaluation (run by hand: python bench/annotated_vs_reified.py).

Each element holds one observation whose value carries a confidence, plus k - 1 further
statements annotated with a source. The query keeps values whose confidence is >= 0.5,
written once with `<< >>` patterns (annotated data) and once with rdf:subject/predicate/object
(reified data). Result counts are checked to agree before timing.
"""
from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

import pyoxigraph as ox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import PREFIXES, Table, iso, machine, publish  # noqa: E402

from rspstar.endpoint.engine.evaluation import QueryEvaluator  # noqa: E402
from rspstar.store.stream_store import StreamStore  # noqa: E402
from rspstar.translator.temporal import parse_instant  # noqa: E402
from rspstar.translator.validate import compile_query  # noqa: E402
from rspstar.translator.policy import report_policy  # noqa: E402

ELEMENTS = 5000
SECONDS = 50
START = parse_instant("2026-03-01T08:00:00Z")
HEADER = """PREFIX ex: <http://example.org/>
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
SELECT ?o ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT10S STEP PT10S]
"""
ANNOTATED_QUERY = HEADER + """WHERE { WINDOW ex:w { GRAPH ?g {
  ?o ex:value ?v . << ?o ex:value ?v >> ex:confidence ?c . FILTER(?c >= 0.5) } } }"""
REIFIED_QUERY = HEADER + """WHERE { WINDOW ex:w { GRAPH ?g {
  ?o ex:value ?v . ?st rdf:subject ?o ; rdf:predicate ex:value ; rdf:object ?v ; ex:confidence ?c .
  FILTER(?c >= 0.5) } } }"""


def stream(annotations: int, reified: bool) -> str:
    rng = random.Random(annotations)
    t0 = START // 1_000_000
    parts = [PREFIXES, "@prefix rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .\n"]
    for i in range(ELEMENTS):
        stamp = iso(t0, i * SECONDS * 1000 // ELEMENTS)
        value, confidence = rng.randint(50, 130), round(rng.random(), 2)
        statements = [("ex:o%d" % i, "ex:value", str(value), "ex:confidence", str(confidence))]
        statements += [("ex:o%d" % i, "ex:p%d" % k, "ex:x%d" % k, "ex:source", "ex:sensor%d" % (i % 7))
                       for k in range(1, annotations)]
        body = []
        for n, (s, p, o, q, z) in enumerate(statements):
            if reified:
                body.append("%s %s %s . _:st%d rdf:subject %s ; rdf:predicate %s ; rdf:object %s ; %s %s ."
                            % (s, p, o, n, s, p, o, q, z))
            else:
                body.append("%s %s %s {| %s %s |} ." % (s, p, o, q, z))
        parts.append('ex:e%d prov:generatedAtTime "%s"^^xsd:dateTime .\nex:e%d { %s }\n' % (i, stamp, i, " ".join(body)))
    return "".join(parts)


def measure(text: str, query_text: str) -> tuple[float, int]:
    store = StreamStore()
    store.publish("http://example.org/s",
                  store.documents.stage("http://example.org/s", text.encode(), ox.RdfFormat.TRIG, "s.trig").staged)
    evaluator = QueryEvaluator(compile_query(query_text), store)
    times, rows = [], 0
    query = evaluator.query
    for instant in report_policy(query).fixed_instants(START, START + SECONDS * 1_000_000):
        started = time.perf_counter()
        rows += len(evaluator.evaluate(instant).rows)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, rows


def run() -> str:
    table = Table("Annotated (RDF 1.2) vs reified statements, %d elements, RANGE 10 s windows of %d elements"
                  % (ELEMENTS, ELEMENTS * 10 // SECONDS),
                  ["annotated statements per element", "TriG bytes annotated", "TriG bytes reified",
                   "bytes ratio", "ms / window annotated", "ms / window reified", "time ratio", "results agree"])
    for k in (1, 2, 5, 10):
        annotated, reified = stream(k, False), stream(k, True)
        ms_a, rows_a = measure(annotated, ANNOTATED_QUERY)
        ms_r, rows_r = measure(reified, REIFIED_QUERY)
        table.add(k, len(annotated.encode()), len(reified.encode()), "%.2f" % (len(reified) / len(annotated)),
                  ms_a, ms_r, "%.2f" % (ms_r / ms_a), "yes (%d)" % rows_a if rows_a == rows_r else
                  "NO (%d vs %d)" % (rows_a, rows_r))
    return table.markdown()


def main() -> None:
    text = "Machine: %s\n\n%s" % (machine(), run())
    publish("annotated_vs_reified", text)


if __name__ == "__main__":
    main()
