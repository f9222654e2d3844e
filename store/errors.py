"""Errors of the data layer. Every one of them is a StoreError."""
from __future__ import annotations


class StoreError(Exception):
    """Base error of the `store` package."""


class RdfInputError(StoreError):
    """RDF input that cannot be read, with where: source name, line and column when known."""

    def __init__(self, message: str, source: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.message = message
        self.source = source
        self.line = line
        self.column = column

    def __str__(self) -> str:
        where = self.source
        if self.line is not None:
            where += ":%d" % self.line
            if self.column is not None:
                where += ":%d" % self.column
        return "%s: %s" % (where, self.message)


class EventTimeAhead(RdfInputError):
    """An element stamped further ahead of the engine's clock than an element may be ([engine]
    max_event_ahead): taken, it would move its stream's watermark past every reading to come."""


class DuplicateElementError(StoreError):
    """A graph name already used by another stream element."""


class QueryTimeout(StoreError):
    """A query ran past its time limit."""


class ReservedGraphError(StoreError):
    """A write (a SPARQL Update) that would touch a stream element, a timestamp graph or
    another graph the engine keeps for itself."""


class GraphNotWritable(ReservedGraphError):
    """A graph the graph store protocol may not change: a stream element or the engine's own."""


class UpdateFailed(StoreError):
    """A well-formed SPARQL Update that fails as SPARQL 1.1 Update says it does without SILENT
    (nothing is changed): the client named a graph that is not there, or one that is."""


class GraphMissing(UpdateFailed):
    """DROP, CLEAR, MOVE (or LOAD INTO ...) of a graph that does not exist."""


class GraphExists(UpdateFailed):
    """CREATE of a graph that already exists."""


class DiskFull(StoreError):
    """The data directory's disk is full, or below the floor the engine keeps free."""


class EvaluationStopped(StoreError):
    """A continuous query's evaluation stopped before its end by one of the engine's limits,
    or because the query was removed: nothing of it is delivered."""


class EvaluationTimeout(EvaluationStopped):
    """An evaluation ran past its time limit ([engine] evaluation_timeout)."""


class ResultTooLarge(EvaluationStopped):
    """An evaluation produced more rows or triples than one evaluation may ([engine] max_result_rows)."""


class EvaluationCancelled(EvaluationStopped):
    """The query was removed while its evaluation ran."""


class EvaluationOverMemory(EvaluationStopped):
    """An evaluation took more memory than a worker process may ([engine] worker_memory)."""


class UpdateTooLarge(StoreError):
    """A SPARQL Update that would add and remove more quads than one update may ([http] update_max_changes)."""


class BackgroundChanged(StoreError):
    """The background changed while an update was computed over it: it is computed again."""
