"""The RSP-QL* language layer: parse continuous queries, rewrite windows into SPARQL-star,
and supply the `rspu:` uncertainty functions. Pure: no I/O, no store, no server."""
