"""Errors of the language layer. Every one of them is a TranslatorError."""
from __future__ import annotations


class TranslatorError(Exception):
    """Base error of the `translator` package."""


class QuerySyntaxError(TranslatorError):
    """A query that is not valid RSP-QL*, with the position (1-based line and column) in the
    text the user wrote."""

    def __init__(self, message: str, line: int, column: int):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column

    def __str__(self) -> str:
        return "%d:%d: %s" % (self.line, self.column, self.message)


class TemporalValueError(TranslatorError):
    """A duration or an instant that cannot be read (no position: the caller adds one)."""
