"""Errors of the language layer. Every one of them is a TranslatorError."""
from __future__ import annotations


class TranslatorError(Exception):
    """Base error of the `translator` package."""


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
