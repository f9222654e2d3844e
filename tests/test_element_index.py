"""The element index: time order with ties in arrival order, late counting against the
watermark, eviction, counters that survive a restart."""
from rspstar.store.element_index import ElementIndex


def test_elements_are_kept_in_time_order_and_ties_in_arrival_order():
    index = ElementIndex()
    for timestamp, graph in [(5, "e5"), (1, "e1"), (5, "e5b"), (3, "e3")]:
        index.add("s", timestamp, graph, "stamp of " + graph)
    assert index.between("s", 0, 10) == ["e1", "e3", "e5", "e5b"]
    assert index.between("s", 3, 5) == ["e3"] and index.between("other", 0, 10) == []
    assert "e3" in index and "e9" not in index


def test_adding_elements_together_is_adding_them_one_by_one():
    batches = [[("e1", 1), ("e2", 2), ("e2b", 2)],       # in order, after everything held
               [("e4", 4), ("e3", 3)],                   # out of order
               [("e0", 0), ("e5", 5)],                   # in order, but before what is held
               []]
    together, one_by_one = ElementIndex(), ElementIndex()
    for index in (together, one_by_one):
        index.advance_watermark("s", 2)
    for batch in batches:
        together.add_all("s", [(graph, timestamp, "stamp of " + graph) for graph, timestamp in batch])
        for graph, timestamp in batch:
            one_by_one.add("s", timestamp, graph, "stamp of " + graph)
    assert together.between("s", 0, 10) == one_by_one.between("s", 0, 10) == ["e0", "e1", "e2", "e2b", "e3",
                                                                              "e4", "e5"]
    assert together.snapshot() == one_by_one.snapshot() and together.snapshot()["s"].late == 2   # e1 and e0
    assert together.cut_before("s", 3) == one_by_one.cut_before("s", 3)


def test_late_elements_eviction_and_watermarks():
    index = ElementIndex()
    index.add("s", 10, "e10", "stamp of e10")
    assert index.advance_watermark("s", 8) and not index.advance_watermark("s", 7)   # never back
    index.add("s", 7, "e7", "stamp of e7")                                        # below the watermark: late
    assert index.cut_before("s", 9) == [("e7", "stamp of e7")] and index.cut_before("s", 9) == []
    stats = index.snapshot()["s"]
    assert (stats.elements, stats.late, stats.evicted, stats.latest, stats.watermark) == (1, 1, 1, 10, 8)
    assert index.known("t") is None and "t" not in index.snapshot()


def test_saved_counters_come_back_over_a_rebuilt_index():
    index = ElementIndex()
    index.add("s", 1, "e1", "stamp of e1")
    index.add("s", 2, "e2", "stamp of e2")
    index.stats_of("s").ingested += 2            # the store counts what it publishes
    index.advance_watermark("s", 2)
    index.cut_before("s", 2)
    saved = index.saved_counters()
    rebuilt = ElementIndex()                     # what a reopened store finds on disk
    rebuilt.add("s", 2, "e2", "stamp of e2")
    rebuilt.restore_counters(saved)
    assert rebuilt.snapshot() == index.snapshot()
