"""Errors of the language layer. Every one of them is a TranslatorError; and the base of every
usage error, whichever layer finds it."""
from __future__ import annotations


class TranslatorError(Exception):
    """Base error of the `translator` package."""


class UsageError(Exception):
    """A call, command line or setting that cannot be honoured as made (an option, an argument, a
    stream's name), whichever layer finds it: `rspstar.UsageError`. Each layer's own are
    subclasses (OptionError, StreamNameError here; the engine's UsageError)."""


class StreamNameError(TranslatorError, UsageError):
    """A stream named by something other than an absolute IRI (`check_stream_iri`)."""


class PositionedError(TranslatorError):
    """An error at a position (1-based line and column) of the text the user wrote."""

    def __init__(self, message: str, line: int, column: int):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column

    def __str__(self) -> str:
        return "%d:%d: %s" % (self.line, self.column, self.message)


class QuerySyntaxError(PositionedError):
    """A query that is not valid RSP-QL*, with its position."""


class TemporalValueError(TranslatorError):
    """A duration or an instant that cannot be read (no position: the caller adds one)."""
