"""The query model: what a parsed RSP-QL* query means, independent of its text.

The syntax tree of the body (`syntax.py`) travels with the model so the rewriter can turn it
into SPARQL-star for any window bounds.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

# The query's windows, one class per kind (windows.py), are part of the model and named from here too.
from .windows import (
    CountContent, CountWindow, FactTemplate, FactWindow, LandmarkWindow, PartitionedWindow, StreamView,
    TimeWindow, Window, WindowContent,
)

__all__ = ["R2S", "QueryForm", "ContinuousQuery", "Window", "TimeWindow", "CountWindow", "PartitionedWindow",
           "LandmarkWindow", "FactWindow", "FactTemplate", "WindowContent", "CountContent", "StreamView"]

if TYPE_CHECKING:
    from .syntax import ParsedBody


class R2S(enum.Enum):
    RSTREAM = "RSTREAM"
    ISTREAM = "ISTREAM"
    DSTREAM = "DSTREAM"


class QueryForm(enum.Enum):
    SELECT = "SELECT"
    CONSTRUCT = "CONSTRUCT"
    ASK = "ASK"


@dataclass
class ContinuousQuery:
    """A parsed RSP-QL* query."""

    text: str
    form: QueryForm
    r2s: R2S
    windows: dict[str, Window]
    # None in a query whose evaluation no longer reads it (a member of a group of queries
    # differing in constants keeps its text instead).
    body: "ParsedBody | None"
    name: str | None = None
    output_stream: str | None = None
    computed_every: int | None = None
    from_graphs: list[str] = field(default_factory=list)
    from_named_graphs: list[str] = field(default_factory=list)
    report: str | None = None        # the report policy the query's dialect implies (spec §6.5)
    dialect: str = "rspql"
    # Options the dialect implies (its window content, say); a user's options override them.
    option_defaults: dict[str, str] = field(default_factory=dict)
    translation: str | None = None   # a dialect query written as RSP-QL*
    # The SELECT clause's variables in its order (None: SELECT *, or not a SELECT), the head of
    # the query's results.
    variables: tuple[str, ...] | None = None
    # C-SPARQL / Streaming SPARQL (spec §6.5): outside WINDOW and GRAPH, triples match the
    # merge of these windows' elements and the background default graph.
    merged_windows: tuple[str, ...] | None = None
    # Window forms of the community pages read as the dialect's own (spec §6.7), and what the
    # query says that is valid but surely not meant (a HAVING over a SELECT alias): each names
    # its line and column in the user's text.
    normalised: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # CQELS-QL: FROM NAMED graphs name the background graphs GRAPH ranges over and leave the
    # default graph the background's (CQELS reads its default dataset whatever a query names).
    named_keep_default: bool = False
    # The IRI the text was retrieved from (its file, the URL it was registered at, a configured
    # base), which its relative IRIs resolve against before any BASE of its own: a text made
    # from this one (a part of a join, queries differing in constants) is read with it too.
    base: str | None = None

    @property
    def streams(self) -> list[str]:
        return sorted({w.stream for w in self.windows.values()})

    def policy_origin(self) -> int:
        """τ0 of the query: the earliest START of its windows' periodic closes, else the epoch."""
        starts = [w.origin for w in self.windows.values() if w.origin is not None]
        return min(starts) if starts else 0
