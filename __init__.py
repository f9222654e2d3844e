"""rspstar: an RDF stream processing engine for RSP-QL*.

The repository's top-level folders are the package's parts: `rspstar.translator` (language,
vocabulary, time), `rspstar.store` (Oxigraph, Spark ingestion), `rspstar.endpoint` (runner,
scheduler, HTTP, CLI) and `rspstar.config` (the settings and the packaged configuration).
"""
__version__ = "0.1.0"
