"""The SPARQL 1.1 Graph Store HTTP Protocol over the background data: GET, HEAD, PUT, POST and
DELETE of `/store?graph=IRI` (a background graph) or `/store?default` (the default graph), in
every RDF format Oxigraph reads, the token for writes, the same body limit, charset (UTF-8)
and nesting check as /update. Stream elements and the engine's own graphs are not the
protocol's: 403, naming why. `curl -T data.ttl -H 'Content-Type: text/turtle'
'.../store?graph=...'` loads a file."""
from __future__ import annotations

import pyoxigraph as ox
from flask import Blueprint, Response, request

from ..adhoc import QueryRefused, negotiate, serialize_graph
from .errors import BadRequest, NotAcceptable, UnknownGraph, UnsupportedMediaType
from .context import require_write, services
from .protocol import iris, params, single, text_body

blueprint = Blueprint("graph_store", __name__)


def _target() -> str | None:
    """The graph a request names: an IRI (?graph=), or None for the default graph (?default)."""
    found = params(("graph", "default"))
    graph = single(found, "graph")
    if graph is not None and "default" in found:
        raise BadRequest("name one graph: ?graph=IRI or ?default, not both")
    if graph is None and "default" not in found:
        raise BadRequest("name the graph: /store?graph=IRI, or /store?default for the default graph")
    if graph is not None:
        iris(found, "graph")
    return graph


def _name(graph: str | None) -> str:
    return "the default graph" if graph is None else "graph <%s>" % graph


@blueprint.route("/store", methods=["GET", "HEAD"])
def read_graph():
    graph = _target()
    triples = services().store.background.triples(graph)
    if triples is None:
        raise UnknownGraph("no background %s" % _name(graph))
    try:
        body, media = serialize_graph(triples, negotiate(request.accept_mimetypes).graphs or ("text/turtle",))
    except QueryRefused as e:
        raise NotAcceptable(e.message) from None
    return Response(body, mimetype=media)


@blueprint.route("/store", methods=["PUT", "POST"])
def write_graph():
    require_write()
    graph = _target()
    fmt = ox.RdfFormat.from_media_type(request.mimetype) if request.mimetype else None
    if fmt is None:
        raise UnsupportedMediaType("the graph store takes an RDF format (text/turtle, application/n-triples, "
                                   "application/rdf+xml, application/ld+json, ...), not %r" % request.mimetype)
    disk = services().disk

    def admit(quads: list) -> None:
        """Refused before anything is written when the disk cannot take what the store will
        write of it: counted by its triples as N-Quads (a Turtle body is several times smaller
        than that), not by the body."""
        if disk is not None:
            size = len(ox.serialize([q.triple for q in quads], format=ox.RdfFormat.N_TRIPLES))
            disk.check("%s /store" % request.method, size + len(quads) * (len(graph or "") + 3))

    created = services().store.background.write(graph, text_body(), fmt, "request body",
                                                replace=request.method == "PUT", admit=admit)
    services().engine.background_changed()
    return Response(status=201 if created else 204)


@blueprint.route("/store", methods=["DELETE"])
def delete_graph():
    require_write()
    graph = _target()
    if not services().store.background.drop(graph):
        raise UnknownGraph("no background %s" % _name(graph))
    services().engine.background_changed()
    return Response(status=204)
