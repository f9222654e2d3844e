"""Streams: posted stream data, decoded into elements here (a bad element is a 400 naming its
line) and dropped durably, as canonical N-Quads, into the landing directory for Spark to ingest;
and what each stream and source holds."""
from __future__ import annotations

import json
import re

from flask import Blueprint, Response, request

from rspstar.store import formats
from rspstar.store.codec import CANONICAL, Payload, canonical, decode
from rspstar.store.landing import drop_file
from rspstar.translator.temporal import format_instant

from .errors import BadRequest, ServiceUnavailable, UnsupportedMediaType
from .context import require_write, services
from .protocol import params, single, text_body

blueprint = Blueprint("streams", __name__)
_IRI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|^`\\]*$")


@blueprint.route("/streams", methods=["POST"])
def post_stream():
    require_write()
    landing = services().settings.landing_dir
    if landing is None:
        raise ServiceUnavailable("no files source is configured to take posted streams")
    stream = single(params(("stream",)), "stream")
    if not stream or not _IRI.match(stream):
        raise BadRequest("POST /streams needs ?stream=IRI")
    fmt = formats.by_media_type(request.mimetype)
    if fmt is None:
        raise UnsupportedMediaType("POST /streams takes %s, not %r" % (", ".join(formats.media_types()),
                                                                       request.mimetype))
    decoded = decode(Payload(stream, fmt.name, "request body", text_body(),
                             services().engine.clock.now(), line=1 if fmt.line_based else None))
    if decoded.rejected:
        raise decoded.rejected[0].error()
    if not decoded.elements:
        raise BadRequest("the body holds no stream element (a named graph, or a JSON envelope)")
    bodies = {target: canonical(elements) for target, elements in decoded.elements.items()}
    disk = services().disk
    if disk is not None:    # storing it later needs room too (store.disk)
        disk.check("POST /streams", sum(len(data) for data in bodies.values()))
    accepted = []
    for target, data in bodies.items():
        path = drop_file(landing, target, data, CANONICAL.extension)
        if disk is not None:
            disk.landed.landed(path, len(data))
        accepted.append(path.name)
    return Response(json.dumps({"stream": stream, "accepted": accepted,
                                "elements": sum(len(e) for e in decoded.elements.values())}) + "\n",
                    status=202, mimetype="application/json")


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
