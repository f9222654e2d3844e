"""Eviction: what a window close pays to drop the elements no window can reach any more.

Two stores with the same 20,000-element stream (one graph per element, two content triples):
one evicts with `StreamStore.evict_before` (each element's graph and its timestamp triple
removed as stored), the twin removes the same graphs and drops their timestamp triples with one
SPARQL DELETE (the way eviction worked before). Evicts 1,000 elements per close, 10 closes, in
memory and on disk; prints ms per close and the ratio.

Run by hand: python bench/eviction.py
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pyoxigraph as ox

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Table, machine, publish  # noqa: E402

from rspstar.store.rdf_input import Element, instant_literal  # noqa: E402
from rspstar.store.stream_store import StreamStore  # noqa: E402
from rspstar.translator.temporal import parse_instant  # noqa: E402
from rspstar.translator.vocabulary import timestamps_graph  # noqa: E402

STREAM = "http://example.org/s"
T0 = parse_instant("2026-03-01T08:00:00Z")
MS = 1000
ELEMENTS, PER_CLOSE, CLOSES = 20_000, 1_000, 10


def filled(path: str | None) -> StreamStore:
    store = StreamStore(path, compact_after=10**9)
    elements = []
    for k in range(ELEMENTS):
        graph = ox.NamedNode("http://example.org/e%d" % k)
        quads = [ox.Quad(ox.NamedNode("http://example.org/o%d" % (k % 100)), ox.NamedNode("http://example.org/v"),
                         ox.Literal(k), graph),
                 ox.Quad(ox.NamedNode("http://example.org/o%d" % (k % 100)), ox.NamedNode("http://example.org/at"),
                         ox.NamedNode("http://example.org/room%d" % (k % 7)), graph)]
        elements.append(Element(graph.value, T0 + k * MS, instant_literal(T0 + k * MS), quads))
    store.add_elements(STREAM, elements)
    return store


def by_delete(store: StreamStore, instant: int) -> None:
    """The former eviction: graphs removed, timestamp triples found by one SPARQL DELETE."""
    with store.lock:
        doomed = [graph for graph, _ in store._index.cut_before(STREAM, instant)]
        for graph in doomed:
            store.write("remove_graph", ox.NamedNode(graph))
        store.write("update", "DELETE { GRAPH <%s> { ?g ?p ?t } } WHERE { VALUES ?g { %s } GRAPH <%s> { ?g ?p ?t } }"
                     % (timestamps_graph(STREAM), " ".join("<%s>" % g for g in doomed), timestamps_graph(STREAM)))


def per_close(path: str | None, evict) -> float:
    store = filled(path)
    seconds = 0.0
    for close in range(1, CLOSES + 1):
        started = time.perf_counter()
        evict(store, T0 + close * PER_CLOSE * MS)
        seconds += time.perf_counter() - started
    left = sum(1 for _ in store.oxigraph.quads_for_pattern(None, None, None, ox.NamedNode(timestamps_graph(STREAM))))
    assert left == ELEMENTS - CLOSES * PER_CLOSE, left
    store.close()
    return 1000 * seconds / CLOSES


def run() -> Table:
    table = Table("Eviction of %d elements per close from a %d-element stream (%s)" % (PER_CLOSE, ELEMENTS, machine()),
                  ["store", "evict_before (ms per close)", "with a SPARQL DELETE (ms per close)", "ratio"])
    for name in ("in memory", "on disk"):
        paths = (None, None) if name == "in memory" else (tempfile.mkdtemp(), tempfile.mkdtemp())
        direct = per_close(paths[0], lambda store, instant: store.evict_before(STREAM, instant))
        delete = per_close(paths[1], by_delete)
        table.add(name, "%.1f" % direct, "%.1f" % delete, "%.1fx" % (delete / direct))
    return table


def main() -> None:
    table = run()
    publish("eviction", table.markdown())


if __name__ == "__main__":
    main()
