"""rspstar: an RDF stream processing engine for RSP-QL*.

    import rspstar
    engine = rspstar.Engine(start="2026-03-01T08:00:00Z")
    query = engine.register(text)
    engine.push(stream_iri, trig_text)
    engine.advance("2026-03-01T08:00:10Z")
    query.dataframe()

`Engine`, `Query`, `Results` and `replay` are the Python API (`rspstar.endpoint.api`), `Client`
the client of a running server (`rspstar.endpoint.client`), and every error they raise is
importable from here (`rspstar.QuerySyntaxError`, `rspstar.RdfInputError`, `rspstar.UsageError`,
...). The repository's top-level folders are the package's parts: `rspstar.translator`
(language, vocabulary, time), `rspstar.config` (the settings), `rspstar.store` (Oxigraph, Spark
ingestion) and `rspstar.endpoint` (runner, scheduler, HTTP, CLI).
"""
import importlib as _importlib

__version__ = "0.1.0"

# Each name of the API and the module it lives in: imported on first use, so that
# `import rspstar.config` stays light.
_WHERE = {
    "Engine": "endpoint.api", "Query": "endpoint.api", "Results": "endpoint.api", "replay": "endpoint.api",
    "Client": "endpoint.client", "RemoteQuery": "endpoint.client",
    # Every error a caller can meet, by layer: each is a TranslatorError, StoreError or
    # EndpointError (ConfigError: a configuration file's), and every usage error a UsageError.
    "UsageError": "translator.errors",
    "TranslatorError": "translator.errors", "PositionedError": "translator.errors",
    "QuerySyntaxError": "translator.errors", "TemporalValueError": "translator.errors",
    "StreamNameError": "translator.errors", "OptionError": "translator.options",
    "QueryOverLimits": "translator.admission", "QueryNeverEvaluated": "translator.admission",
    "LandmarkTooEarly": "translator.admission", "PolicyError": "translator.policy",
    "FederationNotAllowed": "translator.federation", "PartitionError": "translator.partition",
    "UncertaintyError": "translator.uncertainty.distributions",
    "ConfigError": "config.schema",
    "StoreError": "store.errors", "RdfInputError": "store.errors", "DuplicateElementError": "store.errors",
    "EventTimeAhead": "store.errors",
    "QueryTimeout": "store.errors", "ReservedGraphError": "store.errors", "GraphNotWritable": "store.errors",
    "UpdateFailed": "store.errors", "GraphMissing": "store.errors", "GraphExists": "store.errors",
    "DiskFull": "store.errors", "EvaluationStopped": "store.errors", "EvaluationTimeout": "store.errors",
    "ResultTooLarge": "store.errors", "EvaluationCancelled": "store.errors",
    "EvaluationOverMemory": "store.errors", "UpdateTooLarge": "store.errors",
    "UnknownFormat": "store.formats", "ClosureTooLarge": "store.entailment",
    "EndpointError": "endpoint.engine.errors",
    "UnknownQuery": "endpoint.engine.errors", "DuplicateQuery": "endpoint.engine.errors",
    "InvalidQueryId": "endpoint.engine.errors", "EngineAtCapacity": "endpoint.engine.errors",
    "SinkNotAllowed": "endpoint.engine.sinks", "LandmarkOverLimit": "endpoint.engine.s2r",
    "QueryFailed": "endpoint.api", "ServerError": "endpoint.client",
    "AnswerPastBound": "endpoint.adhoc", "QueriesBusy": "endpoint.adhoc", "QueryOverMemory": "endpoint.adhoc",
}
__all__ = list(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(_importlib.import_module("." + _WHERE[name], __name__), name)
    raise AttributeError("module 'rspstar' has no attribute %r" % name)


def __dir__() -> list[str]:
    return sorted(set(__all__) | {name for name in globals() if name.startswith("__")} | {"__version__"})
