"""The SPARQL 1.1 Protocol (with SPARQL-star) over the store: queries, the service
description a bare GET answers with, and updates of the background data."""
from __future__ import annotations

from flask import Blueprint, Response, request
from werkzeug.datastructures import MIMEAccept
from werkzeug.http import parse_accept_header

from rspstar.translator.federation import check_federation
from rspstar.translator.nesting import check_nesting
from rspstar.translator.protocol import with_update_dataset
from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.validate import check_query_calls, oxigraph_syntax_error

from ..adhoc import GRAPH_TYPES, RESULT_TYPES, Job, Negotiated, QueryRefused, negotiate, serialize_graph
from .errors import BadRequest, NotAcceptable, UnsupportedMediaType
from ..engine.result_shapes import TRIPLE_TERMS, with_triple_iris
from .service_description import service_description
from .context import base_iri, require_write, services
from .protocol import FORM, iris, params, single, text_body

blueprint = Blueprint("sparql", __name__)

# The query-string parameters clients name the format with instead of an Accept header (each
# is an alias of content negotiation, as in Fuseki and Virtuoso): SPARQLWrapper sends all three,
# with its default settings, on every query.
FORMAT_PARAMETERS = ("format", "output", "results")
# Each short name and the media types it asks for: one for solutions and booleans, one for
# graphs (a CONSTRUCT or DESCRIBE), None where it names no such format. "xml" and "json" name
# both kinds, as in Fuseki: SPARQL XML or RDF/XML, SPARQL JSON or JSON-LD.
FORMAT_NAMES: dict[str, tuple[str | None, str | None]] = {
    "json": ("application/sparql-results+json", "application/ld+json"),
    "xml": ("application/sparql-results+xml", "application/rdf+xml"),
    "csv": ("text/csv", None),
    "tsv": ("text/tab-separated-values", None),
    "turtle": (None, "text/turtle"), "ttl": (None, "text/turtle"), "n3": (None, "text/turtle"),
    "ntriples": (None, "application/n-triples"), "nt": (None, "application/n-triples"),
    "n-triples": (None, "application/n-triples"),
    "trig": (None, "application/trig"),
    "nquads": (None, "application/n-quads"), "nq": (None, "application/n-quads"),
    "n-quads": (None, "application/n-quads"),
    "rdf": (None, "application/rdf+xml"), "rdfxml": (None, "application/rdf+xml"), "rdf+xml": (None, "application/rdf+xml"),
    "jsonld": (None, "application/ld+json"), "json-ld": (None, "application/ld+json"),
}


def format_named(values: list[str]) -> Negotiated:
    """What the `format` (`output`, `results`) values ask for, in their order of preference: short
    names (json, xml, csv, tsv, turtle, ...), or media types as an Accept header lists them
    (SPARQLWrapper sends "application/ld+json,application/x-json+ld"), of which one at least is
    served here. BadRequest for any other value, naming those it takes."""
    results: list[str] = []
    graphs: list[str] = []
    for value in values:
        name = value.strip().lower()
        if name in FORMAT_NAMES:
            result, graph = FORMAT_NAMES[name]
            found = Negotiated(result, (graph,) if graph else ())
        elif "/" in name:
            found = negotiate(parse_accept_header(name, MIMEAccept))
        else:
            found = Negotiated(None, ())
        if found.results is None and not found.graphs:
            raise BadRequest("format %r is not one this endpoint serves: give one of %s, or a media type (%s); "
                             "or leave it out and send an Accept header"
                             % (value[:80], ", ".join(FORMAT_NAMES), ", ".join(list(RESULT_TYPES) + list(GRAPH_TYPES))))
        if found.results is not None and found.results not in results:
            results.append(found.results)
        graphs += [graph for graph in found.graphs if graph not in graphs]
    return Negotiated(results[0] if results else None, tuple(graphs))


def negotiated(found: dict[str, list[str]]) -> Negotiated:
    """The formats the request asks for: by its format parameters when it gives any (they
    replace the Accept header), else by its Accept header."""
    named = [value for name in FORMAT_PARAMETERS for value in found.get(name, [])]
    return format_named(named) if named else negotiate(request.accept_mimetypes)


class SparqlSyntaxError(BadRequest):
    """A SPARQL query or update Oxigraph cannot parse, with its position."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@blueprint.route("/sparql", methods=["GET", "POST"])
def sparql():
    """The SPARQL 1.1 Protocol's query operation: GET with `query`, POST of a form, or POST of the
    query itself (application/sparql-query) with the dataset parameters in the URL."""
    found = params(("query", "default-graph-uri", "named-graph-uri", "triple_terms") + FORMAT_PARAMETERS)
    triple_terms = single(found, "triple_terms")
    if triple_terms is not None and triple_terms not in TRIPLE_TERMS:
        raise BadRequest("triple_terms takes %s, not %r" % (" or ".join(TRIPLE_TERMS), triple_terms[:40]))
    accepted = negotiated(found)
    if request.method == "POST" and request.mimetype == "application/sparql-query":
        if "query" in found:
            raise BadRequest("a query posted directly takes no query parameter as well")
        text = text_body("the query")
    elif request.method == "POST" and request.mimetype != FORM:
        raise UnsupportedMediaType("POST /sparql takes application/sparql-query or a form, not %r" % request.mimetype)
    else:
        text = single(found, "query")
    if request.method == "GET" and "query" not in found:
        iris(found, "default-graph-uri"), iris(found, "named-graph-uri")
        return describe_service(accepted)
    if not text:
        raise BadRequest("missing the query (parameter 'query')")
    check_nesting(text, language="sparql")
    check_federation(text, services().engine.config.federation_allowed, base_iri())
    try:
        check_query_calls(text)
    except QuerySyntaxError as e:
        raise SparqlSyntaxError(e.message, e.line, e.column) from None
    job = Job(text, tuple(iris(found, "default-graph-uri")), tuple(iris(found, "named-graph-uri")),
              accepted, base_iri())
    try:
        body, media = services().adhoc.run(job)
    except QueryRefused as e:
        raise (SparqlSyntaxError(e.message, e.line, e.column) if e.kind == "syntax" else NotAcceptable(e.message))
    if triple_terms == "iri":
        body = with_triple_iris(body, media)
    if not body.endswith(b"\n"):       # Oxigraph's JSON and XML end without one; a terminal shows the next prompt after it
        body += b"\n"
    return Response(body, mimetype=media)


def describe_service(accepted: Negotiated) -> Response:
    base = request.host_url.rstrip("/")
    triples = service_description(base + "/sparql", base + "/update",
                                  list(RESULT_TYPES.keys() - {"application/json"}) + list(GRAPH_TYPES), base + "/store")
    try:
        body, media = serialize_graph(triples, accepted.graphs)
    except QueryRefused as e:
        raise NotAcceptable(e.message) from None
    return Response(body, mimetype=media)


@blueprint.route("/update", methods=["POST"])
def update():
    """The protocol's update operation, on the background data only: POST of a form or of the
    update itself (application/sparql-update), `using-graph-uri` and `using-named-graph-uri` as
    its dataset."""
    require_write()
    found = params(("update", "using-graph-uri", "using-named-graph-uri"))
    if request.mimetype == "application/sparql-update":
        if "update" in found:
            raise BadRequest("an update posted directly takes no update parameter as well")
        text = text_body("the update")
    elif request.mimetype == FORM:
        text = single(found, "update")
    else:
        raise UnsupportedMediaType("POST /update takes application/sparql-update or a form")
    if not text:
        raise BadRequest("missing the update (parameter 'update')")
    check_nesting(text, language="sparql")
    check_federation(text, services().engine.config.federation_allowed, base_iri())
    text = with_update_dataset(text, iris(found, "using-graph-uri"), iris(found, "using-named-graph-uri"))
    engine = services().engine
    try:
        # Computed in a worker within the time and memory limits, applied here (endpoint/adhoc.py).
        services().adhoc.update(engine.store.background, text, base_iri())
    except SyntaxError as e:
        raise SparqlSyntaxError(*oxigraph_syntax_error(str(e), text)) from None
    engine.background_changed()
    return Response(status=204)
