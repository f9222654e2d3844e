"""Streams: posted stream data, decoded into elements here (a bad element is a 400 naming its
line, one stamped further ahead of the engine's clock than [engine] max_event_ahead a 400 naming
it, a duplicate a 409 naming it) and admitted by what the pipeline can hold (the bounds on
streams, on input waiting to be stored, on an element's size, and the disk) before it is dropped
durably into the landing directory for Spark to ingest (store.landing.land_elements); and what
each stream and source holds."""
from __future__ import annotations

import collections
import json
import uuid

from flask import Blueprint, Response, request

from rspstar.store import formats
from rspstar.store.codec import EventTimeBound, Payload, decode_body
from rspstar.store.errors import DuplicateElementError
from rspstar.store.landing import LandedFiles, StreamBound, land_elements
from rspstar.translator.syntax import check_stream_iri
from rspstar.translator.temporal import format_instant

from .errors import (
    BadRequest, ElementTooLarge, IngestionBacklog, ServiceUnavailable, TooManyStreams, UnsupportedMediaType,
)
from .context import require_write, services
from .protocol import params, single, text_body

blueprint = Blueprint("streams", __name__)


@blueprint.route("/streams", methods=["POST"])
def post_stream():
    require_write()
    landing = services().settings.landing_dir
    if landing is None:
        raise ServiceUnavailable("no files source is configured to take posted streams")
    stream = single(params(("stream",)), "stream")
    if not stream:
        raise BadRequest("POST /streams needs ?stream=IRI")
    check_stream_iri(stream, "the stream parameter")
    fmt = formats.by_media_type(request.mimetype)
    if fmt is None:
        raise UnsupportedMediaType("POST /streams takes %s, not %r" % (", ".join(formats.media_types()),
                                                                       request.mimetype))
    text = text_body()
    if not text.strip():
        raise BadRequest(EMPTY_BODY)
    # Each post names what it leaves unnamed (blank graph names, envelopes without "graph")
    # afresh: the same body posted twice is two posts.
    # An element stamped far ahead of the engine's clock is refused here, naming it: taken, it would
    # move its stream's watermark past every reading to come.
    engine = services().engine
    decoded = decode_body(Payload(stream, fmt.name, "request body", text, engine.clock.now(),
                                  line=1 if fmt.line_based else None, scope="request:" + uuid.uuid4().hex),
                          event_time=EventTimeBound(engine.clock, engine.config.max_event_ahead))
    if not decoded.elements:
        raise BadRequest("the body holds no stream element (a named graph with its timestamp, triples, or a JSON "
                         "envelope)")
    disk = services().disk
    landed = disk.landed if disk is not None else None
    bound = StreamBound(services().engine.config.max_streams, lambda: services().store.streams(), landed)
    beyond = bound.beyond(decoded.elements)
    if beyond:
        raise TooManyStreams("the body names %s" % bound.reason(beyond))
    names = [element.graph for elements in decoded.elements.values() for element in elements]
    _refuse_duplicates(names, landed)

    def admit(size: int) -> None:
        """Refused before anything lands: what the pipeline cannot hold now (a backlog past its
        bound: 503 and Retry-After) or on disk (storing it later takes room too: 507)."""
        if landed is not None and not landed.room_for(size):
            raise IngestionBacklog(
                "%d bytes of input are acknowledged and not stored yet, and this post's %d would pass the %d that may "
                "wait ([engine] max_landed_bytes): retry once Spark has stored some" % (landed.bytes(), size,
                                                                                         landed.max_bytes))
        if disk is not None:
            disk.check("POST /streams", size)

    def oversize(target: str, element, size: int) -> None:
        raise ElementTooLarge(
            "graph <%s> is %d bytes as N-Quads, more than the %d one micro-batch takes ([[sources]] max_batch_bytes of "
            "the landing source): split it, or raise that bound (and Spark's heap with it)"
            % (element.graph[:200], size, landed.max_element_bytes))

    try:
        files = land_elements(landing, decoded.elements, admit=admit, oversize=oversize,
                              max_element_bytes=landed.max_element_bytes if landed is not None else None)
    except BaseException:
        if landed is not None:
            landed.release(names)
        raise
    if landed is not None:
        for file in files:
            landed.landed(file.path, file.size, file.streams, file.names)
    accepted = [file.path.name for file in files]
    return Response(json.dumps({"stream": stream, "accepted": accepted, "elements": len(names)}) + "\n",
                    status=202, mimetype="application/json")


EMPTY_BODY = ("the body is empty: POST /streams takes stream elements in the body (curl: --data-binary '@file.trig' "
              "sends the file file.trig; a body that starts with '@', such as '@prefix ...', makes curl read a "
              "file of that name instead)")


def _refuse_duplicates(names: list[str], landed: LandedFiles | None) -> None:
    """DuplicateElementError naming the elements of a body whose graph names are taken: an
    element is stored once, and one answered 202 would be set aside later, the client none the
    wiser. Taken: twice in the body, already stored, or posted and not stored yet (then they
    are claimed for this post here, until its files are stored)."""
    repeated = [name for name, count in collections.Counter(names).items() if count > 1]
    if repeated:
        raise DuplicateElementError("%s twice in the body: an element's graph name names one element"
                                    % _graphs(repeated, "is", "are"))
    store = services().store
    stored = [name for name in names if store.is_taken(name)]
    if stored:
        raise DuplicateElementError("%s already stored (posted before?): an element is stored once; post it under "
                                    "another graph name" % _graphs(stored, "is", "are"))
    if landed is not None:
        pending = landed.claim(names)
        if pending:
            raise DuplicateElementError("%s posted before and not stored yet (posted twice?): an element is stored "
                                        "once" % _graphs(pending, "was", "were"))


def _graphs(names: list[str], one: str, many: str) -> str:
    shown = ", ".join("<%s>" % name[:200] for name in names[:3])
    more = " and %d more" % (len(names) - 3) if len(names) > 3 else ""
    return "graph %s %s" % (shown, one) if len(names) == 1 else "graphs %s%s %s" % (shown, more, many)


@blueprint.route("/streams", methods=["GET"])
def list_streams():
    sources = services().ingestion_status()
    quarantined: dict[str, int] = {}
    for source in sources.values():
        for stream, count in source.get("quarantined", {}).items():
            quarantined[stream] = quarantined.get(stream, 0) + count
    streams = []
    for stream, stats in sorted(services().store.streams().items()):
        streams.append({"stream": stream, "elements": stats.elements, "ingested": stats.ingested,
                        "evicted": stats.evicted, "late": stats.late, "quarantined": quarantined.get(stream, 0),
                        "watermark": None if stats.watermark is None else format_instant(stats.watermark),
                        "latest": None if stats.latest is None else format_instant(stats.latest)})
    return {"streams": streams, "sources": sources}
