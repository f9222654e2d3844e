"""Streams: posted stream data, checked and dropped durably into the landing directory for
Spark to ingest, and what each stream and source holds."""
from __future__ import annotations

import json
import re

from flask import Blueprint, Response, request

from store import formats
from store.landing import drop_file
from store.rdf_input import read_envelope, scan_document
from translator.temporal import format_instant

from ..http_errors import BadRequest, ServiceUnavailable, UnsupportedMediaType
from .context import require_write, services

blueprint = Blueprint("streams", __name__)
_IRI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|^`\\]*$")


@blueprint.route("/streams", methods=["POST"])
def post_stream():
    require_write()
    landing = services().settings.landing_dir
    if landing is None:
        raise ServiceUnavailable("no files source is configured to take posted streams")
    stream = request.args.get("stream")
    if not stream or not _IRI.match(stream):
        raise BadRequest("POST /streams needs ?stream=IRI")
    fmt = formats.by_media_type(request.mimetype)
    if fmt is None:
        raise UnsupportedMediaType("POST /streams takes %s, not %r" % (", ".join(formats.media_types()),
                                                                       request.mimetype))
    data = request.get_data()
    check_stream_body(data, fmt.rdf)
    path = drop_file(landing, stream, data, fmt.extension)
    return Response(json.dumps({"stream": stream, "accepted": path.name}), status=202, mimetype="application/json")


def check_stream_body(data: bytes, fmt) -> None:
    """Refuse a posted stream body that would only be quarantined later: RDF must parse and
    every JSON line must be a well-formed envelope (the store's own check, naming the field)."""
    if fmt is not None:
        scan_document(data, fmt, "request body")
        return
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if line.strip():
            read_envelope(line, "request body", number)


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
