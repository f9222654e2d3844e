"""The query model: what a parsed RSP-QL* query means, independent of its text.

The syntax tree of the body (`syntax.py`) travels with the model so the rewriter can turn it
into SPARQL-star for any window bounds.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, Union

from .temporal import format_duration, format_instant

if TYPE_CHECKING:
    from .syntax import ParsedBody


class R2S(enum.Enum):
    RSTREAM = "RSTREAM"
    ISTREAM = "ISTREAM"
    DSTREAM = "DSTREAM"


class QueryForm(enum.Enum):
    SELECT = "SELECT"
    CONSTRUCT = "CONSTRUCT"
    ASK = "ASK"


class StreamView(Protocol):
    """What windows and report policies read of the streams: the element index, in stream
    order (by timestamp, ties in arrival order), numbered 1, 2, 3, ... from each stream's first
    element (spec §6.1)."""

    def elements_in(self, stream: str, opens: int, closes: int) -> list[str]: ...

    def count_window(self, stream: str, through: int, size: int, step: int) -> "CountContent | None": ...

    def next_count_close(self, stream: str, after: int, step: int) -> int | None: ...

    def count_reach(self, stream: str, instant: int, size: int, step: int) -> int: ...

    def next_arrival(self, stream: str, after: int) -> int | None: ...

    # Partitioned windows (spec §6.9): the elements of a stream by the objects of their key
    # predicates' triples.
    def partition_window(self, stream: str, keys: tuple[str, ...], through: int,
                         size: int) -> "CountContent | None": ...

    def next_keyed_arrival(self, stream: str, keys: tuple[str, ...], after: int) -> int | None: ...

    def partition_reach(self, stream: str, keys: tuple[str, ...], instant: int, size: int) -> int: ...

    # Landmark windows (spec §6.10): how many elements a time range holds, without listing them.
    def count_between(self, stream: str, opens: int, closes: int) -> int: ...


@dataclass(frozen=True)
class CountContent:
    """The elements of a count window, in stream order, and the first and last one's time."""

    graphs: list[str]
    first: int
    last: int


@dataclass(frozen=True)
class WindowContent:
    """What a window holds at one evaluation: the elements with opens <= τ < closes (time
    windows) or the listed graphs (count windows), and the interval the results show."""

    shown: tuple[int, int]
    opens: int = 0
    closes: int = 0
    graphs: list[str] | None = None

    # A fact window (spec §6.13) holds no elements: `graphs` is the one graph its facts are
    # in at this evaluation, and `changed` says whether a fact opened or closed at the instant.
    facts: bool = False
    changed: bool = False

    def select(self, stream: str, view: StreamView) -> list[str]:
        return self.graphs if self.graphs is not None else view.elements_in(stream, self.opens, self.closes)


@dataclass(frozen=True)
class TimeWindow:
    """A time-based window, times in microseconds. At its closes x_i = τ0 + a + i·β it holds
    [x_i − a, x_i − b): `FROM NAMED WINDOW iri ON stream [RANGE a STEP β START τ0]` has b = 0,
    `[FROM NOW-a TO NOW-b STEP β]` (spec §6.2) any 0 <= b < a. `upper_closed` windows hold
    (x_i − a, x_i − b] instead: C-SPARQL's bounds (spec §6.5); timestamps are whole
    microseconds, so that is [x_i − a + 1, x_i − b + 1). `tumbling` (CQELS-QL's TUMBLING,
    docs/language.md) changes what content change reads: the period (τ0 + k·a, τ0 + (k+1)·a]
    that holds the evaluation instant, up to it, instead of the last `a`. `lower_closed` windows hold [t − a, t]
    under content change instead of (t − a, t]: an EP-SPARQL query bounded by getDURATION() <= a
    (spec §6.12) reads an event at t − a."""

    iri: str
    stream: str
    range: int
    step: int
    start: int = 0
    lag: int = 0
    upper_closed: bool = False
    line: int = 0
    column: int = 0
    tumbling: bool = False
    lower_closed: bool = False

    def close_at_or_before(self, instant: int) -> int | None:
        """The latest close x_i = τ0 + a + i·β with x_i <= instant, or None before the first."""
        first = self.start + self.range
        if instant < first:
            return None
        return first + ((instant - first) // self.step) * self.step

    def bounds_at(self, instant: int) -> tuple[int, int] | None:
        """[opens, closes): the timestamps the window holds at an evaluation at `instant`, or
        None if it has not closed yet."""
        close = self.close_at_or_before(instant)
        return None if close is None else self._selection(close)

    def _selection(self, close: int) -> tuple[int, int]:
        shift = 1 if self.upper_closed else 0
        return close - self.range + shift, close - self.lag + shift

    def content_at(self, instant: int, view: StreamView) -> WindowContent | None:
        close = self.close_at_or_before(instant)
        if close is None:
            return None
        opens, closes = self._selection(close)
        return WindowContent((close - self.range, close - self.lag), opens, closes)

    def content_sliding(self, instant: int, view: StreamView) -> WindowContent:
        """Content change (spec §6.3): t − a < τ <= t − b at the evaluation instant t (t − a <= τ
        when `lower_closed`); a tumbling window p < τ <= t, p = τ0 + k·a the start of the period
        (p, p + a] holding t."""
        opens = self._period_start(instant) if self.tumbling else instant - self.range
        return WindowContent((opens, instant - self.lag),
                             opens + (0 if self.lower_closed else 1), instant - self.lag + 1)

    def _period_start(self, instant: int) -> int:
        """The greatest τ0 + k·a below `instant`: the open start of its period."""
        return self.start + (instant - self.start - 1) // self.range * self.range

    def next_close(self, after: int, view: StreamView) -> int | None:
        first = self.start + self.range
        if after < first:
            return first
        return first + ((after - first) // self.step + 1) * self.step

    def closes_between(self, after: int, until: int) -> list[int]:
        """Every close x with after < x <= until."""
        first = self.start + self.range
        if until < first:
            return []
        i = 0 if after < first else (after - first) // self.step + 1
        closes = []
        x = first + i * self.step
        while x <= until:
            closes.append(x)
            x += self.step
        return closes

    def earliest_reachable(self, instant: int, view: StreamView | None = None) -> int:
        """No evaluation at or after `instant` reads an element earlier than this."""
        bounds = self.bounds_at(instant)
        return self.start if bounds is None else bounds[0]

    def sliding_reach(self, after: int, view: StreamView) -> int:
        """No content-change evaluation after `after` reads an element earlier than this."""
        return (self._period_start(after + 1) if self.tumbling else after - self.range) + 1

    @property
    def rate(self) -> float:
        """Closes per second."""
        return 1_000_000 / self.step

    def describe(self) -> dict:
        data = {"iri": self.iri, "stream": self.stream, "range": format_duration(self.range),
                "step": format_duration(self.step), "start": format_instant(self.start)}
        if self.lag:
            data["to"] = "NOW-" + format_duration(self.lag)
        if self.upper_closed:
            data["bounds"] = "(close - range, close]"
        if self.tumbling:
            data["tumbling"] = ("at an arrival instant t: the elements of the period (start + k*%s, start + (k+1)*%s] "
                                "that contains t, up to t" % (data["range"], data["range"]))
        if self.lower_closed:
            data["content_change_bounds"] = "[t - range, t]"
        return data


@dataclass(frozen=True)
class CountWindow:
    """`[ELEMS n STEP m]` (spec §6.1): a close at every element whose number is a multiple of
    m, at that element's time; the window then holds the last n elements up to it."""

    iri: str
    stream: str
    size: int
    step: int = 1
    line: int = 0
    column: int = 0

    def content_at(self, instant: int, view: StreamView) -> WindowContent | None:
        return self._content(view.count_window(self.stream, instant, self.size, self.step))

    def content_sliding(self, instant: int, view: StreamView) -> WindowContent | None:
        """Content change: the last n elements with τ <= t (STEP ignored)."""
        return self._content(view.count_window(self.stream, instant, self.size, 1))

    @staticmethod
    def _content(content: CountContent | None) -> WindowContent | None:
        if content is None:
            return None
        return WindowContent((content.first, content.last), graphs=content.graphs)

    def next_close(self, after: int, view: StreamView) -> int | None:
        return view.next_count_close(self.stream, after, self.step)

    def earliest_reachable(self, instant: int, view: StreamView) -> int:
        return view.count_reach(self.stream, instant, self.size, self.step)

    def sliding_reach(self, after: int, view: StreamView) -> int:
        return view.count_reach(self.stream, after, self.size, 1)

    def describe(self) -> dict:
        return {"iri": self.iri, "stream": self.stream, "elements": self.size, "step": self.step}


@dataclass(frozen=True)
class PartitionedWindow:
    """`[ELEMS n PARTITION BY p1, ..., pk]` (spec §6.9): at instant t, for every key, the last n
    elements of that key with τ <= t (ties in arrival order). An element's keys are the tuples of
    the objects of its asserted triples `?s p_i ?o`: one with several values for a predicate
    belongs to each such partition, one with none for some p_i to none (it never enters). It
    closes at every distinct τ of an element that has a key, and is listed as [τ of the oldest
    element held, τ of the newest]."""

    iri: str
    stream: str
    size: int
    keys: tuple[str, ...]
    line: int = 0
    column: int = 0

    def content_at(self, instant: int, view: StreamView) -> WindowContent | None:
        content = view.partition_window(self.stream, self.keys, instant, self.size)
        return None if content is None else WindowContent((content.first, content.last), graphs=content.graphs)

    def content_sliding(self, instant: int, view: StreamView) -> WindowContent | None:
        """Content change is this window's own policy: the same content."""
        return self.content_at(instant, view)

    def next_close(self, after: int, view: StreamView) -> int | None:
        return view.next_keyed_arrival(self.stream, self.keys, after)

    def earliest_reachable(self, instant: int, view: StreamView) -> int:
        return view.partition_reach(self.stream, self.keys, instant, self.size)

    def sliding_reach(self, after: int, view: StreamView) -> int:
        return view.partition_reach(self.stream, self.keys, after, self.size)

    def explain(self) -> str:
        keys = ", ".join("<%s>" % k for k in self.keys)
        return ("for every value of %s in an element (each value a partition of its own), the last %d element%s "
                "of that partition; closes whenever an element with a key arrives (elements without one never "
                "enter)" % (keys, self.size, "" if self.size == 1 else "s"))

    def describe(self) -> dict:
        return {"iri": self.iri, "stream": self.stream, "kind": "partitioned", "elements": self.size,
                "partition_by": list(self.keys), "explained": self.explain()}


@dataclass(frozen=True)
class LandmarkWindow:
    """`[RANGE UNBOUNDED STEP β START τ0]` (spec §6.10): closes at x_i = τ0 + i·β, i = 1, 2, ...
    (none at τ0 itself) and then holds [τ0, x_i): everything the stream has since τ0 (the epoch
    without START), listed as [τ0, x_i]."""

    iri: str
    stream: str
    step: int
    start: int = 0
    line: int = 0
    column: int = 0
    upper_closed = False     # (read beside TimeWindow's)
    lag = 0

    def close_at_or_before(self, instant: int) -> int | None:
        first = self.start + self.step
        if instant < first:
            return None
        return self.start + ((instant - self.start) // self.step) * self.step

    def content_at(self, instant: int, view: StreamView) -> WindowContent | None:
        close = self.close_at_or_before(instant)
        if close is None:
            return None
        return WindowContent((self.start, close), self.start, close)

    def content_sliding(self, instant: int, view: StreamView) -> WindowContent | None:
        """Content change (spec §6.3, §6.6): everything with τ0 <= τ <= t."""
        if instant < self.start:
            return None
        return WindowContent((self.start, instant), self.start, instant + 1)

    def next_close(self, after: int, view: StreamView) -> int | None:
        if after < self.start + self.step:
            return self.start + self.step
        return self.start + ((after - self.start) // self.step + 1) * self.step

    def earliest_reachable(self, instant: int, view: StreamView | None = None) -> int:
        return self.start

    def sliding_reach(self, after: int, view: StreamView) -> int:
        return self.start

    @property
    def rate(self) -> float:
        return 1_000_000 / self.step

    def explain(self) -> str:
        since = "the epoch (everything the stream has)" if not self.start else format_instant(self.start)
        return ("everything since %s, growing: closes every %s from then on, the first %s after it"
                % (since, format_duration(self.step), format_duration(self.step)))

    def describe(self) -> dict:
        return {"iri": self.iri, "stream": self.stream, "kind": "landmark", "range": "UNBOUNDED",
                "step": format_duration(self.step), "start": format_instant(self.start),
                "explained": self.explain()}


@dataclass(frozen=True)
class FactTemplate:
    """A triple of a FACTS template: each position a variable (`?name`) or a constant written as
    SPARQL (an IRI in full, a literal as written; the query's prefixes are in force)."""

    subject: str
    predicate: str
    object: str

    def terms(self) -> tuple[str, str, str]:
        return self.subject, self.predicate, self.object


@dataclass(frozen=True)
class FactWindow:
    """`[FACTS { template } SINCE { P } TILL { Q } STEP β START τ0]` (spec §6.13): each element, in
    stream order, opens the template's triples for each match of P (unless open already: the
    earliest opening is kept) and then closes the open triples each match of Q binds through the
    variables the template shares with Q. A fact opened at τs and closed at τe holds during
    [τs, τe). At instant t the window's default graph holds the facts that hold at t, each
    annotated `rspstar:since τs`. With STEP it closes at τ0 + i·β (i = 1, 2, ...), without it at
    every instant where a fact opens or closes; listed as [t, t]. The facts are state (the
    engine's, endpoint/engine/facts.py), not elements."""

    iri: str
    stream: str
    template: tuple[FactTemplate, ...]
    since: str                  # the SINCE group pattern as written, braces included
    till: str                   # the TILL group pattern
    prologue: str               # the query's PREFIX and BASE declarations, for the patterns
    step: int | None = None
    start: int = 0
    line: int = 0
    column: int = 0
    upper_closed = False
    lag = 0

    def template_variables(self) -> list[str]:
        return list(dict.fromkeys(t[1:] for triple in self.template for t in triple.terms() if t.startswith("?")))

    def close_at_or_before(self, instant: int) -> int | None:
        if self.step is None or instant < self.start + self.step:
            return None
        return self.start + ((instant - self.start) // self.step) * self.step

    def content_at(self, instant: int, view: StreamView) -> WindowContent | None:
        """The facts at `instant` (the view keeps them: FactView in the engine)."""
        return view.facts_at(self, instant)

    def content_sliding(self, instant: int, view: StreamView) -> WindowContent | None:
        return view.facts_at(self, instant)

    def next_close(self, after: int, view: StreamView) -> int | None:
        if self.step is None:
            return view.next_arrival(self.stream, after)
        if after < self.start + self.step:
            return self.start + self.step
        return self.start + ((after - self.start) // self.step + 1) * self.step

    def earliest_reachable(self, instant: int, view: StreamView) -> int:
        return view.fact_reach(self)

    def sliding_reach(self, after: int, view: StreamView) -> int:
        return view.fact_reach(self)

    @property
    def rate(self) -> float:
        return 0.0 if self.step is None else 1_000_000 / self.step

    def explain(self) -> str:
        template = " . ".join(" ".join(t.terms()) for t in self.template)
        when = ("every %s from %s" % (format_duration(self.step), format_instant(self.start))
                if self.step is not None else "whenever a fact opens or closes")
        return ("the facts { %s } that hold: each opens when an element matches SINCE %s (the earliest opening "
                "kept) and closes when one matches TILL %s through the variables they share; its default graph "
                "holds them annotated with rspstar:since; evaluated %s" % (template, self.since, self.till, when))

    def describe(self) -> dict:
        data = {"iri": self.iri, "stream": self.stream, "kind": "facts",
                "facts": [" ".join(t.terms()) for t in self.template], "since": self.since, "till": self.till,
                "explained": self.explain()}
        if self.step is not None:
            data["step"] = format_duration(self.step)
            data["start"] = format_instant(self.start)
        return data


Window = Union[TimeWindow, CountWindow, PartitionedWindow, LandmarkWindow, FactWindow]


@dataclass
class ContinuousQuery:
    """A parsed RSP-QL* query."""

    text: str
    form: QueryForm
    r2s: R2S
    windows: dict[str, Window]
    # None in a query whose evaluation no longer reads it (a member of a group of queries
    # differing in constants keeps its text instead).
    body: "ParsedBody | None"
    name: str | None = None
    output_stream: str | None = None
    computed_every: int | None = None
    from_graphs: list[str] = field(default_factory=list)
    from_named_graphs: list[str] = field(default_factory=list)
    report: str | None = None        # the report policy the query's dialect implies (spec §6.5)
    dialect: str = "rspql"
    # Options the dialect implies (its window content, say); a user's options override them.
    option_defaults: dict[str, str] = field(default_factory=dict)
    translation: str | None = None   # a dialect query written as RSP-QL*
    # The SELECT clause's variables in its order (None: SELECT *, or not a SELECT), the head of
    # the query's results.
    variables: tuple[str, ...] | None = None
    # C-SPARQL / Streaming SPARQL (spec §6.5): outside WINDOW and GRAPH, triples match the
    # merge of these windows' elements and the background default graph.
    merged_windows: tuple[str, ...] | None = None
    # Window forms of the community pages read as the dialect's own (spec §6.7), and what the
    # query says that is valid but surely not meant (a HAVING over a SELECT alias): each names
    # its line and column in the user's text.
    normalised: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # What each WINDOW block reads and why (spec 6.15), under the options it was admitted with.
    readings: list[str] = field(default_factory=list)
    # CQELS-QL: FROM NAMED graphs name the background graphs GRAPH ranges over and leave the
    # default graph the background's (CQELS reads its default dataset whatever a query names).
    named_keep_default: bool = False
    # The IRI the text was retrieved from (its file, the URL it was registered at, a configured
    # base), which its relative IRIs resolve against before any BASE of its own: a text made
    # from this one (a part of a join, queries differing in constants) is read with it too.
    base: str | None = None

    @property
    def streams(self) -> list[str]:
        return sorted({w.stream for w in self.windows.values()})

    def policy_origin(self) -> int:
        """τ0 of the query: the earliest START of its time windows, else the epoch."""
        starts = [w.start for w in self.windows.values() if isinstance(w, (TimeWindow, LandmarkWindow))
                  or (isinstance(w, FactWindow) and w.step is not None)]
        return min(starts) if starts else 0
