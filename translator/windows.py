"""The kinds of window: each one class, answering every question the engine asks of a window.

A query's windows are values of these classes (the parser makes them, one clause per kind). What
registration, admission, the report policy, the incremental plans, partitioned evaluation, the
dialects and the engine's S2R need to know of a window, they ask the window: none of them
branches on its kind. Adding a kind is adding a class here and its clause in `parser.py`
(docs/design.md, "Adding a window kind"); every answer has a default in `Window` that a kind
which does not take part (in partitioned evaluation, in incremental evaluation) keeps.

The questions, in the order the engine meets them:

- `over_limits(limits)`: what it holds past the engine's limits (admission);
- `closes()`: where its closes come from: a `Progression` known in advance, or its stream's
  elements (`ElementCloses`), known as they arrive; `origin`: τ0 of a periodic policy;
- `waits_past_close`: whether its content at a close is exact only once its stream is complete
  past the close (a close at an element's own instant: the report policy's `complete_through`);
- `ranges_refusal(...)` and `unbounded`: how incremental evaluation may read it (time ranges
  each evaluated once, or close by close since its start);
- `keyed`, `partition_refusal()` and `key_refusal(key)`: whether it partitions by key and
  whether a query over it may run partitioned on Spark's executors;
- `reads_facts`: whether it holds facts its query keeps as state rather than elements;
- `bounded(...)`: the window under a dialect's bounds (C-SPARQL's upper-closed windows,
  CQELS-QL's TUMBLING, EP-SPARQL's lower-closed duration bound);
- `content_at`, `content_sliding`, `next_close`, `earliest_reachable`, `sliding_reach`: what it
  holds at an instant, read through a `StreamView` (the store's element index), at its closes
  and under content change, and how far back it reads (retention).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Protocol

from .temporal import format_duration, format_instant


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


# -- where a window's closes come from ------------------------------------------------------
@dataclass(frozen=True)
class Progression:
    """The instants first + k·step, k = 0, 1, 2, ...: closes known in advance."""

    first: int
    step: int

    def next(self, after: int, view: StreamView | None = None) -> int:
        if after < self.first:
            return self.first
        return self.first + ((after - self.first) // self.step + 1) * self.step

    def between(self, after: int, until: int) -> list[int]:
        instants = []
        t = self.next(after)
        while t <= until:
            instants.append(t)
            t += self.step
        return instants

    def meet(self, other: "Progression") -> "Progression | None":
        """The instants both hold (Chinese remainder theorem), None if they never meet."""
        g = math.gcd(self.step, other.step)
        if (other.first - self.first) % g:
            return None
        lcm = self.step // g * other.step
        m = other.step // g
        k = ((other.first - self.first) // g * pow(self.step // g, -1, m)) % m if m > 1 else 0
        x = self.first + self.step * k
        lowest = max(self.first, other.first)
        if x < lowest:
            x += -(-(lowest - x) // lcm) * lcm
        return Progression(x, lcm)


@dataclass(frozen=True)
class ElementCloses:
    """The closes of `window` at its stream's elements, known once they are in (the window
    answers `next_close` from the stream); with `changes`, a candidate is a close only where the
    window's content changed there (`WindowContent.changed`: a fact window without STEP)."""

    window: "Window"
    changes: bool = False

    def next(self, after: int, view: StreamView) -> int | None:
        return self.window.next_close(after, view)

    @property
    def element_window(self) -> str | None:
        """The window that closes at every one of its elements here (None: a candidate is not
        a close by itself)."""
        return None if self.changes else self.window.iri


# -- the kinds ------------------------------------------------------------------------------
class Window:
    """What every kind of window answers (the module's docstring lists the questions). The
    defaults are those of a window that reads its stream's elements at its closes and takes no
    part in partitioned or incremental evaluation; a kind overrides what differs."""

    noun = "window"             # its kind, as messages name it ("a count window ...")
    # A kind's fields (dataclass fields of each subclass): every kind has these.
    iri: str
    stream: str
    line: int
    column: int

    # -- declared: registration, admission, the report policy ---------------------------------
    def closes(self) -> Progression | ElementCloses:
        raise NotImplementedError

    @property
    def origin(self) -> int | None:
        """τ0 of its closes when they are a progression from a START (the query's periodic
        instants start there), else None."""
        return None

    @property
    def waits_past_close(self) -> bool:
        """Whether its content at a close is exact only once the stream is complete past the
        close (it holds elements at the close's own instant)."""
        return True

    def over_limits(self, limits) -> str | None:
        """Why it holds more than the engine's limits allow (`limits`: max_range, µs, and
        max_elements), or None."""
        return None

    # -- incremental evaluation (translator/incremental.py) ------------------------------------
    unbounded = False           # holds everything since its START, growing (read close by close)

    def ranges_refusal(self, max_ranges: int) -> str:
        """Why its elements cannot be read as time ranges each evaluated once ("": they can)."""
        return "a %s window is evaluated whole" % self.noun

    # -- partitioned evaluation (translator/partition.py, store/partitions.py) -----------------
    keyed = False               # partitions its stream's elements by key (spec §6.9)

    def partition_refusal(self) -> str | None:
        """Why a query over it may not run on Spark's executors (None: it may, when its stream
        has a key: `key_refusal`)."""
        return "window <%s> is a %s window, which runs on the single store only" % (self.iri, self.noun)

    def key_refusal(self, key) -> str | None:
        """Why it may not run partitioned by its stream's partition key `key` (None: it may)."""
        return None

    # -- what it holds ---------------------------------------------------------------------------
    reads_facts = False         # holds the facts its stream opened and closed, not elements (§6.13)

    def bounded(self, upper_closed: bool, tumbling: bool, lower_closed: bool) -> "Window":
        """The window under a dialect's bounds (spec §6.5, §6.12): only a time window has them."""
        return self

    def content_at(self, instant: int, view: StreamView) -> WindowContent | None:
        """What it holds at an evaluation at `instant` (its latest close at or before it), None
        before its first close."""
        raise NotImplementedError

    def content_sliding(self, instant: int, view: StreamView) -> WindowContent | None:
        """What it holds at `instant` under content change (spec §6.3)."""
        raise NotImplementedError

    def next_close(self, after: int, view: StreamView) -> int | None:
        """Its first close after `after` known now."""
        raise NotImplementedError

    def earliest_reachable(self, instant: int, view: StreamView) -> int:
        """No evaluation at or after `instant` reads an element earlier than this."""
        raise NotImplementedError

    def sliding_reach(self, after: int, view: StreamView) -> int:
        """No content-change evaluation after `after` reads an element earlier than this."""
        raise NotImplementedError

    def describe(self) -> dict:
        raise NotImplementedError


_NOT_KEYED = "window <%s> is not a time window: the last n elements of a stream are not the last n of each key"


@dataclass(frozen=True)
class TimeWindow(Window):
    """A time-based window, times in microseconds. At its closes x_i = τ0 + a + i·β it holds
    [x_i − a, x_i − b): `FROM NAMED WINDOW iri ON stream [RANGE a STEP β START τ0]` has b = 0,
    `[FROM NOW-a TO NOW-b STEP β]` (spec §6.2) any 0 <= b < a. `upper_closed` windows hold
    (x_i − a, x_i − b] instead: C-SPARQL's bounds (spec §6.5); timestamps are whole
    microseconds, so that is [x_i − a + 1, x_i − b + 1). `tumbling` (CQELS-QL's TUMBLING,
    docs/language.md) changes what content change reads: the period (τ0 + k·a, τ0 + (k+1)·a]
    that holds the evaluation instant, up to it, instead of the last `a`. `lower_closed` windows hold
    [t − a, t] under content change instead of (t − a, t]: an EP-SPARQL query bounded by
    getDURATION() <= a (spec §6.12) reads an event at t − a."""

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

    noun = "time"

    def closes(self) -> Progression:
        return Progression(self.start + self.range, self.step)

    @property
    def origin(self) -> int:
        return self.start

    @property
    def waits_past_close(self) -> bool:
        return self.upper_closed

    def over_limits(self, limits) -> str | None:
        if self.range > limits.max_range:
            return "window <%s>: RANGE %s is longer than the engine's limit of %s (max_range)" % (
                self.iri, format_duration(self.range), format_duration(limits.max_range))
        return None

    def ranges_refusal(self, max_ranges: int) -> str:
        if self.lag or self.upper_closed:
            return "a window in the past or with upper-closed bounds is evaluated whole"
        if self.range > max_ranges * self.step:
            return "the window would be kept as more than %d ranges (RANGE / STEP)" % max_ranges
        return ""

    def partition_refusal(self) -> str | None:
        return _NOT_KEYED % self.iri if self.upper_closed else None

    def bounded(self, upper_closed: bool, tumbling: bool, lower_closed: bool) -> "TimeWindow":
        changed: dict = {}
        if upper_closed:
            changed.update(upper_closed=True, tumbling=tumbling)
        if lower_closed:
            changed.update(lower_closed=True)
        return replace(self, **changed) if changed else self

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

    def next_close(self, after: int, view: StreamView | None = None) -> int | None:
        return self.closes().next(after)

    def closes_between(self, after: int, until: int) -> list[int]:
        """Every close x with after < x <= until."""
        return self.closes().between(after, until)

    def earliest_reachable(self, instant: int, view: StreamView | None = None) -> int:
        bounds = self.bounds_at(instant)
        return self.start if bounds is None else bounds[0]

    def sliding_reach(self, after: int, view: StreamView | None = None) -> int:
        return (self._period_start(after + 1) if self.tumbling else after - self.range) + 1

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


def _over_elements(window: "CountWindow | PartitionedWindow", limits) -> str | None:
    if window.size > limits.max_elements:
        return "window <%s>: ELEMS %d holds more elements than the engine's limit of %d (max_elements)" % (
            window.iri, window.size, limits.max_elements)
    return None


def _listed(content: CountContent | None) -> WindowContent | None:
    """A count window's elements as its content, listed from the first one's time to the last's."""
    return None if content is None else WindowContent((content.first, content.last), graphs=content.graphs)


@dataclass(frozen=True)
class CountWindow(Window):
    """`[ELEMS n STEP m]` (spec §6.1): a close at every element whose number is a multiple of
    m, at that element's time; the window then holds the last n elements up to it."""

    iri: str
    stream: str
    size: int
    step: int = 1
    line: int = 0
    column: int = 0

    noun = "count"

    def closes(self) -> ElementCloses:
        return ElementCloses(self)

    def over_limits(self, limits) -> str | None:
        return _over_elements(self, limits)

    def partition_refusal(self) -> str | None:
        return _NOT_KEYED % self.iri

    def content_at(self, instant: int, view: StreamView) -> WindowContent | None:
        return _listed(view.count_window(self.stream, instant, self.size, self.step))

    def content_sliding(self, instant: int, view: StreamView) -> WindowContent | None:
        """Content change: the last n elements with τ <= t (STEP ignored)."""
        return _listed(view.count_window(self.stream, instant, self.size, 1))

    def next_close(self, after: int, view: StreamView) -> int | None:
        return view.next_count_close(self.stream, after, self.step)

    def earliest_reachable(self, instant: int, view: StreamView) -> int:
        return view.count_reach(self.stream, instant, self.size, self.step)

    def sliding_reach(self, after: int, view: StreamView) -> int:
        return view.count_reach(self.stream, after, self.size, 1)

    def describe(self) -> dict:
        return {"iri": self.iri, "stream": self.stream, "elements": self.size, "step": self.step}


@dataclass(frozen=True)
class PartitionedWindow(Window):
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

    noun = "partitioned"
    keyed = True

    def closes(self) -> ElementCloses:
        return ElementCloses(self)

    def over_limits(self, limits) -> str | None:
        return _over_elements(self, limits)

    def partition_refusal(self) -> str | None:
        return None

    def key_refusal(self, key) -> str | None:
        if key.inverse or key.predicate not in self.keys:
            return ("window <%s> is partitioned by %s, which does not include its stream's partition key %s: a key "
                    "of the window would span key groups" % (self.iri, ", ".join("<%s>" % k for k in self.keys),
                                                             key.show()))
        return None

    def content_at(self, instant: int, view: StreamView) -> WindowContent | None:
        return _listed(view.partition_window(self.stream, self.keys, instant, self.size))

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


def _stepped(start: int, step: int) -> Progression:
    """Closes every `step` from τ0, none at τ0 itself."""
    return Progression(start + step, step)


@dataclass(frozen=True)
class LandmarkWindow(Window):
    """`[RANGE UNBOUNDED STEP β START τ0]` (spec §6.10): closes at x_i = τ0 + i·β, i = 1, 2, ...
    (none at τ0 itself) and then holds [τ0, x_i): everything the stream has since τ0 (the epoch
    without START), listed as [τ0, x_i]."""

    iri: str
    stream: str
    step: int
    start: int = 0
    line: int = 0
    column: int = 0

    noun = "landmark"
    unbounded = True

    def closes(self) -> Progression:
        return _stepped(self.start, self.step)

    @property
    def origin(self) -> int:
        return self.start

    @property
    def waits_past_close(self) -> bool:
        return False

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

    def next_close(self, after: int, view: StreamView | None = None) -> int | None:
        return self.closes().next(after)

    def earliest_reachable(self, instant: int, view: StreamView | None = None) -> int:
        return self.start

    def sliding_reach(self, after: int, view: StreamView | None = None) -> int:
        return self.start

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
class FactWindow(Window):
    """`[FACTS { template } SINCE { P } TILL { Q } STEP β START τ0]` (spec §6.13): each element, in
    stream order, opens the template's triples for each match of P (unless open already: the
    earliest opening is kept) and then closes the open triples each match of Q binds through the
    variables the template shares with Q. A fact opened at τs and closed at τe holds during
    [τs, τe). At instant t the window's default graph holds the facts that hold at t, each
    annotated `rspstar:since τs`. With STEP it closes at τ0 + i·β (i = 1, 2, ...), without it at
    every instant where a fact opens or closes; listed as [t, t]. The facts are state (the
    engine's, endpoint/engine/facts.py), not elements: its view reads them (`facts_at`)."""

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

    noun = "fact"
    reads_facts = True

    def template_variables(self) -> list[str]:
        return list(dict.fromkeys(t[1:] for triple in self.template for t in triple.terms() if t.startswith("?")))

    def closes(self) -> Progression | ElementCloses:
        return _stepped(self.start, self.step) if self.step is not None else ElementCloses(self, changes=True)

    @property
    def origin(self) -> int | None:
        return self.start if self.step is not None else None

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
        return self.closes().next(after)

    def earliest_reachable(self, instant: int, view: StreamView) -> int:
        return view.fact_reach(self)

    def sliding_reach(self, after: int, view: StreamView) -> int:
        return view.fact_reach(self)

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
