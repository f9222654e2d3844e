"""Report policies per window (spec §6.6, translator/policy.py): strategies bound to windows,
combined by `and`, their instants, what they refuse and how they are shown."""
import pytest
from hypothesis import given, strategies as st

from rspstar.endpoint.engine.s2r import ReadWindows
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore
from rspstar.translator.parser import parse_query
from rspstar.translator.policy import PolicyError, parse_strategies, report_policy
from rspstar.translator.windows import Progression

import pyoxigraph as ox

S = 1_000_000
PREFIX = "PREFIX ex: <http://example.org/> PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> "
# the RSP-QL paper's Example 10 windows: W1 (RANGE 5 STEP 2 START 1), W2 (RANGE 2 STEP 2 START 0).
EXAMPLE_10 = (PREFIX + 'SELECT * FROM NAMED WINDOW ex:w1 ON ex:nearby [RANGE PT5S STEP PT2S START '
              '"1970-01-01T00:00:01Z"^^xsd:dateTime] FROM NAMED WINDOW ex:w2 ON ex:coupon [RANGE PT2S STEP PT2S] '
              'WHERE { }')


def policy(text, report=None):
    return report_policy(parse_query(text), report)


def store_with(**streams):
    """An in-memory store with one element per (stream, timestamp in seconds), published."""
    store = StreamStore()
    for stream, seconds in streams.items():
        elements = []
        for k, second in enumerate(seconds):
            graph = "http://example.org/%s%d" % (stream, k)
            at = second * S
            elements.append(Element(graph, at, instant_literal(at), [
                ox.Quad(ox.NamedNode("http://example.org/x"), ox.NamedNode("http://example.org/p"),
                        ox.Literal(k), ox.NamedNode(graph))]))
        store.add_elements("http://example.org/" + stream, elements)
    return store


def instants(p, store, until):
    found, t = [], -1
    read = ReadWindows(p, store)
    while (t := read.next_instant(t)) is not None and t <= until:
        if read.reports(t, read.contents(t)):
            found.append(t)
    return found


def test_example_10s_policy_evaluates_at_w2s_closes_when_w2_holds_an_element():
    store = store_with(nearby=[2, 2, 5, 7, 12], coupon=[8, 15])
    p = policy(EXAMPLE_10, "close(ex:w2) and non-empty(ex:w2)")
    assert instants(p, store, 18 * S) == [10 * S, 16 * S]
    # At 10 s W1 holds its latest window closed by then, [5 s, 10 s).
    assert ReadWindows(p, store).contents(10 * S)["http://example.org/w1"].shown == (5 * S, 10 * S)
    assert p.show() == "close(<http://example.org/w2>) and non-empty(<http://example.org/w2>)"
    assert p.describe() == "at every close of <http://example.org/w2>, skipped when <http://example.org/w2> is empty"
    # The same without the windows named: every close of either window, some window non-empty.
    # (W1 closes first at 6 s; at 18 s both windows are empty.)
    assert instants(policy(EXAMPLE_10, "close and non-empty"), store, 18 * S) == \
        [6 * S, 8 * S, 10 * S, 12 * S, 14 * S, 16 * S]
    assert instants(policy(EXAMPLE_10), store, 18 * S) == [2 * S * k for k in range(1, 10)]


def test_a_window_is_named_by_iri_prefixed_name_or_relative_iri_against_the_base():
    for name in ("<http://example.org/w2>", "ex:w2"):
        assert policy(EXAMPLE_10, "close(%s)" % name).fixed_instants(0, 6 * S) == [2 * S, 4 * S, 6 * S]
    based = "BASE <http://example.org/> " + EXAMPLE_10
    assert policy(based, "close(<w1>)").fixed_instants(0, 10 * S) == [6 * S, 8 * S, 10 * S]


def test_closes_of_two_windows_meet_where_both_close():
    text = PREFIX + ("SELECT * FROM NAMED WINDOW ex:a ON ex:s [RANGE PT2S STEP PT2S] "
                     "FROM NAMED WINDOW ex:b ON ex:s [RANGE PT3S STEP PT3S] WHERE { }")
    p = policy(text, "close(ex:a) and close(ex:b)")
    assert p.fixed_instants(0, 20 * S) == [6 * S, 12 * S, 18 * S]
    assert ReadWindows(p, None).next_instant(6 * S) == 12 * S and p.rate() == pytest.approx(1 / 6)
    assert policy(text, "close(ex:a) and periodic(PT4S)").fixed_instants(0, 13 * S) == [4 * S, 8 * S, 12 * S]


def test_a_combination_that_can_never_hold_is_refused():
    text = PREFIX + ("SELECT * FROM NAMED WINDOW ex:a ON ex:s [RANGE PT2S STEP PT2S] "
                     "FROM NAMED WINDOW ex:b ON ex:s [RANGE PT3S STEP PT2S] WHERE { }")
    with pytest.raises(PolicyError, match="can never hold"):
        policy(text, "close(ex:a) and close(ex:b)")


@pytest.mark.parametrize("report,message", [
    ("close(ex:w3)", "column 7: the query declares no window ex:w3"),
    ("close(zz:w1)", "column 7: undeclared prefix"),
    ("close(ex:w1) or non-empty", "column 14: strategies are joined by 'and'"),
    ("closed", "column 1: unknown strategy 'closed'"),
    ("close()", "names nothing"),
    ("periodic(ten seconds)", "periodic takes a duration"),
    ("close and", "column 10: expected a strategy"),
])
def test_policies_that_cannot_be_read_are_refused_with_the_column(report, message):
    with pytest.raises(PolicyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        policy(EXAMPLE_10, report)


def test_periodic_needs_a_period_or_computed_every():
    with pytest.raises(PolicyError, match="COMPUTED EVERY"):
        policy(EXAMPLE_10, "periodic")
    p = policy(EXAMPLE_10, "periodic(PT5S)")
    # τ0q is the earliest START: W2 has none, so the epoch.
    assert p.fixed_instants(0, 12 * S) == [5 * S, 10 * S] and p.show() == "periodic(PT5S)"


def test_content_change_of_one_window_follows_its_stream_alone():
    store = store_with(nearby=[2, 5], coupon=[3, 8])
    p = policy(EXAMPLE_10, "content-change(ex:w2)")
    assert instants(p, store, 10 * S) == [3 * S, 8 * S]
    assert instants(policy(EXAMPLE_10, "content-change"), store, 10 * S) == [2 * S, 3 * S, 5 * S, 8 * S]
    # Under content change every window slides (spec §6.3): W1 holds t - 5 s < τ <= t.
    assert ReadWindows(p, store).contents(8 * S)["http://example.org/w1"].shown == (3 * S, 8 * S)
    assert p.arrivals and not p.at_closes and not p.fixed


def test_a_strategy_written_without_a_window_keeps_its_meaning():
    store = store_with(nearby=[7], coupon=[])
    p = policy(EXAMPLE_10, "non-empty")
    assert p.fixed_instants(0, 12 * S) == [2 * S, 4 * S, 6 * S, 8 * S, 10 * S, 12 * S]
    assert instants(p, store, 12 * S) == [8 * S, 10 * S, 12 * S]      # W1 holds 7 s from [3, 8) to [7, 12)
    assert instants(policy(EXAMPLE_10, "non-empty(ex:w2)"), store, 12 * S) == []


def test_the_policy_strategies_are_read_case_insensitively_and_once():
    assert [k for k, _, _ in parse_strategies("Close(ex:w1) AND non-empty AND close(ex:w1)")] == \
        ["close", "non-empty", "close"]
    assert policy(EXAMPLE_10, "close(ex:w1) and close(ex:w1)").show() == "close(<http://example.org/w1>)"


@given(st.integers(0, 40), st.integers(1, 12), st.integers(0, 40), st.integers(1, 12))
def test_two_progressions_meet_exactly_where_enumeration_finds_them(f1, s1, f2, s2):
    a, b = Progression(f1, s1), Progression(f2, s2)
    common = sorted(set(range(f1, 400, s1)) & set(range(f2, 400, s2)))
    met = a.meet(b)
    if met is None:
        assert common == []
    else:
        assert [t for t in met.between(-1, 399)] == common
