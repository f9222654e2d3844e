"""Errors of the orchestration layer. Every one of them is an EndpointError."""
from __future__ import annotations

from rspstar.translator import errors as _translator


class EndpointError(Exception):
    """Base error of the `endpoint` package."""


class UsageError(EndpointError, _translator.UsageError):
    """A command line or option that cannot be honoured, found by the engine or a door. Its base,
    `rspstar.UsageError` (translator.errors), is every usage error's, whichever layer finds it:
    a query option's (OptionError) and a stream name's (StreamNameError) too."""


class UnknownQuery(EndpointError):
    """No registered query has this id."""


class DuplicateQuery(EndpointError):
    """A query with this id is already registered."""


class InvalidQueryId(EndpointError):
    """A query id that is not a short name of letters, digits, '.', '_' or '-'."""


class EngineAtCapacity(EndpointError):
    """A registration refused because the engine is at one of its admission limits."""

    retry_after = 60
