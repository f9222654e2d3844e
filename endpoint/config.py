"""The engine's configuration as `rspstar serve` uses it: the schema's typed settings
(`rspstar.config.schema`, every setting declared there once) turned into the engine's
configuration and the queries to register at start (through the same `Runner.register` as the
HTTP API)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rspstar.config import schema
from rspstar.config.schema import ConfigError, Settings
from rspstar.translator.errors import PositionedError, TranslatorError
from rspstar.translator.partition import PartitionError, PartitionKey

from .engine.runner import Runner, EngineConfig
from .engine.errors import EndpointError

# The packaged configuration (config/ in the repository, inside the package when installed):
# simulated streams, a landing directory, example queries and their background data, so
# `rspstar serve` runs anywhere with no file of its own.
DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "config" / "default.toml"

__all__ = ["Config", "ConfigError", "DEFAULT_CONFIG", "QueryEntry", "load_config", "register_configured"]


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
    settings: Settings

    @property
    def path(self) -> Path | None:
        return self.settings.path

    def relative(self, name: str) -> Path:
        """A path the configuration names, relative to its file."""
        return ((self.path.parent if self.path is not None else Path.cwd()) / name).resolve()


def _partition_keys(table: dict[str, str], where: str) -> dict[str, PartitionKey]:
    keys = {}
    for stream, text in table.items():
        try:
            keys[stream] = PartitionKey.parse(text)
        except PartitionError as e:
            raise ConfigError("%s: %s: %s" % (where, stream, str(e).split(": ", 1)[1])) from None
    return keys


def engine_config(settings: Settings, data_dir: Path | None) -> EngineConfig:
    engine = settings.engine
    return EngineConfig(
        data_dir=data_dir, allowed_sinks=settings.sinks.allowed, max_delay=engine.max_delay,
        history_limit=engine.history, history_bytes=engine.history_bytes, idle_retention=engine.idle_retention,
        federation_allowed=settings.federation.allowed, max_range=engine.max_range,
        max_reports_per_second=engine.max_reports_per_second, max_elements=engine.max_elements,
        landmark_elements=engine.landmark_elements,
        partition_keys=_partition_keys(settings.partition_keys.streams, "%s [partition_keys]" % settings.path),
        key_groups=engine.key_groups, max_queries=engine.max_queries, max_load=engine.max_load)


def load_config(path: Path, data_dir: Path | None = None, overrides: dict[str, object] | None = None) -> Config:
    settings = schema.load(path, overrides)
    config = Config(engine_config(settings, data_dir), [], settings)
    for k, entry in enumerate(settings.queries):
        where = "%s [[queries]] #%d" % (path, k + 1)
        query_path = config.relative(entry.file)
        try:
            text = query_path.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError("%s: cannot read %s: %s" % (where, query_path, e.strerror)) from None
        config.queries.append(QueryEntry(entry.id, text, query_path, entry.sinks, entry.options))
    return config


def register_configured(engine: Runner, config: Config) -> list[str]:
    """Register the configured queries that are neither registered (a restart restores
    queries from the data directory first) nor were deleted through the API (the data
    directory remembers that: a user's deletion outlives restarts). Returns the ids
    registered now."""
    registered = []
    engine.configured({entry.id for entry in config.queries if entry.id is not None})
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
