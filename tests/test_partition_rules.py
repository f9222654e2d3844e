"""Which queries may run partitioned (translator/partition.py): each rule refuses a query that
would give other results per key than over the whole stream, and says which rule."""
import pytest

from rspstar.translator.partition import PartitionError, PartitionKey, check_partitioned
from rspstar.translator.policy import report_policy
from rspstar.translator.validate import compile_query

SOSA = "http://www.w3.org/ns/sosa/"
OX, TEMP = "http://ex.org/oxygen", "http://ex.org/temperature"
KEYS = {OX: PartitionKey(SOSA + "hasFeatureOfInterest"), TEMP: PartitionKey(SOSA + "hasFeatureOfInterest")}
PROLOGUE = """PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX ex: <http://ex.org/>
"""
LISTING_2 = PROLOGUE + """REGISTER STREAM ex:out COMPUTED EVERY PT4S AS
SELECT ?location ?ox ?t
FROM NAMED WINDOW ex:w1 ON ex:oxygen [RANGE PT10S STEP PT1S]
FROM NAMED WINDOW ex:w2 ON ex:temperature [RANGE PT10S STEP PT1S]
WHERE {
  ?location a ex:Sector .
  WINDOW ex:w1 { GRAPH ?g1 { ?o1 sosa:hasSimpleResult ?ox ; sosa:hasFeatureOfInterest ?location . } }
  WINDOW ex:w2 { GRAPH ?g2 { ?o2 sosa:hasSimpleResult ?t ; sosa:hasFeatureOfInterest ?location . FILTER(?t > 30) } }
}"""
ONE = PROLOGUE + """SELECT %s
FROM NAMED WINDOW ex:w ON ex:oxygen [RANGE PT10S STEP PT2S]
WHERE { %s }
%s"""
BLOCK = "WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v ; sosa:hasFeatureOfInterest ?location . } }"


def check(text, variable="?location", keys=KEYS, report="close"):
    query = compile_query(text)
    check_partitioned(query, variable, keys, report_policy(query, report))


def refused(text, rule, **kwargs):
    with pytest.raises(PartitionError) as caught:
        check(text, **kwargs)
    assert caught.value.rule == rule, str(caught.value)
    return str(caught.value)


def test_listing_2_with_background_runs_partitioned():
    # Every form: CONSTRUCT triples and ASK answers unite over the keys as SELECT solutions do.
    check(PROLOGUE + "CONSTRUCT { ?location ex:reading ?v } FROM NAMED WINDOW ex:w ON ex:oxygen "
          "[RANGE PT10S STEP PT2S] WHERE { " + BLOCK + " }")
    check(PROLOGUE + "ASK FROM NAMED WINDOW ex:w ON ex:oxygen [RANGE PT10S STEP PT2S] WHERE { " + BLOCK + " }")
    check(LISTING_2, report="periodic(PT5S)")
    check(LISTING_2, report="close(ex:w2)")
    check(LISTING_2, report="close(ex:w1) and non-empty(ex:w2)")      # the groups say which windows held some
    check(ONE % ("?location (AVG(?v) AS ?mean)", BLOCK, "GROUP BY ?location HAVING (AVG(?v) > 0.1)"))
    check(ONE % ("DISTINCT ?location", BLOCK, ""))
    # A key read as the subject of its predicate, and a second GRAPH block inside OPTIONAL
    # joined on it.
    check(ONE % ("?o ?v", "WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v } "
                          "OPTIONAL { GRAPH ?h { ?o sosa:hasSimpleResult ?w } } }", ""),
          variable="o", keys={OX: PartitionKey(SOSA + "hasSimpleResult", inverse=True)})


def test_each_rule_names_itself():
    assert "GROUP BY ?location" in refused(ONE % ("(AVG(?v) AS ?mean)", BLOCK, ""), "aggregates")
    refused(ONE % ("?o (COUNT(*) AS ?n)", BLOCK, "GROUP BY ?o"), "aggregates")
    refused(ONE % ("DISTINCT ?v", BLOCK, ""), "distinct")
    refused(ONE % ("?location ?v", BLOCK, "ORDER BY ?v"), "modifiers")
    refused(ONE % ("?location ?v", BLOCK, "LIMIT 3"), "modifiers")
    refused(ONE % ("?location", BLOCK, ""), "report", report="content-change")
    refused(LISTING_2, "report", report="close(ex:w1) and content-change(ex:w2)")
    refused(PROLOGUE + "CONSTRUCT { ?location ex:reading ?v } FROM NAMED WINDOW ex:w ON ex:oxygen "
            "[RANGE PT10S STEP PT2S] WHERE { " + BLOCK + " } LIMIT 5", "modifiers")
    refused(PROLOGUE + "ASK FROM NAMED WINDOW ex:w ON ex:oxygen [RANGE PT10S STEP PT2S] "
            "WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:hasSimpleResult ?v } } }", "binds")
    refused(PROLOGUE + "SELECT ?location FROM NAMED WINDOW ex:w ON ex:oxygen [ELEMS 10] WHERE { " + BLOCK + " }",
            "window")
    assert "has no partition key" in refused(ONE % ("?location", BLOCK, ""), "window", keys={TEMP: KEYS[TEMP]})
    # The variable bound only through another predicate, or not in every GRAPH block.
    assert "sosa:hasFeatureOfInterest" not in refused(
        ONE % ("?location", "WINDOW ex:w { GRAPH ?g { ?o sosa:isHostedBy ?location } }", ""), "binds")
    refused(ONE % ("?location", "WINDOW ex:w { GRAPH ?g { ?o sosa:hasFeatureOfInterest ?location } "
                                "OPTIONAL { GRAPH ?h { ?p sosa:hasSimpleResult ?w } } }", ""), "binds")
    refused(ONE % ("?location", "WINDOW ex:w { GRAPH ?g { ?o sosa:hasFeatureOfInterest ?location } "
                                "?x ?y ?z }", ""), "binds")
    refused(ONE % ("?location", "WINDOW ex:w { GRAPH ex:one { ?o sosa:hasFeatureOfInterest ?location } }", ""),
            "binds")
    refused(ONE % ("?location", "OPTIONAL { " + BLOCK + " }", ""), "joins")
    refused(ONE % ("?location", "?location a ex:Sector . SERVICE <http://x.org/sparql> { ?a ?b ?c } " + BLOCK, ""),
            "service")


def test_keys_are_one_step_paths():
    assert PartitionKey.parse("<%shasFeatureOfInterest>" % SOSA) == KEYS[OX]
    assert PartitionKey.parse("^%shasSimpleResult" % SOSA) == PartitionKey(SOSA + "hasSimpleResult", True)
    for bad in ("", "hasFeatureOfInterest", "<a b>", "^", 7):
        with pytest.raises(PartitionError) as caught:
            PartitionKey.parse(bad)
        assert caught.value.rule == "key"
