"""R2S, relation to stream (the RSP-QL paper Def. 20-22): what one evaluation emits of its
relation, given the evaluation before. One operator per query, chosen once when it is registered
(`r2s_operator`), answering:

    apply(rows)       what the evaluation emits of its rows
    previous          what it remembers of the last evaluation (None: nothing), saved with the query
    restore(rows)     that memory put back at a restart
"""
from __future__ import annotations

from typing import Callable, Hashable, Protocol

from rspstar.translator.model import R2S


class R2SOperator(Protocol):
    def apply(self, rows: list) -> list: ...

    @property
    def previous(self) -> list | None: ...

    def restore(self, rows: list) -> None: ...


class RStream:
    """Every solution of the evaluation. It remembers nothing: one serves every query."""

    def apply(self, rows: list) -> list:
        return rows

    @property
    def previous(self) -> None:
        return None

    def restore(self, rows: list) -> None:
        pass


RSTREAM = RStream()


class _Distinct:
    """An operator comparing an evaluation's distinct solutions (by `key`) with the previous
    evaluation's; the first compares with the empty set."""

    def __init__(self, key: Callable[[object], Hashable]):
        self.key = key
        self._previous: dict[Hashable, object] = {}

    def apply(self, rows: list) -> list:
        current: dict[Hashable, object] = {}
        for row in rows:
            current.setdefault(self.key(row), row)
        emitted = self._emitted(current)
        self._previous = current
        return emitted

    def _emitted(self, current: dict) -> list:
        raise NotImplementedError

    @property
    def previous(self) -> list:
        """The previous evaluation's distinct rows: the state IStream and DStream compare with."""
        return list(self._previous.values())

    def restore(self, rows: list) -> None:
        self._previous = {}
        for row in rows:
            self._previous.setdefault(self.key(row), row)


class IStream(_Distinct):
    """The distinct solutions absent from the previous evaluation."""

    def _emitted(self, current: dict) -> list:
        return [row for k, row in current.items() if k not in self._previous]


class DStream(_Distinct):
    """The distinct solutions of the previous evaluation that are absent now."""

    def _emitted(self, current: dict) -> list:
        return [row for k, row in self._previous.items() if k not in current]


def r2s_operator(operator: R2S, key: Callable[[object], Hashable]) -> R2SOperator:
    """The operator a query's R2S clause names, its solutions told apart by `key`."""
    if operator is R2S.RSTREAM:
        return RSTREAM
    return IStream(key) if operator is R2S.ISTREAM else DStream(key)
