"""The engine's TOML configuration: engine settings, the sink allow-list, and queries to
register at start (through the same `Engine.register` as the HTTP API)."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from rspstar.store.partitions import DEFAULT_KEY_GROUPS
from rspstar.translator.errors import PositionedError, TemporalValueError, TranslatorError
from rspstar.translator.partition import PartitionError, PartitionKey
from rspstar.translator.temporal import parse_duration

from .engine import (
    DEFAULT_HISTORY, DEFAULT_IDLE_RETENTION, DEFAULT_MAX_DELAY, DEFAULT_MAX_ELEMENTS, DEFAULT_MAX_RANGE, DEFAULT_MAX_REPORTS_PER_SECOND,
    Engine, EngineConfig,
)
from .errors import EndpointError
from .sinks import DEFAULT_HISTORY_BYTES


# The embedded defaults (shipped inside the package): simulated streams, example queries and
# their background data, so `rspstar serve` runs anywhere with no file of its own.
DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "config" / "default.toml"


class ConfigError(EndpointError):
    """A configuration file that cannot be used, naming the file and the key."""


@dataclass
class QueryEntry:
    id: str | None
    text: str
    file: Path
    sinks: list[str] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)


@dataclass
class Config:
    engine: EngineConfig
    queries: list[QueryEntry]
    raw: dict
    path: Path | None = None


def _duration(table: dict, key: str, default: int, where: str) -> int:
    if key not in table:
        return default
    try:
        return parse_duration(str(table[key]))
    except TemporalValueError as e:
        raise ConfigError("%s: %s: %s" % (where, key, e)) from None


def _whole(table: dict, key: str, default: int, where: str, least: int = 1, what: str | None = None) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError("%s: %s must be %s, got %r"
                          % (where, key, what or "a whole number of at least %d" % least, value))
    return value


def byte_budget(config: Config, table: str, default: int, zero: str) -> int:
    """`[table] max_bytes`: a whole number of bytes (0 means `zero`)."""
    return _whole(config.raw.get(table, {}), "max_bytes", default, "%s [%s]" % (config.path, table), 0,
                  "a whole number of bytes (0: %s)" % zero)


def _partition_keys(table, where: str) -> dict[str, PartitionKey]:
    """`[partition_keys]`: stream IRI = "<predicate>" (its object) or "^<predicate>" (its subject)."""
    if not isinstance(table, dict):
        raise ConfigError("%s: write stream IRI = \"<predicate IRI>\" lines" % where)
    keys = {}
    for stream, text in table.items():
        try:
            keys[stream] = PartitionKey.parse(text)
        except PartitionError as e:
            raise ConfigError("%s: %s: %s" % (where, stream, str(e).split(": ", 1)[1])) from None
    return keys


def load_config(path: Path, data_dir: Path | None = None) -> Config:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError("cannot read %s: %s" % (path, e.strerror)) from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError("%s: %s" % (path, e)) from None
    engine_table = raw.get("engine", {})
    where = "%s [engine]" % path
    engine = EngineConfig(
        data_dir=data_dir,
        allowed_sinks=list(raw.get("sinks", {}).get("allowed", [])),
        max_delay=_duration(engine_table, "max_delay", DEFAULT_MAX_DELAY, where),
        history_limit=_whole(engine_table, "history", DEFAULT_HISTORY, where),
        history_bytes=_whole(engine_table, "history_bytes", DEFAULT_HISTORY_BYTES, where),
        idle_retention=_duration(engine_table, "idle_retention", DEFAULT_IDLE_RETENTION, where),
        federation_allowed=list(raw.get("federation", {}).get("allowed", [])),
        max_range=_duration(engine_table, "max_range", DEFAULT_MAX_RANGE, where),
        max_reports_per_second=float(engine_table.get("max_reports_per_second", DEFAULT_MAX_REPORTS_PER_SECOND)),
        max_elements=_whole(engine_table, "max_elements", DEFAULT_MAX_ELEMENTS, where),
        partition_keys=_partition_keys(raw.get("partition_keys", {}), "%s [partition_keys]" % path),
        key_groups=_whole(engine_table, "key_groups", DEFAULT_KEY_GROUPS, where),
    )
    queries = []
    for k, entry in enumerate(raw.get("queries", [])):
        where = "%s [[queries]] #%d" % (path, k + 1)
        if "file" not in entry:
            raise ConfigError("%s: needs file = \"QUERY.rq\"" % where)
        query_path = (path.parent / entry["file"]).resolve()
        try:
            text = query_path.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError("%s: cannot read %s: %s" % (where, query_path, e.strerror)) from None
        queries.append(QueryEntry(entry.get("id"), text, query_path, list(entry.get("sinks", [])),
                                  {str(k): str(v) for k, v in entry.get("options", {}).items()}))
    return Config(engine, queries, raw, path)


def register_configured(engine: Engine, config: Config) -> list[str]:
    """Register the configured queries that are neither registered (a restart restores
    queries from the data directory first) nor were deleted through the API (the data
    directory remembers that: a user's deletion outlives restarts). Returns the ids
    registered now."""
    registered = []
    known = {q.id for q in engine.queries()} | engine.removed_ids
    for entry in config.queries:
        if entry.id is not None and entry.id in known:
            continue
        try:
            registered.append(engine.register(entry.text, entry.id, entry.sinks, entry.options).id)
        except PositionedError as e:
            raise ConfigError("%s:%d:%d: %s" % (entry.file, e.line, e.column, e.message)) from None
        except (EndpointError, TranslatorError) as e:
            raise ConfigError("%s: %s" % (entry.file, e)) from None
    return registered
