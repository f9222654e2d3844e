"""Parser golden tests: the query model of representative queries, and error positions."""
import pytest

from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.model import QueryForm, R2S
from rspstar.translator.parser import parse_query
from rspstar.translator.tokens import SourceText, tokenize
from rspstar.translator.validate import compile_query

P = """PREFIX ex: <http://example.org/>
PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>
"""


def error_of(text: str, compile_: bool = False) -> QuerySyntaxError:
    with pytest.raises(QuerySyntaxError) as info:
        (compile_query if compile_ else parse_query)(text)
    return info.value


def test_tokenizer_respects_strings_iris_comments_and_rdf12_brackets():
    text = '''?s <http://a#b> "x # not a comment" 'y' """long "quoted"
text""" \'\'\'more\'\'\' # a comment { }
<<( ?a ?b ?c )>> << ?a ?b ?c >> {| ex:p 1 |} ex:a/ex:b ?o <= 2'''
    kinds = [(t.kind, t.text) for t in tokenize(SourceText(text))]
    texts = [t for _, t in kinds]
    assert ("STRING", '"x # not a comment"') in kinds
    assert ("STRING", '"""long "quoted"\ntext"""') in kinds
    assert ("STRING", "'''more'''") in kinds
    assert "{" not in texts[:12]  # the braces after '#' are comment text
    for punct in ("<<(", ")>>", "<<", ">>", "{|", "|}", "/", "<="):
        assert punct in texts
    assert ("IRI", "<http://a#b>") in kinds
    assert texts[-1] == ""  # EOF


def test_golden_full_header():
    q = parse_query(P + """REGISTER ISTREAM ex:out/alerts COMPUTED EVERY PT5S AS
SELECT ?s (COUNT(?o) AS ?n)
FROM NAMED WINDOW ex:w1 ON STREAM ex:stream/a [RANGE PT10S STEP PT2.5S START "2026-01-01T00:00:01Z"^^xsd:dateTime]
FROM NAMED WINDOW ex:w2 ON ex:stream/b [RANGE "PT1M"^^xsd:duration TUMBLING]
FROM ex:bg
FROM NAMED ex:profiles
WHERE { WINDOW ex:w1 { GRAPH ?g { ?s ex:p ?o } } WINDOW ?w { GRAPH ?h { ?s ex:q ?o } } }
GROUP BY ?s""")
    assert q.form is QueryForm.SELECT
    assert q.r2s is R2S.ISTREAM
    assert q.output_stream == "http://example.org/out/alerts"
    assert q.computed_every == 5_000_000
    w1, w2 = q.windows["http://example.org/w1"], q.windows["http://example.org/w2"]
    assert (w1.stream, w1.range, w1.step) == ("http://example.org/stream/a", 10_000_000, 2_500_000)
    assert w1.start == 1767225601_000_000
    assert (w2.stream, w2.range, w2.step, w2.start) == ("http://example.org/stream/b", 60_000_000, 60_000_000, 0)
    assert q.from_graphs == ["http://example.org/bg"]
    assert q.from_named_graphs == ["http://example.org/profiles"]
    assert q.body.projected == frozenset({"s", "n"})


@pytest.mark.parametrize("header,r2s,name,out", [
    ("", R2S.RSTREAM, None, None),
    ("REGISTER STREAM ex:o AS ", R2S.RSTREAM, "http://example.org/o", "http://example.org/o"),
    ("REGISTER RSTREAM ex:o AS ", R2S.RSTREAM, "http://example.org/o", "http://example.org/o"),
    ("REGISTER DSTREAM ex:o AS ", R2S.DSTREAM, "http://example.org/o", "http://example.org/o"),
    ("REGISTER QUERY ex:q AS ", R2S.RSTREAM, "http://example.org/q", None),
])
def test_register_forms(header, r2s, name, out):
    q = parse_query(P + header + "SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S] WHERE { WINDOW ex:w { ?a ?b ?c } }")
    assert (q.r2s, q.name, q.output_stream) == (r2s, name, out)
    assert q.windows["http://example.org/w"].step == 1_000_000


def test_r2s_after_construct_and_keywords_are_case_insensitive():
    q = parse_query(P + "construct istream { ?a ?b ?c } from named window ex:w on ex:s [range PT1S step PT1S] "
                        "where { window ex:w { graph ?g { ?a ?b ?c } } }")
    assert q.form is QueryForm.CONSTRUCT and q.r2s is R2S.ISTREAM


def test_register_before_prologue_is_accepted():
    q = parse_query("REGISTER QUERY <http://q> AS " + P + "ASK FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S] WHERE { WINDOW ex:w { } }")
    assert q.form is QueryForm.ASK and q.name == "http://q"


def test_window_at_any_depth():
    q = compile_query(P + """SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S]
WHERE { OPTIONAL { { SELECT ?x WHERE { WINDOW ex:w { GRAPH ?g { ?x ?p ?o } } } } }
        FILTER NOT EXISTS { WINDOW ex:w { ?g ex:t ?t } } }""")
    assert list(q.windows) == ["http://example.org/w"]


@pytest.mark.parametrize("text,line,column,fragment", [
    (P + "SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S]\nWHERE { WINDOW ex:v { ?a ?b ?c } }",
     4, 16, "window <http://example.org/v> is not declared"),
    (P + "SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S]\nFROM NAMED WINDOW ex:w ON ex:t [RANGE PT2S] WHERE { }",
     4, 19, "declared twice"),
    (P + "SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT0S] WHERE { }", 3, 48, "RANGE must be positive"),
    (P + "SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S STEP -PT1S] WHERE { }", 3, 58, "for STEP"),
    (P + "SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE P1M] WHERE { }", 3, 48, "no fixed length"),
    (P + "SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE ten] WHERE { }", 3, 48, "RANGE"),
    (P + 'SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S START "2026-02-30T00:00:00Z"^^xsd:dateTime] WHERE { }',
     3, 59, "START"),
    (P + "SELECT * WHERE { ?a ?b ?c }\nFROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S]", 4, 1, "misplaced FROM"),
    (P + "SELECT * WHERE { ?a ?b ?c . REGISTER }", 3, 29, "misplaced REGISTER"),
    (P + "SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S STEP] WHERE { }", 3, 57, "duration"),
    (P + "SELECT * WHERE { WINDOW ?w { } }", 3, 25, "declares no window"),
    (P + "DESCRIBE ?x WHERE { }", 3, 1, "DESCRIBE is not supported"),
    (P + "SELECT * WHERE { ?a nope:b ?c }", 3, 21, "undeclared prefix 'nope:'"),
    (P + "SELECT * WHERE { ?a ?b ?c ", 3, 16, "never closed"),
    (P + "SELECT * WHERE { ?a ?b ?c\n  FILTER((?c > 3)\n}", 4, 9, "'(' is never closed (found '}')"),
    (P + "SELECT * WHERE { ?a ?b ?c BIND((?c AS ?d) }", 3, 31, "'(' is never closed"),
    (P + "SELECT * WHERE { ?a ?b ?c FILTER(?c > [ }", 3, 39, "'[' is never closed"),
    (P + 'SELECT * WHERE { ?a ?b "open }', 3, 24, "unterminated string"),
])
def test_errors_have_positions(text, line, column, fragment):
    e = error_of(text)
    assert fragment in e.message
    assert (e.line, e.column) == (line, column), str(e)


def test_sparql_errors_found_by_oxigraph_are_mapped_to_the_user_text():
    text = P + """SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S]
WHERE {
  WINDOW ex:w { GRAPH ?g { ?a ex:p ?v } }
  FILTER(?v >< 3)
}"""
    e = error_of(text, compile_=True)
    assert (e.line, e.column) == (6, 3)
    assert "invalid expression" in e.message


def test_unknown_function_is_reported_at_its_call():
    e = error_of(P + "SELECT * WHERE { ?a ?b ?c FILTER(ex:nothing(?c)) }", compile_=True)
    assert "unknown function <http://example.org/nothing>" in e.message
    assert (e.line, e.column) == (3, 34)


WINDOWED = ("PREFIX rspu: <http://w3id.org/rsp/rspu#>\n"
            "SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S]\n"
            "WHERE { WINDOW ex:w { GRAPH ?g { ?s ex:u ?u\n  FILTER(%s) } } }")


@pytest.mark.parametrize("call, message", [
    ("rspu:nothing(?u) > 0", "unknown function <http://w3id.org/rsp/rspu#nothing>"),
    ("rspu:greaterThan(?u, 1, 2) > 0", "rspu:greaterThan takes 2 arguments (a distribution and a value), not 3"),
    ("rspu:between(?u, 1) > 0", "rspu:between takes 3 arguments (a distribution and two values), not 2"),
    ("ex:nothing(?u)", "unknown function <http://example.org/nothing>"),
    ("xsd:integer(?u, 2)", "xsd:integer takes 1 argument, not 2"),
])
def test_a_call_inside_a_window_is_checked_where_it_stands(call, message):
    """A window's pattern is not evaluated when the query is checked (its window is empty), so
    an unknown function or a wrong arity there is found by reading the calls themselves."""
    e = error_of(P + WINDOWED % call, compile_=True)
    assert message in e.message
    assert (e.line, e.column) == (6, 10)


def test_rspu_iris_that_are_not_calls_are_not_functions():
    compile_query(P + WINDOWED % "rspu:add(?u, 1) > 0" + "\n# rspu:nothing(1)")
    compile_query(P + "PREFIX rspu: <http://w3id.org/rsp/rspu#>\nSELECT * WHERE { ?s rspu:uncertainty (1 2) ; "
                  "rspu:unit \"rspu:nothing(1)\" FILTER(rspu:lessThan(rspu:add(?u, 1), 2) > 0.5) }")


def test_conflicting_r2s_is_an_error():
    e = error_of(P + "REGISTER ISTREAM ex:o AS SELECT DSTREAM * WHERE { }")
    assert "conflicts" in e.message


def test_step_larger_than_range_is_legal():
    q = parse_query(P + "SELECT * FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S STEP PT10S] WHERE { }")
    w = q.windows["http://example.org/w"]
    assert w.step > w.range


@pytest.mark.parametrize("base,reference,resolved", [
    # RFC 3986 section 5.4's examples, base http://a/b/c/d;p?q
    ("http://a/b/c/d;p?q", "g:h", "g:h"), ("http://a/b/c/d;p?q", "g", "http://a/b/c/g"),
    ("http://a/b/c/d;p?q", "./g", "http://a/b/c/g"), ("http://a/b/c/d;p?q", "g/", "http://a/b/c/g/"),
    ("http://a/b/c/d;p?q", "/g", "http://a/g"), ("http://a/b/c/d;p?q", "//g", "http://g"),
    ("http://a/b/c/d;p?q", "?y", "http://a/b/c/d;p?y"), ("http://a/b/c/d;p?q", "#s", "http://a/b/c/d;p?q#s"),
    ("http://a/b/c/d;p?q", "", "http://a/b/c/d;p?q"), ("http://a/b/c/d;p?q", "../..", "http://a/"),
    ("http://a/b/c/d;p?q", "../../../g", "http://a/g"), ("http://a/b/c/d;p?q", "g;x=1/../y", "http://a/b/c/y"),
    # An absolute IRI keeps its empty fragment; a base of any scheme resolves.
    ("http://example.org/", "http://www.w3.org/2001/XMLSchema#", "http://www.w3.org/2001/XMLSchema#"),
    ("http://example.org/", "#", "http://example.org/#"),
    ("urn:ex:a/b", "c", "urn:ex:a/c"),
])
def test_relative_iris_resolve_as_rfc_3986_says(base, reference, resolved):
    from rspstar.translator.syntax import resolve_reference
    assert resolve_reference(base, reference) == resolved


def test_a_base_keeps_the_empty_fragment_of_a_prefix_such_as_xsd():
    q = parse_query('BASE <http://example.org/> PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> '
                    'SELECT * FROM NAMED WINDOW <w> ON <s> [RANGE PT2S START "2026-03-01T08:00:00Z"^^xsd:dateTime] '
                    'WHERE { }')
    assert set(q.windows) == {"http://example.org/w"}


VERSIONED = """SELECT ?o FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S] WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }"""


@pytest.mark.parametrize("text", [
    'VERSION "1.2"\n' + P + VERSIONED, P + 'version \'1.2\'\n' + VERSIONED, 'VERSION "1.1" ' + P + VERSIONED,
    'VERSION "1.2-basic"\n' + P + 'VERSION "1.2"\n' + VERSIONED,
    'REGISTER RSTREAM <http://example.org/out> AS\nVERSION "1.2"\n' + P + VERSIONED,
])
def test_a_sparql_12_version_declaration_is_read_in_the_prologue(text):
    query = compile_query(text)
    assert list(query.windows) == ["http://example.org/w"] and query.variables == ("o",)


@pytest.mark.parametrize("text,where,message", [
    ('VERSION "9"\n' + P + VERSIONED, (1, 9), 'VERSION "9": this engine reads SPARQL "1.1", "1.2", "1.2-basic"'),
    ('VERSION """1.2"""\n' + P + VERSIONED, (1, 9), 'expected a version string such as "1.2" after VERSION'),
    ('VERSION 1.2\n' + P + VERSIONED, (1, 9), 'expected a version string'),
    (P + VERSIONED.replace("SELECT", 'SELECT ?v VERSION "1.2"'), (3, 11), "expected WHERE"),
])
def test_a_bad_version_declaration_is_refused_at_its_position(text, where, message):
    error = error_of(text)
    assert (error.line, error.column) == where and message in error.message


def test_the_select_clauses_variables_are_kept_in_order():
    assert compile_query(P + VERSIONED.replace("SELECT ?o", "SELECT ?v (STR(?o) AS ?s) ?o")).variables == ("v", "s", "o")
    assert compile_query(P + VERSIONED.replace("SELECT ?o", "SELECT *")).variables is None
    assert compile_query(P + VERSIONED.replace("SELECT ?o", "ASK")).variables is None


def test_a_projected_variable_neither_grouped_nor_aggregated_is_named():
    # RSP4J's CityBench q12 (SELECT ?service ?p ... GROUP BY ?service): Oxigraph's message named
    # neither the variable nor the rule.
    from rspstar.translator.validate import compile_query
    with pytest.raises(QuerySyntaxError) as info:
        compile_query("PREFIX ex: <http://example.org/>\nSELECT ?s ?p (COUNT(?o) AS ?n)\nFROM NAMED WINDOW ex:w ON ex:s "
                      "[RANGE PT1S]\nWHERE { WINDOW ex:w { ?s ?p ?o } } GROUP BY ?s")
    assert (info.value.line, info.value.column) == (2, 11)
    assert info.value.message.startswith("?p is projected but neither grouped by nor aggregated")
    compile_query("PREFIX ex: <http://example.org/>\nSELECT ?s (COUNT(?o) AS ?n) (SAMPLE(?p) AS ?q)\nFROM NAMED WINDOW "
                  "ex:w ON ex:s [RANGE PT1S]\nWHERE { WINDOW ex:w { ?s ?p ?o } } GROUP BY ?s")
