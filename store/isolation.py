"""Continuous evaluations in worker processes that can be killed (store.limits says which).

A worker opens the on-disk store read-only for each call (`Store.read_only`: it sees what the
engine has written, flushed or not), evaluates the rewritten query with its own `rspu:`
functions and sends back the solutions' terms, counted as they are read so that a result past
the bound is refused before it is materialised. The engine waits for the answer in slices and
kills the worker at the time limit or when the query is removed: the evaluation's CPU and memory
go with it, whatever Oxigraph was doing. A replacement starts on a thread of its own. Workers run
at a lower priority than the engine (NICENESS), so the queries evaluated on its threads and the
ingestion keep their CPU beside a runaway.
"""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass

import pyoxigraph as ox

from rspstar.translator.uncertainty import FunctionLibrary

from .errors import EvaluationCancelled, EvaluationStopped, StoreError
from .workers import WorkerLost, WorkerPool, WorkerProcess

WORKERS = 2
# Times a call is sent again when the view could not read the store (a rebuild replaced it).
READ_ONLY_ATTEMPTS = 3
# How often a waiting evaluation looks at its time limit and its query's removal.
POLL_SECONDS = 0.05
NICENESS = 5


@dataclass(frozen=True)
class IsolatedCall:
    """One rewritten query for a worker: its text and default graph, the fused `rspu:` calls
    it makes (None: it calls no rspu: function), whether their cache is on, and the most rows
    or triples it may give (None: no bound)."""
    text: str
    default_graph: tuple[str, ...] | None     # graph IRIs, "" for the store's default graph
    fused: tuple[str, ...] | None
    cache: bool
    bound: int | None

    @staticmethod
    def graph_names(default_graph) -> tuple[str, ...] | None:
        """A default graph (IRIs, or pyoxigraph graph names: an entailed dataset holds the
        store's own default graph) as the strings a call carries to a worker."""
        if default_graph is None:
            return None
        return tuple("" if isinstance(g, ox.DefaultGraph) else g.value if isinstance(g, ox.NamedNode) else g
                     for g in default_graph)


class IsolatedResult:
    """What a worker sent back, read as the Oxigraph result it stands for: solutions (tuples
    of terms by position, with `variables`) or triples."""

    def __init__(self, variables, items: list):
        self.variables = variables
        self._items = items

    def __iter__(self):
        return iter(self._items)


def _read(result, bound: int | None) -> tuple:
    if isinstance(result, ox.QueryBoolean):
        return ("boolean", bool(result))
    variables = list(result.variables) if isinstance(result, ox.QuerySolutions) else None
    items = []
    for item in result:
        if bound is not None and len(items) >= bound:
            return ("too_large", bound)
        items.append(tuple(item) if variables is not None else item)
    return ("items", variables, items)


def evaluate_read_only(path: str, call: IsolatedCall) -> tuple:
    """The outcome of `call` over a read-only view of the store at `path`, with the rspu:
    calls it made: ("boolean", value) / ("items", variables, items) / ("too_large", bound) /
    ("error", text) / ("unreadable", text), then (calls, computed). "unreadable": the view could
    not open or read the store's files, which a rebuild of the store may have replaced (another
    generation, another path): the engine asks again with the path of the live one."""
    functions = FunctionLibrary(cache=call.cache) if call.fused is not None else None
    kwargs = {}
    if call.default_graph is not None:
        kwargs["default_graph"] = [ox.NamedNode(g) if g else ox.DefaultGraph() for g in call.default_graph]
    if functions is not None:
        kwargs["custom_functions"] = functions.table_for(call.fused)
    store = result = None
    try:
        store = ox.Store.read_only(path)
        if functions is not None:
            functions.begin_evaluation()
        result = store.query(call.text, **kwargs)
        outcome = _read(result, call.bound)
    except OSError as e:
        outcome = ("unreadable", "%s: %s" % (type(e).__name__, e))
    except RuntimeError as e:
        outcome = ("error" if store is not None else "unreadable", "%s: %s" % (type(e).__name__, e))
    except Exception as e:  # reported to the engine; the worker goes on
        outcome = ("error", "%s: %s" % (type(e).__name__, e))
    finally:
        result = store = None
    counts = functions.counts if functions is not None else None
    return outcome + ((counts.calls, counts.computed) if counts is not None else (0, 0))


class EvaluationWorkers:
    """`size` worker processes, started at the first call."""

    def __init__(self, size: int = WORKERS):
        self.size = size
        self.calls = 0                  # calls evaluated in a worker (stopped ones too)
        self.killed = 0                 # workers killed at a time limit or a removal
        self._lock = threading.Lock()
        self._pool = WorkerPool(size, evaluate_read_only, "rspstar-evaluation", NICENESS)

    def processes(self) -> list:
        """The worker processes alive now (for the status and the tests)."""
        return self._pool.processes()

    def _take(self, budget) -> WorkerProcess:
        """An idle worker; the wait is not the evaluation's time (budget.waited), but a removal
        of its query ends it."""
        self._pool.start()
        started = budget.monotonic()
        try:
            while True:
                try:
                    worker = self._pool.take(POLL_SECONDS)
                except queue.Empty:
                    if budget.cancelled:
                        raise EvaluationCancelled("the query was removed") from None
                    continue
                if worker is None:
                    raise StoreError("the engine is stopping")
                return worker
        finally:
            budget.waited += budget.monotonic() - started

    def run(self, path: str, call: IsolatedCall, budget) -> tuple:
        """The worker's outcome for `call` over the store at `path` (evaluate_read_only);
        EvaluationTimeout or EvaluationCancelled once `budget` says so, the worker killed."""
        worker = self._take(budget)
        started = budget.monotonic()
        with self._lock:
            self.calls += 1

        def wait(connection) -> None:
            while not connection.poll(POLL_SECONDS):
                try:
                    budget.check()
                except EvaluationStopped:
                    with self._lock:
                        self.killed += 1
                    raise

        try:
            return self._pool.ask(worker, (path, call), wait)
        except WorkerLost as lost:
            if lost.closed:
                raise StoreError("the engine is stopping") from None
            raise StoreError("the worker process evaluating the query ended (exit %s)" % lost.exitcode) from None
        finally:
            budget.isolated_seconds += budget.monotonic() - started

    def close(self) -> None:
        """Stop every worker at once, busy or not."""
        self._pool.close()
