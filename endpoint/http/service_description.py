"""The SPARQL 1.1 Service Description of `/sparql`: what a client reads from a bare GET to
learn the endpoint's languages, formats and extension functions (the `rspu:` library)."""
from __future__ import annotations

import pyoxigraph as ox

from rspstar.translator.namespaces import RDF, RSPU
from rspstar.translator.uncertainty.functions import FUNCTION_NAMES

SD = "http://www.w3.org/ns/sparql-service-description#"
FORMATS = "http://www.w3.org/ns/formats/"
# Media types the endpoint serves, by the W3C format IRI a service description names them with.
FORMAT_IRIS = {
    "application/sparql-results+json": "SPARQL_Results_JSON",
    "application/sparql-results+xml": "SPARQL_Results_XML",
    "text/csv": "SPARQL_Results_CSV",
    "text/tab-separated-values": "SPARQL_Results_TSV",
    "text/turtle": "Turtle",
    "application/n-triples": "N-Triples",
    "application/trig": "TriG",
    "application/n-quads": "N-Quads",
    "application/rdf+xml": "RDF_XML",
    "application/ld+json": "JSON-LD",
}


DCTERMS = "http://purl.org/dc/terms/"
GRAPH_STORE_PROTOCOL = "http://www.w3.org/TR/sparql11-http-rdf-update/"


def service_description(endpoint: str, update_endpoint: str, media_types: list[str],
                        graph_store: str | None = None) -> list[ox.Triple]:
    """Two services: queries at `endpoint`, SPARQL Update (background data) at `update_endpoint`;
    and the graph store (the SPARQL 1.1 Graph Store HTTP Protocol) at `graph_store`, which the
    service description vocabulary has no term for: it is linked from the query service and said
    to conform to the protocol."""
    def iri(value: str) -> ox.NamedNode:
        return ox.NamedNode(value)

    a = iri(RDF + "type")
    triples = []
    query_service, update_service = iri(endpoint), iri(update_endpoint)
    for service, endpoint_iri, language in ((query_service, endpoint, "SPARQL11Query"),
                                            (update_service, update_endpoint, "SPARQL11Update")):
        triples += [ox.Triple(service, a, iri(SD + "Service")),
                    ox.Triple(service, iri(SD + "endpoint"), iri(endpoint_iri)),
                    ox.Triple(service, iri(SD + "supportedLanguage"), iri(SD + language))]
    for media in media_types:
        triples.append(ox.Triple(query_service, iri(SD + "resultFormat"), iri(FORMATS + FORMAT_IRIS[media])))
    if graph_store is not None:
        store = iri(graph_store)
        triples += [ox.Triple(query_service, iri("http://www.w3.org/2000/01/rdf-schema#seeAlso"), store),
                    ox.Triple(store, iri(DCTERMS + "conformsTo"), iri(GRAPH_STORE_PROTOCOL))]
    for name in FUNCTION_NAMES:
        function = iri(RSPU + name)
        triples += [ox.Triple(query_service, iri(SD + "extensionFunction"), function),
                    ox.Triple(function, a, iri(SD + "Function"))]
    return triples
