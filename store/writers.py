"""What the stream store's writers of whole documents, of background data and of entailed
triples (documents.py, background.py, entailment.py) may use of the store, and nothing more: its lock, its Oxigraph store and the one
path every write takes, and its graph names. `StreamStore` provides it; the writers import this
protocol, not the store, so the store's parts do not import each other."""
from __future__ import annotations

import threading
from typing import Iterable, Protocol

import pyoxigraph as ox

from .staged import StagedElement


class StoreWriting(Protocol):
    lock: threading.RLock
    background: object      # the store's background data (background.Background), which entailment reads
    # Whether evicted elements are removed from Oxigraph: only then is each element's stamp (its
    # timestamp triple as stored) kept until eviction.
    remove_evicted: bool

    @property
    def oxigraph(self) -> ox.Store:
        """The live Oxigraph store (it changes when a rebuild switches generations)."""

    def write(self, operation: str, *args) -> None:
        """Every write to Oxigraph, with the lock held (but for a document's parts)."""

    def flush_soon(self) -> None:
        """Flush the store's writes soon, when enough were written since the last flush."""

    def is_element(self, graph: str) -> bool:
        """A stream element's graph, published or staged."""

    def check_new(self, graphs: Iterable[str]) -> None:
        """DuplicateElementError unless elements of these graph names may all be written."""

    def mark_staged(self, graphs: Iterable[str]) -> None:
        """These graphs are written elements, not yet published."""

    def stage_elements(self, stream: str, elements, timestamp_predicate: str) -> list[StagedElement]:
        """Write elements in one transaction (a graph name in use refuses them all)."""
