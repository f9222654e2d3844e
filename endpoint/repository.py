"""The registered queries as the data directory keeps them, so they survive restarts: their
specs (`engine/queries.json`: text, sinks, options, the last instant evaluated and what IStream /
DStream remember of it), the ids of configured queries a user deleted (`removed-queries.json`,
so such a query is not registered again at the next start) and the queries that could not be
restored (`unrestored-queries.json`, set aside for the operator). Without a data directory it
keeps nothing and reads nothing."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rspstar.store.landing import replace_text

UNRESTORED_FILE = "unrestored-queries.json"


@dataclass
class QuerySpec:
    """What registration needs; persisted so queries survive a restart."""

    id: str
    text: str
    sinks: list[str] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    last_evaluation: int | None = None   # a restart continues after this instant
    r2s_previous: list | None = None     # what IStream/DStream compare the next evaluation with
    counters: dict | None = None         # the status counters (QueryStatus.saved) as of last_evaluation


class QueryRepository:
    def __init__(self, data_dir: Path | None):
        self.data_dir = data_dir
        self.removed: set[str] = set()
        if data_dir is not None:
            data_dir.mkdir(parents=True, exist_ok=True)
            path = data_dir / "removed-queries.json"
            self.removed = set(json.loads(path.read_text())) if path.exists() else set()

    def specs(self) -> list[QuerySpec]:
        """The specs saved last."""
        path = self._path("queries.json")
        if path is None or not path.exists():
            return []
        return [QuerySpec(**item) for item in json.loads(path.read_text())]

    def save(self, specs: list[QuerySpec]) -> None:
        path = self._path("queries.json")
        if path is not None:
            replace_text(path, json.dumps([asdict(spec) for spec in specs], indent=2))

    def removed_by_user(self, query_id: str) -> None:
        self.removed.add(query_id)
        self._save_removed()

    def keep_removed(self, ids: set[str]) -> None:
        """Forget the removals of ids not in `ids`."""
        if not self.removed <= ids:
            self.removed &= ids
            self._save_removed()

    def registered_again(self, query_id: str) -> None:
        if query_id in self.removed:
            self.removed.discard(query_id)
            self._save_removed()

    @property
    def unrestored(self) -> Path | None:
        return self._path(UNRESTORED_FILE)

    def set_aside(self, specs: list[QuerySpec]) -> None:
        """Keep queries that could not be restored where the operator finds them."""
        if self.unrestored is not None and specs:
            replace_text(self.unrestored, json.dumps([asdict(spec) for spec in specs], indent=2))

    def history_file(self, query_id: str) -> Path | None:
        return None if self.data_dir is None else self.data_dir / "history" / (query_id + ".jsonl")

    def outbox(self) -> Path | None:
        return None if self.data_dir is None else self.data_dir / "outbox"

    def _save_removed(self) -> None:
        path = self._path("removed-queries.json")
        if path is not None:
            replace_text(path, json.dumps(sorted(self.removed)))

    def _path(self, name: str) -> Path | None:
        return None if self.data_dir is None else self.data_dir / name
