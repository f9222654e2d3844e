"""Report policies (spec §3 and §6.3): when a query is evaluated, what its windows hold then,
and whether an evaluation is reported. The runner asks a query's policy "when next?",
"what do the windows hold?" and "report now?"; nothing else in the engine compares policy
names.

Instants are microseconds. Policies read the streams through a `StreamView` (the store's
element index) only where the instants or contents depend on the data: count windows and
content change.
"""
from __future__ import annotations

from .errors import TranslatorError
from .model import ContinuousQuery, CountWindow, StreamView, TimeWindow, Window, WindowContent
from .temporal import format_duration

POLICIES = ("close", "non-empty", "content-change", "periodic")


class PolicyError(TranslatorError):
    """A report policy the query cannot have."""


class ReportPolicy:
    """Evaluate at every close of any window of the query (spec §3, the default)."""

    name = "close"
    # Whether instants come from the elements themselves (count windows, content change), so
    # that a replay must offer every element's timestamp as a candidate instant.
    arrivals = False
    # Whether the windows are read at their closes (so a close's content is the same whenever
    # it is read, which incremental evaluation relies on).
    at_closes = True

    def __init__(self, windows: list[Window]):
        self.windows = windows
        self.arrivals = any(isinstance(w, CountWindow) for w in windows)

    def next_instant(self, after: int, view: StreamView) -> int | None:
        """The first evaluation instant strictly after `after` known now (None: none yet)."""
        closes = [c for c in (w.next_close(after, view) for w in self.windows) if c is not None]
        return min(closes) if closes else None

    def fixed_instants(self, after: int, until: int) -> list[int]:
        """The instants in (after, until] that do not depend on the data."""
        closes: set[int] = set()
        for window in self.windows:
            if isinstance(window, TimeWindow):
                closes.update(window.closes_between(after, until))
        return sorted(closes)

    def contents(self, instant: int, view: StreamView) -> dict[str, WindowContent]:
        """What each window holds at `instant` (a window that holds nothing yet is left out)."""
        found = {}
        for window in self.windows:
            content = self.content(window, instant, view)
            if content is not None:
                found[window.iri] = content
        return found

    def content(self, window: Window, instant: int, view: StreamView) -> WindowContent | None:
        """A window at its latest close by `instant` (None: not closed yet)."""
        return window.content_at(instant, view)

    def report_now(self, elements: int) -> bool:
        return True

    def complete_through(self, instant: int) -> int:
        """The watermark every input stream must reach before the evaluation at `instant`:
        a window that holds elements at its close instant (count windows, upper-closed
        bounds) waits until the stream is complete past it."""
        exact = any(isinstance(w, CountWindow) or w.upper_closed for w in self.windows)
        return instant + 1 if exact else instant

    def retention(self, after: int, view: StreamView) -> dict[str, int]:
        """Per stream, the earliest timestamp an evaluation after `after` can read."""
        # A count window's next close is known only once its element is in, and may come
        # before the next time close: then only `after` bounds the next instant.
        instant = after if self.arrivals else self.next_instant(after, view)
        return _earliest([(w.stream, w.earliest_reachable(instant, view)) for w in self.windows])

    def rate(self) -> float:
        """Evaluations per second the policy asks for whatever the data: count windows and
        content change add one per element arriving, at the streams' rate, not the query's."""
        return sum(w.rate for w in self.windows if isinstance(w, TimeWindow))

    def describe(self) -> str:
        return "at every window close"


class Periodic(ReportPolicy):
    """`COMPUTED EVERY p`: instants τ0q + k·p, the windows at their latest close."""

    name = "periodic"

    def __init__(self, windows: list[Window], origin: int, period: int):
        super().__init__(windows)
        self.arrivals = False
        self.origin = origin
        self.period = period

    def next_instant(self, after: int, view: StreamView) -> int | None:
        return self.origin + max(0, (after - self.origin) // self.period + 1) * self.period

    def fixed_instants(self, after: int, until: int) -> list[int]:
        instants = []
        t = self.next_instant(after, None)
        while t <= until:
            instants.append(t)
            t += self.period
        return instants

    def rate(self) -> float:
        return 1_000_000 / self.period

    def describe(self) -> str:
        return "every %s" % format_duration(self.period)


class NonEmpty(ReportPolicy):
    """Another policy's instants and contents, skipping an evaluation when every window is
    empty."""

    name = "non-empty"

    def __init__(self, inner: ReportPolicy):
        super().__init__(inner.windows)
        self.inner = inner
        self.arrivals = inner.arrivals
        self.at_closes = inner.at_closes

    def next_instant(self, after: int, view: StreamView) -> int | None:
        return self.inner.next_instant(after, view)

    def fixed_instants(self, after: int, until: int) -> list[int]:
        return self.inner.fixed_instants(after, until)

    def contents(self, instant: int, view: StreamView) -> dict[str, WindowContent]:
        return self.inner.contents(instant, view)

    def complete_through(self, instant: int) -> int:
        return self.inner.complete_through(instant)

    def retention(self, after: int, view: StreamView) -> dict[str, int]:
        return self.inner.retention(after, view)

    def rate(self) -> float:
        return self.inner.rate()

    def report_now(self, elements: int) -> bool:
        return elements > 0

    def describe(self) -> str:
        return self.inner.describe() + ", skipped when every window is empty"


class ContentChange(ReportPolicy):
    """CQELS's policy (spec §6.3): at every instant t at which an element with τ = t entered a
    stream the query reads, once all elements with that timestamp are in; every time window
    then holds t − a < τ <= t − b, every count window its stream's last n elements up to t."""

    name = "content-change"
    at_closes = False

    def __init__(self, windows: list[Window]):
        super().__init__(windows)
        self.arrivals = True
        self.streams = sorted({w.stream for w in windows})

    def next_instant(self, after: int, view: StreamView) -> int | None:
        arrivals = [t for t in (view.next_arrival(s, after) for s in self.streams) if t is not None]
        return min(arrivals) if arrivals else None

    def fixed_instants(self, after: int, until: int) -> list[int]:
        return []

    def content(self, window: Window, instant: int, view: StreamView) -> WindowContent | None:
        return window.content_sliding(instant, view)

    def complete_through(self, instant: int) -> int:
        return instant + 1

    def rate(self) -> float:
        return 0.0

    def retention(self, after: int, view: StreamView) -> dict[str, int]:
        return _earliest([(w.stream, w.sliding_reach(after, view)) for w in self.windows])

    def describe(self) -> str:
        return "at every instant an element arrives (content change)"


def _earliest(bounds: list[tuple[str, int]]) -> dict[str, int]:
    earliest: dict[str, int] = {}
    for stream, bound in bounds:
        earliest[stream] = min(bound, earliest.get(stream, bound))
    return earliest


def report_policy(query: ContinuousQuery, report: str | None = None) -> ReportPolicy:
    """The policy of a query: `report` as given in its options, else what the query itself
    says (COMPUTED EVERY, its dialect), else window close."""
    windows = list(query.windows.values())
    report = report or query.report or ("periodic" if query.computed_every is not None else "close")
    if report not in POLICIES:
        raise PolicyError("unknown report policy %r (known: %s)" % (report, ", ".join(POLICIES)))
    if report == "content-change":
        return ContentChange(windows)
    if report == "periodic" and query.computed_every is None:
        raise PolicyError("report = periodic needs COMPUTED EVERY in the query")
    if report in ("periodic", "non-empty") and query.computed_every is not None:
        base = Periodic(windows, query.policy_origin(), query.computed_every)
    else:
        base = ReportPolicy(windows)
    return NonEmpty(base) if report == "non-empty" else base

