"""Queries that differ only in constants (translator/constants.py): the literals of their
row-wise FILTERs and BINDs as variables bound by a table, one query evaluating them all."""
import re

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
    # A comment between the function's name and its bracket is white space: still a call.
    ('WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?o != IRI # the sensor\n("o1")) } }', True),
    ('WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?o != URI #\n #\n ("o1")) } }', True),
    # The word in a comment or a string, whatever follows it, is no call (and is read at once).
    ('WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?o != "IRI%s") } } # IRI%s\n' % (" " * 200, " #" * 200), False),
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


# -- comparisons with one variable, applied by the group's index (Parameterized.bounds) ----------

@pytest.mark.parametrize("where,bounds", [
    # Each side, any order, through && and parentheses; || or ! keeps a FILTER whole.
    ("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v >= 1 && 2 > ?v) } }", ("v", ">=", "<")),
    ("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER((?v > 1) && (?v <= 2 && STR(?o) != \"a\")) } }", ("v", ">", "<=")),
    ("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v < 1 || ?v > 2) } }", None),
    ("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(!(?v < 1)) } }", None),
    ("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v != 1) } }", None),
    ("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v + 1 < 2 && ?v < ?o) } }", None),
    ("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v = 3) } } FILTER(?v < 9)", ("v", "=", "<")),
    # The variable most compared; a window's FILTER on a variable bound only outside the window
    # compares an unbound variable there (always an error): it stays.
    ("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v ; ex:u ?u FILTER(?u > 1 && ?v > 1 && ?v < 2) } }", ("v", ">", "<")),
    ("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } FILTER(?y > 1) } BIND(?v AS ?y)", None),
    ("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } BIND(?v * 2 AS ?y) FILTER(?y > 1) }", ("y", ">")),
])
def test_which_comparisons_the_group_applies_itself(where, bounds):
    found = parameterized(compile_query(query(where)))
    assert (None if found.bounds is None else (found.bounds.variable, *found.bounds.operators)) == bounds


def test_the_query_without_its_bounds_projects_the_variable_and_keeps_the_other_constants():
    found = parameterized(compile_query(query(
        'WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v >= 0.1 && STR(?o) != "a" && ?v < 2) } }', "SELECT ?o")))
    bounds = found.bounds
    assert bounds.columns == (0, 2) and not bounds.projected and found.constants == ("0.1", '"a"', "2")
    text = bounds.text([('"a"',)])
    assert "SELECT ?__rspc0 ?v ?o" in text and 'VALUES (?__rspc0 ?__rspc2) { (0 "a") }' in text
    assert "FILTER(STR(?o) != ?__rspc2)" in text and "?__rspc1" not in text and "?__rspc3" not in text
    compile_template(parse_query(text), RewriteOptions())


XSD = "http://www.w3.org/2001/XMLSchema#"
VALUES = ['"0.1"^^<%sdecimal>' % XSD, '"0.1"^^<%sdouble>' % XSD, '"0.1"^^<%sfloat>' % XSD,
          '"0.10000000000000001"^^<%sdecimal>' % XSD, '"1"^^<%sinteger>' % XSD, '"1"^^<%sdecimal>' % XSD,
          '"1"^^<%sdouble>' % XSD, '"9007199254740993"^^<%sinteger>' % XSD, '"16777217"^^<%sinteger>' % XSD,
          '"NaN"^^<%sdouble>' % XSD, '"INF"^^<%sdouble>' % XSD, '"-INF"^^<%sfloat>' % XSD, '"-0"^^<%sdouble>' % XSD,
          '"abc"^^<%sinteger>' % XSD, '"1.5"^^<%sinteger>' % XSD, '"1"', '"1"@en', "<http://example.org/x>",
          '"1"^^<http://example.org/t>', '"5"^^<%sint>' % XSD, '"170141183460469231731"^^<%sdecimal>' % XSD,
          '"0.1234567890123456789"^^<%sdecimal>' % XSD, '"99999999999999999999"^^<%sinteger>' % XSD]
CONSTANTS = ["0.1", "0.1e0", '"0.1"^^xsd:float', "1", "1.0", "1e0", '"1"^^xsd:int', "9007199254740992e0",
             "9007199254740992", '"16777216"^^xsd:float', '"NaN"^^xsd:double', '"INF"^^xsd:double', "0", "-0.0e0",
             "0.10000000000000001"]


def test_each_comparison_of_a_value_with_a_constant_is_what_oxigraph_makes_of_it():
    """Decimal against double at 0.1, integer against decimal, floats, integers past a double's
    precision, NaN, infinities, strings, IRIs and ill-typed literals: the index's verdict is the
    store's, for every operator."""
    from rspstar.translator.constants import compares, number_of_term
    store = ox.Store()
    for value in VALUES:
        constants = [(c, parameterized(compile_query(query(
            "WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v < %s) } }" % c))).values[0]) for c in CONSTANTS]
        assert all(number is not None for _, number in constants)
        for operator in ("<", "<=", ">", ">=", "="):
            for written, number in constants:
                found = list(store.query("PREFIX xsd: <%s> SELECT * { VALUES ?v { %s } FILTER(?v %s %s) }"
                                         % (XSD, value, operator, written)))
                mine = number_of_term(value)
                assert (mine is not None and compares(mine, operator, number)) == bool(found), \
                    (value, operator, written)


def test_random_numbers_compare_as_oxigraph_compares_them():
    import random
    from rspstar.translator.constants import compares, number, number_of_term
    rng = random.Random(7)
    kinds = ["integer", "decimal", "double", "float"]

    def drawn():
        kind = rng.choice(kinds)
        whole = rng.choice([0, 1, 3, 16777215, 16777216, 16777217, 2 ** 53 + 1, 10 ** 17 + 3])
        if kind == "integer":
            return str(whole * rng.choice([1, -1])), kind
        return "%s%d.%s" % (rng.choice(["", "-"]), whole, "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 18)))), kind
    store = ox.Store()
    for _ in range(300):
        (a, ka), (b, kb) = drawn(), drawn()
        left, right = '"%s"^^<%s%s>' % (a, XSD, ka), '"%s"^^<%s%s>' % (b, XSD, kb)
        for operator in ("<", "=", ">"):
            found = bool(list(store.query("SELECT * { VALUES (?v ?c) { (%s %s) } FILTER(?v %s ?c) }"
                                          % (left, right, operator))))
            # Values as Oxigraph writes them back (canonical), constants as written.
            [[written]] = [[s["v"]] for s in store.query("SELECT ?v { VALUES ?v { %s } }" % left)]
            mine = number_of_term(str(written))
            assert mine is not None and compares(mine, operator, number(b, XSD + kb)) == found, (left, operator, right)


def element_of(k: int, value, at: int):
    from rspstar.store.rdf_input import Element, instant_literal
    graph = ox.NamedNode("http://example.org/e%d" % k)
    return Element(graph.value, at, instant_literal(at),
                   [ox.Quad(ox.NamedNode("http://example.org/o%d" % k), ox.NamedNode("http://example.org/v"), value, graph)])


def test_a_group_applying_its_bounds_keeps_each_members_rows_at_the_tricky_values(monkeypatch):
    from rspstar.endpoint.engine import sharing
    from rspstar.endpoint.engine.evaluation import QueryEvaluator
    from rspstar.endpoint.engine.sharing import ConstantGroups
    from rspstar.store.stream_store import StreamStore
    from rspstar.translator.temporal import parse_instant
    t0, second = parse_instant("2026-03-01T08:00:00Z"), 1_000_000
    typed = lambda lexical, kind: ox.Literal(lexical, datatype=ox.NamedNode(XSD + kind))     # noqa: E731
    values = {"dec": typed("0.1", "decimal"), "dec17": typed("0.10000000000000001", "decimal"),
              "dbl": typed("0.1", "double"), "flt": typed("0.1", "float"), "one": ox.Literal(1),
              "onedec": typed("1.0", "decimal"), "str": ox.Literal("0.5"), "bad": typed("x", "integer"),
              "nan": typed("NaN", "double"), "inf": typed("INF", "double")}
    store = StreamStore()
    store.add_elements("http://example.org/s", [element_of(k, v, t0 + k * 1000) for k, v in enumerate(values.values())])
    # What each member keeps, worked out from XPath's promotion: integers and decimals exactly;
    # with a double, as doubles (the decimals 0.1 and 0.10000000000000001 are one double); else
    # with a float, as floats (0.1 as a float is above the double 0.1).
    numbers = {"dec", "dec17", "dbl", "flt", "one", "onedec", "inf"}
    expected = {
        "?v = 0.1": {"dec", "dbl", "flt"},
        "?v < 0.10000000000000001": {"dec"},
        "?v <= 0.10000000000000001": {"dec", "dec17", "dbl", "flt"},
        "?v = 0.1e0": {"dec", "dec17", "dbl"},
        "?v > 0.1e0": {"flt", "one", "onedec", "inf"},
        "?v > 0.1": {"dec17", "one", "onedec", "inf"},
        "?v = 1": {"one", "onedec"},                 # an integer equals the decimal 1.0
        "?v >= 1 && ?v < 1.0e0": set(),
        '?v > "-INF"^^xsd:double': numbers,          # not a string, an ill-typed literal, NaN
        '?v < "NaN"^^xsd:double': set(),
        '?v >= "NaN"^^xsd:double': {"nan"},          # a term is >= itself (Oxigraph)
        '?v >= "INF"^^xsd:double': {"inf"},
        '?v > 0 && ?v < "0.1"^^xsd:float': {"dbl"},
        "?v >= 0.1 && ?v <= 1": numbers - {"inf"},
        '"0.5" > ?v && ?v < 1': set(),               # a string constant: all joined in the store
    }
    kinds = {"<http://example.org/o%d>" % k: name for k, name in enumerate(values)}
    # Each beside a member of its shape with other constants, and the group applying its bounds
    # itself from two members on.
    filler = re.compile(r'"[^"]*"\^\^xsd:\w+|(?<![\w."])-?[0-9][0-9.]*(?:[eE][+-]?[0-9]+)?')
    texts = [query("WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(%s) } }" % c, "SELECT ?o")
             for condition in expected for c in (condition, filler.sub("7", condition))]
    monkeypatch.setattr(sharing, "SPLIT_FROM", 2)
    groups = ConstantGroups()
    together = [QueryEvaluator(compile_query(t), store, groups=groups) for t in texts]
    alone = [QueryEvaluator(compile_query(t), store) for t in texts]
    store.advance_watermark("http://example.org/s", t0 + 5 * second)
    rows = [sorted(r["o"] for r in e.evaluate(t0 + 4 * second).rows) for e in together]
    for k, (condition, kept) in enumerate(expected.items()):
        assert {kinds[o] for o in rows[2 * k]} == kept, condition
        group = together[2 * k].r2r.ranges.group
        split = group is not None and group._compiled is not None and group._compiled.split is not None
        assert split is ("0.5" not in condition), condition
    assert rows == [sorted(r["o"] for r in e.evaluate(t0 + 4 * second).rows) for e in alone]
