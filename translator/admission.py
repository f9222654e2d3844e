"""Admission: everything that decides whether a query may be registered, in one call beside
`compile_query`. A query is compiled (its syntax, dialect and SPARQL checked), its SERVICE and
LOAD targets checked against the allowed origins, its report policy built, its windows and
report rate held to the engine's limits (and a query that would never be evaluated, having
no window and no period, refused), and, when it asks to run partitioned, the partition
rules checked. What is refused raises a TranslatorError naming what and where; nothing is
registered."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from .errors import TranslatorError
from .federation import check_federation
from .model import ContinuousQuery
from .options import QueryOptions
from .partition import PartitionKey, check_partitioned
from .policy import ReportPolicy, report_policy
from .temporal import format_instant
from .validate import compile_query, with_option_warnings
from .variants import CompiledShapes


class QueryOverLimits(TranslatorError):
    """A query whose windows or report rate pass the engine's configured limits."""


class QueryNeverEvaluated(TranslatorError):
    """A query with no window and no period: registered, it would never be evaluated."""


NEVER_EVALUATED = ("the query has no window, so it would never be evaluated: a continuous query reads a stream "
                   "through FROM NAMED WINDOW <w> ON <stream> [RANGE PT10S STEP PT5S] (or is evaluated at fixed "
                   "instants: COMPUTED EVERY PT5S, or the option report=periodic(PT5S)); a query over the stored data "
                   "alone is asked once, at /sparql (the SPARQL Protocol)")


class Limits(Protocol):
    """What a registered query may ask of the engine: the runner's configuration is read through
    these names (its [engine] settings, docs/configuration.md), nothing copies them."""

    max_range: int                                   # µs, the longest window RANGE
    max_reports_per_second: float                    # evaluations a query may ask for
    max_elements: int                                # the most elements a count window may hold
    # Origins SERVICE and LOAD may reach; None: anything (offline, a replay of the user's own files).
    federation_allowed: list[str] | None
    partition_keys: dict[str, PartitionKey]


@dataclass
class Admitted:
    query: ContinuousQuery
    policy: ReportPolicy
    options: QueryOptions


def admit(text: str, limits: Limits, options: QueryOptions | dict[str, str] | None = None, *,
          compiled: ContinuousQuery | None = None, registering: bool = True,
          shapes: CompiledShapes | None = None) -> Admitted:
    """The query of `text` with its options (read here from KEY=VALUE pairs when given so) and
    its report policy, if the engine may run it under `limits` (`compiled`: `text` as
    compile_query gave it with these options' dialect, start and base, not compiled again;
    `shapes`: the trees of queries compiled before, compile_query's).
    A check (`registering` false) is told what a registration would be refused for only where
    the query is well formed: a query that would never be evaluated."""
    if not isinstance(options, QueryOptions):
        options = QueryOptions.from_pairs(options or {})
    query = compiled if compiled is not None else compile_query(text, dialect=options.dialect, start=options.start,
                                                                base=options.base, streams=options.streams,
                                                                shapes=shapes if options.share_constants else None)
    query = with_option_warnings(query, options)
    if limits.federation_allowed is not None:
        check_federation(text, limits.federation_allowed, options.base)
    policy = report_policy(query, options.report)
    if policy.never_reports and registering:
        raise QueryNeverEvaluated(NEVER_EVALUATED)
    _check_limits(query, policy, limits)
    if options.partition is not None:
        check_partitioned(query, options.partition, limits.partition_keys, policy)
    return Admitted(query, policy, options)


def _check_limits(query: ContinuousQuery, policy: ReportPolicy, limits: Limits) -> None:
    """Windows longer than `max_range` or holding more than `max_elements` pin what the store
    holds; report instants more frequent than `max_reports_per_second` could never be kept up
    with, since every instant is evaluated and none skipped. Count windows and content change
    report as the data arrives: their rate is the streams' own."""
    for window in query.windows.values():
        over = window.over_limits(limits)
        if over:
            raise QueryOverLimits(over)
    rate = policy.rate()
    if rate > limits.max_reports_per_second:
        raise QueryOverLimits("the query asks for %.6g evaluations per second (STEP or COMPUTED EVERY); the "
                              "engine's limit is %g (max_reports_per_second)" % (rate, limits.max_reports_per_second))


class LandmarkTooEarly(TranslatorError):
    """A landmark window whose START lies before elements the store has evicted (spec §6.10)."""


def check_landmark_starts(query: ContinuousQuery, evicted_before: Callable[[str], int | None]) -> None:
    """A landmark window holds everything since its START: one starting before what its stream
    still holds (`evicted_before(stream)`: every element below it is gone) would be a window
    cut short, so it is refused, naming the oldest instant it can start from."""
    for window in query.windows.values():
        if not window.unbounded:
            continue
        oldest = evicted_before(window.stream)
        if oldest is not None and window.start < oldest:
            raise LandmarkTooEarly(
                "window <%s>: the landmark starts at %s, but the store has evicted <%s>'s elements before %s; "
                "the oldest instant it can start from is %s (START \"%s\"^^xsd:dateTime)"
                % (window.iri, format_instant(window.start), window.stream, format_instant(oldest),
                   format_instant(oldest), format_instant(oldest)))
