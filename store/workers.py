"""A pool of worker processes that can be killed: each a spawned process that says it is ready,
then answers one message at a time with a function of its own (`handler`), until its
connection closes.

What runs in a worker can take its process down (a parser's stack, a runaway evaluation) or
must be stoppable at a time limit: the caller kills the worker, and a replacement starts on a
thread of its own, so a caller that had to stop a worker does not wait for the new one. The
continuous evaluations (store/isolation.py) and the `/sparql` queries and `/update` updates
(endpoint/adhoc.py) each keep a pool.

A worker's memory is bounded two ways: the caller, waiting for an answer in slices of
POLL_SECONDS, reads the worker's resident memory between slices and kills it past the pool's
`memory_limit` (WorkerOverMemory); and the worker's own data segment is limited
(RLIMIT_DATA) to BACKSTOP_FACTOR times that plus BACKSTOP_SLACK, so that an allocation faster
than the caller looks ends the worker (its allocator fails) instead of the machine's memory.
An answer is read only up to the pool's `answer_limit` bytes (AnswerTooLarge beyond): whatever
a worker computed, the engine's process never holds more than that of it.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import queue
import resource
import signal
import threading
from typing import Callable

log = logging.getLogger(__name__)
WORKER_START_SECONDS = 120.0
# How often a caller waiting for an answer looks at its limits and at the worker's memory.
POLL_SECONDS = 0.05
# The worker's data segment may reach this many times the memory limit, plus this much, before
# its allocations fail (what a Python interpreter with Oxigraph maps beyond what it touches).
BACKSTOP_FACTOR = 2
BACKSTOP_SLACK = 512 << 20
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _serve(connection, handler: Callable, niceness: int, memory_limit: int | None = None) -> None:
    """A worker process: say it is ready, then answer each message with `handler(*message)`
    until the connection closes. Ctrl-C reaches the whole process group: the pool's owner
    stops its workers itself, so a worker ignores it (no traceback of its own)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if niceness:
        try:
            os.nice(niceness)
        except OSError:
            pass
    if memory_limit:
        backstop = BACKSTOP_FACTOR * memory_limit + BACKSTOP_SLACK
        try:
            resource.setrlimit(resource.RLIMIT_DATA, (backstop, backstop))
        except (ValueError, OSError):       # a lower hard limit of the system's stands
            pass
    connection.send("ready")
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        connection.send(handler(*message))


class WorkerProcess:
    """One worker: its process and the engine's end of its connection."""

    def __init__(self, context, handler: Callable, name: str, niceness: int, memory_limit: int | None = None):
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, handler, niceness, memory_limit), daemon=True,
                                       name=name)
        self.process.start()
        child.close()
        self._killed = threading.Lock()

    def ready(self, timeout: float) -> bool:
        """Whether the process started and said so (its start-up must not count against the
        first message it gets)."""
        try:
            return self.connection.poll(timeout) and self.connection.recv() == "ready"
        except (EOFError, OSError):
            return False

    def rss(self) -> int:
        """The process's resident memory in bytes (0 once it has ended)."""
        try:
            with open("/proc/%d/statm" % self.process.pid, "rb") as statm:
                return int(statm.read().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError, TypeError):
            return 0

    def kill(self) -> None:
        if not self._killed.acquire(blocking=False):
            return
        self.process.kill()
        self.process.join(timeout=10)
        self.connection.close()


class WorkerLost(Exception):
    """The worker's process ended before it answered (`exitcode`), or the pool was closed
    (`closed`)."""

    def __init__(self, exitcode: int | None, closed: bool):
        super().__init__("exit %s" % exitcode)
        self.exitcode, self.closed = exitcode, closed


class WorkerOverMemory(Exception):
    """A worker's resident memory passed the pool's limit: it was killed."""

    def __init__(self, rss: int, limit: int):
        super().__init__("%d MiB, past %d MiB" % (rss >> 20, limit >> 20))
        self.rss, self.limit = rss, limit


class AnswerTooLarge(Exception):
    """A worker's answer was longer than the pool reads: it was killed."""

    def __init__(self, limit: int):
        super().__init__("an answer past %d bytes" % limit)
        self.limit = limit


class WorkerPool:
    """`size` workers answering with `handler` (a module-level function or an instance of a
    module-level class: it is sent to each spawned process), started by `start()`; each worker
    within `memory_limit` bytes of resident memory and its answers within `answer_limit` bytes
    (None: no bound)."""

    def __init__(self, size: int, handler: Callable, name: str, niceness: int = 0,
                 memory_limit: int | None = None, answer_limit: int | None = None):
        self.size = size
        self.memory_limit = memory_limit
        self.answer_limit = answer_limit
        self.over_memory = 0                # workers killed past memory_limit
        self._handler, self._name, self._niceness = handler, name, niceness
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        # The worker given back last is taken first: what it keeps between calls (a view of the
        # store) is the most likely to serve the next one.
        self._idle: queue.LifoQueue[WorkerProcess | None] = queue.LifoQueue()
        self._all: set[WorkerProcess] = set()
        self._started = False
        self.closed = False

    def start(self) -> None:
        """Start the workers, once; each joins the idle ones when it is ready."""
        with self._lock:
            if self._started:
                return
            self._started = True
        for _ in range(self.size):
            self._add()

    def processes(self) -> list:
        """The worker processes alive now (for the status and the tests)."""
        with self._lock:
            return [w.process for w in self._all]

    def idle(self) -> int:
        """How many workers wait for a message now."""
        return self._idle.qsize()

    def take(self, timeout: float) -> WorkerProcess | None:
        """An idle worker, or None when the pool is closed; queue.Empty after `timeout` seconds."""
        worker = self._idle.get(timeout=timeout)
        if worker is None:
            self._idle.put(None)            # for the next waiter
        return worker

    def give_back(self, worker: WorkerProcess) -> None:
        self._idle.put(worker)

    def ask(self, worker: WorkerProcess, message: tuple, check: Callable[[], None]) -> object:
        """`worker`'s answer to `message`, the worker given back. While it works, `check()` is
        called every POLL_SECONDS and may raise to stop it; past the memory limit it is stopped
        with WorkerOverMemory, an answer past the answer limit with AnswerTooLarge: the worker is
        killed and replaced, and the exception goes on. WorkerLost when the worker's process
        ended or the pool closed."""
        connection = worker.connection
        try:
            connection.send(message)
            while not connection.poll(POLL_SECONDS):
                check()
                if self.memory_limit is not None:
                    rss = worker.rss()
                    if rss > self.memory_limit:
                        with self._lock:
                            self.over_memory += 1
                        raise WorkerOverMemory(rss, self.memory_limit)
            try:
                answer = pickle.loads(connection.recv_bytes(self.answer_limit))
            except OSError:
                if self.answer_limit is not None and worker.process.is_alive() and not self.closed:
                    raise AnswerTooLarge(self.answer_limit) from None
                raise
        except (EOFError, OSError):
            if self.closed:
                raise WorkerLost(None, closed=True) from None
            code = worker.process.exitcode
            self.retire(worker)
            raise WorkerLost(code, closed=False) from None
        except BaseException:
            self.retire(worker)
            raise
        self.give_back(worker)
        return answer

    def retire(self, worker: WorkerProcess) -> None:
        """Kill `worker` (stopped at a limit, or its process ended) and start another."""
        with self._lock:
            self._all.discard(worker)
            closed = self.closed
        worker.kill()
        if not closed:
            self._add()

    def close(self) -> None:
        """Stop every worker at once, busy or not; whoever waits for one is told so."""
        with self._lock:
            self.closed = True
            workers, self._all = list(self._all), set()
        for worker in workers:
            worker.kill()
        self._idle.put(None)

    def _add(self) -> None:
        worker = WorkerProcess(self._context, self._handler, self._name, self._niceness, self.memory_limit)
        with self._lock:
            if self.closed:
                worker.kill()
                return
            self._all.add(worker)

        def when_ready():
            if worker.ready(WORKER_START_SECONDS):
                self._idle.put(worker)
            elif not self.closed:
                log.error("a worker process (%s) did not start (exit %s)", self._name, worker.process.exitcode)
                self.retire(worker)

        threading.Thread(target=when_ready, daemon=True, name=self._name + "-start").start()
