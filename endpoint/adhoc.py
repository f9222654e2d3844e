"""Ad-hoc SPARQL queries (`/sparql`) and updates (`/update`), evaluated where a runaway cannot
hurt the engine.

Oxigraph cannot cancel a query, and a query its parser chokes on can take the process down.
With the store on disk, each ad-hoc query therefore runs in one of a few worker processes
over `Store.read_only` of the live store (it sees the engine's writes, flushed or not; a worker
keeps its view while the store is not written): a query past its time limit or past the memory
a worker may take has its worker killed and replaced, so it stops using CPU and memory at once,
and a worker that dies takes only its own query with it. The worker serializes the answer and
stops past `max_bytes` (the client is told, 413, never sent a truncated answer), so the engine's
process holds at most that much of it. An in-memory store cannot be shared with another process;
its queries run on threads.

Queries are admitted `workers` + `backlog` at a time: a request beyond that is answered 503 with
Retry-After at once, so that queries never hold the HTTP threads /health, /metrics and the rest
of the API need. Updates are computed the same way, one at a time, in a worker of their own
(store/updates.py), and applied in the engine's process.
"""
from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import time
from dataclasses import dataclass

import pyoxigraph as ox

from rspstar.config.schema import default
from rspstar.store.background import Background
from rspstar.store.errors import BackgroundChanged, QueryTimeout, StoreError
from rspstar.store.isolation import ReadOnlyViews
from rspstar.store.stream_store import StreamStore
from rspstar.store.updates import UpdateCall, UpdateWorker, changes_of
from rspstar.store.workers import WORKER_START_SECONDS, AnswerTooLarge, WorkerLost, WorkerOverMemory, WorkerPool
from rspstar.translator.uncertainty import FunctionLibrary
from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.validate import compile_query, oxigraph_syntax_error, unknown_function

from .engine.errors import EndpointError

log = logging.getLogger(__name__)
READ_ONLY_ATTEMPTS = 3
# Times an update is computed again when the background changed while it was computed.
UPDATE_ATTEMPTS = 3
# What a worker's answer may weigh beyond the serialized result (its media type, framing).
ANSWER_SLACK = 4096
# A request waits this much longer than the time limit for a free worker: stopping a runaway
# query costs its worker, and the replacement takes a moment to start. (The requests waiting
# are bounded by [http] query_backlog.)
WORKER_WAIT_GRACE_SECONDS = 10.0

RESULT_TYPES = {
    "application/sparql-results+json": ox.QueryResultsFormat.JSON,
    "application/json": ox.QueryResultsFormat.JSON,
    "application/sparql-results+xml": ox.QueryResultsFormat.XML,
    "text/csv": ox.QueryResultsFormat.CSV,
    "text/tab-separated-values": ox.QueryResultsFormat.TSV,
}
GRAPH_TYPES = {
    "text/turtle": ox.RdfFormat.TURTLE,
    "application/n-triples": ox.RdfFormat.N_TRIPLES,
    "application/trig": ox.RdfFormat.TRIG,
    "application/n-quads": ox.RdfFormat.N_QUADS,
    "application/rdf+xml": ox.RdfFormat.RDF_XML,
    "application/ld+json": ox.RdfFormat.JSON_LD,
}


class QueryRefused(EndpointError):
    """An ad-hoc query that was evaluated and refused: a syntax error (with its position) or
    no representation the client accepts (`not_acceptable`)."""

    def __init__(self, kind: str, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.line = line
        self.column = column


class QueryCrashed(EndpointError):
    """The worker evaluating a query died (the engine itself is unharmed)."""


class QueriesBusy(EndpointError):
    """Every /sparql worker is busy and the backlog is full (or an update runs and another
    waits): the client should retry shortly."""

    retry_after = 2


class AnswerPastBound(EndpointError):
    """A /sparql answer larger than the server sends ([http] query_max_bytes): stopped, not sent."""


class QueryOverMemory(EndpointError):
    """A /sparql query or an /update that took more memory than a worker may ([engine] worker_memory)."""


class _Capped:
    """A writer that takes at most `bound` bytes (OverflowError beyond: the serializer stops)."""

    def __init__(self, bound: int | None):
        self.bound = bound
        self.size = 0
        self.parts: list[bytes] = []

    def write(self, data) -> int:
        self.size += len(data)
        if self.bound is not None and self.size > self.bound:
            raise OverflowError("past %d bytes" % self.bound)
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def value(self) -> bytes:
        return b"".join(self.parts)


def _too_large(bound: int) -> AnswerPastBound:
    return AnswerPastBound("the answer is larger than %d bytes, the most this server sends for one query ([http] "
                           "query_max_bytes); it was stopped, nothing of it is sent: narrow the query (LIMIT, "
                           "fewer variables) or page through it (ORDER BY with LIMIT and OFFSET)" % bound)


def _over_memory(limit: int, what: str = "query") -> QueryOverMemory:
    return QueryOverMemory("the %s took more than %d MiB, the memory a worker process may take ([engine] "
                           "worker_memory); it was stopped" % (what, limit >> 20))


@dataclass(frozen=True)
class Negotiated:
    """What the client accepts: one media type for solutions and booleans (None: nothing
    fits), and the graph media types it accepts, best first."""
    results: str | None
    graphs: tuple[str, ...]


def negotiate(accept) -> Negotiated:
    """From werkzeug's Accept header object (empty: the defaults)."""
    if not accept:
        return Negotiated("application/sparql-results+json", ("text/turtle",))
    ranked = sorted(((accept.quality(media), -k, media) for k, media in enumerate(GRAPH_TYPES)
                     if accept.quality(media) > 0), reverse=True)
    return Negotiated(accept.best_match(list(RESULT_TYPES)), tuple(media for _, _, media in ranked))


def serialize_graph(triples: list[ox.Triple], accepted: tuple[str, ...], max_bytes: int | None = None
                    ) -> tuple[bytes, str]:
    """Triples in the first accepted media type that can carry them (AnswerPastBound past
    `max_bytes`). JSON-LD has no triple terms: a graph holding some goes to the client's next
    choice, or is refused."""
    has_triple_terms = any(isinstance(t.subject, ox.Triple) or isinstance(t.object, ox.Triple) for t in triples)
    for media in accepted:
        if GRAPH_TYPES[media] is ox.RdfFormat.JSON_LD and has_triple_terms:
            continue
        output = _Capped(max_bytes)
        try:
            ox.serialize(triples, output, format=GRAPH_TYPES[media])
        except OverflowError:
            raise _too_large(max_bytes) from None
        return output.value(), media
    if accepted:
        raise QueryRefused("not_acceptable", "this graph holds triple terms, which JSON-LD cannot carry; ask for one "
                           "of %s" % ", ".join(m for m in GRAPH_TYPES if GRAPH_TYPES[m] is not ox.RdfFormat.JSON_LD))
    raise QueryRefused("not_acceptable", "graphs are served as %s" % ", ".join(GRAPH_TYPES))


@dataclass(frozen=True)
class Job:
    text: str
    default_graphs: tuple[str, ...]
    named_graphs: tuple[str, ...]
    accepted: Negotiated
    base_iri: str | None = None       # what relative IRIs in the query resolve against


def _syntax_error(message: str, text: str, base: str | None) -> tuple[str, int | None, int | None]:
    """What is wrong in a query Oxigraph refused, in the client's terms: the engine's own parser
    names the construct it expected and what it found there (Oxigraph lists grammar tokens,
    often at the end of the text); Oxigraph's message where the engine's parser finds nothing
    (a form it does not read, such as DESCRIBE)."""
    try:
        compile_query(text, base=base)
    except QuerySyntaxError as e:
        if "DESCRIBE" not in e.message:
            return e.message, e.line, e.column
    except Exception:       # the engine's reading failed otherwise: Oxigraph's message stands
        pass
    return oxigraph_syntax_error(message, text)


def evaluate(query, job: Job, max_bytes: int | None = None) -> tuple[bytes, str]:
    """Run `job` with `query` (a store's query method) and serialize what it gives, at most
    `max_bytes` of it; raises QueryRefused, AnswerPastBound. Oxigraph's results are dropped
    here, on the thread that made them."""
    functions = FunctionLibrary()
    kwargs = {"custom_functions": functions.table, "base_iri": job.base_iri}
    if job.default_graphs:
        kwargs["default_graph"] = [ox.NamedNode(g) for g in job.default_graphs]
    if job.named_graphs:
        kwargs["named_graphs"] = [ox.NamedNode(g) for g in job.named_graphs]
    try:
        result = query(job.text, **kwargs)
    except SyntaxError as e:
        raise QueryRefused("syntax", *_syntax_error(str(e), job.text, job.base_iri)) from None
    except RuntimeError as e:
        refused = unknown_function(str(e), job.text)
        if refused is None:
            raise
        raise QueryRefused("syntax", *refused) from None
    try:
        if isinstance(result, ox.QueryTriples):
            return serialize_graph(list(result), job.accepted.graphs, max_bytes)
        if job.accepted.results is None:
            raise QueryRefused("not_acceptable", "results are served as %s" % ", ".join(RESULT_TYPES))
        output = _Capped(max_bytes)
        try:
            result.serialize(output, format=RESULT_TYPES[job.accepted.results])
        except OverflowError:
            raise _too_large(max_bytes) from None
        return output.value(), job.accepted.results
    finally:
        del result


class QueryWorker:
    """A /sparql worker's handler: each job over a read-only view of the store, kept while the
    store is not written (store.isolation.ReadOnlyViews)."""

    def __init__(self):
        self.views = ReadOnlyViews()

    def __call__(self, path: str, writes: int | None, job: Job, max_bytes: int | None) -> tuple:
        """The outcome of `job`. The engine may compact files away while the view opens or
        reads them; a fresh view then reads the files that replaced them, so such a failure is
        tried again a few times."""
        for attempt in range(READ_ONLY_ATTEMPTS):
            try:
                store = self.views.view(path, writes if attempt == 0 else None)
                return ("ok",) + evaluate(store.query, job, max_bytes)
            except QueryRefused as e:
                return ("refused", e.kind, e.message, e.line, e.column)
            except AnswerPastBound:
                return ("too_large", max_bytes)
            except (OSError, RuntimeError) as e:
                self.views.forget()
                if attempt + 1 == READ_ONLY_ATTEMPTS:
                    return ("error", "%s: %s" % (type(e).__name__, e))
            except Exception as e:  # reported to the client; the worker goes on
                return ("error", "%s: %s" % (type(e).__name__, e))
            finally:
                store = None


class AdhocQueries:
    """Evaluates `/sparql` queries within `timeout` seconds, `workers` at a time with at most
    `backlog` waiting, each answer within `max_bytes` and each worker within `memory_limit`
    bytes; and `/update` updates the same way, one at a time, each changing at most
    `max_changes` quads."""

    def __init__(self, store: StreamStore, timeout: float, workers: int = 2,
                 backlog: int = default("http.query_backlog"), max_bytes: int | None = default("http.query_max_bytes"),
                 memory_limit: int | None = default("engine.worker_memory"),
                 max_changes: int = default("http.update_max_changes")):
        self.store = store
        self.timeout = timeout
        self.workers = workers
        self.backlog = backlog
        self.max_bytes = max_bytes
        self.memory_limit = memory_limit
        self.max_changes = max_changes
        self.refused_busy = 0                   # requests answered 503 at once (every worker and the backlog taken)
        self._admitted = threading.BoundedSemaphore(workers + backlog)
        self._updates = threading.BoundedSemaphore(1 + backlog)
        self._updating = threading.Lock()
        self._closed = False
        self._threads: concurrent.futures.ThreadPoolExecutor | None = None
        self._pool: WorkerPool | None = None
        self._update_pool: WorkerPool | None = None
        answer_limit = None if max_bytes is None else max_bytes + ANSWER_SLACK
        if store.generation_path() is None:
            self._threads = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sparql")
        else:
            self._pool = WorkerPool(workers, QueryWorker(), "rspstar-sparql", memory_limit=memory_limit,
                                    answer_limit=answer_limit)
            self._pool.start()
            # Started at the first update: most engines are never sent one.
            self._update_pool = WorkerPool(1, UpdateWorker(), "rspstar-update", memory_limit=memory_limit)

    def processes(self) -> list:
        """The worker processes alive now (none when queries run on threads)."""
        return self._pool.processes() if self._pool is not None else []

    def _admit(self, slots: threading.BoundedSemaphore, what: str) -> None:
        if not slots.acquire(blocking=False):
            self.refused_busy += 1
            raise QueriesBusy("%s: every worker is busy and %d more wait already ([http] query_workers, "
                              "query_backlog); retry shortly" % (what, self.backlog))

    def run(self, job: Job) -> tuple[bytes, str]:
        """(body, media type); QueryRefused, QueryTimeout, QueryCrashed, QueriesBusy,
        AnswerPastBound or QueryOverMemory otherwise."""
        self._admit(self._admitted, "the query is not evaluated now")
        try:
            return self._run(job)
        finally:
            self._admitted.release()

    def _run(self, job: Job) -> tuple[bytes, str]:
        if self._threads is not None:
            future = self._threads.submit(evaluate, lambda text, **kwargs: self.store.oxigraph.query(text, **kwargs),
                                          job, self.max_bytes)
            try:
                return future.result(timeout=self.timeout)
            except concurrent.futures.TimeoutError:
                # A thread cannot be stopped: it finishes on its own, the client is told now.
                raise QueryTimeout("the query ran past its time limit of %g s" % self.timeout) from None
        worker = self._take(self._pool)
        started = time.monotonic()
        key = self.store.view_key()

        def check() -> None:
            if self._closed:
                raise QueryTimeout("the engine is stopping")
            if time.monotonic() - started > self.timeout:
                log.warning("an ad-hoc query ran past %g s; its worker is stopped", self.timeout)
                raise QueryTimeout("the query ran past its time limit of %g s and was stopped" % self.timeout)

        try:
            outcome = self._pool.ask(worker, key + (job, self.max_bytes), check)
        except WorkerOverMemory as e:
            log.warning("an ad-hoc query took more than %d MiB; its worker is stopped", e.limit >> 20)
            raise _over_memory(e.limit) from None
        except AnswerTooLarge:
            raise _too_large(self.max_bytes) from None
        except WorkerLost as lost:
            if lost.closed:
                raise QueryTimeout("the engine is stopping") from None
            raise QueryCrashed("the query could not be evaluated: its worker process ended (exit %s)"
                               % lost.exitcode) from None
        if outcome[0] == "ok":
            return outcome[1], outcome[2]
        if outcome[0] == "refused":
            raise QueryRefused(*outcome[1:])
        if outcome[0] == "too_large":
            raise _too_large(outcome[1])
        raise StoreError("the query failed: %s" % outcome[1])

    def _take(self, pool: WorkerPool):
        """A free worker of `pool`, waited for within the time limit and WORKER_WAIT_GRACE_SECONDS."""
        pool.start()
        try:
            worker = pool.take(self.timeout + WORKER_WAIT_GRACE_SECONDS)
        except queue.Empty:
            raise QueryTimeout("every worker stayed busy for %g s" % (self.timeout + WORKER_WAIT_GRACE_SECONDS)) \
                from None
        if worker is None:
            raise QueryTimeout("the engine is stopping")
        return worker

    def update(self, background: Background, text: str, base_iri: str | None) -> int:
        """Compute `text` over the background in a worker within the time and memory limits,
        and apply what it changes (store/updates.py): the number of quads changed. SyntaxError,
        QuerySyntaxError (an unknown function), UpdateTooLarge, ReservedGraphError, GraphMissing
        and GraphExists as Background.update raises them; QueryTimeout, QueryOverMemory,
        QueriesBusy otherwise."""
        self._admit(self._updates, "the update is not run now")
        try:
            if not self._updating.acquire(timeout=self.timeout + WORKER_WAIT_GRACE_SECONDS):
                raise QueryTimeout("another update ran for the whole time limit of %g s ([http] query_timeout)"
                                   % self.timeout)
            try:
                for _ in range(UPDATE_ATTEMPTS):
                    version, graphs = background.current()
                    call = UpdateCall(text, base_iri, graphs, self.max_changes)
                    outcome = self._compute_update(background, call)
                    try:
                        return background.apply_outcome(version, outcome, text)
                    except BackgroundChanged:
                        continue
                raise QueriesBusy("the background kept changing while the update was computed; retry")
            finally:
                self._updating.release()
        finally:
            self._updates.release()

    def _compute_update(self, background: Background, call: UpdateCall) -> tuple:
        if self._update_pool is None:       # an in-memory store: a copy, on a thread
            _, quads, _ = background.copy()
            thread = concurrent.futures.ThreadPoolExecutor(1, "update")
            future = thread.submit(changes_of, quads, call)
            thread.shutdown(wait=False)         # a thread cannot be stopped: one past the limit ends on its own
            try:
                return future.result(timeout=self.timeout)
            except concurrent.futures.TimeoutError:
                raise QueryTimeout("the update ran past its time limit of %g s; nothing was changed"
                                   % self.timeout) from None
        for _ in range(READ_ONLY_ATTEMPTS):
            worker = self._take(self._update_pool)
            started = time.monotonic()

            def check() -> None:
                if self._closed:
                    raise QueryTimeout("the engine is stopping")
                if time.monotonic() - started > self.timeout:
                    log.warning("an update ran past %g s; its worker is stopped", self.timeout)
                    raise QueryTimeout("the update ran past its time limit of %g s and was stopped; nothing was "
                                       "changed" % self.timeout)

            try:
                outcome = self._update_pool.ask(worker, self.store.view_key() + (call,), check)
            except WorkerOverMemory as e:
                raise _over_memory(e.limit, "update") from None
            except WorkerLost as lost:
                if lost.closed:
                    raise QueryTimeout("the engine is stopping") from None
                raise QueryCrashed("the update could not be computed: its worker process ended (exit %s)"
                                   % lost.exitcode) from None
            if outcome[0] != "unreadable":
                return outcome
        raise StoreError("the update could not read the store: %s" % outcome[1])

    def wait_ready(self, timeout: float = WORKER_START_SECONDS) -> bool:
        """Wait until every worker has started (True), or `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while self._pool is not None and self._pool.idle() < self.workers:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def close(self) -> None:
        """Stop every worker at once, busy or not; requests waiting for one are told so."""
        self._closed = True
        if self._pool is not None:
            self._pool.close()
        if self._update_pool is not None:
            self._update_pool.close()
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
