"""The registered queries as the data directory keeps them, so they survive restarts: their
specs (`engine/queries/<id>.json`, one file per query: text, sinks, options; so registering or
removing one query writes that query's file only, whatever the number of queries), their
progress (`engine/progress.jsonl`: after each evaluation a line with the last instant
evaluated, what IStream / DStream remember of it and the status counters, appended to one open
file: a thousand queries closing together cost a thousand short appends, not a thousand files
replaced; the log is rewritten with each query's latest line when it grows past a bound), the
ids of configured queries a user deleted (`removed-queries.json`, so such a query is not
registered again at the next start) and the queries that could not be restored
(`unrestored-queries.json`, set aside for the operator). Without a data directory it
keeps nothing and reads nothing."""
from __future__ import annotations

import json
import logging
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rspstar.store.landing import replace_text

UNRESTORED_FILE = "unrestored-queries.json"
SPECS_FOLDER = "queries"
PROGRESS_FILE = "progress.jsonl"
# The progress log is compacted (each query's latest line kept) beyond this many lines, or four
# lines per query if that is more.
PROGRESS_LINES = 10_000
log = logging.getLogger(__name__)


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
    state: dict | None = None            # what else the query keeps (its fact windows' facts) as of then


class QueryRepository:
    def __init__(self, data_dir: Path | None):
        self.data_dir = data_dir
        self.removed: set[str] = set()
        self._order = 0                          # the registration order of the newest spec
        self._orders: dict[str, int] = {}        # each saved spec's
        self._progress: dict[str, str] = {}      # each query's latest progress line
        self._progress_lines = 0                 # lines in the log
        self._progress_file = None               # the log, open for appending
        self._lock = threading.Lock()
        if data_dir is not None:
            data_dir.mkdir(parents=True, exist_ok=True)
            path = data_dir / "removed-queries.json"
            self.removed = set(json.loads(path.read_text())) if path.exists() else set()

    def specs(self) -> list[QuerySpec]:
        """The specs saved last, in the order they were registered, each with its latest
        progress. A file that cannot be read (edited by hand, say) is logged and left where it
        is, not deleted."""
        folder = self._path(SPECS_FOLDER)
        if folder is None:
            return []
        self._migrate()
        found, unreadable = [], []
        for path in folder.glob("*.json") if folder.is_dir() else []:
            try:
                saved = json.loads(path.read_text(encoding="utf-8"))
                found.append((saved["order"], QuerySpec(**saved["spec"])))
            except (OSError, ValueError, KeyError, TypeError) as e:
                unreadable.append("%s: %s" % (path.name, e))
        for problem in unreadable:
            log.error("a saved query could not be read (%s); it is left where it is", problem)
        found.sort(key=lambda item: item[0])
        self._order = max((order for order, _ in found), default=0)
        self._orders = {spec.id: order for order, spec in found}
        specs = [spec for _, spec in found]
        progress = self._read_progress()
        self._progress = {}
        for spec in specs:
            if spec.id in progress:
                line, saved = progress[spec.id]
                spec.last_evaluation, spec.r2s_previous, spec.counters, spec.state = (
                    saved.get("last_evaluation"), saved.get("r2s_previous"), saved.get("counters"), saved.get("state"))
                self._progress[spec.id] = line
        with self._lock:
            try:
                self._compact()        # only the restored queries' latest lines
            except OSError as e:       # a full disk: the engine starts all the same, the log as it is
                log.error("the queries' progress log is not compacted (%s); it is at a later save", e)
        return specs

    def save_progress(self, spec: QuerySpec) -> None:
        """Keep a query's progress after an evaluation: one line appended to the log."""
        path = self._path(PROGRESS_FILE)
        if path is None:
            return
        progress = {"id": spec.id, "last_evaluation": spec.last_evaluation,
                    "r2s_previous": spec.r2s_previous, "counters": spec.counters}
        if spec.state is not None:
            progress["state"] = spec.state
        line = json.dumps(progress) + "\n"
        with self._lock:
            if spec.id not in self._orders:
                return                  # removed meanwhile
            self._progress[spec.id] = line
            try:
                if self._progress_lines >= max(PROGRESS_LINES, 4 * len(self._progress)):
                    self._compact()
                else:
                    if self._progress_file is None:
                        self._progress_file = path.open("a", encoding="utf-8")
                    self._progress_file.write(line)
                    self._progress_file.flush()   # in the kernel's hands: a crash of the process loses nothing
                    self._progress_lines += 1
            except OSError as e:
                # A full disk: the query goes on; a restart meanwhile re-evaluates from the progress
                # last kept. Kept again at the next save (the whole log, compacted).
                if self._progress_file is not None:
                    try:
                        self._progress_file.close()
                    except OSError:
                        pass
                    self._progress_file = None
                self._progress_lines = max(PROGRESS_LINES, 4 * len(self._progress))
                if not self._saves_failing:       # once, not at every evaluation
                    log.error("the queries' progress cannot be kept (%s); kept again once it can", e)
                self._saves_failing = True
                return
            if self._saves_failing:
                self._saves_failing = False
                log.warning("the queries' progress is kept again")

    def _read_progress(self) -> dict[str, tuple[str, dict]]:
        path = self._path(PROGRESS_FILE)
        latest: dict[str, tuple[str, dict]] = {}
        if path is None or not path.exists():
            return latest
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                saved = json.loads(line)
                latest[saved["id"]] = (line + "\n", saved)
            except (ValueError, KeyError, TypeError):
                continue            # a line cut short by a crash: the one before it stands
        return latest

    _saves_failing = False         # the last progress could not be written (a full disk)

    def _compact(self) -> None:
        """Rewrite the log with each query's latest line (under the lock)."""
        path = self._path(PROGRESS_FILE)
        if path is None:
            return
        if self._progress_file is not None:
            self._progress_file.close()
            self._progress_file = None
        replace_text(path, "".join(self._progress.values()))
        self._progress_lines = len(self._progress)

    def close(self) -> None:
        with self._lock:
            if self._progress_file is not None:
                self._progress_file.close()
                self._progress_file = None

    def save(self, spec: QuerySpec) -> None:
        """Keep one query's spec (at its registration; its progress goes to `save_progress`)."""
        folder = self._path(SPECS_FOLDER)
        if folder is None:
            return
        folder.mkdir(exist_ok=True)
        with self._lock:
            order = self._orders.get(spec.id)
            if order is None:
                self._order += 1
                order = self._orders[spec.id] = self._order
        replace_text(folder / (spec.id + ".json"), json.dumps({"order": order, "spec": asdict(spec)}))

    def delete(self, query_id: str) -> None:
        folder = self._path(SPECS_FOLDER)
        with self._lock:
            self._orders.pop(query_id, None)
            self._progress.pop(query_id, None)     # its lines in the log go at the next compaction
        if folder is not None:
            (folder / (query_id + ".json")).unlink(missing_ok=True)

    def _migrate(self) -> None:
        """The single file of all specs that earlier versions wrote becomes a file per query."""
        old = self._path("queries.json")
        if old is None or not old.exists():
            return
        for item in json.loads(old.read_text(encoding="utf-8")):
            self.save(QuerySpec(**item))
        old.unlink()

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
            for spec in specs:
                self.delete(spec.id)

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
