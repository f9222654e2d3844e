"""Every setting of `rspstar serve`, declared once: its table, key, kind, default and help.

The TOML configuration is read against this schema into typed objects (`load`), `rspstar
config` prints the effective settings and where each came from, and docs/configuration.md is
generated from it (`markdown`, kept equal by a test). Defaults live here and nowhere else: the
engine's, the HTTP app's and the stores' own defaults are read from `default()`.

A setting's kind turns a TOML value into what the engine uses (durations into microseconds)
and refuses anything else with the file, table and key.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path

from rspstar.translator.errors import StreamNameError, TemporalValueError
from rspstar.translator.options import OPTIONS
from rspstar.translator.syntax import check_stream_iri
from rspstar.translator.temporal import format_duration, parse_duration


class ConfigError(Exception):
    """A configuration that cannot be used, naming the file, the table and the key."""


# -- kinds --------------------------------------------------------------------------------
class Kind:
    """How a value is written in TOML and what it becomes."""

    python = object
    shown = "value"

    def read(self, value, where: str):
        return value

    def show(self, value) -> str:
        return repr(value)


class Duration(Kind):
    python = int
    shown = "xsd:duration"

    def __init__(self, zero: bool = False):
        self.zero = zero

    def read(self, value, where):
        if not isinstance(value, str):
            raise ConfigError("%s must be an xsd:duration such as \"PT3S\" (a string), got %r" % (where, value))
        try:
            micros = parse_duration(value)
        except TemporalValueError as e:
            raise ConfigError("%s: %s" % (where, e)) from None
        if micros < 0 or (micros == 0 and not self.zero):
            raise ConfigError("%s must be %s, got %s" % (where, "zero or more" if self.zero else "positive", value))
        return micros

    def show(self, value) -> str:
        return '"%s"' % (_xsd_duration(value) if isinstance(value, int) else value)


class Whole(Kind):
    python = int
    shown = "whole number"

    def __init__(self, least: int = 1, unit: str = ""):
        self.least = least
        self.unit = unit
        self.shown = "whole number%s of at least %d" % (" of " + unit if unit else "", least)

    def read(self, value, where):
        if isinstance(value, bool) or not isinstance(value, int) or value < self.least:
            raise ConfigError("%s must be a %s, got %r" % (where, self.shown, value))
        return value

    def show(self, value) -> str:
        return str(value)


class Number(Kind):
    python = float
    shown = "number"

    def __init__(self, above: float = 0.0):
        self.above = above
        self.shown = "number (above %g)" % above

    def read(self, value, where):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= self.above:
            raise ConfigError("%s must be a number above %g, got %r" % (where, self.above, value))
        return float(value)

    def show(self, value) -> str:
        return "%g" % value


class Text(Kind):
    python = str
    shown = "string"

    def __init__(self, choices: tuple[str, ...] = (), optional: bool = False):
        self.choices = choices
        self.optional = optional
        if choices:
            self.shown = " | ".join('"%s"' % c for c in choices)

    def read(self, value, where):
        if value is None and self.optional:
            return None
        if not isinstance(value, str):
            raise ConfigError("%s must be a string, got %r" % (where, value))
        if self.choices and value not in self.choices:
            raise ConfigError("%s must be one of %s, got %r" % (where, ", ".join(self.choices), value))
        return value

    def show(self, value) -> str:
        return "(unset)" if value is None else '"%s"' % value


class StreamIri(Text):
    """A stream's IRI, checked as every door checks it (translator.syntax.check_stream_iri)."""

    shown = "stream IRI"

    def read(self, value, where):
        value = super().read(value, where)
        if value is not None:
            try:
                check_stream_iri(value, "the stream")
            except StreamNameError as e:
                raise ConfigError("%s: %s" % (where, e)) from None
        return value


class Texts(Kind):
    python = list
    shown = "list of strings"

    def read(self, value, where):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError("%s must be a list of strings, got %r" % (where, value))
        return list(value)

    def show(self, value) -> str:
        return "[%s]" % ", ".join('"%s"' % v for v in value)


class Flag(Kind):
    python = bool
    shown = "true | false"

    def read(self, value, where):
        if not isinstance(value, bool):
            raise ConfigError("%s must be true or false, got %r" % (where, value))
        return value

    def show(self, value) -> str:
        return "true" if value else "false"


class Topics(Kind):
    """One topic (filter), or a table of topic filters and the stream IRI each feeds."""

    python = object
    shown = "string or table of filter = stream IRI"

    def read(self, value, where):
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and value and all(isinstance(v, str) and v for v in value.values()):
            for topic, stream in value.items():
                try:
                    check_stream_iri(stream, "the stream of topic %r" % topic)
                except StreamNameError as e:
                    raise ConfigError("%s: %s" % (where, e)) from None
            return {str(k): v for k, v in value.items()}
        raise ConfigError("%s must be a topic, or a table of topic filter = \"stream IRI\" lines, got %r"
                          % (where, value))

    def show(self, value) -> str:
        if isinstance(value, dict):
            return "{%s}" % ", ".join('"%s" = "%s"' % kv for kv in value.items())
        return '"%s"' % value


class Table(Kind):
    """A table of free keys with string (or scalar) values: Spark settings, query options."""

    python = dict
    shown = "table of strings"

    def read(self, value, where):
        if not isinstance(value, dict) or not all(isinstance(v, (str, int, float, bool)) for v in value.values()):
            raise ConfigError("%s must be a table of key = \"value\" lines, got %r" % (where, value))
        return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}

    def show(self, value) -> str:
        return "{%s}" % ", ".join('"%s" = "%s"' % kv for kv in value.items())


def _xsd_duration(micros: int) -> str:
    """A duration as a person writes it: P1D, PT10M, PT1H30M, PT0.5S."""
    days, rest = divmod(micros, 86_400_000_000)
    hours, rest = divmod(rest, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    time = "".join("%d%s" % (n, unit) for n, unit in ((hours, "H"), (minutes, "M")) if n)
    if rest:
        time += format_duration(rest)[2:]
    text = "P" + ("%dD" % days if days else "") + ("T" + time if time else "")
    return text if text != "P" else "PT0S"


# Where the engine runs, which decides a few defaults: `rspstar serve` (SERVE: a server for
# everyone's queries, every limit on) or a library in the user's own process (LIBRARY: the
# Python API, `rspstar replay`, an engine or HTTP app made without a configuration), where a
# limit meant to protect a shared server is none unless asked for.
SERVE, LIBRARY = "serve", "library"
_AS_SERVED = object()


@dataclass(frozen=True)
class Setting:
    table: str          # the TOML table; "sources" and "queries" are arrays of tables
    key: str
    kind: Kind
    default: object     # as written in TOML (None: unset)
    help: str
    applies: str = ""   # for a source setting: the kinds of source it is for ("": every one)
    library: object = _AS_SERVED    # the LIBRARY profile's default, where it differs (None: no limit)

    @property
    def name(self) -> str:
        return "%s.%s" % (self.table, self.key)

    def default_in(self, profile: str) -> object:
        """The default as written in TOML under `profile` (SERVE or LIBRARY)."""
        return self.default if profile == SERVE or self.library is _AS_SERVED else self.library


MIB = 1024 * 1024
SOURCE_KINDS = ("simulator", "files", "socket", "kafka", "mqtt")
GRAPH_FORMATS = ("turtle", "ntriples", "rdfxml", "jsonld")

SETTINGS: tuple[Setting, ...] = (
    # [engine]
    Setting("engine", "max_delay", Duration(), "PT3S",
            "evaluate a close at the latest this long after it, complete input or not (spec 5)"),
    Setting("engine", "history", Whole(1), 1000, "result records kept per query for polling, the dashboard and "
                                                 "restarts"),
    Setting("engine", "history_bytes", Whole(1, "bytes"), 4 * MIB,
            "and at most this much of their JSON (the newest record is always kept)"),
    Setting("engine", "outbox_bytes", Whole(1, "bytes"), 64 * MIB,
            "disk one sink's outbox may take with the records waiting for their receiver (each record a file, "
            "counted as the 4 KiB blocks it takes): past it the oldest waiting records are dropped (the newest "
            "is always kept), counted in the query's status, /metrics and the dashboard (docs/running.md#sinks)"),
    Setting("engine", "idle_retention", Duration(), "PT10M", "how long elements of streams no query reads are kept"),
    Setting("engine", "max_range", Duration(), "P1D",
            "the longest window RANGE a registration may ask for (a window pins what the store holds)"),
    Setting("engine", "max_reports_per_second", Number(), 10.0,
            "evaluations per second a query may ask for (the sum of 1/STEP over its windows, or 1/period)"),
    Setting("engine", "max_elements", Whole(1), 100_000, "the most elements a count window ([ELEMS n]) may hold"),
    Setting("engine", "landmark_elements", Whole(1), 1_000_000,
            "the most elements a landmark window ([RANGE UNBOUNDED STEP ...]) may hold: past it its query stops with "
            "a failed status naming this setting (spec 6.10)"),
    Setting("engine", "min_free_disk", Whole(0, "bytes"), 64 * MIB,
            "free space the data directory's disk keeps beyond what storing the acknowledged landing files will "
            "take: below it writes are refused (507) before the store or a landing file fails half-way, and /health "
            "says degraded (0: no check)"),
    Setting("engine", "max_streams", Whole(1), 1000,
            "streams the engine holds at most (stored, or posted and not stored yet): a post naming new streams past "
            "it is refused (400) naming this setting, and any source's elements of new streams past it are set aside "
            "in quarantine/ with the reason"),
    Setting("engine", "max_event_ahead", Duration(zero=True), "PT1M",
            "how far ahead of the engine's clock an element's event time may be: a post holding a later one is "
            "refused (400) naming it, any source's is set aside in quarantine/ with the reason, so that no element "
            "moves a stream's watermark further ahead; and the furthest ahead of the clock a watermark has a query "
            "evaluate (`rspstar replay` and the Python API read event time as it comes: "
            "docs/running.md#event-time-and-the-engines-clock)"),
    Setting("engine", "max_landed_bytes", Whole(1, "bytes"), 64 * MIB,
            "input acknowledged and not stored yet (landing files of posts and MQTT messages) at most: past it a post "
            "is answered 503 with Retry-After and MQTT messages wait at the broker, unacknowledged, until Spark has "
            "stored what came before (one post alone always fits)"),
    Setting("engine", "max_queries", Whole(1), 2000, "queries registered at once at most (registrations beyond: 503)",
            library=None),
    Setting("engine", "max_load", Number(), 0.8,
            "share of the machine's cores the queries' evaluations may take together, as measured (each query's "
            "CPU per evaluation times its evaluations per second): while they take more, registrations get 503",
            library=None),
    Setting("engine", "evaluation_timeout", Duration(), "PT10S",
            "how long one evaluation of a continuous query may run: past it the evaluation is stopped (killed, when "
            "it runs in a worker process) and the query is marked failed with the reason "
            "(docs/running.md#evaluation-limits)", library=None),
    Setting("engine", "max_result_rows", Whole(1), 100_000,
            "rows (SELECT) or triples (CONSTRUCT) one evaluation may produce, counted as they are read: past it the "
            "evaluation stops, the query is marked failed and nothing of that evaluation is delivered"),
    Setting("engine", "isolate_evaluations", Text(("always", "new", "never")), "always",
            "which evaluations run in worker processes that the time limit, a query's removal, the engine's stop "
            "and worker_memory kill: every one (always: the read-only view of the store a worker opens serves every "
            "evaluation until the store is written again), a query's first ones and those whose input outgrew what "
            "it was proven on (new: faster, but a proven query's evaluation cannot be stopped inside one Oxigraph "
            "call), or none (never: stopped between two solutions only) (docs/running.md#evaluation-limits)"),
    Setting("engine", "worker_memory", Whole(64 * MIB, "bytes"), 1024 * MIB,
            "resident memory one worker process may take (a continuous evaluation's, a /sparql query's, an /update's): "
            "past it the worker is killed and its work stopped with an error naming this setting"),
    Setting("engine", "max_entailed_triples", Whole(1), 100_000,
            "triples RDFS entailment may derive for one closure (a schema's, or the elements one evaluation reads): "
            "past it the evaluation stops and its query is marked failed with the reason (its time counts against "
            "evaluation_timeout)"),
    Setting("engine", "key_groups", Whole(1), 64,
            "what a partitioned query's keys are spread over (its Spark state: docs/partitioned-queries.md)"),
    # [http]
    Setting("http", "host", Text(), "127.0.0.1", "address to listen on (rspstar serve --host)"),
    Setting("http", "port", Whole(0), 8000, "port to listen on (rspstar serve --port; 0: any free port)"),
    Setting("http", "token", Text(optional=True), None,
            "bearer token for writes; unset: made at the first start and kept in DATA/token; \"\": writes open"),
    Setting("http", "cors_origins", Texts(), [], "web origins whose pages may write (others get 403)"),
    Setting("http", "query_timeout", Number(), 30.0, "seconds a /sparql query or an /update may run before it is "
                                                     "stopped, its worker process killed (503)"),
    Setting("http", "query_workers", Whole(1), 2, "/sparql queries evaluated at once (worker processes)"),
    Setting("http", "query_backlog", Whole(0), 2, "/sparql queries waiting for a worker at most (beyond: 503 with "
                                                  "Retry-After at once), so that queries never hold the threads "
                                                  "/health and the API need"),
    Setting("http", "query_max_bytes", Whole(1024, "bytes"), 16 * MIB,
            "the largest /sparql answer, serialized: past it the query is stopped and answered 413, never cut short"),
    Setting("http", "update_max_changes", Whole(1), 100_000,
            "quads one /update may add and remove together: past it nothing changes and the update is answered 413"),
    Setting("http", "max_body", Whole(1, "bytes"), 16 * MIB, "the largest request body, declared or chunked "
                                                            "(413 before anything is read into the app)"),
    Setting("http", "body_budget", Whole(1, "bytes"), 32 * MIB,
            "bytes of request bodies processed at once (a body costs about ten times its size while read): "
            "beyond it a body waits 2 s, then 503; one body alone always fits"),
    Setting("http", "base_iri", Text(optional=True), None,
            "the base IRI relative IRIs of /sparql queries, /update updates and queries registered at /queries "
            "resolve against, before any BASE of their own (unset: the URL they were sent to, e.g. "
            "http://127.0.0.1:8000/sparql)"),
    Setting("http", "threads", Whole(2), 16, "worker threads answering requests (an event stream holds one while it "
                                             "lasts)"),
    Setting("http", "connection_limit", Whole(1), 4096, "open connections at most (beyond it new ones wait); idle "
                                                        "and slow ones hold a socket, not a thread"),
    Setting("http", "idle_timeout", Number(), 60.0, "seconds a connection may sit idle before it is closed"),
    Setting("http", "request_timeout", Number(), 10.0, "seconds a client has to send a whole request from its "
                                                       "first byte (slow senders are dropped)"),
    Setting("http", "max_event_streams", Whole(1), 8, "server-sent event streams open at once (503 beyond); "
                                                      "fewer than threads, so requests always find a worker"),
    Setting("http", "max_event_streams_per_client", Whole(1), 4,
            "event streams one client address holds at once (503 beyond), so that a few clients cannot take every "
            "slot (a terminal's curl -N, a dashboard and a reconnection fit); behind a proxy every client has the "
            "proxy's address: raise it there"),
    Setting("http", "event_backlog", Whole(1), 256, "records waiting for a slow event-stream client; beyond it the "
                                                    "oldest are dropped and counted"),
    Setting("http", "event_backlog_bytes", Whole(1, "bytes"), 4 * MIB,
            "and at most this much of their JSON (the newest record is always kept): a client that reads slowly or "
            "not at all skips ahead, told how many records it missed in a 'dropped' event"),
    Setting("http", "event_keepalive", Number(), 15.0, "seconds between keep-alive comments on an idle event "
                                                       "stream"),
    Setting("http", "event_idle_seconds", Number(), 300.0, "seconds an event stream may deliver no record before it "
                                                           "ends with a 'closed' event (reason 'idle'); a client "
                                                           "reconnects"),
    Setting("http", "event_stream_seconds", Number(), 3600.0, "seconds an event stream lasts; it then ends with a "
                                                              "'closed' event (reason 'expired') and a client "
                                                              "reconnects, which recycles its worker"),
    # [spark]
    Setting("spark", "master", Text(), "local[2]",
            "Spark master: local[n], or spark://host:7077 for a cluster (docs/partitioned-queries.md)"),
    Setting("spark", "settings", Table(), {},
            "other Spark settings, written as keys of [spark] itself (\"spark.driver.memory\" = \"1g\")"),
    # [recording], [quarantine]
    Setting("recording", "max_bytes", Whole(0, "bytes"), 256 * MIB,
            "disk for all streams' recordings (DATA/recording), oldest files deleted first; 0 records nothing"),
    Setting("quarantine", "max_bytes", Whole(0, "bytes"), 64 * MIB,
            "disk for input set aside as unreadable (DATA/quarantine), oldest deleted first; 0 keeps no payload"),
    # [sinks], [federation], [background]
    Setting("sinks", "allowed", Texts(), [], "origins sinks may deliver to, e.g. \"http://localhost:9000\" or "
                                               "\"mqtt://127.0.0.1:1883\""),
    Setting("federation", "allowed", Texts(), [], "origins SPARQL SERVICE and LOAD may reach (none: both are off)"),
    Setting("background", "files", Texts(), [], "background data loaded at the first start (paths relative to the "
                                                "configuration file)"),
    Setting("background", "allowed", Texts(), [], "origins [[background.graphs]] sources may be fetched from, e.g. "
                                                  "\"https://data.example.org\" (none: files only)"),
    Setting("background", "max_bytes", Whole(1, "bytes"), 64 * MIB,
            "the largest document a [[background.graphs]] source may give (a larger one is a failed reload)"),
    Setting("background", "max_triples", Whole(1), 100_000,
            "the most triples a [[background.graphs]] document may hold, counted as it is read (more: a failed "
            "reload); a reload writes only what changed, and evaluations wait while it does"),
    Setting("background", "timeout", Number(), 10.0, "seconds a [[background.graphs]] URL may keep the engine waiting "
                                                     "for its next bytes"),
    Setting("background", "reload_seconds", Number(), 60.0,
            "seconds a [[background.graphs]] reload may take to fetch and read its source in all (a source that "
            "sends slowly fails there); a reload that takes longer than its refresh skips the reloads it ran past"),
    Setting("partition_keys", "streams", Table(), {},
            "per stream IRI, the key its elements are partitioned by: \"<predicate>\" (its object) or "
            "\"^<predicate>\" (its subject), written as keys of [partition_keys] itself"),
    # [[sources]]
    Setting("sources", "name", Text(), None, "unique; names the checkpoint and the batch markers"),
    Setting("sources", "kind", Text(SOURCE_KINDS), None, "what feeds the stream"),
    Setting("sources", "stream", StreamIri(optional=True), None, "the stream IRI (the simulator names its own streams; "
                                                            "mqtt: the stream of a single `topic`)",
            "files, socket, kafka, mqtt"),
    Setting("sources", "path", Text(), "landing", "landing directory, under the data directory (POST /streams "
                                                  "writes here too)", "files"),
    Setting("sources", "format", Text(("nquads", "jsonl", "trig")), "nquads",
            "what each line or message is (trig: mqtt only, a message is one document)", "socket, kafka, mqtt"),
    Setting("sources", "host", Text(), "127.0.0.1", "the server Spark connects to", "socket"),
    Setting("sources", "port", Whole(0), 0, "its port", "socket"),
    Setting("sources", "scenario", Text(("tvs", "homecare", "sensors")), "tvs",
            "tunnel ventilation (the RSPU paper), home care (the RSP-QL* paper) or plain sensors", "simulator"),
    Setting("sources", "rate", Whole(1), 10, "observations per second", "simulator"),
    Setting("sources", "size", Whole(1), 10, "tunnel sectors, patients or sensors", "simulator"),
    Setting("sources", "bootstrap_servers", Text(), "", "Kafka brokers, host:port,...", "kafka"),
    Setting("sources", "topic", Topics(), "", "the Kafka topic; for mqtt a topic filter (+ and # wildcards), or a "
                                              "table of filters and the stream IRI each feeds", "kafka, mqtt"),
    Setting("sources", "broker", Text(), "mqtt://127.0.0.1:1883", "the MQTT broker: mqtt://host:port, or "
                                                                 "mqtts://host:port for TLS", "mqtt"),
    Setting("sources", "client_id", Text(optional=True), None,
            "the MQTT client id the broker keeps the session under (unset: rspstar-NAME)", "mqtt"),
    Setting("sources", "username", Text(optional=True), None, "MQTT user name", "mqtt"),
    Setting("sources", "password", Text(optional=True), None, "MQTT password (prefer password_env)", "mqtt"),
    Setting("sources", "password_env", Text(optional=True), None,
            "the environment variable that holds the MQTT password", "mqtt"),
    Setting("sources", "ca_file", Text(optional=True), None,
            "CA certificates (PEM) that sign an mqtts:// broker's certificate (unset: the system's)", "mqtt"),
    Setting("sources", "retained", Flag(), False,
            "take the broker's retained messages too (by default ignored: they are old readings)", "mqtt"),
    Setting("sources", "trigger_seconds", Number(), 1.0, "micro-batch interval"),
    Setting("sources", "decode", Text(("auto", "driver", "executors")), "auto",
            "where a micro-batch's input is parsed: in the engine's process (driver), or on Spark's executors, "
            "which hand the driver N-Quads it stores in one call, outside Python's lock (pays from thousands of "
            "elements a second); auto: on the executors when the batch before brought 2,000 elements or more "
            "(docs/spark.md)"),
    Setting("sources", "allowed_lateness", Duration(zero=True), "PT0S",
            "how far below the newest event time an element may arrive and still be on time"),
    Setting("sources", "max_batch_bytes", Whole(1, "bytes"), 4 * MIB,
            "the landing files one micro-batch takes at most, by their size (Spark's maxBytesPerTrigger; at least one "
            "file): a micro-batch costs Spark's JVM tens of times its input, so this is what keeps a burst within its "
            "heap; a posted element or MQTT message element larger than it is refused (413) or set aside "
            "(docs/running.md#posting-and-the-landing-directory)", "files, mqtt"),
    Setting("sources", "options", Table(), {}, "Spark reader options of the source (e.g. maxFilesPerTrigger, which "
                                               "replaces max_batch_bytes)"),
    # [[background.graphs]]: background graphs that refresh themselves (spec 6.14)
    Setting("background.graphs", "graph", Text(), None, "the background graph's IRI (a named graph; the refresh "
                                                       "replaces it whole)"),
    Setting("background.graphs", "source", Text(), None,
            "a file (relative to the configuration file) or an http(s) URL under [background] allowed"),
    Setting("background.graphs", "format", Text(GRAPH_FORMATS, optional=True), None,
            "what the source holds (unset: from the file's extension or the response's Content-Type)"),
    Setting("background.graphs", "refresh", Duration(), None,
            "reload it this often (unset: loaded at each start only); a failed reload keeps what the graph "
            "held and shows in /health, /metrics and the dashboard"),
    # [[queries]]
    Setting("queries", "file", Text(optional=True), None, "the query's file (relative to the configuration file)"),
    Setting("queries", "query", Text(optional=True), None,
            "the query's text itself, in the configuration (a TOML multi-line string), instead of a file"),
    Setting("queries", "id", Text(optional=True), None, "its id (unset: from REGISTER's name, else generated)"),
    Setting("queries", "sinks", Texts(), [], "sinks its results go to: http(s) URLs, or mqtt(s)://host:port/topic "
                                               "(under [sinks] allowed)"),
    Setting("queries", "options", Table(), {}, "query options, docs/query-options.md: %s (base is a key of "
                                               "[[queries]] itself)" % ", ".join(o.name for o in OPTIONS
                                                                                   if o.name != "base")),
    Setting("queries", "base", Text(optional=True), None,
            "the absolute IRI its relative IRIs resolve against before any BASE of its own (unset: the query "
            "file's file: IRI, as rspstar check and replay read it)"),
)
_BY_NAME = {s.name: s for s in SETTINGS}
ARRAYS = ("sources", "queries", "background.graphs")   # arrays of tables: [[sources]], [[background.graphs]]
FREE_TABLES = {"spark": "settings", "partition_keys": "streams"}   # tables whose other keys are free
# Keys an entry must have; a tuple of keys: exactly one of them.
REQUIRED = {"sources": ("name", "kind"), "queries": (("file", "query"),), "background.graphs": ("graph", "source")}


def _required(table: str, key: str) -> tuple[str, ...] | None:
    """The keys `key` is required among (itself alone, or its alternatives), None if optional."""
    for required in REQUIRED.get(table, ()):
        among = required if isinstance(required, tuple) else (required,)
        if key in among:
            return among
    return None


def default(name: str, profile: str = SERVE):
    """The default of a setting under `profile`, as the engine uses it (durations in microseconds)."""
    setting = _BY_NAME[name]
    value = setting.default_in(profile)
    return None if value is None else setting.kind.read(value, name)


def tables() -> list[str]:
    return list(dict.fromkeys(s.table for s in SETTINGS))


def settings_of(table: str) -> list[Setting]:
    return [s for s in SETTINGS if s.table == table]


# -- typed objects ------------------------------------------------------------------------------
def settings_class(table: str, name: str | None = None, extra: tuple = (), frozen: bool = True,
                   profile: str = SERVE):
    """A dataclass with a field per setting of `table`, defaulting to its typed default under
    `profile`, and the `extra` fields (name, type, dataclasses.field) of what its user takes
    besides: a class that reads its settings from here gains a new one with no edit of its own."""
    def field_of(setting: Setting):
        value = default(setting.name, profile)
        if isinstance(value, (list, dict)):
            return field(default_factory=lambda value=value: type(value)(value))
        return field(default=value)

    def type_of(setting: Setting):
        return setting.kind.python if setting.default_in(profile) is not None else setting.kind.python | None
    own = [(s.key, type_of(s), field_of(s)) for s in settings_of(table) if s.key not in {e[0] for e in extra}]
    return make_dataclass(name or table.title().replace("_", "").replace(".", "") + "Settings", own + list(extra),
                          frozen=frozen)


SECTIONS = {table: settings_class(table) for table in tables()}
Source = SECTIONS["sources"]          # one [[sources]] entry
Query = SECTIONS["queries"]           # one [[queries]] entry
BackgroundGraph = SECTIONS["background.graphs"]   # one [[background.graphs]] entry


@dataclass
class Settings:
    """A configuration read: each table's typed settings, the sources and queries, and where each
    value came from ("default", the file, or "command line")."""

    path: Path | None
    sections: dict[str, object]
    sources: list
    queries: list
    origins: dict[str, str]
    background_graphs: list = field(default_factory=list)     # [[background.graphs]]

    def __getattr__(self, table: str):
        try:
            return self.__dict__["sections"][table]
        except KeyError:
            raise AttributeError(table) from None


def load(path: Path | None, overrides: dict[str, object] | None = None) -> Settings:
    """Read a TOML file against the schema (None: the defaults alone); `overrides` maps
    "table.key" to values given on the command line."""
    raw: dict = {}
    if path is not None:
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigError("cannot read %s: %s" % (path, e.strerror)) from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError("%s: %s" % (path, e)) from None
    known = {table.split(".")[0] for table in tables()}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError("%s: unknown table [%s] (known: %s)" % (path, unknown[0], ", ".join(sorted(known))))
    origins: dict[str, str] = {}
    sections = {}
    for table in tables():
        if table in ARRAYS:
            continue
        given = raw.get(table, {})
        if not isinstance(given, dict):
            raise ConfigError("%s: [%s] must be a table" % (path, table))
        nested = {array.split(".", 1)[1] for array in ARRAYS if array.startswith(table + ".")}
        sections[table] = _read_table(table, {k: v for k, v in given.items() if k not in nested}, path,
                                      overrides or {}, origins)
    entries = {}
    for table in ARRAYS:
        outer, _, inner = table.partition(".")
        given = raw.get(outer, []) if not inner else raw.get(outer, {}).get(inner, [])
        if not isinstance(given, list):
            raise ConfigError("%s: write each of %s as [[%s]]" % (path, table, table))
        entries[table] = [_read_entry(table, entry, "%s [[%s]] #%d" % (path, table, k + 1),
                                      "%s[%d]" % (table, k), str(path), origins) for k, entry in enumerate(given)]
    names = [s.name for s in entries["sources"]]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError("%s: two [[sources]] are named %r (a name keys a source's checkpoint)" % (path, name))
    graphs = [entry.graph for entry in entries["background.graphs"]]
    for graph in graphs:
        if graphs.count(graph) > 1:
            raise ConfigError("%s: two [[background.graphs]] are graph <%s>" % (path, graph))
    return Settings(path, sections, entries["sources"], entries["queries"], origins, entries["background.graphs"])


def _read_table(table: str, given: dict, path: Path | None, overrides: dict, origins: dict):
    values = {}
    free = FREE_TABLES.get(table)
    declared = {s.key for s in settings_of(table)} - ({free} if free else set())
    if free:
        rest = {k: v for k, v in given.items() if k not in declared}
        given = {**{k: v for k, v in given.items() if k in declared}, free: rest} if rest else \
            {k: v for k, v in given.items() if k in declared}
    else:
        unknown = sorted(set(given) - declared)
        if unknown:
            raise ConfigError("%s [%s]: unknown key %r (known: %s)" % (path, table, unknown[0], ", ".join(sorted(declared))))
    for setting in settings_of(table):
        where = "%s [%s]: %s" % (path, table, setting.key)
        if setting.name in overrides:
            values[setting.key] = setting.kind.read(overrides[setting.name], "command line: %s" % setting.name)
            origins[setting.name] = "command line"
        elif setting.key in given:
            values[setting.key] = setting.kind.read(given[setting.key], where)
            origins[setting.name] = str(path)
        else:
            origins[setting.name] = "default"
    return SECTIONS[table](**values)


def _read_entry(table: str, entry, where: str, name: str, path: str, origins: dict):
    if not isinstance(entry, dict):
        raise ConfigError("%s: must be a table" % where)
    declared = {s.key: s for s in settings_of(table)}
    unknown = sorted(set(entry) - set(declared))
    if unknown:
        raise ConfigError("%s: unknown key %r (known: %s)" % (where, unknown[0], ", ".join(sorted(declared))))
    missing = []
    for required in REQUIRED[table]:
        among = required if isinstance(required, tuple) else (required,)
        given = [key for key in among if key in entry]
        if len(given) > 1:
            raise ConfigError("%s: takes %s, not both" % (where, " or ".join(among)))
        if not given:
            missing.append(" or ".join(among))
    if missing:
        raise ConfigError("%s: needs %s" % (where, " and ".join(missing)))
    values = {}
    for key, setting in declared.items():
        if key in entry:
            if setting.applies and table == "sources" and entry.get("kind") not in setting.applies.split(", "):
                raise ConfigError("%s: %s is for %s sources, not %s" % (where, key, setting.applies, entry.get("kind")))
            values[key] = setting.kind.read(entry[key], "%s: %s" % (where, key))
        origins["%s.%s" % (name, key)] = path if key in entry else "default"
    return SECTIONS[table](**values)


# -- what it says of itself ---------------------------------------------------------------------
def effective(settings: Settings) -> list[tuple[str, str, str]]:
    """(name, value as TOML writes it, origin) of every setting, then each source and query."""
    rows = []
    for table in tables():
        if table in ARRAYS:
            continue
        section = settings.sections[table]
        for setting in settings_of(table):
            value = getattr(section, setting.key)
            rows.append((setting.name, setting.kind.show(value), settings.origins[setting.name]))
    for table, entries in (("sources", settings.sources), ("queries", settings.queries),
                           ("background.graphs", settings.background_graphs)):
        for k, entry in enumerate(entries):
            for setting in settings_of(table):
                if setting.applies and entry.kind not in setting.applies.split(", "):
                    continue        # a key of another kind of source
                name = "%s[%d].%s" % (table, k, setting.key)
                rows.append((name, setting.kind.show(getattr(entry, setting.key)), settings.origins[name]))
    return rows


def markdown() -> str:
    """docs/configuration.md: every table and setting, its kind, default and help."""
    lines = ["# Configuration", "",
             "`rspstar serve --config FILE` reads a TOML file; every setting it does not give takes the",
             "default below (`rspstar serve` with no `--config` runs `config/default.toml`, the packaged",
             "configuration: simulated streams, a landing directory and three example queries).",
             "`rspstar config [--config FILE]` prints the effective settings and where each came from.",
             "This page is generated from the schema ([config/schema.py](../config/schema.py)); a test keeps",
             "them equal. Durations are xsd:durations (`\"PT3S\"`, `\"P1D\"`); sizes are bytes.", ""]
    for table in tables():
        header = "[[%s]]" % table if table in ARRAYS else "[%s]" % table
        lines += ["## `%s`" % header, "", "| key | kind | default | what |", "| --- | --- | --- | --- |"]
        for s in settings_of(table):
            key = s.key
            if FREE_TABLES.get(table) == s.key:
                key = "(any other key)"
            among = _required(table, s.key)
            default_text = ("(required)" if len(among) == 1 else "(this or %s)" % " or ".join(
                k for k in among if k != s.key)) if among else ("(unset)" if s.default is None else s.kind.show(s.default))
            what = s.help + (" (%s)" % ("for " + s.applies + " sources") if s.applies else "")
            if s.default_in(LIBRARY) != s.default:
                library = s.default_in(LIBRARY)
                what += "; in the Python API and `rspstar replay`: %s" % ("none" if library is None else
                                                                          s.kind.show(library))
            lines.append("| `%s` | %s | %s | %s |" % (key, s.kind.shown.replace("|", "or"),
                                                       default_text.replace("|", "\\|"), what.replace("|", "\\|")))
        lines.append("")
    return "\n".join(lines)
