"""The continuous-query API: register, list, describe, remove; each query's result history
and its server-sent events."""
from __future__ import annotations

import json
import queue
import time

from flask import Blueprint, Response, request

from rspstar.translator.admission import admit
from rspstar.translator.errors import TemporalValueError
from rspstar.translator.temporal import format_instant, parse_instant

from ..engine.result_shapes import COMPACT, SHAPES, SPARQL_JSON, TRIPLE_TERMS, shaped_json
from ..engine.runner import QUERY_ID, UnknownQuery
from ..engine.sinks import FeedClosed, check_sinks_allowed
from .errors import BadRequest, TooManyEventStreams, UnsupportedMediaType
from .context import base_iri, require_write, services
from .protocol import params, single, text_body

blueprint = Blueprint("queries", __name__)
MAX_RESULTS_LIMIT = 1_000_000


@blueprint.route("/queries", methods=["POST"])
def register_query():
    require_write()
    found = params(("id", "sink", "option"))
    given_id = single(found, "id")
    if given_id is not None and not QUERY_ID.fullmatch(given_id):
        raise BadRequest("id %s: use 1-64 letters, digits, '.', '_' or '-'" % json.dumps(given_id)[:80])
    text, query_id, sinks, options = _registration(found, "POST /queries")
    query_id = given_id if query_id is None else query_id
    # Relative IRIs resolve against the URL the query was registered at unless the client says
    # otherwise; kept with the query's options, so a restart reads it as it was registered.
    options.setdefault("base", base_iri())
    registered = services().engine.register(text, query_id, sinks, options)
    return _registered(registered, 201)


@blueprint.route("/queries/<query_id>", methods=["PUT"])
def put_query(query_id):
    """The query under this id is the one in the body: registered when there is none (201),
    left as it runs when it is the same text, sinks and options (200: PUT is idempotent), else
    replaced (200), the new text checked before the old query is removed, so that a bad one
    leaves the old running. Relative IRIs resolve against /queries, as a POST's do, so that
    a query means the same whichever of the two registered it."""
    require_write()
    if not QUERY_ID.fullmatch(query_id):
        raise BadRequest("id %s: use 1-64 letters, digits, '.', '_' or '-'" % json.dumps(query_id)[:80])
    found = params(("sink", "option"))
    text, given_id, sinks, options = _registration(found, "PUT /queries/<id>")
    if given_id is not None and given_id != query_id:
        raise BadRequest("the body names id %s, the URL %s: leave it out, or make them equal"
                         % (json.dumps(given_id)[:80], json.dumps(query_id)))
    # The URL it was sent to less the id (/queries), unless [http] base_iri gives the base,
    # which is every registration's as it is.
    options.setdefault("base", services().settings.base_iri or base_iri().rsplit("/", 1)[0])
    engine = services().engine
    try:
        current = engine.get(query_id)
    except UnknownQuery:
        current = None
    if current is None:
        return _registered(engine.register(text, query_id, sinks, options), 201)
    if (current.spec.text, current.spec.sinks, current.spec.options) == (text, list(sinks), options):
        return _registered(current, 200)
    admit(text, engine.config, dict(options))
    check_sinks_allowed(sinks, engine.config.allowed_sinks)
    old = current.spec
    engine.remove(query_id)
    try:
        registered = engine.register(text, query_id, sinks, options)
    except Exception:
        engine.register(old.text, query_id, old.sinks, old.options)     # the old one back, from now
        raise
    return _registered(registered, 200)


def _registration(found: dict[str, list[str]], route: str) -> tuple[str, str | None, list[str], dict[str, str]]:
    """The query's text, the id its JSON body names, its sinks and options: from a JSON body, or
    from a text body and the URL's parameters."""
    if request.mimetype == "application/json":
        return _json_registration(_json_body())
    if request.mimetype in ("application/sparql-query", "text/plain", "application/rsp-ql"):
        return (text_body("the query"), None, found.get("sink", []),
                dict(_option(o) for o in found.get("option", [])))
    raise UnsupportedMediaType("%s takes the RSP-QL* text (application/sparql-query or text/plain) or JSON, not %r"
                               % (route, request.mimetype))


def _registered(registered, status: int) -> Response:
    response = Response(json.dumps(registered.describe()) + "\n", status=status, mimetype="application/json")
    response.headers["Location"] = "/queries/%s" % registered.id
    return response


def _json_body():
    """The JSON body, read from its UTF-8 text (BadRequest when it is not JSON)."""
    try:
        return json.loads(text_body("the JSON body"))
    except ValueError as e:
        raise BadRequest("the body is not JSON: %s" % e) from None


def _json_registration(body) -> tuple[str, str | None, list[str], dict[str, str]]:
    if not isinstance(body, dict) or not isinstance(body.get("query"), str):
        raise BadRequest('a JSON body needs {"query": "..."} (optional: id, sinks, options)')
    unknown = sorted(set(body) - {"query", "id", "sinks", "options"})
    if unknown:     # a misspelt "option" or "sink" would otherwise be dropped unnoticed
        raise BadRequest("the JSON body has %s %s: it takes query, id, sinks and options"
                         % ("keys" if len(unknown) > 1 else "key", ", ".join(json.dumps(k)[:80] for k in unknown[:5])))
    query_id, sinks, options = body.get("id"), body.get("sinks", []), body.get("options", {})
    if query_id is not None and not isinstance(query_id, str):
        raise BadRequest('"id" must be a string, got %s' % json.dumps(query_id)[:80])
    if not isinstance(sinks, list) or not all(isinstance(s, str) for s in sinks):
        raise BadRequest('"sinks" must be a list of URL strings')
    if not isinstance(options, dict) or not all(isinstance(v, (str, bool)) for v in options.values()):
        raise BadRequest('"options" must be an object of KEY: value (a string, or a boolean for a switch)')
    return body["query"], query_id, sinks, {k: str(v).lower() if isinstance(v, bool) else str(v)
                                            for k, v in options.items()}


def _option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise BadRequest("option must be KEY=VALUE, got %r" % text)
    return key, value


@blueprint.route("/queries", methods=["GET"])
def list_queries():
    return {"queries": [q.describe() for q in services().engine.queries()]}


@blueprint.route("/queries/<query_id>", methods=["GET"])
def get_query(query_id):
    return services().engine.get(query_id).describe()


@blueprint.route("/queries/<query_id>", methods=["DELETE"])
def delete_query(query_id):
    require_write()
    services().engine.remove(query_id)
    return Response(status=204)


def _shape(found: dict[str, list[str]]) -> str:
    """The shape the records go in: SPARQL Query Results JSON, or with format=compact the
    record as the history keeps it (the conformance format)."""
    shape = single(found, "format")
    if shape is None:
        return SPARQL_JSON
    if shape not in SHAPES:
        raise BadRequest("format takes %s, not %r" % (" or ".join(SHAPES), shape[:40]))
    return shape


def _triple_terms(found: dict[str, list[str]]) -> str:
    """How triple terms are written in the SPARQL JSON shape: as SPARQL 1.2 does (the default),
    or with triple_terms=iri as IRIs, for readers of SPARQL 1.1 results that know no triple term
    (rdflib 7)."""
    given = single(found, "triple_terms")
    if given is None:
        return TRIPLE_TERMS[0]
    if given not in TRIPLE_TERMS:
        raise BadRequest("triple_terms takes %s, not %r" % (" or ".join(TRIPLE_TERMS), given[:40]))
    return given


@blueprint.route("/queries/<query_id>/results", methods=["GET"])
def query_results(query_id):
    """The query's records from its history, oldest first, one JSON object a line: each
    evaluation in the SPARQL Query Results JSON shape (format=compact: as kept). Without `since`,
    `limit` keeps the latest N; with `since` (exclusive: the evaluations after that instant), the
    first N after it, so that a client reading on from the last instant it has misses none."""
    registered = services().engine.get(query_id)
    found = params(("since", "limit", "format", "triple_terms"))
    shape, triple_terms = _shape(found), _triple_terms(found)
    since = single(found, "since")
    try:
        instant = parse_instant(since) if since is not None else None
    except TemporalValueError as e:
        raise BadRequest("since: %s" % e) from None
    limit = single(found, "limit")
    if limit is not None and not (limit.isascii() and limit.isdigit() and int(limit) <= MAX_RESULTS_LIMIT):
        raise BadRequest("limit must be an integer from 0 to %d, got %r" % (MAX_RESULTS_LIMIT, limit[:40]))
    lines = registered.history.lines(instant, int(limit) if limit is not None else None)
    if shape != COMPACT:
        variables = registered.query.variables
        lines = [shaped_json(json.loads(line), shape, variables, triple_terms) + "\n" for line in lines]
    return Response("".join(lines), mimetype="application/x-ndjson")


# How often an event stream looks whether its client is still there (waitress tells, see
# server.py): a client that drops gives its slot back within this.
DISCONNECT_CHECK_SECONDS = 0.5
# What a browser's EventSource waits before it reconnects (its own default is about 3 s).
RECONNECT_MILLISECONDS = 2000


def _resume_from(found: dict[str, list[str]]) -> int | None:
    """The instant a stream resumes after: its `since` parameter, or the Last-Event-ID header a
    reconnecting client sends (the id of the last event it had: its evaluation's instant)."""
    since = single(found, "since")
    given, what = (since, "since") if since is not None else (request.headers.get("Last-Event-ID"), "Last-Event-ID")
    if given is None or (what == "Last-Event-ID" and not given.strip()):
        return None            # (an empty Last-Event-ID is what a client that had no event sends)
    try:
        return parse_instant(given.strip())
    except TemporalValueError as e:
        raise BadRequest("%s: %s (an event's id is the instant of its evaluation)" % (what, e)) from None


def _event(name: str, data: str, event_id: str | None = None) -> str:
    return "%sevent: %s\ndata: %s\n\n" % ("id: %s\n" % event_id if event_id else "", name, data)


@blueprint.route("/queries/<query_id>/events", methods=["GET"])
def query_events(query_id):
    """Server-sent events: `result` per evaluation, its `id` the evaluation's instant, a
    keep-alive comment while nothing comes, a `dropped` event when a slow client lost its oldest
    records (how many), and `closed` when the query is removed, the stream has lasted [http]
    event_stream_seconds or delivered nothing for event_idle_seconds (then the stream ends). A
    client that reconnects with Last-Event-ID (or `since`) first gets the records after that
    instant the history keeps, then the live ones, none twice. At most [http] max_event_streams
    at once, each holding a worker thread while it lasts, and max_event_streams_per_client of
    them for one client address; a client that drops gives its slot back within a second, and
    HEAD takes none. A result's data is the evaluation in the SPARQL Query Results JSON shape
    (format=compact: the record)."""
    registered = services().engine.get(query_id)
    found = params(("format", "since", "triple_terms"))
    shape, triple_terms = _shape(found), _triple_terms(found)
    resume = _resume_from(found)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    if request.method == "HEAD":         # what a GET would answer, without holding a stream open
        return Response(mimetype="text/event-stream", headers=headers)
    feed, history, variables = registered.feed, registered.history, registered.query.variables
    settings, streams = services().settings, services().event_streams
    client = request.remote_addr or ""
    full = streams.open(client)
    if full == "max_event_streams":
        raise TooManyEventStreams("%d event streams are open, the most this server keeps (max_event_streams); "
                                  "retry later, or poll GET /queries/%s/results" % (settings.max_event_streams, query_id))
    if full is not None:
        raise TooManyEventStreams("this client holds %d event streams already, the most one client address holds "
                                  "(max_event_streams_per_client); close one, or poll GET /queries/%s/results"
                                  % (settings.max_event_streams_per_client, query_id))
    # Subscribed before the history is read, so that nothing published meanwhile is missed; what
    # both give is sent once (by instant).
    subscription = feed.subscribe(settings.event_backlog, settings.event_backlog_bytes)
    released = []

    def release() -> None:
        """The slot and the subscription given back, once, whichever comes first: the stream's
        end, or the server closing the response (a client gone, a HEAD, a stream never read)."""
        if not released:
            released.append(True)
            feed.unsubscribe(subscription)
            streams.close(client)

    gone = request.environ.get("waitress.client_disconnected") or (lambda: False)

    def stream():
        reported = 0
        last = resume
        ends = time.monotonic() + settings.event_stream_seconds
        idle_from = keepalive_from = time.monotonic()

        def result(record: dict) -> str:
            return _event("result", shaped_json(record, shape, variables, triple_terms), record["time"])

        try:
            yield ": subscribed to %s\nretry: %d\n\n" % (query_id, RECONNECT_MILLISECONDS)
            if resume is not None:
                for line in history.lines(resume):
                    record = json.loads(line)
                    last = parse_instant(record["time"])
                    yield result(record)
            while True:
                now = time.monotonic()
                left, idle_left = ends - now, idle_from + settings.event_idle_seconds - now
                last_id = None if last is None else format_instant(last)
                if left <= 0 or idle_left <= 0:
                    reason = "expired" if left <= 0 else "idle"
                    yield _event("closed", json.dumps({"query": query_id, "reason": reason}), last_id)
                    return
                if gone():
                    return
                try:
                    record = subscription.get(timeout=max(0.0, min(DISCONNECT_CHECK_SECONDS, left, idle_left)))
                except queue.Empty:
                    if time.monotonic() - keepalive_from >= settings.event_keepalive:
                        keepalive_from = time.monotonic()
                        yield ": keep-alive\n\n"
                    continue
                except FeedClosed:
                    yield _event("closed", json.dumps({"query": query_id, "reason": "removed"}), last_id)
                    return
                instant = parse_instant(record["time"])
                if last is not None and instant <= last:
                    continue                     # sent already, from the history
                idle_from = keepalive_from = time.monotonic()
                if subscription.dropped > reported:
                    yield _event("dropped", json.dumps({"dropped": subscription.dropped}), last_id)
                    reported = subscription.dropped
                last = instant
                yield result(record)
        finally:
            release()

    response = Response(stream(), mimetype="text/event-stream", headers=headers)
    response.call_on_close(release)
    return response
