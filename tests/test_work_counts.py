"""Work counted, not timed (tests/work.py): the store evaluations a fixed workload costs through
every door, for every fast path that saves some (docs/design.md, "Fast paths and the
differential test"). A change that loses a fast path through any door fails here, on any
machine."""
from __future__ import annotations

import json

import pytest

from rspstar.endpoint.cli import main as cli_main
from rspstar.translator.temporal import format_instant
from work import DOORS, EX, PREFIXES, STREAM, S, T0, Work, Workload, elements, rows, run

SENSOR = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S STEP PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:madeBySensor ex:s%d ; sosa:hasSimpleResult ?v } } }
"""
CLOSES = 11        # T0 + 2 s ... T0 + 22 s


def sensor_queries(count: int) -> dict[str, str]:
    return {"q%04d" % k: SENSOR % (k % 10) for k in range(count)}


@pytest.mark.parametrize("door", DOORS)
def test_queries_watching_one_sensor_each_cost_one_querys_evaluations_through_every_door(door, tmp_path):
    one_records, one = run(door, Workload(sensor_queries(1), elements()), tmp_path / "one")
    many_records, many = run(door, Workload(sensor_queries(10), elements()), tmp_path / "many")
    assert len(many_records) == 10 and all(len(r) == CLOSES for r in many_records.values())
    assert rows(many_records["q0000"]) == rows(one_records["q0000"])
    # One evaluation per time range for the ten, as for one: never ten times as many.
    assert one.evaluations > 0 and (many.evaluations, many.elements) == (one.evaluations, one.elements)


RELATIVE = """PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v
FROM NAMED WINDOW <http://example.org/w> ON <http://example.org/stream> [RANGE PT10S STEP PT2S]
WHERE { WINDOW <http://example.org/w> { GRAPH ?g { ?o sosa:madeBySensor <%s> ; sosa:hasSimpleResult ?v } } }
"""


def test_a_relative_iri_read_against_two_files_bases_means_two_iris_and_their_queries_do_not_share(tmp_path):
    # The same text in two folders names two sensors, a/sensor and b/sensor; b/qc.rq differs
    # from a/qa.rq in a constant only, but its <other> is b/other. Each is evaluated with its own
    # base: no range of one serves another.
    files = {"qa": tmp_path / "a" / "qa.rq", "qb": tmp_path / "b" / "qb.rq", "qc": tmp_path / "b" / "qc.rq"}
    for path, local in zip(files.values(), ("sensor", "sensor", "other")):
        path.parent.mkdir(exist_ok=True)
        path.write_text(RELATIVE % local)
    sensors = [(tmp_path / folder / local).as_uri() for folder, local in (("a", "sensor"), ("b", "sensor"), ("b", "other"))]
    items = elements()
    text = [PREFIXES]
    for e in items:
        text.append('ex:e%d prov:generatedAtTime "%s"^^xsd:dateTime .\n' % (e.index, format_instant(T0 + e.ms * 1000)))
        text.append("ex:e%d { ex:o%d sosa:madeBySensor <%s> ; sosa:hasSimpleResult %s . }\n"
                    % (e.index, e.index, sensors[e.index % 3], e.value))
    stream = tmp_path / "stream.trig"
    stream.write_text("".join(text))
    work = Work()
    with work.counting():
        assert cli_main(["replay", *map(str, files.values()), "--stream", "%s=%s" % (STREAM, stream),
                         "--from", format_instant(T0), "--to", format_instant(T0 + 22 * S),
                         "--out-dir", str(tmp_path / "out")]) == 0
    for k, query_id in enumerate(files):
        records = [json.loads(line) for line in (tmp_path / "out" / ("%s.jsonl" % query_id)).read_text().splitlines()]
        assert {b["o"] for r in records for b in r["bindings"]} == {"<%so%d>" % (EX, e.index) for e in items
                                                                      if e.index % 3 == k}
    assert work.evaluations == 3 * CLOSES
