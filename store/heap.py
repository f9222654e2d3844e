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


class WorkerHeap:
    """A Spark Python worker's heap, settled at the worker's first task: what the worker
    imported. Its later objects, kept stores among them, stay collectable. Spark reuses its
    Python workers, so that first time is once per worker process; the one instance,
    WORKER_HEAP, stands for the process's heap, which is one per process as the collector's
    own state is (`gc.get_freeze_count()` would tell as well, but walks every frozen object)."""

    def __init__(self) -> None:
        self.settled = False

    def settle(self) -> None:
        if not self.settled:
            settle_heap()
            self.settled = True


WORKER_HEAP = WorkerHeap()
