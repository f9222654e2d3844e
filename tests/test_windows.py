"""Window arithmetic (spec §3): closes x_i = τ0 + α + i·β, windows [x - α, x)."""
import pytest
from hypothesis import given, strategies as st

from rspstar.endpoint.engine.s2r import ReadWindows
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore
from rspstar.translator.model import CountWindow, TimeWindow
from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.policy import PolicyError, report_policy
from rspstar.translator.parser import parse_query
from rspstar.translator.temporal import parse_instant

S = 1_000_000


def test_latest_close_and_bounds():
    w = TimeWindow("w", "s", range=10 * S, step=2 * S)
    assert w.close_at_or_before(9 * S) is None
    assert w.bounds_at(9 * S) is None
    assert w.bounds_at(10 * S) == (0, 10 * S)
    assert w.bounds_at(11_999_999) == (0, 10 * S)
    assert w.bounds_at(12 * S) == (2 * S, 12 * S)


def test_fractional_step_and_start():
    w = TimeWindow("w", "s", range=S, step=S // 4, start=3 * S)
    assert w.closes_between(3 * S, 5 * S) == [4 * S, 4_250_000, 4_500_000, 4_750_000, 5 * S]
    assert w.bounds_at(4_600_000) == (3_500_000, 4_500_000)
    assert w.earliest_reachable(0) == 3 * S


def test_step_larger_than_range_samples_the_stream():
    w = TimeWindow("w", "s", range=S, step=5 * S)
    assert w.closes_between(0, 12 * S) == [S, 6 * S, 11 * S]
    assert w.bounds_at(7 * S) == (5 * S, 6 * S)


@given(st.integers(1, 10**8), st.integers(1, 10**8), st.integers(-10**9, 10**9), st.integers(-10**10, 10**10))
def test_bounds_are_the_latest_window_closing_at_or_before(width, step, start, instant):
    w = TimeWindow("w", "s", range=width, step=step, start=start)
    bounds = w.bounds_at(instant)
    if bounds is None:
        assert instant < start + width
        return
    lo, hi = bounds
    assert hi - lo == width and hi <= instant < hi + step
    assert (hi - start - width) % step == 0


@given(st.integers(1, 50), st.integers(1, 50), st.integers(0, 100), st.integers(0, 100))
def test_closes_between_agrees_with_enumeration(width, step, start, span):
    w = TimeWindow("w", "s", range=width, step=step, start=start)
    after, until = start, start + span + width
    expected = [start + width + i * step for i in range(0, 1000) if after < start + width + i * step <= until]
    assert w.closes_between(after, until) == expected


def test_report_instants_window_close_and_computed_every():
    prefix = "PREFIX ex: <http://example.org/> PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> "
    q = parse_query(prefix + "SELECT * FROM NAMED WINDOW ex:a ON ex:s [RANGE PT4S] "
                             "FROM NAMED WINDOW ex:b ON ex:s [RANGE PT6S STEP PT3S] WHERE { }")
    policy = report_policy(q)
    assert policy.fixed_instants(0, 12 * S) == [4 * S, 6 * S, 8 * S, 9 * S, 12 * S]
    assert ReadWindows(policy, None).next_instant(4 * S) == 6 * S
    q = parse_query(prefix + "REGISTER QUERY ex:q COMPUTED EVERY PT5S AS SELECT * "
                             'FROM NAMED WINDOW ex:a ON ex:s [RANGE PT4S START "2026-03-01T08:00:03Z"^^xsd:dateTime] WHERE { }')
    origin = parse_instant("2026-03-01T08:00:03Z")
    policy = report_policy(q)
    assert policy.fixed_instants(origin - 20 * S, origin + 11 * S) == [origin, origin + 5 * S, origin + 10 * S]
    assert {w: c.shown for w, c in ReadWindows(policy, None).contents(origin + 5 * S).items()} == \
        {"http://example.org/a": (origin, origin + 4 * S)}
    assert ReadWindows(policy, None).contents(origin) == {}


# -- windows in the past, count windows and content change (spec §6.1-6.3) --------------------


def _store(*timestamps, stream="s"):
    """An in-memory store holding one element per timestamp on `stream`, named e1, e2, ... in
    that (arrival) order."""
    store = StreamStore()
    elements = [Element("http://example.org/e%d" % k, t, instant_literal(t), [])
                for k, t in enumerate(timestamps, 1)]
    for element in elements:
        store.add_elements(stream, [element])
    return store


def _closes(window, store, until):
    """The count window's closes up to `until`, as the runner finds them, one after another."""
    closes, t = [], 0
    while (t := window.next_close(t, store)) is not None and t <= until:
        closes.append(t)
    return closes


def _names(content):
    return [g.rsplit("/", 1)[1] for g in content.graphs]


def test_a_window_in_the_past_holds_what_lies_between_its_two_offsets():
    w = TimeWindow("w", "s", range=4 * S, step=2 * S, lag=2 * S)
    assert w.bounds_at(3 * S) is None
    content = w.content_at(4 * S, None)
    assert (content.opens, content.closes, content.shown) == (0, 2 * S, (0, 2 * S))
    assert w.closes_between(0, 8 * S) == [4 * S, 6 * S, 8 * S]


def test_an_upper_closed_window_holds_its_close_and_not_its_open():
    w = TimeWindow("w", "s", range=4 * S, step=2 * S, upper_closed=True)
    store = _store(0, 1 * S, 4 * S, 5 * S)
    content = w.content_at(4 * S, store)
    assert content.select("s", store) == ["http://example.org/e2", "http://example.org/e3"]
    assert content.shown == (0, 4 * S)


def test_count_windows_number_elements_by_time_then_arrival():
    # e2 and e3 share a timestamp: e2 (arrived first) is element 2, e3 element 3.
    store = _store(1 * S, 2 * S, 2 * S, 4 * S, 5 * S, 7 * S)
    w = CountWindow("w", "s", size=3, step=2)
    assert _closes(w, store, 10 * S) == [2 * S, 4 * S, 7 * S]
    assert w.next_close(2 * S, store) == 4 * S
    assert w.next_close(7 * S, store) is None
    assert w.content_at(1 * S, store) is None                 # no close yet
    at2 = w.content_at(2 * S, store)
    assert _names(at2) == ["e1", "e2"] and at2.shown == (1 * S, 2 * S)   # fewer at the start; e3 not yet
    assert _names(w.content_at(6 * S, store)) == ["e2", "e3", "e4"]
    assert _names(w.content_sliding(5 * S, store)) == ["e3", "e4", "e5"]  # content change: STEP ignored


def test_count_windows_keep_numbering_and_reach_after_eviction():
    store = _store(1 * S, 2 * S, 2 * S, 4 * S, 5 * S, 7 * S)
    w = CountWindow("w", "s", size=3, step=2)
    # The evaluation at 7 s reads e4..e6; nothing earlier is needed any more.
    assert w.earliest_reachable(7 * S, store) == 4 * S
    # Before it, the close at 4 s (element 4) reads e2..e4.
    assert w.earliest_reachable(5 * S, store) == 2 * S
    store.evict_before("s", 4 * S)
    assert _closes(w, store, 10 * S) == [4 * S, 7 * S]   # e4 is still element 4
    assert _names(w.content_at(7 * S, store)) == ["e4", "e5", "e6"]


def _policy(text, report=None):
    """The report policy of a query whose relative IRIs (stream <s>) resolve against ex:."""
    return report_policy(parse_query("PREFIX ex: <http://example.org/> " + text, "http://example.org/"), report)


EX_S = "http://example.org/s"


def test_content_change_reports_once_per_arrival_instant_with_sliding_contents():
    store = _store(1 * S, 2 * S, 2 * S, 4 * S, stream=EX_S)
    policy = _policy("SELECT * FROM NAMED WINDOW ex:w ON <s> [RANGE PT2S STEP PT10S] WHERE { }",
                     "content-change")
    assert [ReadWindows(policy, store).next_instant(t) for t in (0, 1 * S, 2 * S, 4 * S)] == [1 * S, 2 * S, 4 * S, None]
    content = ReadWindows(policy, store).contents(2 * S)["http://example.org/w"]
    assert content.shown == (0, 2 * S)
    assert content.select(EX_S, store) == ["http://example.org/e1", "http://example.org/e2", "http://example.org/e3"]
    assert policy.complete_through(2 * S) == 2 * S + 1     # every element stamped 2 s must be in
    assert policy.fixed_instants(0, 10 * S) == []


def test_a_query_mixing_count_and_time_windows_reports_at_both_closes():
    store = _store(1 * S, 5 * S, stream=EX_S)
    policy = _policy("SELECT * FROM NAMED WINDOW ex:c ON <s> [ELEMS 2] "
                     "FROM NAMED WINDOW ex:t ON <s> [RANGE PT4S] WHERE { }")
    instants, t = [], 0
    while (t := ReadWindows(policy, store).next_instant(t)) is not None and t <= 8 * S:
        instants.append(t)
    assert instants == [1 * S, 4 * S, 5 * S, 8 * S]
    assert policy.fixed_instants(0, 8 * S) == [4 * S, 8 * S] and policy.arrivals


def test_report_policies_from_options_and_the_query():
    assert _policy("SELECT * FROM NAMED WINDOW ex:w ON <s> [RANGE PT2S] WHERE { }").show() == "close"
    periodic = "REGISTER QUERY ex:q COMPUTED EVERY PT5S AS SELECT * FROM NAMED WINDOW ex:w ON <s> [RANGE PT2S] WHERE { }"
    assert _policy(periodic).show() == "periodic"
    assert _policy(periodic).fixed_instants(0, 12 * S) == [5 * S, 10 * S]
    non_empty = _policy(periodic, "non-empty")
    assert non_empty.show() == "non-empty" and non_empty.rate() == 0.2
    assert non_empty.fixed_instants(0, 12 * S) == [5 * S, 10 * S]
    store = _store(1 * S, stream=EX_S)
    read = ReadWindows(non_empty, store)
    assert not read.reports(5 * S, read.contents(5 * S))       # [3 s, 5 s) is empty
    assert read.reports(2 * S, read.contents(2 * S))           # [0, 2 s) holds e1
    with pytest.raises(PolicyError, match="COMPUTED EVERY"):
        _policy("SELECT * FROM NAMED WINDOW ex:w ON <s> [RANGE PT2S] WHERE { }", "periodic")


def test_window_specifications_are_checked_with_positions():
    with pytest.raises(QuerySyntaxError, match="a > b") as e:
        parse_query("SELECT * FROM NAMED WINDOW <w> ON <s> [FROM NOW-PT2S TO NOW-PT3S STEP PT1S] WHERE { }",
                    "http://example.org/")
    assert (e.value.line, e.value.column) == (1, 61)
    with pytest.raises(QuerySyntaxError, match="positive whole number"):
        parse_query("SELECT * FROM NAMED WINDOW <w> ON <s> [ELEMS 0] WHERE { }", "http://example.org/")
    with pytest.raises(QuerySyntaxError, match="positive whole number"):
        parse_query("SELECT * FROM NAMED WINDOW <w> ON <s> [ELEMS 3 STEP 1.5] WHERE { }", "http://example.org/")
