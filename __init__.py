"""rspstar: an RDF stream processing engine for RSP-QL*.

    import rspstar
    engine = rspstar.Engine(start="2026-03-01T08:00:00Z")
    query = engine.register(text)
    engine.push(stream_iri, trig_text)
    engine.advance("2026-03-01T08:00:10Z")
    query.dataframe()

`Engine`, `Query`, `Results` and `replay` are the Python API (`rspstar.endpoint.api`). The
repository's top-level folders are the package's parts: `rspstar.translator` (language,
vocabulary, time), `rspstar.config` (the settings), `rspstar.store` (Oxigraph, Spark
ingestion) and `rspstar.endpoint` (runner, scheduler, HTTP, CLI).
"""
__version__ = "0.1.0"
__all__ = ["Engine", "Query", "Results", "replay"]


def __getattr__(name: str):
    # The API is imported on first use, so `import rspstar.config` stays light.
    if name in __all__:
        from .endpoint import api
        return getattr(api, name)
    raise AttributeError("module 'rspstar' has no attribute %r" % name)
