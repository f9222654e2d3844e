"""S2R, stream to relation (spec §3, §6.3, §6.6): at which instants a query is evaluated, what
each of its windows holds then, and whether the evaluation there is reported.

The query's report policy (translator/policy.py) declares its instants as terms of sources;
each window (translator/windows.py) says what it holds at an instant and where its closes are,
read through a `StreamView`. S2R puts them together at run time, over the streams:

    next_instant(after)          the first evaluation instant after `after` known now
    contents(instant)            what each window holds at that instant
    reports(instant, contents)   whether the evaluation there is reported
    retention(after)             per stream, the earliest timestamp an evaluation after `after` reads

`ReadWindows` reads the windows in the engine's store (the element index, and the facts of the
query's fact windows); a partitioned query's windows are read on Spark's executors
(store/partitions.py), and its S2R, `KeyGroupWindows`, is what its key groups told of the instant.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rspstar.translator.policy import ReportPolicy, Term
from rspstar.translator.temporal import format_instant
from rspstar.translator.windows import StreamView, WindowContent

from .errors import EndpointError


class S2R(Protocol):
    def next_instant(self, after: int) -> int | None: ...

    def contents(self, instant: int) -> dict[str, WindowContent]: ...

    def reports(self, instant: int, contents: dict[str, WindowContent]) -> bool: ...

    def retention(self, after: int) -> dict[str, int]: ...


class LandmarkOverLimit(EndpointError):
    """A landmark window holds more elements than the engine keeps for one (spec §6.10)."""


class ReadWindows:
    """A query's report policy over its windows as the engine's store holds them (`view`): the
    store, with the query's facts where it has fact windows. `landmark_elements`: the most
    elements a window holding everything since its START may hold (None: no bound)."""

    def __init__(self, policy: ReportPolicy, view: StreamView, landmark_elements: int | None = None):
        self.policy = policy
        self.view = view
        self.landmark_elements = landmark_elements
        # (A tuple, empty for most queries, and no index of the windows: a thousand queries'
        # lists and dicts would be objects for Python's full collections to scan.)
        self._landmarks = tuple(w for w in policy.windows if w.unbounded) if landmark_elements is not None else ()
        # Instants that do not depend on the data, as one progression (most queries: one window,
        # or windows whose closes meet), are read from it alone; a run asks for the same instant
        # several times (to evaluate it, for its record, for the status), so the last answer is
        # kept (a pair of numbers, which Python's full collections stop scanning).
        terms = policy.terms
        self._progression = terms[0].progression if len(terms) == 1 and not terms[0].data else None
        self._asked: tuple[int, int] | None = None

    def next_instant(self, after: int) -> int | None:
        if self._progression is not None:
            asked = self._asked
            if asked is None or asked[0] != after:
                asked = self._asked = (after, self._progression.next(after))
            return asked[1]
        known = [t for t in (self._next(term, after) for term in self.policy.terms) if t is not None]
        return min(known) if known else None

    def _next(self, term: Term, after: int) -> int | None:
        """The first instant after `after` every source of `term` holds, known now."""
        # Each source's next instant at or past the latest candidate, until all agree: every
        # round moves the candidate forward, and the data sources end with the data known now.
        sources = term.sources()
        t = after
        while True:
            candidates = [source.next(t, self.view) for source in sources]
            if None in candidates:
                return None
            highest = max(candidates)
            if min(candidates) == highest:
                return highest
            t = highest - 1

    def contents(self, instant: int) -> dict[str, WindowContent]:
        """What each window holds at `instant` (a window that holds nothing yet is left out):
        its latest window closed at or before it, or under content change the elements with
        t − a < τ <= t (spec §6.3)."""
        found = {}
        sliding = self.policy.content_change
        for window in self.policy.windows:
            content = window.content_sliding(instant, self.view) if sliding else window.content_at(instant, self.view)
            if content is not None:
                found[window.iri] = content
        if self._landmarks:
            self._check_landmarks(found)
        return found

    def reports(self, instant: int, contents: dict[str, WindowContent]) -> bool:
        """Whether the non-empty strategies hold for these contents (each window read only when
        a strategy asks about it), and, for a query whose instants include a fact window's
        changes, whether `instant` is one of its instants after all (an arrival that opened or
        closed no fact is none: spec §6.13)."""
        policy = self.policy
        if not policy.non_empty and not policy.changes:
            return True         # nothing to ask of the contents (most queries)
        if policy.changes and not self._holds(instant, contents):
            return False

        def held(iri: str) -> bool:
            content = contents.get(iri)
            if content is None:
                return False
            window = next(w for w in self.policy.windows if w.iri == iri)
            return bool(content.select(window.stream, self.view))

        return self.policy.report_where(held)

    def _holds(self, instant: int, contents: dict[str, WindowContent]) -> bool:
        """Whether some term gives `instant`: every one of its sources does (a window closing
        where its content changed, where it changed at the instant)."""
        for term in self.policy.terms:
            if term.progression is not None and term.progression.next(instant - 1) != instant:
                continue
            if all(contents.get(source.window.iri) is not None and contents[source.window.iri].changed
                   if source.changes else source.next(instant - 1, self.view) == instant
                   for source in term.data):
                return True
        return False

    def retention(self, after: int) -> dict[str, int]:
        policy = self.policy
        if policy.content_change:
            return _earliest([(w.stream, w.sliding_reach(after, self.view)) for w in policy.windows])
        # A count window's next close is known only once its element is in, and may come
        # before the next time close: then only `after` bounds the next instant.
        instant = None if policy.arrivals else self.next_instant(after)
        instant = after if instant is None else instant
        return _earliest([(w.stream, w.earliest_reachable(instant, self.view)) for w in policy.windows])

    def _check_landmarks(self, contents: dict[str, WindowContent]) -> None:
        """A landmark window keeps everything since its start: past `landmark_elements` the query
        stops (its status names the setting) rather than read a window cut short."""
        for window in self._landmarks:
            content = contents.get(window.iri)
            if content is None:
                continue
            held = self.view.count_between(window.stream, content.opens, content.closes)
            if held > self.landmark_elements:
                raise LandmarkOverLimit(
                    "landmark window <%s> holds %d elements since %s, more than the engine keeps for one "
                    "([engine] landmark_elements = %d): register it with a later START, or raise the setting"
                    % (window.iri, held, format_instant(window.start), self.landmark_elements))


@dataclass(frozen=True)
class KeyGroupReport:
    """What a partitioned query's key groups told of one instant: the rows of all of them
    (SELECT: {var: term}; CONSTRUCT: N-Triples lines; ASK: [true] or nothing), the elements
    their windows held, the windows holding some, and the interval each window lists when the
    windows' contents depend on the elements (partitioned windows; None: as the query's time
    windows list them)."""

    rows: list
    elements: int = 0
    holding: frozenset[str] = frozenset()
    windows: dict[str, tuple[int, int]] | None = None


class KeyGroupWindows:
    """S2R of a partitioned query: what its key groups told (`tell`) of the instant evaluated
    next. Its instants that depend on the data come from the groups; only the others are known
    here. Its windows are read on the executors: the engine keeps nothing of them for it."""

    def __init__(self, policy: ReportPolicy, view: StreamView):
        self.policy = policy
        self.view = view
        self.told: KeyGroupReport | None = None

    def tell(self, report: KeyGroupReport) -> None:
        self.told = report

    def next_instant(self, after: int) -> int | None:
        return self.policy.next_fixed_instant(after)

    def contents(self, instant: int) -> dict[str, WindowContent]:
        if self.told.windows is not None:
            return {w: WindowContent(interval) for w, interval in self.told.windows.items()}
        return {w.iri: c for w in self.policy.windows if (c := w.content_at(instant, self.view)) is not None}

    def reports(self, instant: int, contents: dict[str, WindowContent]) -> bool:
        return self.policy.report_where(self.told.holding.__contains__)

    def retention(self, after: int) -> dict[str, int]:
        return {}


def _earliest(bounds: list[tuple[str, int]]) -> dict[str, int]:
    earliest: dict[str, int] = {}
    for stream, bound in bounds:
        earliest[stream] = min(bound, earliest.get(stream, bound))
    return earliest
