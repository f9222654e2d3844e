"""Relation-to-stream operators (the RSP-QL paper Def. 20-22), with the state they keep per query."""
from __future__ import annotations

from typing import Callable, Hashable

from rspstar.translator.model import R2S


class R2SOperator:
    """RStream emits every solution of the evaluation; IStream the distinct solutions absent
    from the previous evaluation; DStream the distinct solutions of the previous evaluation
    that are absent now. The first evaluation compares with the empty set."""

    def __init__(self, operator: R2S, key: Callable[[object], Hashable]):
        self.operator = operator
        self.key = key
        self._previous: dict[Hashable, object] = {}

    def apply(self, rows: list) -> list:
        if self.operator is R2S.RSTREAM:
            return rows
        current: dict[Hashable, object] = {}
        for row in rows:
            current.setdefault(self.key(row), row)
        if self.operator is R2S.ISTREAM:
            emitted = [row for k, row in current.items() if k not in self._previous]
        else:
            emitted = [row for k, row in self._previous.items() if k not in current]
        self._previous = current
        return emitted

    @property
    def previous(self) -> list:
        """The previous evaluation's distinct rows: the state IStream and DStream compare with."""
        return list(self._previous.values())

    def restore(self, rows: list) -> None:
        self._previous = {}
        for row in rows:
            self._previous.setdefault(self.key(row), row)
