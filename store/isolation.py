"""Continuous evaluations in worker processes that can be killed (store.limits says which).

A worker reads the on-disk store through a read-only view (`Store.read_only`: it sees what the
engine had written when it was opened, flushed or not), evaluates the rewritten query with its
own `rspu:` functions and sends back the solutions' terms, counted as they are read so that a
result past the bound is refused before it is materialised. The view is kept from call to call
while the store has not been written since it was opened (each call carries the store's count
of writes, `StreamStore.view_key`), and opened again once it has: the evaluations between two
micro-batches share one opening, which costs milliseconds plus tens of microseconds per element
written since the store's last flush (docs/running.md#evaluation-limits).

The engine waits for the answer in slices and kills the worker at the time limit, when the
query is removed, when the engine stops, or past the memory a worker may take
(store/workers.py): the evaluation's CPU and memory go with it, whatever Oxigraph was doing. A
replacement starts on a thread of its own. Workers run at a lower priority than the engine
(NICENESS), so ingestion and the HTTP threads keep their CPU beside a runaway.
"""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass

import pyoxigraph as ox

from rspstar.translator.uncertainty import FunctionLibrary

from .terms import term_to_ntriples
from .errors import EvaluationCancelled, EvaluationOverMemory, EvaluationStopped, ResultTooLarge, StoreError
from .workers import POLL_SECONDS, AnswerTooLarge, WorkerLost, WorkerOverMemory, WorkerPool, WorkerProcess

# Three processes on the two cores the engine is measured on: a runaway query held to its time
# limit and a query on probation leave one to the proven queries.
WORKERS = 3
# Times a call is sent again when the view could not read the store (a rebuild replaced it).
READ_ONLY_ATTEMPTS = 3
NICENESS = 5
# The most an evaluation's answer may weigh, as a share of a worker's memory: rows are bounded
# by [engine] max_result_rows, a row's terms are not.
ANSWER_SHARE = 4


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


class Term(str):
    """A solution's term as a worker sends it: its N-Triples text (store.terms.term_to_ntriples,
    what every reader of solutions makes of a term, and far cheaper to send than Oxigraph's
    pickled terms: bench/out/NOTES.md#figures-from-comments), with the lexical form of a literal
    as `value` (what a reader takes of a marker)."""

    __slots__ = ()

    @property
    def value(self) -> str:
        if not self.startswith('"'):
            return self[1:-1] if self.startswith("<") else self
        return _unescape(self[1:self.rindex('"')])


_ESCAPES = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, k = [], 0
    while k < len(text):
        c = text[k]
        if c != "\\":
            out.append(c)
            k += 1
        elif text[k + 1] in "uU":
            width = 4 if text[k + 1] == "u" else 8
            out.append(chr(int(text[k + 2:k + 2 + width], 16)))
            k += 2 + width
        else:
            out.append(_ESCAPES.get(text[k + 1], text[k + 1]))
            k += 2
    return "".join(out)


class IsolatedResult:
    """What a worker sent back, read as the Oxigraph result it stands for: solutions (tuples
    of Terms by position, with `variables`) or triples."""

    def __init__(self, variables, items: list):
        self.variables = variables
        self._items = items

    def __iter__(self):
        if self.variables is None:
            return iter(self._items)
        return (tuple(None if term is None else Term(term) for term in item) for item in self._items)


def _read(result, bound: int | None) -> tuple:
    if isinstance(result, ox.QueryBoolean):
        return ("boolean", bool(result))
    variables = list(result.variables) if isinstance(result, ox.QuerySolutions) else None
    items = []
    for item in result:
        if bound is not None and len(items) >= bound:
            return ("too_large", bound)
        items.append(tuple(None if term is None else term_to_ntriples(term) for term in item)
                     if variables is not None else item)
    return ("items", variables, items)


class ReadOnlyViews:
    """A worker's handler: it evaluates each call over a read-only view of the store, the one it
    opened for the same (path, writes) while there is one (see the module's docstring)."""

    def __init__(self):
        self._key: tuple | None = None
        self._store: ox.Store | None = None
        self.opened = 0                 # views opened by this worker (for the tests)

    def view(self, path: str, writes: int | None) -> ox.Store:
        if self._store is None or writes is None or self._key != (path, writes):
            self._store = None          # the old view's files go before the new one opens
            self._store = ox.Store.read_only(path)
            self._key = (path, writes)
            self.opened += 1
        return self._store

    def forget(self) -> None:
        self._store = self._key = None

    def __call__(self, path: str, writes: int | None, call: "IsolatedCall") -> tuple:
        return evaluate_read_only(path, call, self, writes)


def evaluate_read_only(path: str, call: IsolatedCall, views: ReadOnlyViews | None = None,
                       writes: int | None = None) -> tuple:
    """The outcome of `call` over a read-only view of the store at `path` (kept in `views`
    while the store's count of writes is `writes`), with the rspu: calls it made:
    ("boolean", value) / ("items", variables, items) / ("too_large", bound) / ("error", text) /
    ("unreadable", text), then (calls, computed), then the views this worker has opened.
    "unreadable": the view could not open or read the store's files, which a rebuild of the
    store may have replaced (another generation, another path): the engine asks again with the
    path of the live one, and the worker opens a fresh view."""
    views = views if views is not None else ReadOnlyViews()
    functions = FunctionLibrary(cache=call.cache) if call.fused is not None else None
    kwargs = {}
    if call.default_graph is not None:
        kwargs["default_graph"] = [ox.NamedNode(g) if g else ox.DefaultGraph() for g in call.default_graph]
    if functions is not None:
        kwargs["custom_functions"] = functions.table_for(call.fused)
    store = result = None
    try:
        store = views.view(path, writes)
        if functions is not None:
            functions.begin_evaluation()
        result = store.query(call.text, **kwargs)
        outcome = _read(result, call.bound)
    except OSError as e:
        views.forget()
        outcome = ("unreadable", "%s: %s" % (type(e).__name__, e))
    except RuntimeError as e:
        if store is None or "IO error" in str(e) or "No such file" in str(e):
            views.forget()
            outcome = ("unreadable", "%s: %s" % (type(e).__name__, e))
        else:
            outcome = ("error", "%s: %s" % (type(e).__name__, e))
    except Exception as e:  # reported to the engine; the worker goes on
        outcome = ("error", "%s: %s" % (type(e).__name__, e))
    finally:
        result = store = None
    counts = functions.counts if functions is not None else None
    return outcome + ((counts.calls, counts.computed) if counts is not None else (0, 0)) + (views.opened,)


def over_memory(limit: int) -> EvaluationOverMemory:
    return EvaluationOverMemory(
        "the evaluation took more than %d MiB, the memory a worker process may take ([engine] worker_memory); it was "
        "stopped and nothing of it was delivered" % (limit >> 20))


class EvaluationWorkers:
    """`size` worker processes, started at the first call, each within `memory_limit` bytes
    (None: no bound)."""

    def __init__(self, size: int = WORKERS, memory_limit: int | None = None):
        self.size = size
        self.memory_limit = memory_limit
        self.calls = 0                  # calls evaluated in a worker (stopped ones too)
        self.killed = 0                 # workers killed at a time limit, a removal or their memory limit
        self.views_opened = 0           # read-only views the workers opened (as their latest answers say)
        self._opened: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stopping = False
        self._pool = WorkerPool(size, ReadOnlyViews(), "rspstar-evaluation", NICENESS, memory_limit,
                                None if memory_limit is None else memory_limit // ANSWER_SHARE)

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
                    raise EvaluationCancelled("the engine is stopping")
                return worker
        finally:
            budget.waited += budget.monotonic() - started

    def run(self, path: str, call: IsolatedCall, budget, writes: int | None = None) -> tuple:
        """The worker's outcome for `call` over the store at `path` as of its `writes`th write
        (evaluate_read_only); EvaluationTimeout or EvaluationCancelled once `budget` says so,
        EvaluationOverMemory past the memory limit, ResultTooLarge for an answer past its
        bound: the worker killed."""
        worker = self._take(budget)
        started = budget.monotonic()
        with self._lock:
            self.calls += 1

        def check() -> None:
            if self._stopping:
                raise EvaluationCancelled("the engine is stopping")
            budget.check()

        try:
            outcome = self._pool.ask(worker, (path, writes, call), check)
        except EvaluationStopped:
            with self._lock:
                self.killed += 1
            raise
        except WorkerOverMemory as e:
            with self._lock:
                self.killed += 1
            raise over_memory(e.limit) from None
        except AnswerTooLarge as e:
            with self._lock:
                self.killed += 1
            raise ResultTooLarge("the evaluation's result weighs more than %d MiB, the most one evaluation may send "
                                 "back (a quarter of [engine] worker_memory); it was stopped and nothing of it was "
                                 "delivered" % (e.limit >> 20)) from None
        except WorkerLost as lost:
            if lost.closed or self._stopping:
                raise EvaluationCancelled("the engine is stopping") from None
            raise StoreError("the worker process evaluating the query ended (exit %s%s)" % (
                lost.exitcode, ": past the memory a worker may take ([engine] worker_memory)?"
                if lost.exitcode in (-6, -11, 134, 139) and self.memory_limit else "")) from None
        finally:
            budget.isolated_seconds += budget.monotonic() - started
        with self._lock:
            self._opened[worker.process.pid] = outcome[-1]
            self.views_opened = sum(self._opened.values())
        return outcome[:-1]

    def stop(self) -> None:
        """The engine stops: every evaluation waiting for a worker or its answer ends now
        (EvaluationCancelled), its worker killed."""
        self._stopping = True
        self._pool.close()

    def over_memory(self) -> int:
        """Workers killed past their memory limit so far."""
        return self._pool.over_memory

    def close(self) -> None:
        """Stop every worker at once, busy or not."""
        self._stopping = True
        self._pool.close()
