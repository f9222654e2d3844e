"""Every HTTP status the server answers an error with, chosen here and only here."""
from __future__ import annotations

from waitress import utilities as server_errors

from rspstar.store.errors import (
    DiskFull, DuplicateElementError, GraphExists, GraphMissing, GraphNotWritable, QueryTimeout, RdfInputError,
    ReservedGraphError, StoreError, UpdateTooLarge,
)
from rspstar.translator.admission import QueryOverLimits
from rspstar.translator.errors import QuerySyntaxError, TranslatorError

from ..adhoc import AnswerPastBound, QueriesBusy, QueryCrashed, QueryOverMemory
from ..engine.errors import (
    DuplicateQuery, EndpointError, EngineAtCapacity, InvalidQueryId, UnknownQuery, UsageError,
)
from ..engine.sinks import SinkNotAllowed


class Unauthorized(EndpointError):
    """A request that needs the configured bearer token and did not bring it."""


class Forbidden(EndpointError):
    """A write from a web page of another origin (a browser would send it with the user's access)."""


class UnknownGraph(EndpointError):
    """A graph store request for a background graph that does not exist."""


class NotAcceptable(EndpointError):
    """No representation the client accepts."""


class BadRequest(EndpointError):
    """A request missing what the protocol requires."""


class UnsupportedMediaType(EndpointError):
    """A request body in a media type this route does not read."""


class ElementTooLarge(EndpointError):
    """A posted element larger than what one micro-batch takes ([[sources]] max_batch_bytes)."""


class TooManyStreams(EndpointError):
    """A post naming new streams past the bound on streams ([engine] max_streams)."""


class ServiceUnavailable(EndpointError):
    """Something this route needs is not configured or not running."""


class Starting(ServiceUnavailable):
    """The engine answers already but does not take writes yet: the client should retry."""

    retry_after = 5


class TooManyEventStreams(ServiceUnavailable):
    """Every event-stream slot is taken: the client should retry later or poll the results."""

    retry_after = 30


class IngestionBacklog(ServiceUnavailable):
    """Input acknowledged and not yet stored is at its bound ([engine] max_landed_bytes): the
    client should retry once Spark has stored some of it."""

    retry_after = 5


class BodiesInFlight(ServiceUnavailable):
    """The request bodies processed now take the whole budget: the client should retry shortly."""

    retry_after = 2


# Most specific first: the first matching class decides. The server's own refusals (waitress's,
# answered before the app sees the request) are here too, so that every status is chosen here.
_STATUSES: list[tuple[type, int]] = [
    (server_errors.RequestEntityTooLarge, 413),
    (server_errors.RequestHeaderFieldsTooLarge, 431),
    (ElementTooLarge, 413),
    (server_errors.BadRequest, 400),
    (server_errors.ServerNotImplemented, 501),
    (server_errors.Error, 500),
    (Unauthorized, 401),
    (Forbidden, 403),
    (GraphNotWritable, 403),
    (UnknownQuery, 404),
    (UnknownGraph, 404),
    (GraphMissing, 404),
    (NotAcceptable, 406),
    (DuplicateQuery, 409),
    (DuplicateElementError, 409),
    (GraphExists, 409),
    (UnsupportedMediaType, 415),
    (AnswerPastBound, 413),
    (UpdateTooLarge, 413),
    (QueryTimeout, 503),
    (QueryOverMemory, 503),
    (QueriesBusy, 503),
    (EngineAtCapacity, 503),
    (DiskFull, 507),
    (ServiceUnavailable, 503),
    (QuerySyntaxError, 400),
    (RdfInputError, 400),
    (ReservedGraphError, 400),
    (SinkNotAllowed, 400),
    (InvalidQueryId, 400),
    (TooManyStreams, 400),
    (QueryOverLimits, 400),
    (QueryCrashed, 400),
    (UsageError, 400),
    (BadRequest, 400),
    (TranslatorError, 400),
    (StoreError, 500),
    (EndpointError, 500),
]


def status_for(error) -> int:
    for kind, status in _STATUSES:
        if isinstance(error, kind):
            return status
    return 500


def error_body(error: BaseException) -> dict:
    body = {"error": type(error).__name__, "message": getattr(error, "message", None) or str(error)}
    for key in ("line", "column", "source"):
        value = getattr(error, key, None)
        if value is not None:
            body[key] = value
    return body


def server_refusal_body(error: server_errors.Error, max_body: int, max_header: int) -> dict:
    """The JSON error body of a request the server refused before the app saw it (too large a
    body or headers, a malformed request), as every other error's."""
    messages = {
        server_errors.RequestEntityTooLarge: "the body is larger than the %d bytes this server takes ([http] max_body)"
                                             % max_body,
        server_errors.RequestHeaderFieldsTooLarge: "the request's headers are larger than the %d bytes this server "
                                                   "takes" % max_header,
    }
    message = next((text for kind, text in messages.items() if isinstance(error, kind)), None)
    return {"error": type(error).__name__, "message": message or " ".join(str(error.body).split())[:240]}
