"""Ad-hoc SPARQL queries (`/sparql`), evaluated where a runaway cannot hurt the engine.

Oxigraph cannot cancel a query, and a query its parser chokes on can take the process down.
With the store on disk, each ad-hoc query therefore runs in one of a few worker processes
over `Store.read_only` of the live store (it sees the engine's writes, flushed or not, and
opens in milliseconds): a query past its time limit has its worker killed and replaced, so it
stops using CPU at once, and a worker that dies takes only its own query with it. An
in-memory store cannot be shared with another process; its queries run on threads.
"""
from __future__ import annotations

import concurrent.futures
import logging
import queue
import time
from dataclasses import dataclass

import pyoxigraph as ox

from rspstar.store.errors import QueryTimeout, StoreError
from rspstar.store.stream_store import StreamStore
from rspstar.store.workers import WORKER_START_SECONDS, WorkerLost, WorkerPool
from rspstar.translator.uncertainty import FunctionLibrary
from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.validate import compile_query, oxigraph_syntax_error, unknown_function

from .engine.errors import EndpointError

log = logging.getLogger(__name__)
READ_ONLY_ATTEMPTS = 3
# A request waits this much longer than the time limit for a free worker: stopping a runaway
# query costs its worker, and the replacement takes a moment to start.
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


def serialize_graph(triples: list[ox.Triple], accepted: tuple[str, ...]) -> tuple[bytes, str]:
    """Triples in the first accepted media type that can carry them. JSON-LD has no triple
    terms: a graph holding some goes to the client's next choice, or is refused."""
    has_triple_terms = any(isinstance(t.subject, ox.Triple) or isinstance(t.object, ox.Triple) for t in triples)
    for media in accepted:
        if GRAPH_TYPES[media] is ox.RdfFormat.JSON_LD and has_triple_terms:
            continue
        return ox.serialize(triples, format=GRAPH_TYPES[media]), media
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


def evaluate(query, job: Job) -> tuple[bytes, str]:
    """Run `job` with `query` (a store's query method) and serialize what it gives; raises
    QueryRefused. Oxigraph's results are dropped here, on the thread that made them."""
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
            return serialize_graph(list(result), job.accepted.graphs)
        if job.accepted.results is None:
            raise QueryRefused("not_acceptable", "results are served as %s" % ", ".join(RESULT_TYPES))
        return result.serialize(format=RESULT_TYPES[job.accepted.results]), job.accepted.results
    finally:
        del result


def _evaluate_read_only(path: str, job: Job) -> tuple:
    """The outcome of `job` over a read-only view of the store at `path`. The engine may
    compact files away while the view opens or reads them; a fresh view then reads the
    files that replaced them, so such a failure is tried again a few times."""
    for attempt in range(READ_ONLY_ATTEMPTS):
        try:
            store = ox.Store.read_only(path)
            return ("ok",) + evaluate(store.query, job)
        except QueryRefused as e:
            return ("refused", e.kind, e.message, e.line, e.column)
        except (OSError, RuntimeError) as e:
            if attempt + 1 == READ_ONLY_ATTEMPTS:
                return ("error", "%s: %s" % (type(e).__name__, e))
        except Exception as e:  # reported to the client; the worker goes on
            return ("error", "%s: %s" % (type(e).__name__, e))
        finally:
            store = None


class AdhocQueries:
    """Evaluates `/sparql` queries within `timeout` seconds, `workers` at a time."""

    def __init__(self, store: StreamStore, timeout: float, workers: int = 2):
        self.store = store
        self.timeout = timeout
        self.workers = workers
        self._threads: concurrent.futures.ThreadPoolExecutor | None = None
        self._pool: WorkerPool | None = None
        if store.generation_path() is None:
            self._threads = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sparql")
        else:
            self._pool = WorkerPool(workers, _evaluate_read_only, "rspstar-sparql")
            self._pool.start()

    def processes(self) -> list:
        """The worker processes alive now (none when queries run on threads)."""
        return self._pool.processes() if self._pool is not None else []

    def run(self, job: Job) -> tuple[bytes, str]:
        """(body, media type); QueryRefused, QueryTimeout or QueryCrashed otherwise."""
        if self._threads is not None:
            future = self._threads.submit(evaluate, lambda text, **kwargs: self.store.oxigraph.query(text, **kwargs), job)
            try:
                return future.result(timeout=self.timeout)
            except concurrent.futures.TimeoutError:
                # A thread cannot be stopped: it finishes on its own, the client is told now.
                raise QueryTimeout("the query ran past its time limit of %g s" % self.timeout) from None
        try:
            worker = self._pool.take(self.timeout + WORKER_WAIT_GRACE_SECONDS)
        except queue.Empty:
            raise QueryTimeout("all %d query workers stayed busy for %g s"
                               % (self.workers, self.timeout + WORKER_WAIT_GRACE_SECONDS)) from None
        if worker is None:
            raise QueryTimeout("the engine is stopping")
        def wait(connection) -> None:
            if not connection.poll(self.timeout):
                log.warning("an ad-hoc query ran past %g s; its worker is stopped", self.timeout)
                raise QueryTimeout("the query ran past its time limit of %g s and was stopped" % self.timeout)

        try:
            outcome = self._pool.ask(worker, (self.store.generation_path(), job), wait)
        except WorkerLost as lost:
            if lost.closed:
                raise QueryTimeout("the engine is stopping") from None
            raise QueryCrashed("the query could not be evaluated: its worker process ended (exit %s)"
                               % lost.exitcode) from None
        if outcome[0] == "ok":
            return outcome[1], outcome[2]
        if outcome[0] == "refused":
            raise QueryRefused(*outcome[1:])
        raise StoreError("the query failed: %s" % outcome[1])

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
        if self._pool is not None:
            self._pool.close()
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
