"""Python's cycle collector in the long-lived processes the store's code runs in.

A full collection scans every object the collector tracks, with every thread of the process
held, and comes whenever the tracked objects have grown by a quarter since the last. What a
process holds once started (modules, a Spark session, a Spark Python worker's pandas and
pyarrow) never becomes garbage: scanned again at every full collection, it is what makes them
long. `gc.freeze()` moves it out of the collector's generations for good."""
from __future__ import annotations

import gc


def settle_heap() -> None:
    """Take everything this process holds now out of the collector's full collections."""
    gc.collect()
    gc.freeze()


def settle_worker_heap() -> None:
    """In a Spark Python worker, at the start of a task: settle the heap the first time only
    (what the worker imported; its later objects, kept stores among them, stay collectable).
    Spark reuses its Python workers, so that first time is once per worker process."""
    if gc.get_freeze_count() == 0:
        settle_heap()
