"""IRIs the engine writes and reads: the stream store names its graphs with them, the rewrite
selects by them. The bottom layer holds them, so both layers above share one definition."""
from urllib.parse import quote

PROV_GENERATED_AT_TIME = "http://www.w3.org/ns/prov#generatedAtTime"

# The timestamp triples of a stream's elements (`n <ts> τ`) live in a graph of their own per
# stream, so the store's default graph stays the background default graph (spec §3), a whole
# document loads in one call with its default graph redirected there, and a store on disk
# can rebuild its index from these graphs alone.
TIMESTAMPS_PREFIX = "urn:rspstar:timestamps:"

# Records which ingestion batches are already in the store (exactly-once writes).
BATCHES_GRAPH = "urn:rspstar:batches"

# Blank graph names of stream elements are skolemized to IRIs under this prefix (SPARQL VALUES
# cannot hold blank nodes) and turned back into blank nodes when results are rendered.
SKOLEM_PREFIX = "urn:rspstar:genid:"


# The facts a fact window holds (spec §6.13), one graph per query and window: the window's default
# graph at an evaluation. Their annotation is `rspstar:since`.
FACTS_PREFIX = "urn:rspstar:facts:"
RSPSTAR = "https://w3id.org/rspstar#"
RSPSTAR_SINCE = RSPSTAR + "since"


# Graph names under this prefix are the engine's own (timestamps, batch markers, output
# stream elements, generated and skolemized element names): neither posted input nor an
# update may name a graph with one.
RESERVED_PREFIX = "urn:rspstar:"


# Closure graphs of RDFS entailment (store/entailment.py): derived from stream elements and the
# background, never written by a client.
CLOSURE_PREFIX = "urn:rspstar:closure:"


def timestamps_graph(stream: str) -> str:
    return TIMESTAMPS_PREFIX + quote(stream, safe="")


def is_reserved(iri: str) -> bool:
    """Whether `iri` is under the engine's prefix, in any case: a URI's scheme and a URN's
    namespace are case-insensitive (RFC 3986, RFC 8141), so `URN:RSPSTAR:x` is `urn:rspstar:x`."""
    return iri[:len(RESERVED_PREFIX)].lower() == RESERVED_PREFIX


def is_internal_graph(iri: str) -> bool:
    """A graph the store keeps for itself (a stream's timestamps, the batch markers, facts, closures), its
    scheme and namespace in any case."""
    if is_reserved(iri):
        iri = RESERVED_PREFIX + iri[len(RESERVED_PREFIX):]
    return iri.startswith((TIMESTAMPS_PREFIX, FACTS_PREFIX, CLOSURE_PREFIX)) or iri == BATCHES_GRAPH


def any_internal_graph(iris: list[str]) -> bool:
    """Whether any of these is_internal_graph. Every internal graph is under RESERVED_PREFIX, so
    a list where no name starts so (in any case) is answered by one search of their joined
    text, in C: a replay checks each of its elements' names."""
    joined = "\n" + "\n".join(iris).lower()
    if "\n" + RESERVED_PREFIX not in joined:
        return False
    return any(map(is_internal_graph, iris))


def facts_graph(query_id: str, window: str) -> str:
    return FACTS_PREFIX + quote(query_id, safe="") + ":" + quote(window, safe="")
