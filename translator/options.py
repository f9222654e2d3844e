"""A query's options (`--option KEY=VALUE` on the command line, `options` over HTTP, in the
configuration and the Python API), declared once in OPTIONS (name, kind of value, default,
help) like the configuration's settings (config/schema.py), and read once, at admission, into
`QueryOptions`; and the plan they give the query's R2R step (`r2r_plan`): how its rows are
computed from what its windows hold.

From OPTIONS come `QueryOptions` (a field per option), its reading (`from_pairs`), the
command line's help, the OpenAPI document's description of options, the configuration's
`[[queries]] options` help and docs/query-options.md (`markdown`, kept equal by a test).

The switches that turn an optimisation off exist to measure the optimisations and to compare
their results with the plain evaluation (tests/test_differential.py): they never change
results."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, make_dataclass

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
_VARIABLE = re.compile(r"[?$][A-Za-z_][A-Za-z0-9_]*")


class OptionError(TranslatorError, UsageError):
    """An option the engine does not know, or a value it cannot take."""


# -- kinds of value -------------------------------------------------------------------------
class Kind:
    """How an option's value is written (`shown`, in help and the docs) and read from its text
    (`read`: what QueryOptions holds, OptionError naming the option as the user wrote it,
    `key`, otherwise); `examples`: values any query takes (the OpenAPI document's)."""

    python: type = str
    shown = "text"
    metavar = "TEXT"        # on the command line: KEY=METAVAR
    examples: tuple[str, ...] = ()

    def read(self, raw: str, key: str):
        return raw


class Flag(Kind):
    python = bool
    shown = "true | false"
    metavar = "true|false"
    examples = ("true", "false")
    # every spelling read() takes, as a JSON body may send it: a JSON true/false as well
    accepted = _TRUE + _FALSE

    def read(self, raw, key):
        if raw.lower() in _TRUE:
            return True
        if raw.lower() in _FALSE:
            return False
        raise OptionError("option %s takes true or false, not %r" % (key, raw))


class Choice(Kind):
    """One of a few words (`choices` may be a live view, as the dialects' names are)."""

    def __init__(self, choices):
        self.choices = choices

    @property
    def shown(self) -> str:
        return " | ".join(self.choices)

    @property
    def metavar(self) -> str:
        return "|".join(self.choices)

    @property
    def examples(self) -> tuple[str, ...]:
        return tuple(self.choices)

    def read(self, raw, key):
        if raw not in self.choices:
            raise OptionError("option %s takes %s, not %r" % (key, " or ".join(self.choices), raw))
        return raw


class Policy(Kind):
    """A report policy as translator/policy.py reads it."""

    shown = "report policy"
    metavar = "POLICY"
    examples = ("close", "non-empty", "content-change")

    def read(self, raw, key):
        try:
            parse_strategies(raw)
        except PolicyError as e:
            raise OptionError("option %s" % e) from None
        return raw


class Instant(Kind):
    shown = "xsd:dateTime"
    metavar = "DATETIME"
    examples = ("2026-03-01T08:00:00Z",)

    def read(self, raw, key):
        try:
            parse_instant(raw)
        except TemporalValueError as e:
            raise OptionError("option %s takes an xsd:dateTime: %s" % (key, e)) from None
        return raw


class Variable(Kind):
    shown = "variable"
    metavar = "?VARIABLE"

    def read(self, raw, key):
        if not _VARIABLE.fullmatch(raw):
            raise OptionError("option %s takes a variable such as ?location, not %r" % (key, raw[:80]))
        return raw


class Iri(Kind):
    shown = "absolute IRI"
    metavar = "IRI"
    examples = ("http://example.org/queries/q.rq",)

    def read(self, raw, key):
        if not valid_base(raw):
            raise OptionError("option %s takes an absolute IRI such as http://example.org/queries/ (with a scheme, "
                              "and none of <>\"{}|^`\\ or spaces), not %r" % (key, raw[:200]))
        return raw


class Iris(Kind):
    python = tuple
    shown = "IRIs separated by spaces"
    metavar = "'IRI ...'"
    examples = ("http://example.org/s",)

    def read(self, raw, key):
        iris = tuple(raw.split())
        wrong = [iri for iri in iris if not valid_base(iri)]
        if not iris or wrong:
            raise OptionError("option %s takes absolute stream IRIs separated by spaces, not %r"
                              % (key, (wrong[0] if wrong else raw)[:200]))
        return iris


@dataclass(frozen=True)
class Option:
    """One query option: its name, the kind of its value, its default and what it does."""

    name: str
    kind: Kind
    default: object     # as QueryOptions holds it (None: unset, see the help)
    help: str
    switch: bool = False    # turns one optimisation off when false (QueryOptions.all_off)
    any_query: bool = True  # whether every query takes every value it reads (not so: dialect, partition)


_SWITCH = "; on by default, off only to measure it: never changes results"
OPTIONS: tuple[Option, ...] = (
    Option("report", Policy(), None,
           "when the query is evaluated (spec 6.3, 6.6, docs/language.md): strategies joined by `and`, `close` "
           "(every window close), `non-empty` (skip an evaluation when every window is empty), `periodic` (the "
           "COMPUTED EVERY instants), `content-change` (spec 6.3), each also bound to one window, `close(<w>)`, "
           "`non-empty(<w>)`, `content-change(<w>)`, and `periodic(PT5S)`; unset: the query's own (COMPUTED "
           "EVERY, its dialect's), else `close`"),
    Option("window_default_graph", Choice(("timestamps", "union")), None,
           "a WINDOW block's default graph: its elements' timestamp triples (`timestamps`) or also their merged "
           "content (`union`, the C-SPARQL view of spec 3); unset: the dialect's, else each block as spec 6.15 "
           "reads it"),
    Option("dialect", Choice(DIALECTS), None,
           "the language the query is written in (spec 6.5); unset: recognized from the text", any_query=False),
    Option("start", Instant(), None, "t0 of a dialect query's windows; unset: the epoch"),
    Option("rspu_cache", Flag(), True, "the RSPU paper's cache of `rspu:` calls" + _SWITCH, switch=True),
    Option("lazy_bind", Flag(), True, "lazy variables: a BIND of an `rspu:` call nothing reads is not computed"
           + _SWITCH, switch=True),
    Option("h4", Flag(), True, "the RSPU paper's heuristic H4: `rspu:` FILTERs placed after the joins when that "
           "makes fewer calls" + _SWITCH, switch=True),
    Option("fuse_rspu", Flag(), True, "nested `rspu:` calls made as one" + _SWITCH, switch=True),
    Option("incremental", Flag(), True, "windows evaluated incrementally, each time range once "
           "(docs/incremental-evaluation.md)" + _SWITCH, switch=True),
    Option("share_constants", Flag(), True, "the queries that differ only in constants evaluated together, and "
           "parsed once"
           + _SWITCH, switch=True),
    Option("partition", Variable(), None, "the variable a partitioned query is evaluated per key of, e.g. "
           "`?location` (docs/partitioned-queries.md)", any_query=False),
    Option("overrun", Choice(("catch-up", "skip")), "catch-up",
           "what a query behind the clock does: every due instant, in order (`catch-up`: the spec's semantics), "
           "or only the latest, the ones before counted as skipped (`skip`)"),
    Option("base", Iri(), None,
           "the IRI the query was retrieved from, which its relative IRIs resolve against before any BASE of its "
           "own (docs/language.md, Relative IRIs); unset: the command line gives the query file's `file:` IRI, "
           "POST /queries the registration URL, a `[[queries]]` entry its own `base`"),
    Option("sink_format", Choice(SINK_FORMATS), SINK_FORMATS[0],
           "what the query's sinks receive: SPARQL Query Results JSON (`sparql-json`) or the record as `rspstar "
           "replay` writes it (`compact`)"),
    Option("sink_empty", Flag(), True,
           "whether the query's sinks receive evaluations that gave nothing (`false`: only those with results)"),
    Option("streams", Iris(), (),
           "the streams an EP-SPARQL query that names none reads (spec 6.12: from every stream given); a replay "
           "gives its own"),
    Option("entailment", Choice(("none", "rdfs")), "none",
           "`rdfs`: graph patterns match the closure under RDFS rules 2, 3, 5, 7, 9 and 11 over the background's "
           "schema (spec 6.11)"),
)
_BY_NAME = {option.name: option for option in OPTIONS}


def command_line_help() -> str:
    """`--option`'s help (rspstar replay and check)."""
    return "query option, repeatable: %s (what each does: docs/query-options.md)" % ", ".join(
        "%s=%s" % (option.name, option.kind.metavar) for option in OPTIONS)


def _default_shown(option: Option) -> str:
    if option.default is None:
        return "(unset)"
    if isinstance(option.default, bool):
        return "true" if option.default else "false"
    if isinstance(option.default, tuple):
        return "(none)" if not option.default else " ".join(option.default)
    return "`%s`" % option.default


def markdown() -> str:
    """docs/query-options.md: every option, its values, default and help."""
    lines = ["# Query options", "",
             "A query's options are given as `--option KEY=VALUE` to `rspstar replay` and `rspstar check`, as",
             "`?option=KEY=VALUE` or the JSON body's `options` at `POST /queries` ([http-api.md](http-api.md)), as",
             "`options = { KEY = \"VALUE\" }` of a `[[queries]]` entry in the configuration (where `base` is a",
             "key of the entry itself: [configuration.md](configuration.md)), and as keyword arguments of the",
             "Python API ([python-api.md](python-api.md)). Values are text; `true` and `false` may also be",
             "written `on`/`off`, `yes`/`no` or `1`/`0`, and a key may write `-` for `_`. An unknown option, or a",
             "value an option cannot take, is refused with its name (400 over HTTP, exit 2 on the command line).",
             "This page is generated from the options' table ([translator/options.py](../translator/options.py));",
             "a test keeps them equal.", "",
             "| option | value | default | what |", "| --- | --- | --- | --- |"]
    for option in OPTIONS:
        lines.append("| `%s` | %s | %s | %s |" % (option.name, option.kind.shown.replace("|", "\\|"),
                                                   _default_shown(option), option.help.replace("|", "\\|")))
    return "\n".join(lines)


class _QueryOptions:
    """Per-query options: a field per option of OPTIONS, holding its value as read."""

    @classmethod
    def from_pairs(cls, pairs: dict[str, str]) -> "QueryOptions":
        """The options given as KEY = VALUE texts (a key may write '-' for '_'), each read by
        its kind; OptionError naming the first key or value the engine cannot take."""
        values: dict[str, object] = {}
        for key, raw in pairs.items():
            option = _BY_NAME.get(key.replace("-", "_"))
            if option is None:
                raise OptionError("unknown option %r (known: %s)" % (key, ", ".join(sorted(_BY_NAME))))
            if not isinstance(raw, str):
                raise OptionError("option %s takes a string, not %s" % (key, type(raw).__name__))
            values[option.name] = option.kind.read(raw, key)
        return cls(**values)

    @classmethod
    def all_off(cls, **others) -> "QueryOptions":
        """Every optimisation off: the plain evaluation the optimised one is compared with."""
        return cls(**{option.name: False for option in OPTIONS if option.switch}, **others)

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


QueryOptions = make_dataclass("QueryOptions", [(o.name, o.kind.python | None if o.default is None else o.kind.python,
                                                field(default=o.default)) for o in OPTIONS],
                              bases=(_QueryOptions,), frozen=True)
QueryOptions.__module__ = __name__
QueryOptions.__doc__ = _QueryOptions.__doc__


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
