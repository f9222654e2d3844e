"""The engine's configuration as `rspstar serve` uses it: the schema's typed settings
(`rspstar.config.schema`, every setting declared there once) turned into the engine's
configuration and the queries to register at start (through the same `Runner.register` as the
HTTP API)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from rspstar.config import schema
from rspstar.config.schema import ConfigError, Settings
from rspstar.translator.errors import PositionedError, TranslatorError
from rspstar.translator.federation import origin_allowed
from rspstar.translator.partition import PartitionError, PartitionKey
from rspstar.translator.vocabulary import RESERVED_PREFIX

from .engine.clock import Clock
from .engine.refresh import FORMATS, BackgroundRefresh, RefreshedGraph
from .engine.runner import Runner, EngineConfig
from .engine.errors import EndpointError

# The packaged configuration (config/ in the repository, inside the package when installed):
# simulated streams, a landing directory, example queries and their background data, so
# `rspstar serve` runs anywhere with no file of its own.
DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "config" / "default.toml"

__all__ = ["Config", "ConfigError", "DEFAULT_CONFIG", "QueryEntry", "background_refresh", "load_config",
           "refreshed_graphs", "register_configured"]


@dataclass
class QueryEntry:
    id: str | None
    text: str
    file: Path                  # the query's file, or the configuration's when written in it
    sinks: list[str] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    inline: str | None = None   # where in the configuration the text is written, when it is

    @property
    def where(self) -> str:
        """What an error's line and column are counted in."""
        return self.inline or str(self.file)


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


def refreshed_graphs(config: "Config") -> list[RefreshedGraph]:
    """The `[[background.graphs]]` entries, each checked: a graph IRI of the background's, a
    file (made absolute against the configuration's folder) or a URL under `[background]
    allowed`, a format known or told by the file's extension."""
    import pyoxigraph as ox
    graphs = []
    for k, entry in enumerate(config.settings.background_graphs):
        where = "%s [[background.graphs]] #%d" % (config.path, k + 1)
        try:
            ox.NamedNode(entry.graph)
        except ValueError as e:
            raise ConfigError("%s: graph %r is not an IRI: %s" % (where, entry.graph, e)) from None
        if entry.graph.startswith(RESERVED_PREFIX):
            raise ConfigError("%s: graph <%s> is reserved by the engine (%s...)" % (where, entry.graph, RESERVED_PREFIX))
        graph = RefreshedGraph(entry.graph, entry.source, entry.format, entry.refresh)
        if graph.is_url:
            if not origin_allowed(entry.source, config.settings.background.allowed):
                raise ConfigError("%s: source %s is not under [background] allowed (%s)" % (
                    where, entry.source, ", ".join(config.settings.background.allowed) or "empty: files only"))
        else:
            graph.source = str(config.relative(entry.source))
            if entry.format is None and ox.RdfFormat.from_extension(Path(entry.source).suffix.lstrip(".") or "-") is None:
                raise ConfigError("%s: cannot tell the format of %s from its extension: set format (%s)"
                                  % (where, entry.source, ", ".join(FORMATS)))
        graphs.append(graph)
    return graphs


def background_refresh(config: "Config", runner: Runner, clock: Clock) -> BackgroundRefresh | None:
    """What reloads the configuration's background graphs in `runner`'s store (None: none)."""
    graphs = refreshed_graphs(config)
    if not graphs:
        return None
    background = config.settings.background
    return BackgroundRefresh(runner.store, graphs, clock, background.allowed, background.max_bytes,
                             background.timeout, runner.background_changed, background.max_triples,
                             background.reload_seconds)


def engine_config(settings: Settings, data_dir: Path | None) -> EngineConfig:
    """Every [engine] setting, and what the runner takes from the other tables."""
    return EngineConfig(
        **asdict(settings.engine), data_dir=data_dir, allowed_sinks=settings.sinks.allowed,
        federation_allowed=settings.federation.allowed,
        partition_keys=_partition_keys(settings.partition_keys.streams, "%s [partition_keys]" % settings.path))


def load_config(path: Path, data_dir: Path | None = None, overrides: dict[str, object] | None = None) -> Config:
    settings = schema.load(path, overrides)
    config = Config(engine_config(settings, data_dir), [], settings)
    for k, entry in enumerate(settings.queries):
        where = "%s [[queries]] #%d" % (path, k + 1)
        if "base" in entry.options:
            raise ConfigError("%s: base is a key of [[queries]] itself, not of its options" % where)
        if entry.query is not None:
            # Written in the configuration: its relative IRIs resolve against the configuration
            # file, as a query file's resolve against that file.
            text, source = entry.query, config.path or Path.cwd() / "(configuration)"
        else:
            source = config.relative(entry.file)
            try:
                text = source.read_text(encoding="utf-8")
            except OSError as e:
                raise ConfigError("%s: cannot read %s: %s" % (where, source, e.strerror)) from None
        options = {**entry.options, "base": entry.base if entry.base is not None else Path(source).resolve().as_uri()}
        config.queries.append(QueryEntry(entry.id, text, source, entry.sinks, options,
                                         "%s (query)" % where if entry.query is not None else None))
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
            raise ConfigError("%s:%d:%d: %s" % (entry.where, e.line, e.column, e.message)) from None
        except (EndpointError, TranslatorError) as e:
            raise ConfigError("%s: %s" % (entry.where, e)) from None
    return registered
