"""Window arithmetic (spec §3): closes x_i = τ0 + α + i·β, windows [x - α, x)."""
from hypothesis import given, strategies as st

from translator.model import WindowDeclaration
from translator.parser import parse_query
from translator.temporal import parse_instant

S = 1_000_000


def test_latest_close_and_bounds():
    w = WindowDeclaration("w", "s", range=10 * S, step=2 * S)
    assert w.close_at_or_before(9 * S) is None
    assert w.bounds_at(9 * S) is None
    assert w.bounds_at(10 * S) == (0, 10 * S)
    assert w.bounds_at(11_999_999) == (0, 10 * S)
    assert w.bounds_at(12 * S) == (2 * S, 12 * S)


def test_fractional_step_and_start():
    w = WindowDeclaration("w", "s", range=S, step=S // 4, start=3 * S)
    assert w.closes_between(3 * S, 5 * S) == [4 * S, 4_250_000, 4_500_000, 4_750_000, 5 * S]
    assert w.bounds_at(4_600_000) == (3_500_000, 4_500_000)
    assert w.earliest_reachable(0) == 3 * S


def test_step_larger_than_range_samples_the_stream():
    w = WindowDeclaration("w", "s", range=S, step=5 * S)
    assert w.closes_between(0, 12 * S) == [S, 6 * S, 11 * S]
    assert w.bounds_at(7 * S) == (5 * S, 6 * S)


@given(st.integers(1, 10**8), st.integers(1, 10**8), st.integers(-10**9, 10**9), st.integers(-10**10, 10**10))
def test_bounds_are_the_latest_window_closing_at_or_before(width, step, start, instant):
    w = WindowDeclaration("w", "s", range=width, step=step, start=start)
    bounds = w.bounds_at(instant)
    if bounds is None:
        assert instant < start + width
        return
    lo, hi = bounds
    assert hi - lo == width and hi <= instant < hi + step
    assert (hi - start - width) % step == 0


@given(st.integers(1, 50), st.integers(1, 50), st.integers(0, 100), st.integers(0, 100))
def test_closes_between_agrees_with_enumeration(width, step, start, span):
    w = WindowDeclaration("w", "s", range=width, step=step, start=start)
    after, until = start, start + span + width
    expected = [start + width + i * step for i in range(0, 1000) if after < start + width + i * step <= until]
    assert w.closes_between(after, until) == expected


def test_report_instants_window_close_and_computed_every():
    prefix = "PREFIX ex: <http://example.org/> PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> "
    q = parse_query(prefix + "SELECT * FROM NAMED WINDOW ex:a ON ex:s [RANGE PT4S] "
                             "FROM NAMED WINDOW ex:b ON ex:s [RANGE PT6S STEP PT3S] WHERE { }")
    assert q.report_instants(0, 12 * S) == [4 * S, 6 * S, 8 * S, 9 * S, 12 * S]
    assert q.next_report_instant(4 * S) == 6 * S
    q = parse_query(prefix + "REGISTER QUERY ex:q COMPUTED EVERY PT5S AS SELECT * "
                             'FROM NAMED WINDOW ex:a ON ex:s [RANGE PT4S START "2026-03-01T08:00:03Z"^^xsd:dateTime] WHERE { }')
    origin = parse_instant("2026-03-01T08:00:03Z")
    assert q.report_instants(origin - 20 * S, origin + 11 * S) == [origin, origin + 5 * S, origin + 10 * S]
    assert q.window_bounds(origin + 5 * S) == {"http://example.org/a": (origin, origin + 4 * S)}
    assert q.window_bounds(origin) == {}
