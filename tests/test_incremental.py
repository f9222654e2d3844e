"""Which queries are distributive over their window's elements (translator/incremental.py)."""
import pytest

from rspstar.translator.incremental import distributive_window, joined_windows
from rspstar.translator.validate import compile_query

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


TWO = "FROM NAMED WINDOW ex:w ON ex:s [RANGE PT4S STEP PT1S]\nFROM NAMED WINDOW ex:x ON ex:t [RANGE PT2S STEP PT1S]\n"


def test_a_join_of_distributive_windows_is_split_into_one_query_per_window():
    query = compile_query(PREFIXES + "SELECT ?o ?u %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v > 1) } } "
                          "WINDOW ex:x { GRAPH ?h { ?o ex:u ?u } } }" % TWO)
    join, why = joined_windows(query)
    assert why == "" and sorted(join.windows) == ["http://example.org/w", "http://example.org/x"]
    assert join.background is None
    for name, part in join.windows.items():
        assert distributive_window(part) == (name, "")
        same = ("stream", "range", "step", "start", "lag", "upper_closed")
        assert [getattr(part.windows[name], f) for f in same] == [getattr(query.windows[name], f) for f in same]
        assert part.body.projected is None


def test_triple_patterns_beside_the_windows_are_a_query_over_the_background():
    query = compile_query(PREFIXES + "SELECT ?o ?r %s WHERE { ?o ex:in ?r . ?r ex:on ex:floor1 . "
                          "WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } ?r ex:kind ex:lab "
                          "WINDOW ex:x { GRAPH ?h { ?o ex:u ?u } } }" % TWO)
    join, why = joined_windows(query)
    assert why == "" and len(join.windows) == 2 and not join.background.windows
    assert join.background.body.projected is None
    assert " ".join(join.background.text.split()).endswith(
        "SELECT * WHERE { ?o ex:in ?r . ?r ex:on ex:floor1 .\n?r ex:kind ex:lab }".replace("\n", " "))


@pytest.mark.parametrize("query,why", [
    ("SELECT ?o %s WHERE { ?o ex:in ex:room . WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } WINDOW ex:x { GRAPH ?h { ?o ex:u ?u } } "
     "FILTER(?o != ex:a) }", "more than WINDOW blocks"),
    ("SELECT ?o %s FROM ex:extra WHERE { ?o ex:in ex:room . WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } "
     "WINDOW ex:x { GRAPH ?h { ?o ex:u ?u } } }", "FROM and FROM NAMED"),
    ("SELECT DISTINCT ?o %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } WINDOW ex:x { GRAPH ?h { ?o ex:u ?u } } }",
     "DISTINCT or REDUCED"),
    ("SELECT (?v + ?u AS ?s) %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } WINDOW ex:x { GRAPH ?h { ?o ex:u ?u } } }",
     "computes expressions"),
    ("SELECT ?o %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } GRAPH ?k { ?o ex:v ?v } } WINDOW ex:x { GRAPH ?h { ?o ex:u ?u } } }",
     "window http://example.org/w: the window holds more than one GRAPH ?g block"),
    ("SELECT ?o %s WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }", "not a join of the query's windows"),
])
def test_joins_that_are_not_split(query, why):
    join, reason = joined_windows(compile_query(PREFIXES + query % TWO))
    assert join is None and why in reason
