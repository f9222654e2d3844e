"""Report policies (spec §3, §6.3 and §6.6), as declared: when a query is evaluated and which
evaluations are reported. The engine's S2R (endpoint/engine/s2r.py) reads a policy at run time,
with the query's windows, over the streams; registration and admission read what it declares
here (its instants known in advance, its rate, how complete a stream must be at an instant).

A policy is a conjunction of strategies (the RSP-QL paper Def. 23), each bound to one window or, written
without one, to the query as a whole (today's meaning, spec §6.6):

    close(<w>)            t is a close of window <w>        close      t is a close of any window
    non-empty(<w>)        <w>'s window at t holds an element non-empty  some window does
    content-change(<w>)   an element with τ = t entered <w>'s stream (spec §6.3); content-change: any stream
    periodic(PT5S)        t = τ0q + k·p                      periodic   the query's COMPUTED EVERY

`t` is an evaluation instant iff every strategy holds at `t`. The strategies that give instants
(close, content-change, periodic) are intersected into terms; non-empty only filters them. A
policy with no strategy giving instants takes the query's own (COMPUTED EVERY, else every window
close).

Instants are microseconds. A term's sources are a progression known in advance and sources that
depend on the data (count windows' closes, arrivals under content change), each read through a
`StreamView` (the store's element index).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from .errors import TemporalValueError, TranslatorError
from .model import ContinuousQuery
from .windows import Progression, StreamView, Window
from .syntax import resolve_iri
from .temporal import format_duration, parse_duration
from .tokens import IRI, PNAME

STRATEGIES = ("close", "non-empty", "content-change", "periodic")


class PolicyError(TranslatorError):
    """A report policy the query cannot have."""


@dataclass(frozen=True)
class Strategy:
    """One condition of a policy: `kind` (one of STRATEGIES), the window it watches (None: the
    query as a whole) and, for periodic, its period (None: COMPUTED EVERY's)."""

    kind: str
    window: str | None = None
    period: int | None = None

    def show(self) -> str:
        if self.period is not None:
            return "%s(%s)" % (self.kind, format_duration(self.period))
        return self.kind if self.window is None else "%s(<%s>)" % (self.kind, self.window)


# One strategy, `name` or `name(argument)`; strategies are joined by `and`.
_STRATEGY = re.compile(r"\s*([A-Za-z][A-Za-z-]*)\s*(?:\(\s*([^()]*?)\s*\))?\s*")
_AND = re.compile(r"and\b", re.I)


def parse_strategies(text: str) -> list[tuple[str, str | None, int]]:
    """The strategies of a `report` option as (kind, argument or None, column), checking only
    the form (the windows are checked against a query by `report_policy`); PolicyError with the
    column of what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise PolicyError("report: expected a policy such as close, non-empty or close(<w>) and non-empty(<w>)")
    found = []
    at = 0
    while True:
        m = _STRATEGY.match(text, at)
        if not m or not m.group(1):
            raise PolicyError("report, column %d: expected a strategy (%s), found %r"
                              % (at + 1, ", ".join(STRATEGIES), text[at:at + 20]))
        kind = m.group(1).lower()
        if kind not in STRATEGIES:
            raise PolicyError("report, column %d: unknown strategy %r (known: %s)"
                              % (m.start(1) + 1, m.group(1), ", ".join(STRATEGIES)))
        argument = m.group(2)
        if argument is not None and not argument:
            raise PolicyError("report, column %d: %s() names nothing; write %s alone or %s(<window>)"
                              % (m.start(1) + 1, kind, kind, kind))
        found.append((kind, argument, m.start(2 if argument is not None else 1) + 1))
        at = m.end()
        if at == len(text):
            return found
        n = _AND.match(text, at)
        if not n:
            raise PolicyError("report, column %d: strategies are joined by 'and', found %r"
                              % (at + 1, text[at:at + 20]))
        at = n.end()


def strategies_of(query: ContinuousQuery, text: str) -> list[Strategy]:
    """The strategies of `text` with their windows resolved through the query's prologue and
    checked against its declarations (or, for a dialect query, the keys of spec §6.5)."""
    strategies = []
    for kind, argument, column in parse_strategies(text):
        if argument is None:
            strategies.append(Strategy(kind))
        elif kind == "periodic":
            try:
                period = parse_duration(argument)
            except TemporalValueError as e:
                raise PolicyError("report, column %d: periodic takes a duration such as PT5S: %s"
                                  % (column, e)) from None
            if period <= 0:
                raise PolicyError("report, column %d: the period must be positive, got %s" % (column, argument))
            strategies.append(Strategy(kind, period=period))
        else:
            strategies.append(Strategy(kind, _window_named(query, argument, column)))
    return list(dict.fromkeys(strategies))


def _window_named(query: ContinuousQuery, argument: str, column: int) -> str:
    body = query.body
    declared = ", ".join("<%s>" % w for w in query.windows) or "none"
    try:
        if argument.startswith("<") and argument.endswith(">"):
            iri = resolve_iri(argument, IRI, body.prefixes, body.base)
        elif ":" in argument:
            iri = resolve_iri(argument, PNAME, body.prefixes, body.base)
        else:
            iri = argument
    except KeyError:
        raise PolicyError("report, column %d: undeclared prefix in %r (the query declares %s)"
                          % (column, argument, ", ".join(p + ":" for p in body.prefixes) or "none")) from None
    except ValueError as e:
        raise PolicyError("report, column %d: %s is not an IRI the query's base resolves: %s" % (column, argument, e)) \
            from None
    if iri not in query.windows:
        raise PolicyError("report, column %d: the query declares no window %s (its windows: %s)"
                          % (column, argument, declared))
    return iri


# -- where instants come from: the windows' closes (windows.py) and arrivals -------------------
@dataclass(frozen=True)
class Arrivals:
    """The instants at which an element enters one of `streams` (content change)."""

    streams: tuple[str, ...]
    changes = False
    element_window = None

    def next(self, after: int, view: StreamView) -> int | None:
        arrivals = [t for t in (view.next_arrival(s, after) for s in self.streams) if t is not None]
        return min(arrivals) if arrivals else None


class Term:
    """The instants every source holds: at most one progression (several are met into one)
    and sources that depend on the data (the engine's S2R meets them over the streams)."""

    def __init__(self, progression: Progression | None, data: tuple = ()):
        self.progression = progression
        self.data = data

    def sources(self) -> list:
        return ([self.progression] if self.progression is not None else []) + list(self.data)

    def join(self, other: "Term") -> "Term | None":
        if self.progression is None or other.progression is None:
            progression = self.progression or other.progression
        else:
            progression = self.progression.meet(other.progression)
            if progression is None:
                return None
        return Term(progression, tuple(dict.fromkeys(self.data + other.data)))


def _window_closes(window: Window) -> Term:
    closes = window.closes()
    return Term(closes) if isinstance(closes, Progression) else Term(None, (closes,))


class ReportPolicy:
    """A query's conjunction of strategies, as terms whose instants are united."""

    def __init__(self, query: ContinuousQuery, strategies: list[Strategy]):
        self.windows: list[Window] = list(query.windows.values())
        self.strategies = tuple(strategies)
        self._computed_every = query.computed_every
        by_iri = query.windows
        self.content_change = any(s.kind == "content-change" for s in strategies)
        # Whether the windows are read at their closes (so a close's content is the same whenever
        # it is read, which incremental evaluation relies on).
        self.at_closes = not self.content_change
        self.non_empty = tuple(s.window for s in strategies if s.kind == "non-empty")
        giving = [s for s in strategies if s.kind != "non-empty"]
        if not giving:
            giving = [Strategy("periodic")] if query.computed_every is not None else [Strategy("close")]
        self.giving = tuple(giving)
        terms: list[Term] = [Term(None)]
        for strategy in giving:
            options = self._instants_of(query, strategy, by_iri)
            terms = [met for term in terms for option in options if (met := term.join(option)) is not None]
            if not terms and self.windows:
                raise PolicyError("report: %s can never hold: the instants of %s never meet"
                                  % (" and ".join(s.show() for s in strategies), " and ".join(s.show() for s in giving)))
        self.terms = terms
        # A query without windows has instants only from a period: without one, nothing closes
        # and nothing arrives, and it would never be evaluated.
        self.never_reports = not self.windows and not any(term.progression is not None for term in terms)
        # Whether instants come from the elements themselves (count windows, content change), so
        # that a replay must offer every element's timestamp as a candidate instant.
        self.arrivals = any(term.data for term in terms)
        # Whether some instants are only a window's candidates, closes where its content changed
        # there (a fact window without STEP): the engine's S2R asks the contents.
        self.changes = any(source.changes for term in terms for source in term.data)
        # Whether an evaluation waits until its streams are complete past its instant
        # (`complete_through`, asked before every evaluation).
        self._past_instant = self.content_change or any(w.waits_past_close for w in self.windows)

    def _instants_of(self, query: ContinuousQuery, strategy: Strategy, by_iri: dict[str, Window]) -> list[Term]:
        """The instants one strategy gives, as a union of terms."""
        if strategy.kind == "close":
            windows = [by_iri[strategy.window]] if strategy.window else self.windows
            return [_window_closes(w) for w in windows]
        if strategy.kind == "periodic":
            period = strategy.period if strategy.period is not None else query.computed_every
            if period is None:
                raise PolicyError("report: periodic needs COMPUTED EVERY in the query, or a period: periodic(PT5S)")
            return [Term(Progression(query.policy_origin(), period))]
        streams = (by_iri[strategy.window].stream,) if strategy.window else tuple(sorted({w.stream for w in self.windows}))
        return [Term(None, (Arrivals(streams),))]

    # -- what registration, admission and the engine read ----------------------------------------
    def fixed_instants(self, after: int, until: int) -> list[int]:
        """The instants in (after, until] that do not depend on the data."""
        instants: set[int] = set()
        for term in self.terms:
            if not term.data and term.progression is not None:
                instants.update(term.progression.between(after, until))
        return sorted(instants)

    def next_fixed_instant(self, after: int) -> int | None:
        """The first instant after `after` that does not depend on the data (None: none does)."""
        known = [term.progression.next(after, None) for term in self.terms
                 if not term.data and term.progression is not None]
        return min(known) if known else None

    @property
    def at_every_close(self) -> bool:
        """Whether the instants are the closes of every window, each a count or partitioned
        window's (at its elements): `close`, or `close(<w>)` naming all of them."""
        closes = [term.data[0] for term in self.terms if term.progression is None and len(term.data) == 1]
        return not self.content_change and len(closes) == len(self.terms) \
            and all(source.element_window is not None for source in closes) \
            and {source.element_window for source in closes} == {w.iri for w in self.windows}

    def gives(self, instant: int, closed: set[str]) -> bool:
        """Whether `instant` is one of the policy's instants when the count and partitioned
        windows `closed` close there (an element of theirs is at the instant) and no other: for
        a partitioned query, whose key groups say which of their windows closed where."""
        for term in self.terms:
            if term.progression is not None and term.progression.next(instant - 1, None) != instant:
                continue
            if all(source.element_window in closed for source in term.data):
                return True
        return False

    def report_where(self, held: Callable[[str], bool]) -> bool:
        """Whether the non-empty strategies hold when `held(iri)` says whether a window holds
        elements (read from its contents, or from what a partitioned query's keys found)."""
        return all(held(iri) if iri is not None else any(held(w.iri) for w in self.windows)
                   for iri in self.non_empty)

    def complete_through(self, instant: int) -> int:
        """The watermark every input stream must reach before the evaluation at `instant`:
        a window that holds elements at its close instant (count windows, upper-closed
        bounds, content change) waits until the stream is complete past it."""
        return instant + 1 if self._past_instant else instant

    def rate(self) -> float:
        """Evaluations per second the policy asks for whatever the data: count windows and
        content change add one per element arriving, at the streams' rate, not the query's."""
        return sum(1_000_000 / term.progression.step for term in self.terms if term.progression is not None)

    @property
    def fixed(self) -> bool:
        """Whether the instants do not depend on the data (whether to report at one may: the
        non-empty strategies)."""
        return not self.arrivals and not self.content_change

    def show(self) -> str:
        """The policy as the `report` option writes it, windows as full IRIs."""
        return " and ".join(s.show() for s in self.strategies) if self.strategies else \
            " and ".join(s.show() for s in self.giving)

    def describe(self) -> str:
        parts = []
        for strategy in self.giving:
            if strategy.kind == "close":
                parts.append("at every window close" if strategy.window is None
                             else "at every close of <%s>" % strategy.window)
            elif strategy.kind == "periodic":
                period = strategy.period if strategy.period is not None else self._computed_every
                parts.append("every %s" % format_duration(period))
            else:
                parts.append("at every instant an element arrives (content change)" if strategy.window is None
                             else "at every instant an element arrives on <%s>'s stream (content change)"
                             % strategy.window)
        text = parts[0] if len(parts) == 1 else "where these meet: " + "; ".join(parts)
        for iri in self.non_empty:
            text += ", skipped when every window is empty" if iri is None else ", skipped when <%s> is empty" % iri
        return text


def report_policy(query: ContinuousQuery, report: str | None = None) -> ReportPolicy:
    """The policy of a query: `report` as given in its options, else what the query itself
    says (COMPUTED EVERY, its dialect), else window close."""
    text = report or query.report
    return ReportPolicy(query, strategies_of(query, text) if text else [])
