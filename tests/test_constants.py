"""Queries that differ only in constants (translator/constants.py): the literals of their
row-wise FILTERs and BINDs as variables bound by a table, one query evaluating them all."""
import pyoxigraph as ox
import pytest

from rspstar.translator.constants import parameterized, reads_its_base, without_unread_base
from rspstar.translator.rewrite import RewriteOptions, compile_template
from rspstar.translator.parser import parse_query
from rspstar.translator.validate import compile_query

PREFIXES = ("PREFIX ex: <http://example.org/>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
            "FROM NAMED WINDOW ex:w ON ex:s [RANGE PT4S STEP PT1S]\n")


def query(where: str, select: str = "SELECT ?o ?v") -> str:
    return PREFIXES.replace("FROM NAMED", select + "\nFROM NAMED") + "WHERE { " + where + " }"


def test_queries_differing_in_a_threshold_share_a_key_and_keep_their_constants():
    first = parameterized(compile_query(query("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v < 0.16) } }")))
    second = parameterized(compile_query(query("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v < 0.2) } }")))
    assert first.key == second.key
    assert (first.constants, second.constants) == (("0.16",), ("0.2",))
    other = parameterized(compile_query(query("WINDOW ex:w { GRAPH ?g { ?o ex:u ?v FILTER(?v < 0.16) } }")))
    assert other.key != first.key


def test_queries_differing_in_their_register_clause_or_r2s_share_a_key():
    plain = parameterized(compile_query(query("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v < 1) } }")))
    for head in ("REGISTER STREAM ex:out COMPUTED EVERY PT2S AS SELECT ?o ?v", "SELECT ISTREAM ?o ?v",
                 "REGISTER DSTREAM <http://example.org/other> AS SELECT ?o ?v"):
        text = query("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v < 2) } }", head)
        found = parameterized(compile_query(text))
        assert found.key == plain.key and found.constants == ("2",)


def test_each_literal_form_is_a_constant_and_its_span_is_where_it_is_written():
    text = query('WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v < -1.5e2 && STR(?o) != "a"@en) } '
                 'BIND(?v * "2"^^xsd:integer AS ?w) } FILTER(?w != \'b\')', "SELECT ?o ?w")
    found = parameterized(compile_query(text))
    assert found.constants == ("-1.5e2", '"a"@en', '"2"^^xsd:integer', "'b'")
    assert [text[a:b] for a, b in found.spans] == list(found.constants)


@pytest.mark.parametrize("where,constants", [
    # A FILTER reading the graph's variable stays in the block (there the variable is unbound).
    ("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v > 1) FILTER(STR(?g) != \"x\") } }", ("1",)),
    # Beside OPTIONAL a FILTER in the block is not the same beside it.
    ("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v OPTIONAL { ?o ex:u ?u } FILTER(?v > 1) } }", None),
    # A BIND before the block cannot see a table after it; a BIND in the block keeps its literal.
    ("WINDOW ex:w { BIND(3 AS ?k) GRAPH ?g { ?o ex:v ?v BIND(?v + 2 AS ?z) } FILTER(?v > 4) }", ("4",)),
    ("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } }", None),
    # The objects of the block's own triple patterns, not subjects, predicates or annotations.
    ('WINDOW ex:w { GRAPH ?g { ?o ex:by ex:s1 ; a ex:T ; ex:p/ex:q "x" ; ex:v ?v {| ex:u 3 |} . '
     'ex:k ex:z ?v OPTIONAL { ?o ex:w 4 } } }', ("ex:s1", "ex:T", '"x"')),
])
def test_which_literals_become_variables(where, constants):
    found = parameterized(compile_query(query(where)))
    assert (found.constants if found else None) == constants


def test_dialect_queries_are_left_alone():
    text = ("REGISTER QUERY q AS PREFIX ex: <http://example.org/> SELECT ?o FROM STREAM <http://example.org/s> "
            "[RANGE 4s STEP 1s] WHERE { ?o ex:v ?v FILTER(?v > 1) }")
    assert parameterized(compile_query(text)) is None


def test_the_table_evaluates_each_row_as_its_query_alone():
    texts = [query("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v < %s && ?v != \"%s\") } } FILTER(?v > %s)" % c)
             for c in ((5, "x", 0), (3, "y", 1), (9, "z", 2))]
    found = [parameterized(compile_query(t)) for t in texts]
    store = ox.Store()
    graphs = ["http://example.org/e%d" % k for k in range(10)]
    for k, graph in enumerate(graphs):
        store.add(ox.Quad(ox.NamedNode("http://example.org/o%d" % k), ox.NamedNode("http://example.org/v"),
                          ox.Literal(k), ox.NamedNode(graph)))

    def rows(template, marker=None):
        text = template.instantiate({"http://example.org/w": graphs}, []).text
        return sorted((int(s[marker].value) if marker else None, s["o"].value) for s in store.query(text))

    table = [p.constants for p in found]
    together = rows(compile_template(parse_query(found[0].text(table)), RewriteOptions()), found[0].marker)
    alone = [(k, o) for k, t in enumerate(texts) for _, o in rows(compile_template(compile_query(t), RewriteOptions()))]
    assert together == sorted(alone) and len(together) == 4 + 1 + 6



BASES = ("file:///home/a/q0001.rq", "file:///srv/b/q0002.rq")


@pytest.mark.parametrize("where,reads", [
    # Every IRI in full, or prefixed through a PREFIX written in full: the base is never read.
    ("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v < 0.16) } }", False),
    ("WINDOW ex:w { GRAPH ?g { ?o ex:by <http://example.org/s1> ; ex:v ?v } }", False),
    # A relative IRI anywhere (an object, a datatype), and IRI() or URI() of a string, read it.
    ("WINDOW ex:w { GRAPH ?g { ?o ex:by <s1> ; ex:v ?v } }", True),
    ('WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v != "1"^^<kind>) } }', True),
    ('WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?o != IRI("o1")) } }', True),
    ('WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?o != uri("o1")) } }', True),
])
def test_queries_read_from_two_places_share_a_key_unless_they_read_their_base(where, reads):
    first, second = (parameterized(compile_query(query(where), base=base)) for base in BASES)
    assert reads_its_base(compile_query(query(where), base=BASES[0])) is reads
    assert (first.key == second.key) is not reads
    assert first.base == (BASES[0] if reads else None)


def test_an_absolute_base_of_the_querys_own_is_what_its_relative_iris_read():
    own = "BASE <http://example.org/sensors/>\n" + query("WINDOW ex:w { GRAPH ?g { ?o ex:by <s1> ; ex:v ?v } }")
    first, second = (parameterized(compile_query(own, base=base)) for base in BASES)
    assert first.key == second.key and first.base is None
    # A relative BASE is read against the query's own base; so is a PREFIX written relative.
    for prologue in ("BASE <sensors/>\n", "PREFIX s: <sensors/>\n"):
        found = [compile_query(prologue + query("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } }"), base=b) for b in BASES]
        assert reads_its_base(found[0]) and without_unread_base(found[0]).base == BASES[0]
    unread = compile_query(query("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } }"), base=BASES[0])
    assert without_unread_base(unread).base is None and without_unread_base(unread).text == unread.text
