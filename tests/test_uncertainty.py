"""rspu: functions against independent numerical references (scipy integration written out
here, and Monte Carlo with a tolerance from its standard error), edge cases and errors."""
import math
import traceback

import numpy as np
import pyoxigraph as ox
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from scipy import integrate, stats

from rspstar.translator.uncertainty import Distribution, FunctionLibrary, UncertaintyError, default_families
from rspstar.translator.uncertainty.functions import _ON_VALUES, FUSED_PREFIX

RSPU = "http://w3id.org/rsp/rspu#"
XSD = "http://www.w3.org/2001/XMLSchema#"
TOL = 1e-9


def dist(text):
    return ox.Literal(text, datatype=ox.NamedNode(RSPU + "distribution"))


def num(x, datatype="double"):
    return ox.Literal(repr(float(x)) if datatype == "double" else str(x), datatype=ox.NamedNode(XSD + datatype))


@pytest.fixture(scope="module")
def lib():
    library = FunctionLibrary()
    return {name.value[len(RSPU):]: fn for name, fn in library.table.items()}


def prob(literal):
    assert literal is not None and literal.datatype.value == XSD + "double"
    return float(literal.value)


def parse(literal):
    return default_families().parse(literal.value)


def frozen(d: Distribution):
    """The scipy.stats distribution of an N or U literal (an independent implementation)."""
    if not d.uniforms:
        return stats.norm(d.mu, math.sqrt(d.variance))
    (a, b), = d.uniforms
    return stats.uniform(a, b - a)


def convolution_cdf(a, b, x: float) -> float:
    """P(A + B <= x) = ∫ f_A(u) F_B(x - u) du, by adaptive quadrature with the kinks split,
    integrating over the narrower of the two so the integrand has no sharp step."""
    if a.std() > b.std():
        a, b = b, a
    lo, hi = a.ppf(1e-15), a.isf(1e-15)
    inner = [x - p for p in (b.ppf(0), b.isf(0), b.mean()) if math.isfinite(p)]
    edges = sorted({lo, hi} | {p for p in inner if lo < p < hi})
    return sum(integrate.quad(lambda u: a.pdf(u) * b.cdf(x - u), l, h, epsabs=1e-13, epsrel=1e-12, limit=200)[0]
               for l, h in zip(edges, edges[1:]))


means = st.floats(-50, 50, allow_nan=False)
variances = st.floats(1e-4, 25, allow_nan=False)
widths = st.floats(1e-2, 10, allow_nan=False)
numbers = st.floats(-60, 60, allow_nan=False)


@st.composite
def normals(draw):
    return "N(%r, %r)" % (draw(means), draw(variances))


@st.composite
def uniforms(draw):
    a = draw(means)
    return "U(%r, %r)" % (a, a + draw(widths))


@given(normals() | uniforms(), numbers)
def test_comparisons_with_numbers_match_scipy(d_text, x):
    library = FunctionLibrary()
    fns = {n.value[len(RSPU):]: f for n, f in library.table.items()}
    d = default_families().parse(d_text)
    frozen = (stats.norm(d.mu, math.sqrt(d.variance)) if not d.uniforms
              else stats.uniform(d.uniforms[0][0], d.uniforms[0][1] - d.uniforms[0][0]))
    assert prob(fns["lessThan"](dist(d_text), num(x))) == pytest.approx(frozen.cdf(x), abs=TOL)
    assert prob(fns["greaterThan"](dist(d_text), num(x))) == pytest.approx(frozen.sf(x), abs=TOL)
    lo, hi = sorted((x, x + 1.5))
    assert prob(fns["between"](dist(d_text), num(lo), num(hi))) == pytest.approx(frozen.cdf(hi) - frozen.cdf(lo), abs=TOL)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(normals() | uniforms(), normals() | uniforms())
def test_distribution_against_distribution_matches_numerical_convolution(a_text, b_text):
    library = FunctionLibrary()
    fns = {n.value[len(RSPU):]: f for n, f in library.table.items()}
    a, b = default_families().parse(a_text), default_families().parse(b_text)
    # P(A > B) = ∫ f_B(y) (1 - F_A(y)) dy, integrated here independently with scipy.stats.
    fa = stats.norm(a.mu, math.sqrt(a.variance)) if not a.uniforms else stats.uniform(a.uniforms[0][0], a.uniforms[0][1] - a.uniforms[0][0])
    fb = stats.norm(b.mu, math.sqrt(b.variance)) if not b.uniforms else stats.uniform(b.uniforms[0][0], b.uniforms[0][1] - b.uniforms[0][0])
    lo, hi = fb.ppf(1e-15), fb.isf(1e-15)
    edges = sorted({lo, hi} | {p for p in (fa.ppf(1e-15), fa.isf(1e-15), fa.mean()) if lo < p < hi})
    expected = sum(integrate.quad(lambda y: fb.pdf(y) * fa.sf(y), l, h, epsabs=1e-13, limit=200)[0]
                   for l, h in zip(edges, edges[1:]))
    assert prob(fns["greaterThan"](dist(a_text), dist(b_text))) == pytest.approx(expected, abs=1e-9)
    assert prob(fns["lessThan"](dist(a_text), dist(b_text))) == pytest.approx(1 - expected, abs=1e-9)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(normals() | uniforms(), normals() | uniforms(), numbers)
def test_sums_have_the_cdf_of_the_convolution(a_text, b_text, x):
    library = FunctionLibrary()
    fns = {n.value[len(RSPU):]: f for n, f in library.table.items()}
    a, b = frozen(default_families().parse(a_text)), frozen(default_families().parse(b_text))
    x = a.mean() + b.mean() + (x / 60) * 4 * math.sqrt(a.var() + b.var())
    total = fns["add"](dist(a_text), dist(b_text))
    assert prob(fns["lessThan"](total, num(x))) == pytest.approx(convolution_cdf(a, b, x), abs=1e-9)
    difference = fns["subtract"](dist(a_text), dist(b_text))
    neg_b = stats.norm(-b.mean(), b.std()) if b.dist.name == "norm" else stats.uniform(-b.isf(0), b.isf(0) - b.ppf(0))
    assert prob(fns["lessThan"](difference, num(x))) == pytest.approx(convolution_cdf(a, neg_b, x), abs=1e-9)


def test_sum_of_three_parts_matches_monte_carlo(lib):
    rng = np.random.default_rng(11)
    n = 4_000_000
    samples = rng.normal(1, 0.5, n) + rng.uniform(0, 1, n) + rng.uniform(-2, 0.5, n)
    total = lib["add"](lib["add"](dist("N(1, 0.25)"), dist("U(0, 1)")), dist("U(-2, 0.5)"))
    for x in (-0.5, 0.3, 1.0, 2.2):
        estimate = np.mean(samples < x)
        standard_error = math.sqrt(estimate * (1 - estimate) / n)
        assert abs(prob(lib["lessThan"](total, num(x))) - estimate) < 5 * standard_error


def test_closed_forms_of_add_and_subtract(lib):
    assert parse(lib["add"](dist("N(0.0, 4.7e-05)"), num("0.183", "decimal"))) == Distribution(0.183, 4.7e-05)
    assert parse(lib["add"](dist("N(1, 2)"), dist("N(3, 4)"))) == Distribution(4.0, 6.0)
    assert parse(lib["subtract"](dist("N(1, 2)"), dist("N(3, 4)"))) == Distribution(-2.0, 6.0)
    assert lib["add"](dist("U(-0.5, 0.5)"), num(18, "integer")).value == "U(17.5, 18.5)"
    assert lib["subtract"](dist("U(1, 2)"), dist("U(0, 1)")).value == "NU(0.0, 0.0, 1.0, 2.0, -1.0, 0.0)"
    assert lib["subtract"](dist("U(0, 1)"), num(2)).value == "U(-2.0, -1.0)"


def test_results_outside_n_and_u_are_literals_every_function_accepts(lib):
    trapezoid = lib["add"](dist("U(0, 1)"), dist("U(0, 2)"))
    normal_uniform = lib["add"](dist("N(0, 1)"), dist("U(-1, 1)"))
    for d in (trapezoid, normal_uniform):
        assert lib["add"](d, num(1)) is not None
        assert lib["subtract"](d, d) is not None
        for f in ("greaterThan", "lessThan"):
            assert 0 <= prob(lib[f](d, num(0.5))) <= 1
            assert 0 <= prob(lib[f](d, dist("N(0, 1)"))) <= 1
        assert 0 <= prob(lib["between"](d, num(0), d)) <= 1
    # U(0,1)+U(0,2) is a trapezoid: P(S < 1) = 1/4 exactly.
    assert prob(lib["lessThan"](trapezoid, num(1))) == pytest.approx(0.25, abs=1e-12)


def test_between_with_distribution_bounds_matches_monte_carlo(lib):
    rng = np.random.default_rng(7)
    n = 2_000_000
    d = rng.normal(0, 1, n)
    lo = rng.normal(-1, 1, n)
    hi = rng.uniform(0, 2, n)
    estimate = np.mean((lo < d) & (d < hi))
    standard_error = math.sqrt(estimate * (1 - estimate) / n)
    exact = prob(lib["between"](dist("N(0, 1)"), dist("N(-1, 1)"), dist("U(0, 2)")))
    assert abs(exact - estimate) < 5 * standard_error  # 5 standard errors: a false alarm is < 1e-6
    # With one bound a number it must agree with the closed form of the other case.
    assert prob(lib["between"](dist("N(0, 1)"), num(-1), dist("N(1, 1e-12)"))) == pytest.approx(
        stats.norm.cdf(1) - stats.norm.cdf(-1), abs=1e-7)


def test_edge_cases(lib):
    assert prob(lib["greaterThan"](dist("N(0, 1)"), num(40))) == 0.0
    assert prob(lib["greaterThan"](dist("N(0, 1e6)"), num(0))) == pytest.approx(0.5, abs=TOL)
    assert prob(lib["lessThan"](dist("N(0, 1e-12)"), num(1e-7))) == pytest.approx(stats.norm.cdf(0.1), abs=TOL)
    assert prob(lib["between"](dist("N(0, 1)"), num(2), num(1))) == 0.0
    assert prob(lib["between"](dist("U(0, 1)"), num(0.25), num(0.25))) == 0.0
    assert prob(lib["greaterThan"](dist("U(0, 1)"), num(1))) == 0.0
    assert prob(lib["lessThan"](dist("U(0, 1)"), ox.Literal("INF", datatype=ox.NamedNode(XSD + "double")))) == 1.0
    assert prob(lib["greaterThan"](dist("U(0, 1e-9)"), num(5e-10))) == pytest.approx(0.5, abs=TOL)


@pytest.mark.parametrize("args", [
    (dist("N(0, -1)"), num(1)), (dist("N(0, 0)"), num(1)), (dist("U(2, 1)"), num(1)), (dist("U(1, 1)"), num(1)),
    (dist("Q(1, 2)"), num(1)), (dist("N(1)"), num(1)), (dist("N(1, 2, 3)"), num(1)), (dist("N(a, 1)"), num(1)),
    (dist("N(nan, 1)"), num(1)), (dist("N(inf, 1)"), num(1)), (dist("N 1, 2"), num(1)),
    (ox.Literal("0.3"), num(1)), (num(1), dist("N(0, 1)")), (dist("N(0, 1)"), ox.Literal("1")),
    (dist("N(0, 1)"), ox.NamedNode("http://example.org/x")),
    (dist("N(0, 1)"), ox.Literal("NaN", datatype=ox.NamedNode(XSD + "double"))),
])
def test_invalid_arguments_are_expression_errors(lib, args):
    for name in ("add", "subtract", "greaterThan", "lessThan"):
        assert lib[name](*args) is None
    assert lib["between"](args[0], args[1], num(5)) is None


def test_family_registry_refuses_unknown_and_lists_known():
    with pytest.raises(UncertaintyError, match="unknown distribution family 'Q'"):
        default_families().parse("Q(1, 2)")
    assert default_families().names() == ["N", "NU", "U"]


def test_errors_in_a_query_leave_bind_unbound_and_drop_filter_rows():
    store = ox.Store()
    store.add(ox.Quad(ox.NamedNode("http://a"), ox.NamedNode("http://u"), dist("N(0, -1)")))
    store.add(ox.Quad(ox.NamedNode("http://b"), ox.NamedNode("http://u"), dist("N(0, 1)")))
    library = FunctionLibrary()
    rows = list(store.query("PREFIX rspu: <%s> SELECT ?s ?p WHERE { ?s <http://u> ?u "
                            "BIND(rspu:greaterThan(?u, 0) AS ?p) }" % RSPU, custom_functions=library.table))
    assert sorted((r["s"].value, r["p"] is None) for r in rows) == [("http://a", True), ("http://b", False)]
    rows = list(store.query("PREFIX rspu: <%s> SELECT ?s WHERE { ?s <http://u> ?u "
                            "FILTER(rspu:greaterThan(?u, 0) >= 0) }" % RSPU, custom_functions=library.table))
    assert [r["s"].value for r in rows] == ["http://b"]


def test_cache_answers_repeated_calls_and_keeps_the_previous_evaluations_answers():
    library = FunctionLibrary()
    add = library.table[ox.NamedNode(RSPU + "add")]
    for _ in range(3):
        add(dist("N(0, 1)"), num(1))
    assert (library.counts.calls, library.counts.computed) == (3, 1)
    # The next window meets the same element again: answered from the evaluation before.
    library.begin_evaluation()
    assert add(dist("N(0, 1)"), num(1)) == ox.Literal("N(1.0, 1.0)", datatype=ox.NamedNode(RSPU + "distribution"))
    assert library.counts.computed == 1
    # Asked in no evaluation of two in a row: dropped, computed again.
    library.begin_evaluation()
    library.begin_evaluation()
    add(dist("N(0, 1)"), num(1))
    assert library.counts.computed == 2
    # Kept only while asked: a call of the evaluation before the previous one is gone.
    add(dist("N(0, 1)"), num(2))
    library.begin_evaluation()
    add(dist("N(0, 1)"), num(1))
    library.begin_evaluation()
    library.begin_evaluation()
    add(dist("N(0, 1)"), num(2))
    assert library.counts.computed == 4
    uncached = FunctionLibrary(cache=False)
    add = uncached.table[ox.NamedNode(RSPU + "add")]
    for _ in range(3):
        add(dist("N(0, 1)"), num(1))
    uncached.begin_evaluation()
    add(dist("N(0, 1)"), num(1))
    assert uncached.counts.computed == 4


def test_a_bad_literal_raises_a_fresh_error_each_time():
    # A cached exception object would keep the frames of every raise (and the query results
    # they hold) alive, its traceback growing with each evaluation that reads the literal.
    library = FunctionLibrary(cache=False)
    bad = dist("N(oops)")
    errors = []
    for _ in range(3):
        try:
            library.distribution(bad)
        except UncertaintyError as e:
            errors.append(e)
    assert len(errors) == 3 and len({id(e) for e in errors}) == 3
    assert len(traceback.extract_tb(errors[2].__traceback__)) == len(traceback.extract_tb(errors[0].__traceback__))
    assert str(errors[2]) == str(errors[0])


def _fused(library: FunctionLibrary, shape: str):
    iri = FUSED_PREFIX + shape
    library.add_fused(iri)
    return library.table[ox.NamedNode(iri)]


_SHIFTED_ARGUMENTS = st.tuples(
    normals() | uniforms() | st.sampled_from(["N(1e308, 1)", "N(0, 0)", "nonsense"]),
    numbers.map(num) | st.sampled_from([num(1.7e308), num("1e400", "decimal"), num("NaN"), num(7, "integer")])
    | normals().map(dist) | st.just(ox.Literal("text")),
    numbers.map(num) | normals().map(dist) | st.sampled_from([num("INF"), ox.NamedNode("http://example.org/x")]))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["lessThan", "greaterThan"]), _SHIFTED_ARGUMENTS)
def test_a_comparison_of_a_shifted_normal_computed_on_numbers_equals_the_general_path(name, args):
    # lessThan(add(D, x), c) on a normal and numbers is computed without building D + x; any
    # other arguments take the general path. Both give the same literal, or both none.
    shape = "%s(add(_,_),_)" % name
    fast = _fused(FunctionLibrary(cache=False), shape)
    kinds, add = _ON_VALUES["add"]
    general = _fused(FunctionLibrary(cache=False, operations={"add": (kinds, lambda d, x: add(d, x))}), shape)
    d_text, x, c = args
    arguments = (dist(d_text), x, c)
    assert fast(*arguments) == general(*arguments)


BACKGROUND_DISTRIBUTION_QUERY = """
PREFIX rspu: <http://w3id.org/rsp/rspu#>
PREFIX ex: <http://example.org/>
SELECT ?v
FROM NAMED WINDOW ex:w ON ex:s [RANGE PT5S STEP PT5S]
WHERE {
  ex:Sensor rspu:uncertainty ?mu .
  WINDOW ex:w { GRAPH ?g { ?o ex:value ?v } }
  FILTER(rspu:greaterThan(rspu:add(?mu, ?v), 30) >= 0.1)
}"""


@pytest.mark.parametrize("fuse", ["true", "false"])
def test_a_nested_rspu_call_over_background_values_outside_the_window_answers(tmp_path, fuse):
    # A fused call whose arguments come from the background: validation once knew only the
    # window's fused calls (Oxigraph skips a filter over an empty window without resolving it).
    import rspstar
    from rspstar.translator.validate import compile_query

    compile_query(BACKGROUND_DISTRIBUTION_QUERY)
    stream = tmp_path / "s.trig"
    stream.write_text(
        '@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> .\n'
        '@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .\n'
        'ex:e1 prov:generatedAtTime "2026-03-01T08:00:01Z"^^xsd:dateTime . ex:e1 { ex:o1 ex:value 29 . }\n'
        'ex:e2 prov:generatedAtTime "2026-03-01T08:00:02Z"^^xsd:dateTime . ex:e2 { ex:o2 ex:value 20 . }\n')
    background = tmp_path / "background.ttl"
    background.write_text('@prefix ex: <http://example.org/> . @prefix rspu: <http://w3id.org/rsp/rspu#> .\n'
                          'ex:Sensor rspu:uncertainty "N(0,1)"^^rspu:distribution .\n')
    results = rspstar.replay(BACKGROUND_DISTRIBUTION_QUERY, {"http://example.org/s": stream},
                             start="2026-03-01T08:00:00Z", end="2026-03-01T08:00:05Z", background=background,
                             fuse_rspu=fuse)
    # P(N(29, 1) > 30) = 0.159 passes, P(N(20, 1) > 30) ~ 0 does not.
    assert [row["v"] for row in results.rows()] == [29]


def test_the_functions_are_listed_from_the_library_everywhere():
    # The library's table (FUNCTIONS) is the one list of rspu: functions: the check of calls at
    # registration, the SPARQL service description and docs/uncertainty.md read it, so a
    # function added there is known everywhere, and none is named by hand.
    from conftest import REPO
    from rspstar.endpoint.http.service_description import SD, service_description
    from rspstar.translator.errors import QuerySyntaxError
    from rspstar.translator.uncertainty import FUNCTION_NAMES, FUNCTIONS
    from rspstar.translator.uncertainty.functions import functions_table
    from rspstar.translator.validate import compile_query
    assert FUNCTION_NAMES == tuple(f.name for f in FUNCTIONS) == FunctionLibrary().names
    assert {"add", "subtract", "greaterThan", "lessThan", "between"} <= set(FUNCTION_NAMES)
    assert functions_table() in (REPO / "docs" / "uncertainty.md").read_text(encoding="utf-8"), \
        "docs/uncertainty.md's table is translator.uncertainty.functions.functions_table()"
    assert functions_table().count("| `rspu:") == len(FUNCTIONS)
    described = {t.object.value for t in service_description("http://h/sparql", "http://h/update", [])
                 if t.predicate.value == SD + "extensionFunction"}
    assert described == {RSPU + name for name in FUNCTION_NAMES}

    query = "PREFIX rspu: <%s>\nSELECT ?p WHERE { BIND(rspu:%s(\"N(0, 1)\"^^rspu:distribution) AS ?p) }"
    with pytest.raises(QuerySyntaxError) as refused:
        compile_query(query % (RSPU, "median"))
    assert refused.value.message == "unknown function <%smedian> (the engine provides %s)" % (
        RSPU, ", ".join("rspu:" + name for name in FUNCTION_NAMES))
    # A library with one more function takes calls of it and names it among those it provides.
    library = FunctionLibrary(operations={"median": ("d", lambda d: 0.5)})
    compile_query(query % (RSPU, "median"), functions=library)
    with pytest.raises(QuerySyntaxError) as refused:
        compile_query(query % (RSPU, "mode"), functions=library)
    assert refused.value.message.endswith("rspu:between, rspu:median)")
