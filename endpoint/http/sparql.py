"""The SPARQL 1.1 Protocol (with SPARQL-star) over the store: queries, the service
description a bare GET answers with, and updates of the background data."""
from __future__ import annotations

import pyoxigraph as ox
from flask import Blueprint, Response, request

from rspstar.translator.federation import check_federation
from rspstar.translator.nesting import check_nesting
from rspstar.translator.validate import oxigraph_syntax_error

from ..adhoc import GRAPH_TYPES, RESULT_TYPES, Job, QueryRefused, negotiate, serialize_graph
from ..http_errors import BadRequest, NotAcceptable, UnsupportedMediaType
from ..service_description import service_description
from .context import require_write, services

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
    if request.method == "GET":
        text = request.args.get("query")
        default_graphs = request.args.getlist("default-graph-uri")
        named_graphs = request.args.getlist("named-graph-uri")
    else:
        mimetype = request.mimetype
        if mimetype == "application/sparql-query":
            text = request.get_data(as_text=True)
        elif mimetype == "application/x-www-form-urlencoded":
            text = request.form.get("query")
        else:
            raise UnsupportedMediaType("POST /sparql takes application/sparql-query or a form, not %r" % mimetype)
        default_graphs = request.args.getlist("default-graph-uri") + request.form.getlist("default-graph-uri")
        named_graphs = request.args.getlist("named-graph-uri") + request.form.getlist("named-graph-uri")
    if not text and request.method == "GET" and not request.args:
        return describe_service()
    if not text:
        raise BadRequest("missing the query (parameter 'query')")
    check_nesting(text)
    check_federation(text, services().engine.config.federation_allowed)
    for graph in default_graphs + named_graphs:
        try:
            ox.NamedNode(graph)
        except ValueError:
            raise BadRequest("default-graph-uri and named-graph-uri take IRIs, got %r" % graph[:120]) from None
    job = Job(text, tuple(default_graphs), tuple(named_graphs), negotiate(request.accept_mimetypes))
    try:
        body, media = services().adhoc.run(job)
    except QueryRefused as e:
        raise (SparqlSyntaxError(e.message, e.line, e.column) if e.kind == "syntax" else NotAcceptable(e.message))
    return Response(body, mimetype=media)


def describe_service() -> Response:
    base = request.host_url.rstrip("/")
    triples = service_description(base + "/sparql", base + "/update",
                                  list(RESULT_TYPES.keys() - {"application/json"}) + list(GRAPH_TYPES))
    try:
        body, media = serialize_graph(triples, negotiate(request.accept_mimetypes).graphs)
    except QueryRefused as e:
        raise NotAcceptable(e.message) from None
    return Response(body, mimetype=media)


@blueprint.route("/update", methods=["POST"])
def update():
    require_write()
    if request.mimetype == "application/sparql-update":
        text = request.get_data(as_text=True)
    elif request.mimetype == "application/x-www-form-urlencoded":
        text = request.form.get("update")
    else:
        raise UnsupportedMediaType("POST /update takes application/sparql-update or a form")
    if not text:
        raise BadRequest("missing the update (parameter 'update')")
    check_nesting(text)
    check_federation(text, services().engine.config.federation_allowed)
    try:
        services().engine.update_background(text)
    except SyntaxError as e:
        raise SparqlSyntaxError(*oxigraph_syntax_error(str(e), text)) from None
    return Response(status=204)
