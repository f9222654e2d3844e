"""Nesting is bounded before any parser sees a text: SPARQL and RDF parsers are recursive
(Oxigraph's segfaults the process past a few thousand levels, ours raises RecursionError), so
every construct that nests (brackets, `<<`, `<<(`, `{|`) is counted first, on every route and in
every source, and what is too deep is refused with its position: never a crash, a 500 or a
long wait. (SPARQL's chains of operators and patterns, and what each construct costs the
stack, are test_parser_limits.py's.)"""
import json
import re
import subprocess
import sys

import pytest

from rspstar.store.codec import Payload, decode
from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.nesting import MAX_NESTING, check_nesting

DEEP = 10_000
# Brackets past MAX_NESTING, or (SPARQL) nesting and chaining past the stack budget.
REFUSED = "nested deeper than|nested and chained too deeply"


def nested_triple_terms(depth: int) -> str:
    return "<http://a> <http://b> " * 0 + "<< <http://a> <http://b> " * depth + "<http://c>" + " >>" * depth


def nth(text, token, n):
    """The 1-based column of the n-th `token` in a one-line text."""
    at = -1
    for _ in range(n):
        at = text.index(token, at + 1)
    return at + 1


# The WHERE group's brace is the first level: the 128th `<<` is the 129th.
REIFIED = "SELECT * WHERE { ?s ?p %s }" % ("<< ?a ?b " * 200 + "?c" + " >>" * 200)
TRIPLE_TERMS = "SELECT * WHERE { ?s ?p %s }" % ("<<( ?a ?b " * 200 + "?c" + " )>>" * 200)


@pytest.mark.parametrize("text, column", [
    (REIFIED, nth(REIFIED, "<<", MAX_NESTING)),
    (TRIPLE_TERMS, nth(TRIPLE_TERMS, "<<(", MAX_NESTING)),
    ("INSERT DATA { <http://a> <http://b> <http://c> %s }" % ("{| <http://q> <http://r> " * 200 + "|}" * 200), None),
    ("SELECT * WHERE { ?s ?p %s }" % ("[ <http://p> " * 200 + "]" * 200), None),
    ("SELECT * WHERE { " + "{ " * 100 + "?s ?p << ?a ?b " * 28 + "?c" + " >>" * 28 + " }" * 100 + " }", None),
])
def test_every_nesting_construct_is_counted(text, column):
    with pytest.raises(QuerySyntaxError, match="nested deeper than %d" % MAX_NESTING) as e:
        check_nesting(text)
    if column is not None:
        assert (e.value.line, e.value.column) == (1, column)


def test_what_does_not_nest_is_not_counted():
    # Comparisons, IRIs, strings and comments hold '<', '{', '[' and '<<' without nesting.
    deep_text = '"%s" # %s\n' % ("<< {| [ ( {" * 300, "<< {" * 300)
    check_nesting("SELECT * WHERE { ?s ?p ?o FILTER(?o < 3 && ?o <= 4 && ?o >= 1) } # <<<<\n" + deep_text)
    check_nesting("PREFIX ex: <http://example.org/> SELECT * WHERE { ?s ex:p '''%s''' }" % ("[" * 500))
    check_nesting("SELECT * WHERE { %s }" % " ".join("<< ?s ?p ?o%d >> ?q ?z ." % k for k in range(1000)))


@pytest.mark.parametrize("as_bytes", [False, True])
def test_many_shallow_elements_pass_and_a_deep_one_after_them_is_found_on_its_line(as_bytes):
    shallow = "".join('<http://g%d> { <http://s> <http://p> "é" {| <http://q> "(" |} }\n' % k for k in range(2000))
    deep = '<http://x> { <http://s> <http://p> %s }\n' % ("<< <http://a> <http://b> " * 200 + "<http://c>" + " >>" * 200)
    encode = (lambda t: t.encode()) if as_bytes else (lambda t: t)
    check_nesting(encode(shallow))
    with pytest.raises(QuerySyntaxError, match="nested deeper") as e:
        check_nesting(encode(shallow + deep + shallow))
    # The deep line's `{` is the first level: its 128th `<<` the 129th.
    assert (e.value.line, e.value.column) == (2001, nth(deep, "<<", MAX_NESTING))


def test_a_dialect_query_is_refused_before_it_is_translated(monkeypatch):
    import rspstar.translator.validate as validate

    def never(*args, **kwargs):
        raise AssertionError("translated before the nesting was checked")

    monkeypatch.setattr(validate, "translate", never)
    with pytest.raises(QuerySyntaxError, match=REFUSED):
        validate.compile_query("SELECT * FROM STREAM <http://s> [RANGE 1s] WHERE " + "{" * 100_000 + "}" * 100_000)


def test_rdf_input_nested_too_deep_is_rejected_with_its_line():
    trig = ('@prefix prov: <http://www.w3.org/ns/prov#> .\n<http://e> prov:generatedAtTime '
            '"2026-03-01T08:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
            "<http://e> { <http://a> <http://b> %s . }\n" % nested_triple_terms(300))
    decoded = decode(Payload("http://s", "trig", "in.trig", trig, 0))
    assert not decoded.elements and decoded.rejected[0].line == 3
    assert "nested deeper than" in decoded.rejected[0].reason
    envelope = json.dumps({"time": "2026-03-01T08:00:00Z", "data": "<http://a> <http://b> %s ." % nested_triple_terms(300)})
    rejected = decode(Payload("http://s", "jsonl", "in.jsonl", envelope, 0, line=1)).rejected
    assert rejected and "nested deeper than" in rejected[0].reason


# Each request runs in a process of its own: without the check, Oxigraph's parser takes the
# whole process down, which must show here as a failure, not end the test run.
PROBE = r"""
import json, sys
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import Runner, EngineConfig
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.store.stream_store import StreamStore
import tempfile, pathlib
landing = pathlib.Path(tempfile.mkdtemp())
app = create_app(Runner(StreamStore(), VirtualClock(0), EngineConfig()),
                 HttpSettings(token=None, max_body=1 << 24, landing_dir=landing))
client = app.test_client()
method, path, content_type, body = json.loads(sys.stdin.read())
response = client.open(path, method=method, data=body.encode(), content_type=content_type)
print(json.dumps([response.status_code, response.get_json()]))
"""


def run_probe(method, path, content_type, body):
    done = subprocess.run([sys.executable, "-c", PROBE], input=json.dumps([method, path, content_type, body]),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, "the server process died (%d): %s" % (done.returncode, done.stderr[-1000:])
    return json.loads(done.stdout)


@pytest.mark.parametrize("method, path, content_type, body", [
    ("POST", "/update", "application/sparql-update",
     "INSERT DATA { <http://a> <http://b> %s }" % nested_triple_terms(DEEP)),
    ("POST", "/sparql", "application/sparql-query",
     "SELECT * WHERE { ?s ?p %s }" % nested_triple_terms(DEEP)),
    ("POST", "/queries", "application/sparql-query",
     "SELECT * FROM NAMED WINDOW <http://w> ON <http://s> [RANGE PT1S] WHERE { WINDOW <http://w> { GRAPH ?g "
     "{ ?s ?p %s } } }" % nested_triple_terms(DEEP)),
    ("POST", "/streams?stream=http://s", "application/trig",
     '<http://e> <http://www.w3.org/ns/prov#generatedAtTime> "2026-03-01T08:00:00Z"^^'
     "<http://www.w3.org/2001/XMLSchema#dateTime> .\n<http://e> { <http://a> <http://b> %s . }"
     % nested_triple_terms(DEEP)),
    ("POST", "/queries", "application/sparql-query", "SELECT * WHERE " + "{" * 100_000 + "}" * 100_000),
])
def test_a_text_nested_too_deep_is_a_400_on_every_route_and_the_server_lives(method, path, content_type, body):
    status, answer = run_probe(method, path, content_type, body)
    assert status == 400 and re.search(REFUSED, answer["message"]), answer


def test_a_recursion_error_anywhere_is_a_client_error_not_a_500(client, monkeypatch):
    from conftest import REPO  # noqa: F401  (the fixtures' module)
    from http_app import AUTH
    engine = client.application.extensions["rspstar"].engine

    def recurse(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(engine, "register", recurse)
    response = client.post("/queries", data="SELECT * WHERE { }", content_type="application/sparql-query",
                           headers=AUTH)
    assert response.status_code == 400 and "nested too deeply" in response.get_json()["message"]


# Strings as they were first written: one alternation step per character. The tokenizers write
# them unrolled (faster on large documents); both must find the same tokens at the same places.
_PLAIN_STRINGS = (r'''"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'(?:[^'\\]|\\.|'(?!''))*\'\'\''''
                  r'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*' ''').rstrip()


def test_unrolled_strings_tokenize_every_text_as_the_plain_alternation_does():
    import random
    from rspstar.translator import nesting
    plain = re.compile(_PLAIN_STRINGS + nesting._PATTERN[len(nesting._STRINGS):], re.S)
    assert nesting._PATTERN.startswith(nesting._STRINGS) and plain.pattern != nesting._TOKEN.pattern
    pieces = ['"', "'", "\\", "\n", "\r", "#", "<", ">", "(", ")", "[", "]", "{", "}", "|", "^", "`", " ", "a",
              '"""', "'''", "<<", ">>", "{|", "|}", "<<(", ")>>", '\\"', "\\'", "é", "ex:a"]
    draw = random.Random(49)
    for _ in range(20_000):
        text = "".join(draw.choice(pieces) for _ in range(draw.randint(0, 40)))
        spans = [(m.span(), m.group()) for m in plain.finditer(text)]
        assert [(m.span(), m.group()) for m in nesting._TOKEN.finditer(text)] == spans, text
        assert nesting._TOKEN_BYTES.findall(text.encode()) == [t.encode() for _, t in spans], text
    # And the SPARQL tokenizer, token by token and kind by kind.
    assert nesting._STRINGS in nesting._SPARQL.pattern
    sparql = re.compile(nesting._SPARQL.pattern.replace(nesting._STRINGS, _PLAIN_STRINGS), nesting._SPARQL.flags)
    for _ in range(20_000):
        text = "".join(draw.choice(pieces + ["?x", "FILTER", "1.5", "+2", "!", "||", "."]) for _ in range(draw.randint(0, 40)))
        expected = [(m.span(), m.lastgroup) for m in sparql.finditer(text)]
        assert [(m.span(), m.lastgroup) for m in nesting._SPARQL.finditer(text)] == expected, text
