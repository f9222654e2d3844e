"""A query's options (`--option KEY=VALUE` on the command line, `options` over HTTP and in the
configuration), read once, at admission, into `QueryOptions`; and the plan they give the
query's R2R step (`r2r_plan`): how its rows are computed from what its windows hold.

The switches that turn an optimisation off exist to measure the optimisations and to compare
their results with the plain evaluation (tests/test_differential.py): they never change
results."""
from __future__ import annotations

import re
from dataclasses import dataclass, fields

from .dialects import DIALECTS, dialect_named
from .errors import TemporalValueError, TranslatorError, UsageError
from .incremental import Join, Landmark, distributive_window, joined_windows, landmark_window
from .model import ContinuousQuery
from .policy import PolicyError, ReportPolicy, parse_strategies
from .rewrite import RewriteOptions, window_readings
from .syntax import valid_base
from .temporal import parse_instant

_TRUE = ("true", "on", "yes", "1")
_FALSE = ("false", "off", "no", "0")
# What a query's sinks receive: SPARQL Query Results JSON or the record as `rspstar replay`
# writes it (endpoint/engine/result_shapes.py makes each).
SINK_FORMATS = ("sparql-json", "compact")
_CHOICES = {"window_default_graph": ("timestamps", "union"), "dialect": DIALECTS, "overrun": ("catch-up", "skip"),
            "sink_format": SINK_FORMATS, "entailment": ("none", "rdfs")}
_VARIABLE = re.compile(r"[?$][A-Za-z_][A-Za-z0-9_]*")


class OptionError(TranslatorError, UsageError):
    """An option the engine does not know, or a value it cannot take."""


@dataclass(frozen=True)
class QueryOptions:
    """Per-query options.

    report: a conjunction of strategies joined by `and` (spec §6.6, translator/policy.py):
    `close` (every window close), `non-empty` (skip an evaluation when every window is empty),
    `periodic` (the COMPUTED EVERY instants), `content-change` (spec §6.3), each also bound to
    one window, `close(<w>)`, `non-empty(<w>)`, `content-change(<w>)`, and `periodic(PT5S)`;
    unset, the query's own (COMPUTED EVERY, its dialect), else `close`. window_default_graph:
    `timestamps` (a window's default graph is its elements' timestamp triples) or `union` (also
    their merged content, spec §3); unset, the dialect's, else `timestamps`. dialect: the
    language the query is written in (spec §6.5; unset: recognized from the text); start: t0
    of a dialect query's windows (an xsd:dateTime); partition: the variable a partitioned query
    is evaluated per key of (docs/partitioned-queries.md); overrun: what a query behind the
    clock does, `catch-up` (every due instant, in order: the spec's semantics) or `skip` (only
    the latest due instant, the ones before counted as skipped); base: the absolute IRI the query
    was retrieved from, which its relative IRIs resolve against before any BASE of its own (the
    command line gives the query file's, POST /queries the registration URL's, unless given
    here; docs/language.md, "Relative IRIs"); sink_format: what the query's sinks receive,
    `sparql-json` (SPARQL Query Results JSON) or `compact` (the record as `rspstar replay`
    writes it); sink_empty: whether its sinks receive evaluations that gave nothing (false: only
    those with results); streams: the streams an EP-SPARQL query that names none reads (spec
    §6.12: "from every stream given"; IRIs separated by spaces; a replay gives its own). The
    switches turn off one
    optimisation each: the RSPU paper's function cache (`rspu_cache`), lazy variables
    (`lazy_bind`) and its heuristic H4, rspu: FILTERs placed after the joins when that makes
    fewer calls (`h4`); nested rspu: calls made as one (`fuse_rspu`); incremental evaluation of
    sliding windows (`incremental`); and evaluating together the queries that differ only in
    constants (`share_constants`). entailment: `none` or `rdfs` (spec §6.11: graph patterns
    match the closure under RDFS rules 2, 3, 5, 7, 9 and 11 over the background's schema)."""

    report: str | None = None
    window_default_graph: str | None = None
    dialect: str | None = None
    start: str | None = None
    rspu_cache: bool = True
    lazy_bind: bool = True
    h4: bool = True
    fuse_rspu: bool = True
    incremental: bool = True
    share_constants: bool = True
    partition: str | None = None
    overrun: str = "catch-up"
    base: str | None = None
    sink_format: str = SINK_FORMATS[0]
    sink_empty: bool = True
    streams: tuple[str, ...] = ()
    entailment: str = "none"

    @classmethod
    def from_pairs(cls, pairs: dict[str, str]) -> "QueryOptions":
        known = {f.name: f for f in fields(cls)}
        values: dict[str, object] = {}
        for key, raw in pairs.items():
            name = key.replace("-", "_")
            if name not in known:
                raise OptionError("unknown option %r (known: %s)" % (key, ", ".join(sorted(known))))
            if not isinstance(raw, str):
                raise OptionError("option %s takes a string, not %s" % (key, type(raw).__name__))
            if known[name].type in ("bool", bool):
                if raw.lower() in _TRUE:
                    values[name] = True
                elif raw.lower() in _FALSE:
                    values[name] = False
                else:
                    raise OptionError("option %s takes true or false, not %r" % (key, raw))
            elif name == "partition":
                if not _VARIABLE.fullmatch(raw):
                    raise OptionError("option partition takes a variable such as ?location, not %r" % raw[:80])
                values[name] = raw
            elif name == "report":
                try:
                    parse_strategies(raw)
                except PolicyError as e:
                    raise OptionError("option %s" % e) from None
                values[name] = raw
            elif name == "base":
                if not valid_base(raw):
                    raise OptionError("option base takes an absolute IRI such as http://example.org/queries/ (with a "
                                      "scheme, and none of <>\"{}|^`\\ or spaces), not %r" % raw[:200])
                values[name] = raw
            elif name == "streams":
                iris = tuple(raw.split())
                wrong = [iri for iri in iris if not valid_base(iri)]
                if not iris or wrong:
                    raise OptionError("option streams takes absolute stream IRIs separated by spaces, not %r"
                                      % (wrong[0] if wrong else raw)[:200])
                values[name] = iris
            elif name == "start":
                try:
                    parse_instant(raw)
                except TemporalValueError as e:
                    raise OptionError("option start takes an xsd:dateTime: %s" % e) from None
                values[name] = raw
            else:
                allowed = _CHOICES[name]
                if raw not in allowed:
                    raise OptionError("option %s takes %s, not %r" % (key, " or ".join(allowed), raw))
                values[name] = raw
        return cls(**values)

    @classmethod
    def all_off(cls, **others) -> "QueryOptions":
        """Every optimisation off: the plain evaluation the optimised one is compared with."""
        return cls(rspu_cache=False, lazy_bind=False, h4=False, fuse_rspu=False, incremental=False,
                   share_constants=False, **others)

    def rewrite_options(self, query: ContinuousQuery) -> RewriteOptions:
        """How this query is rewritten: these options over the ones its dialect implies."""
        return RewriteOptions(lazy_bind=self.lazy_bind, h4=self.h4, window_union=self.window_content(query)[0],
                              fuse_rspu=self.fuse_rspu, entailment=self.entailment == "rdfs")

    def window_content(self, query: ContinuousQuery) -> tuple[bool | None, str]:
        """(whether every WINDOW block's default graph holds its elements' merged content, and
        what says so): the option window_default_graph when given, else the dialect's reading,
        else (None, ""): each block as spec 6.15 reads it, by whether it holds a GRAPH pattern."""
        if self.window_default_graph is not None:
            return self.window_default_graph == "union", "option window_default_graph = %s" % self.window_default_graph
        implied = query.option_defaults.get("window_default_graph")
        if implied is not None:
            return implied == "union", "the %s dialect's reading, spec %s" % (
                query.dialect, dialect_named(query.dialect).section)
        return None, ""

    def readings(self, query: ContinuousQuery) -> list[str]:
        """What each WINDOW block of the query reads and why (spec 6.15): what `rspstar check`
        and the registration answer show."""
        return window_readings(query, self.rewrite_options(query), self.window_content(query)[1])


@dataclass(frozen=True)
class R2RPlan:
    """How a query's rows are computed from its windows' contents: `whole` (every window's
    elements, the whole query at once), `incremental` (one distributive window, by time ranges
    each evaluated once: `window`), or `joined` (a join of such windows and of background
    patterns: `join`); `why_not` says why a faster plan was not taken."""

    kind: str
    window: str | None = None
    join: Join | None = None
    why_not: str = ""
    landmark: Landmark | None = None    # `landmark`: a landmark window's query close by close

    def describe(self) -> str:
        if self.kind == "incremental":
            return self.window
        if self.kind == "landmark":
            return ("landmark window <%s>, close by close: the elements since the last close evaluated and %s" % (
                self.window, "their aggregates combined with the ones before" if self.landmark.aggregates
                else "their rows added to the ones before"))
        if self.kind == "joined":
            return "a join of windows %s, each incremental%s" % (
                ", ".join("<%s>" % w for w in self.join.windows),
                ", and of background patterns" if self.join.background else "")
        return "no: %s" % self.why_not


def r2r_plan(query: ContinuousQuery, policy: ReportPolicy, options: QueryOptions) -> R2RPlan:
    """The plan for `query` under its report policy and options (docs/incremental-evaluation.md)."""
    if not options.incremental:
        return R2RPlan("whole", why_not="incremental evaluation is off (option incremental)")
    if not policy.at_closes:
        return R2RPlan("whole", why_not="the report policy reads the windows between their closes")
    landmark, why_not_landmark = landmark_window(query)
    if landmark is not None:
        return R2RPlan("landmark", window=landmark.window, landmark=landmark)
    window, why_not = distributive_window(query)
    if window is not None:
        return R2RPlan("incremental", window=window)
    join, why_not_joined = joined_windows(query)
    if join is not None:
        return R2RPlan("joined", join=join)
    if why_not == "a landmark window is evaluated whole":
        why_not = why_not_landmark
    return R2RPlan("whole", why_not=why_not_joined if query.windows else why_not)
