"""A signal on the main thread while it takes a condition's lock back after a wait (Ctrl-C on a
notebook following a query, or evaluating one): where the wait does it in Python, on a plain
lock, the interrupt leaves the waiter without the lock, and its `with` then releases the lock of
the thread that woke it."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

TESTS = Path(__file__).resolve().parent


class Interrupted(Exception):
    """What the signal raises on the main thread."""


def interrupted_on_waking(condition: threading.Condition, wake: Callable[[], None],
                          wait: Callable[[], object]) -> list[Exception]:
    """Run `wait` on the main thread (it waits on `condition`) and, on another thread once it
    waits, hold the condition's lock as the code waking it does, `wake` it there, and interrupt
    the main thread with SIGUSR1 while it takes the lock back. The waiter raises Interrupted;
    returns what the waking thread raised (nothing, where the lock is taken back whole)."""
    main = threading.main_thread().ident
    errors, left = [], threading.Event()

    def interrupt(signum, frame):
        raise Interrupted

    def waking() -> None:
        try:
            while not condition._waiters:          # the waiter waits: the lock free
                time.sleep(0)
            with condition:
                wake()
                # The waiter taking the lock back: where the wait does it in Python, seen there
                # (bounded: where it does it in C, nothing is seen and nothing is needed).
                ends = time.monotonic() + 0.2
                while sys._current_frames()[main].f_code.co_name != "_acquire_restore" and time.monotonic() < ends:
                    time.sleep(0.001)
                time.sleep(0.01)
                signal.pthread_kill(main, signal.SIGUSR1)
                left.wait(0.2)      # (a waiter left without the lock goes on meanwhile)
        except Exception as e:
            errors.append(e)

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        thread = threading.Thread(target=waking)
        thread.start()
        try:
            with pytest.raises(Interrupted):
                wait()
        finally:
            left.set()
            thread.join(10)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    return errors


def in_child(module: str, scenario: str, timeout: float = 120) -> None:
    """Run `module`.`scenario` (a function of a test module asserting what it checks) in a
    process of its own, on its main thread: a signal lost under load, or a lock left held, ends
    in a failure naming it after `timeout` seconds, never in a test run that does not end."""
    code = "import sys; sys.path.insert(0, %r); import %s as m; m.%s()" % (str(TESTS), module, scenario)
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail("%s.%s did not end in %s s" % (module, scenario, timeout))
    assert done.returncode == 0, done.stderr[-4000:]
