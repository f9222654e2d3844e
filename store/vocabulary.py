"""IRIs the store writes and the translator reads: the one thing the two layers share."""

PROV_GENERATED_AT_TIME = "http://www.w3.org/ns/prov#generatedAtTime"

# The timestamp triples of every stream element (`n <ts> τ`) live in this graph, so the store's
# default graph stays the background default graph (spec §3: outside WINDOW the default graph
# never holds stream metadata).
TIMESTAMPS_GRAPH = "urn:rspstar:timestamps"

# Records which ingestion batches are already in the store (exactly-once writes).
BATCHES_GRAPH = "urn:rspstar:batches"

# Blank graph names of stream elements are skolemized to IRIs under this prefix (SPARQL VALUES
# cannot hold blank nodes) and turned back into blank nodes when results are rendered.
SKOLEM_PREFIX = "urn:rspstar:genid:"

INTERNAL_GRAPHS = frozenset({TIMESTAMPS_GRAPH, BATCHES_GRAPH})
