"""Which queries are distributive over their window's elements (translator/incremental.py)."""
import pytest

from translator.incremental import distributive_window
from translator.validate import compile_query

PREFIXES = "PREFIX ex: <http://example.org/>\nPREFIX rspu: <http://w3id.org/rsp/rspu#>\n"
WINDOW = "FROM NAMED WINDOW ex:w ON ex:s [RANGE PT4S STEP PT1S]\n"


@pytest.mark.parametrize("query", [
    "SELECT ?o ?v %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v > 1) } } }",
    "SELECT ?o (?v * 2 AS ?d) %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v OPTIONAL { ?o ex:u ?u } } "
    "FILTER(?v > 1) } BIND(?v + 1 AS ?w) }",
    "SELECT * %s WHERE { WINDOW ex:w { GRAPH ?g { { SELECT ?o (COUNT(*) AS ?n) WHERE { ?o ?p ?x } GROUP BY ?o } } } }",
])
def test_queries_whose_results_are_a_union_over_elements(query):
    assert distributive_window(compile_query(PREFIXES + query % WINDOW)) == ("http://example.org/w", "")


@pytest.mark.parametrize("query,why", [
    ("SELECT (COUNT(*) AS ?n) %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }", "aggregate"),
    ("SELECT DISTINCT ?o %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }", "DISTINCT"),
    ("SELECT ?o %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } } ORDER BY ?o", "solution modifiers"),
    ("SELECT ?o %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } GRAPH ?h { ?o ex:u ?u } } }", "one GRAPH"),
    ("SELECT ?o %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } ?g ?p ?t } }", "more than its GRAPH block"),
    ("SELECT ?o %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } ?o ex:room ?r }", "WHERE holds more"),
    ("SELECT ?o %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } FILTER EXISTS { ?o ex:room ?r } }",
     "WHERE holds more"),
    ("SELECT ?o ?t %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } BIND(NOW() AS ?t) }", "NOW() differs"),
    ("SELECT ?o %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v GRAPH ex:bg { ?o ex:u ?u } } } }",
     "reads more than its element"),
    ("CONSTRUCT { ?o ex:v ?v } %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }", "only SELECT"),
    ("SELECT ?o FROM NAMED WINDOW ex:w ON ex:s [RANGE P1D STEP PT0.1S] # instead of %s"
     "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }", "more than 1000 ranges"),
])
def test_queries_that_combine_elements_or_read_outside_them(query, why):
    window, reason = distributive_window(compile_query(PREFIXES + query % WINDOW))
    assert window is None and why in reason
