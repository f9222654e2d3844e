"""A pool of worker processes that can be killed: each a spawned process that says it is ready,
then answers one message at a time with a function of its own (`handler`), until its
connection closes.

What runs in a worker can take its process down (a parser's stack, a runaway evaluation) or
must be stoppable at a time limit: the caller kills the worker, and a replacement starts on a
thread of its own, so a caller that had to stop a worker does not wait for the new one. The
continuous evaluations (store/isolation.py) and the `/sparql` queries (endpoint/adhoc.py) each
keep a pool.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import signal
import threading
from typing import Callable

log = logging.getLogger(__name__)
WORKER_START_SECONDS = 120.0


def _serve(connection, handler: Callable, niceness: int) -> None:
    """A worker process: say it is ready, then answer each message with `handler(*message)`
    until the connection closes. Ctrl-C reaches the whole process group: the pool's owner
    stops its workers itself, so a worker ignores it (no traceback of its own)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if niceness:
        try:
            os.nice(niceness)
        except OSError:
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

    def __init__(self, context, handler: Callable, name: str, niceness: int):
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, handler, niceness), daemon=True, name=name)
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


class WorkerPool:
    """`size` workers answering with `handler` (a module-level function: it is sent to each
    spawned process by name), started by `start()`."""

    def __init__(self, size: int, handler: Callable, name: str, niceness: int = 0):
        self.size = size
        self._handler, self._name, self._niceness = handler, name, niceness
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._idle: queue.Queue[WorkerProcess | None] = queue.Queue()
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

    def ask(self, worker: WorkerProcess, message: tuple, wait: Callable) -> object:
        """`worker`'s answer to `message`, the worker given back. `wait(connection)` returns
        once the answer is there, or raises to stop the worker: it is killed and replaced, and
        the exception goes on. WorkerLost when the worker's process ended or the pool closed."""
        try:
            worker.connection.send(message)
            wait(worker.connection)
            answer = worker.connection.recv()
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
        worker = WorkerProcess(self._context, self._handler, self._name, self._niceness)
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
