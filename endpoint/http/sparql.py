"""The SPARQL 1.1 Protocol (with SPARQL-star) over the store: queries, the service
description a bare GET answers with, and updates of the background data."""
from __future__ import annotations

from flask import Blueprint, Response, request

from rspstar.translator.federation import check_federation
from rspstar.translator.nesting import check_nesting
from rspstar.translator.protocol import with_update_dataset
from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.validate import check_query_calls, oxigraph_syntax_error

from ..adhoc import GRAPH_TYPES, RESULT_TYPES, Job, QueryRefused, negotiate, serialize_graph
from .errors import BadRequest, NotAcceptable, UnsupportedMediaType
from .service_description import service_description
from .context import base_iri, require_write, services
from .protocol import FORM, iris, params, single, text_body

blueprint = Blueprint("sparql", __name__)


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
    found = params(("query", "default-graph-uri", "named-graph-uri"))
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
        return describe_service()
    if not text:
        raise BadRequest("missing the query (parameter 'query')")
    check_nesting(text, language="sparql")
    check_federation(text, services().engine.config.federation_allowed, base_iri())
    try:
        check_query_calls(text)
    except QuerySyntaxError as e:
        raise SparqlSyntaxError(e.message, e.line, e.column) from None
    job = Job(text, tuple(iris(found, "default-graph-uri")), tuple(iris(found, "named-graph-uri")),
              negotiate(request.accept_mimetypes), base_iri())
    try:
        body, media = services().adhoc.run(job)
    except QueryRefused as e:
        raise (SparqlSyntaxError(e.message, e.line, e.column) if e.kind == "syntax" else NotAcceptable(e.message))
    if not body.endswith(b"\n"):       # Oxigraph's JSON and XML end without one; a terminal shows the next prompt after it
        body += b"\n"
    return Response(body, mimetype=media)


def describe_service() -> Response:
    base = request.host_url.rstrip("/")
    triples = service_description(base + "/sparql", base + "/update",
                                  list(RESULT_TYPES.keys() - {"application/json"}) + list(GRAPH_TYPES), base + "/store")
    try:
        body, media = serialize_graph(triples, negotiate(request.accept_mimetypes).graphs)
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
