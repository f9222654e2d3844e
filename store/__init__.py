"""The data layer: the Oxigraph-backed stream store and the ingestion into it."""
