"""Queries that differ only in constants take the syntax tree of one parsed before
(translator/variants.py): what compiling a text so gives is what parsing it gives, field for
field, and so are the errors; and a group member's constants read from its shape's query are
the ones working them out gives (translator/constants.py `parameterized`).

The texts: every query file of the conformance cases and of other engines' suites
(tests/conformance), each with its constants changed one at a time and all together, read
against another base; and texts made to fall outside the rules."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from differential.strategies import bound_cases, queries

from rspstar.translator.constants import parameterized, reads_its_base, without_unread_base
from rspstar.translator.errors import TranslatorError
from rspstar.translator.incremental import distributive_window
from rspstar.translator.tokens import IRI, NUMBER, PNAME, STRING, SourceText, Tokens, tokenize
from rspstar.translator.validate import compile_query
from rspstar.translator.variants import CompiledShapes

HERE = Path(__file__).parent
QUERY_FILES = sorted((HERE / "conformance").rglob("*.rq"))
BASE, OTHER_BASE = "file:///queries/a/q.rq", "file:///queries/b/elsewhere.rq"


def canonical(value):
    """A compiled query as plain values: its text, tokens and every field of its tree."""
    if isinstance(value, SourceText):
        return ("source", value.text)
    if isinstance(value, Tokens):
        return ("tokens", tuple(value.rows))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__,) + tuple((f.name, canonical(getattr(value, f.name)))
                                               for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return ("dict",) + tuple(sorted((repr(k), canonical(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return ("set",) + tuple(sorted(map(repr, value)))
    return value


def outcome(text: str, base: str | None, shapes: CompiledShapes | None = None):
    try:
        return canonical(compile_query(text, base=base, shapes=shapes))
    except TranslatorError as e:
        return ("error", type(e).__name__, str(e))


# Other spellings of a constant, by the kind of its first token: longer and shorter than most,
# a long string running over lines (what follows it moves down), a number with a sign.
OTHERS = {
    NUMBER: ("123456.75", "-2", "1e3"),
    STRING: ('"an other value"', "'''two\nlines'''", '""'),
    IRI: ("<http://example.org/elsewhere/a/longer/name>", "<urn:x>"),
}


def constants_of(query) -> list[int]:
    """The tokens of the query's constants (their first), as its group would read them."""
    if query.body is None or distributive_window(query)[0] is None:
        return []
    shared = parameterized(query)
    if shared is None:
        return []
    starts = {tok.offset: k for k, tok in enumerate(query.body.tokens)}
    return [starts[start] for start, _ in shared.spans]


def variants(text: str, tokens: list, at: list[int]) -> list[str]:
    """`text` with the constants at tokens `at` spelled otherwise: one at a time, then all."""
    def spelled(changes: dict[int, str]) -> str:
        out, last = [], 0
        for k in sorted(changes):
            out += [text[last:tokens[k].offset], changes[k]]
            last = tokens[k].end
        return "".join(out) + text[last:]

    def others(k: int) -> tuple[str, ...]:
        tok = tokens[k]
        if tok.kind == PNAME:
            return (tok.text.partition(":")[0] + ":other_one9",)
        return OTHERS[tok.kind]
    found = [spelled({k: other}) for k in at for other in others(k)]
    if len(at) > 1:
        found.append(spelled({k: others(k)[0] for k in at}))
    return found


def test_the_corpus_holds_queries_with_constants():
    with_constants = sum(1 for path in QUERY_FILES if _constants_in(path.read_text()))
    assert len(QUERY_FILES) > 300 and with_constants >= 5, (len(QUERY_FILES), with_constants)


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.one_of(queries("distributive"), bound_cases().map(lambda case: case.query)))
def test_drawn_queries_differing_in_constants_compile_as_parsing_them_does(drawn):
    # The differential test's queries (tests/differential): FILTERs, BINDs, bounds spelled
    # every way, patterns with constant objects, under every option.
    text = drawn.text()
    try:
        first = compile_query(text, base=BASE)
    except TranslatorError:
        return
    tokens = tokenize(SourceText(text))
    for other in [text] + variants(text, tokens, constants_of(first)):
        shapes = CompiledShapes()
        compile_query(text, base=BASE, shapes=shapes)
        assert outcome(other, OTHER_BASE, shapes) == outcome(other, OTHER_BASE), other
        try:
            query = without_unread_base(compile_query(other, base=OTHER_BASE, shapes=shapes))
        except TranslatorError:
            continue
        if constants_of(query):
            assert shapes.parameterized(query) == parameterized(query), other


def _constants_in(text: str) -> list[int]:
    try:
        return constants_of(compile_query(text, base=BASE))
    except TranslatorError:
        return []


@pytest.mark.parametrize("path", QUERY_FILES, ids=lambda p: str(p.relative_to(HERE)))
def test_a_text_differing_in_constants_compiles_as_parsing_it_does(path):
    text = path.read_text()
    try:
        first = compile_query(text, base=BASE)
    except TranslatorError:
        return      # (a case refusing its query: nothing is kept from it)
    at = constants_of(first)
    texts = [text] + variants(text, tokenize(SourceText(text)), at)
    for base in (BASE, OTHER_BASE):
        for other in texts:
            shapes = CompiledShapes()
            compile_query(text, base=BASE, shapes=shapes)
            assert outcome(other, base, shapes) == outcome(other, base), (other, base)
            reused = shapes.reused
            apart = reads_its_base(first) or any(w.reads_facts for w in first.windows.values())
            if first.dialect == "rspql" and (base == BASE or not apart):
                # Read from the first one's tree (a dialect's query is its translation's, and
                # the ones the rules send to the parser are below).
                assert reused == 1 or outcome(other, base)[0] == "error", (other, base)


@pytest.mark.parametrize("path", [p for p in QUERY_FILES if _constants_in(p.read_text())],
                         ids=lambda p: str(p.relative_to(HERE)))
def test_a_members_constants_read_from_its_shape_are_the_ones_worked_out(path):
    text = path.read_text()
    tokens = tokenize(SourceText(text))
    shapes = CompiledShapes()
    first = compile_query(text, base=BASE, shapes=shapes)
    for other in [text] + variants(text, tokens, constants_of(first)):
        try:
            query = without_unread_base(compile_query(other, base=OTHER_BASE, shapes=shapes))
        except TranslatorError:
            continue
        found = shapes.parameterized(query)
        assert found is not None and found == parameterized(query), other


SENSOR = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON ex:stream [RANGE PT10S STEP PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o sosa:madeBySensor %s ; sosa:hasSimpleResult ?v
  FILTER(?v > %s) } } } # %s
"""


def compiled_after_first(text: str, base: str = BASE, first: str = SENSOR % ("ex:s1", "10", "")):
    shapes = CompiledShapes()
    compile_query(first, base=BASE, shapes=shapes)
    return outcome(text, base, shapes), outcome(text, base), shapes


@pytest.mark.parametrize("text, reused", [
    (SENSOR % ("ex:s2", "20", ""), True),
    (SENSOR % ("<http://example.org/s2>", "20", ""), False),       # a constant of another kind
    (SENSOR % ("other:s2", "20", ""), False),                      # another prefix: not declared
    (SENSOR % ("<s2>", "20", ""), False),                          # relative: resolved against the base
    (SENSOR % ("ex:s2", "20", "a comment after the constants"), True),
    ("# a line first\n" + SENSOR % ("ex:s2", "20", ""), False),    # what stands before it moved
    (SENSOR.replace("ex:w ON", "ex:w  ON") % ("ex:s2", "20", ""), False),
])
def test_a_text_is_read_from_the_first_ones_tree_only_within_the_rules(text, reused):
    given, parsed, shapes = compiled_after_first(text)
    assert given == parsed
    assert shapes.reused == int(reused)


def test_a_constant_oxigraph_refuses_is_refused_as_parsing_refuses_it():
    # (The escape \q is a string to the tokenizer, not to Oxigraph.)
    given, parsed, shapes = compiled_after_first(SENSOR % ('"\\q"', "20", ""), first=SENSOR % ('"a"', "10", ""))
    assert given[0] == "error" and given == parsed and shapes.reused == 1


def test_a_query_reading_its_base_is_read_from_another_ones_tree_only_against_the_same_base():
    relative = SENSOR.replace("PREFIX ex: <http://example.org/>", "PREFIX ex: <x/>")
    for base, reused in ((BASE, 1), (OTHER_BASE, 0)):
        given, parsed, shapes = compiled_after_first(relative % ("ex:s2", "20", ""), base,
                                                     first=relative % ("ex:s1", "10", ""))
        assert given == parsed and shapes.reused == reused, base


def test_a_query_not_reading_its_base_is_read_from_another_ones_tree_against_any_base():
    declared = "BASE <http://example.org/base/>\n" + SENSOR.replace("ex:stream", "<stream>")
    for base in (BASE, OTHER_BASE, None):
        given, parsed, shapes = compiled_after_first(declared % ("ex:s2", "20", ""), base,
                                                     first=declared % ("ex:s1", "10", ""))
        assert given == parsed and shapes.reused == 1, base


def test_a_members_constants_are_worked_out_again_where_its_text_differs_elsewhere():
    # The same tree (the comment is no token), but the group's text holds the comment.
    shapes = CompiledShapes()
    compile_query(SENSOR % ("ex:s1", "10", ""), base=BASE, shapes=shapes)
    commented = without_unread_base(compile_query(SENSOR % ("ex:s2", "20", "aside"), base=BASE, shapes=shapes))
    assert shapes.reused == 1
    assert shapes.parameterized(commented) is None and parameterized(commented) is not None
    plain = without_unread_base(compile_query(SENSOR % ("ex:s2", "20", ""), base=BASE, shapes=shapes))
    assert shapes.parameterized(plain) == parameterized(plain)


def test_a_translations_constants_are_never_read_from_a_shape():
    # A dialect's query is read through its translation, whose text says less than the query
    # (windows merged into its default graph): parameterized leaves it alone, and so do shapes.
    shapes = CompiledShapes()
    query = without_unread_base(compile_query(SENSOR % ("ex:s1", "10", ""), base=BASE, shapes=shapes))
    assert shapes.parameterized(query) is not None
    for translated in (dataclasses.replace(query, dialect="csparql"),
                       dataclasses.replace(query, merged_windows=("http://example.org/w",))):
        assert shapes.parameterized(translated) is None and parameterized(translated) is None


def test_shapes_are_kept_up_to_their_capacity_the_least_recently_read_going():
    shapes = CompiledShapes(capacity=2)
    texts = [SENSOR.replace("?v", "?v%d" % k) % ("ex:s1", "10", "") for k in range(3)]
    for text in texts:
        compile_query(text, base=BASE, shapes=shapes)
    compile_query(texts[0].replace("ex:s1", "ex:s9"), base=BASE, shapes=shapes)     # gone: parsed
    compile_query(texts[2].replace("ex:s1", "ex:s9"), base=BASE, shapes=shapes)     # kept: reused
    assert (shapes.parsed, shapes.reused) == (4, 1)
