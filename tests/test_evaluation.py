"""Evaluating a registered query at an instant (endpoint/engine/evaluation.py): incremental evaluation
of sliding windows against evaluating every window from scratch."""
import threading

import pyoxigraph as ox
import pytest

from rspstar.endpoint.engine import r2r, sharing
from rspstar.endpoint.engine.evaluation import QueryEvaluator
from rspstar.endpoint.engine.sharing import ConstantGroups, RangeResults
from rspstar.translator.options import QueryOptions
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore
from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.temporal import parse_instant
from rspstar.translator.validate import compile_query

T0 = parse_instant("2026-03-01T08:00:00Z")
S = 1_000_000
STREAM = "http://example.org/s"
QUERY = """PREFIX ex: <http://example.org/>
SELECT ?o ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT4S STEP PT1S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v >= 0) } } }"""


def element(k: int, at: int) -> Element:
    graph = ox.NamedNode("http://example.org/e%d" % k)
    return Element(graph.value, at, instant_literal(at),
                   [ox.Quad(ox.NamedNode("http://example.org/o%d" % k), ox.NamedNode("http://example.org/v"),
                            ox.Literal(k), graph)])


def evaluators(store):
    query = compile_query(QUERY)
    on = QueryEvaluator(query, store, QueryOptions())
    off = QueryEvaluator(query, store, QueryOptions(incremental=False))
    queried = {id(on): [], id(off): []}
    for evaluator in (on, off):
        compiled = evaluator.r2r.compiled
        real = compiled.run

        def counting(elements, count, convert, real=real, seen=queried[id(evaluator)]):
            seen.append(count)
            return real(elements, count, convert)
        compiled.run = counting
    return on, off, queried[id(on)], queried[id(off)]


def rows_at(evaluator, instant):
    return sorted((r["o"], r["v"]) for r in evaluator.evaluate(instant).rows)


def test_a_sliding_window_evaluates_each_element_once_with_the_same_results():
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S // 4) for k in range(80)])     # 4 per second
    on, off, queried_on, queried_off = evaluators(store)
    assert on.r2r.ranges.window == "http://example.org/w" and off.r2r.kind == "whole"
    for second in range(1, 21):
        store.advance_watermark(STREAM, T0 + second * S)
        assert rows_at(on, T0 + second * S) == rows_at(off, T0 + second * S)
    # Each of the 80 elements evaluated once, not in each of the (up to) 4 windows holding it.
    assert sum(queried_on) == 80 and max(queried_on) == 4
    assert sum(queried_off) == 4 + 8 + 12 + 16 * 17


def test_a_late_element_in_a_range_already_evaluated_is_seen_by_the_next_window():
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S) for k in range(6)])
    on, off, _, _ = evaluators(store)
    for second in (4, 5, 6):
        store.advance_watermark(STREAM, T0 + second * S)
        rows_at(on, T0 + second * S)
    store.add_elements(STREAM, [element(99, T0 + 3 * S + S // 2)])         # below the watermark: late
    assert store.late_count(STREAM) == 1
    store.advance_watermark(STREAM, T0 + 7 * S)
    assert ("<http://example.org/o99>", '"99"^^<http://www.w3.org/2001/XMLSchema#integer>') in rows_at(on, T0 + 7 * S)
    assert rows_at(on, T0 + 7 * S) == rows_at(off, T0 + 7 * S)


def test_a_window_evaluated_before_its_stream_is_complete_is_not_kept():
    # Evaluated on max_delay, before the watermark reached the close: what arrives afterwards
    # (not late, the watermark is behind it) must still be seen by the next window.
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S) for k in range(4)])
    on, off, _, _ = evaluators(store)
    store.advance_watermark(STREAM, T0 + 3 * S)
    rows_at(on, T0 + 4 * S)                                               # watermark behind the close
    store.add_elements(STREAM, [element(50, T0 + 3 * S + S // 2)])
    assert store.late_count(STREAM) == 0
    store.advance_watermark(STREAM, T0 + 5 * S)
    assert rows_at(on, T0 + 5 * S) == rows_at(off, T0 + 5 * S)
    assert "<http://example.org/o50>" in {o for o, _ in rows_at(on, T0 + 5 * S)}


def test_incremental_evaluations_count_the_windows_elements_and_skip_empty_ones_when_asked():
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S) for k in (0, 1, 2)])
    query = compile_query(QUERY)
    evaluator = QueryEvaluator(query, store, QueryOptions(report="non-empty"))
    store.advance_watermark(STREAM, T0 + 9 * S)
    assert evaluator.r2r.kind == "incremental"
    assert evaluator.evaluate(T0 + 2 * S).elements == 2          # [T0-2s, T0+2s): e0, e1
    assert evaluator.evaluate(T0 + 3 * S).elements == 3
    assert evaluator.evaluate(T0 + 8 * S) is None                # [T0+4s, T0+8s): empty, skipped


OTHER = "http://example.org/t"
JOINED = """PREFIX ex: <http://example.org/>
PREFIX rspu: <http://w3id.org/rsp/rspu#>
SELECT %s FROM NAMED WINDOW ex:w ON ex:s [RANGE PT4S STEP PT1S]
FROM NAMED WINDOW ex:x ON ex:t [RANGE PT3S STEP PT1S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v >= 2) } }
        WINDOW ex:x { GRAPH ?h { ?q ex:v ?u OPTIONAL { ?q ex:tag ?o } FILTER(?u + 1 > 0) } } }"""


def tagged(k: int, at: int, tag: int | None) -> Element:
    graph = ox.NamedNode("http://example.org/f%d" % k)
    quads = [ox.Quad(ox.NamedNode("http://example.org/q%d" % k), ox.NamedNode("http://example.org/v"),
                     ox.Literal(k), graph)]
    if tag is not None:     # joins with the other window's ?o; without it, any ?o is compatible
        quads.append(ox.Quad(ox.NamedNode("http://example.org/q%d" % k), ox.NamedNode("http://example.org/tag"),
                             ox.NamedNode("http://example.org/o%d" % tag), graph))
    return Element(graph.value, at, instant_literal(at), quads)


def test_a_join_of_windows_evaluates_each_window_incrementally_with_the_same_results():
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S // 2) for k in range(40)])            # 2 per second
    store.add_elements(OTHER, [tagged(k, T0 + k * S // 3, None if k % 5 == 0 else k % 7) for k in range(60)])
    for projection in ("?o ?v ?q", "*"):
        query = compile_query(JOINED % projection)
        on = QueryEvaluator(query, store, QueryOptions())
        off = QueryEvaluator(query, store, QueryOptions(incremental=False))
        assert sorted(on.r2r.parts) == ["http://example.org/w", "http://example.org/x"] and off.r2r.kind == "whole"
        evaluated, emitted = [], []
        for part in on.r2r.parts.values():
            real = part.compiled.run
            part.compiled.run = lambda elements, count, convert, real=real: evaluated.append(count) or real(elements, count, convert)
        for second in range(1, 22):
            store.advance_watermark(STREAM, T0 + second * S)
            store.advance_watermark(OTHER, T0 + second * S)
            got, expected = on.evaluate(T0 + second * S), off.evaluate(T0 + second * S)
            assert sorted(map(sorted_items, got.rows)) == sorted(map(sorted_items, expected.rows)), second
            assert got.elements == expected.elements
            emitted += got.rows
        assert sum(evaluated) == 40 + 60                                  # each element once
        assert {"<http://example.org/q10>", "<http://example.org/q13>"} <= {r["q"] for r in emitted}  # untagged, tagged

def sorted_items(row: dict) -> tuple:
    return tuple(sorted(row.items()))


def test_a_join_with_the_background_reads_the_background_as_it_is_at_each_evaluation():
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S // 2) for k in range(20)])
    store.add_elements(OTHER, [tagged(k, T0 + k * S // 2, k) for k in range(20)])
    store.background.load('<http://example.org/o3> <http://example.org/in> <http://example.org/lab> .',
                          ox.RdfFormat.N_TRIPLES, "bg.nt")
    query = compile_query("""PREFIX ex: <http://example.org/>
SELECT ?o ?q FROM NAMED WINDOW ex:w ON ex:s [RANGE PT4S STEP PT1S]
FROM NAMED WINDOW ex:x ON ex:t [RANGE PT4S STEP PT1S]
WHERE { ?o ex:in ex:lab . WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } WINDOW ex:x { GRAPH ?h { ?q ex:tag ?o } } }""")
    on = QueryEvaluator(query, store, QueryOptions())
    off = QueryEvaluator(query, store, QueryOptions(incremental=False))
    assert on.r2r.kind == "joined" and on.r2r.background is not None
    seen = []
    for second in range(2, 9):
        if second == 5:
            store.background.update("INSERT DATA { <http://example.org/o8> <http://example.org/in> <http://example.org/lab> }")
        store.advance_watermark(STREAM, T0 + second * S)
        store.advance_watermark(OTHER, T0 + second * S)
        got = sorted(map(sorted_items, on.evaluate(T0 + second * S).rows))
        assert got == sorted(map(sorted_items, off.evaluate(T0 + second * S).rows)), second
        seen.append({dict(row)["o"] for row in got})
    assert seen[0] == {"<http://example.org/o3>"} and "<http://example.org/o8>" in seen[-1]


def test_queries_with_equal_window_blocks_evaluate_each_range_once_between_them():
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S // 4) for k in range(40)])
    store.add_elements(OTHER, [tagged(k, T0 + k * S // 2, k) for k in range(20)])
    shared = RangeResults()
    alone = compile_query(QUERY.replace("SELECT ?o ?v", "SELECT *"))
    # The same block of ex:w inside a join: as its own query it compiles to the same text.
    joined = compile_query(QUERY.replace("[RANGE PT4S STEP PT1S]", "[RANGE PT4S STEP PT1S] "
                                         "FROM NAMED WINDOW ex:x ON ex:t [RANGE PT2S STEP PT1S]").replace(
        "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v >= 0) } } }",
        "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v >= 0) } } WINDOW ex:x { GRAPH ?h { ?q ex:tag ?o } } }"))
    first, second = QueryEvaluator(alone, store, shared=shared), QueryEvaluator(joined, store, shared=shared)
    unshared = QueryEvaluator(joined, store)
    runs = []
    for compiled in (first.r2r.compiled, second.r2r.parts["http://example.org/w"].compiled):
        real = compiled.run
        compiled.run = lambda elements, count, convert, real=real, who=compiled: runs.append(who) or real(
            elements, count, convert)
    for second_ in range(1, 11):
        for stream in (STREAM, OTHER):
            store.advance_watermark(stream, T0 + second_ * S)
        first.evaluate(T0 + second_ * S)
        got = second.evaluate(T0 + second_ * S)
        assert sorted(map(sorted_items, got.rows)) == sorted(map(sorted_items, unshared.evaluate(T0 + second_ * S).rows))
    assert runs and all(who is first.r2r.compiled for who in runs)      # the join's ex:w ranges all came from the first query
    assert shared.hits >= 10
    # What no window can still reach is not kept: the last window opens at T0 + 6 s.
    assert shared._rows and all(hi > T0 + 6 * S for _, _, _, hi, _ in shared._rows)


def bag(rows: list[dict]) -> list[tuple]:
    """Rows as SPARQL gives them: a bag (their order within an evaluation is not specified)."""
    return sorted(map(sorted_items, rows))


def threshold_query(threshold) -> str:
    return QUERY.replace("FILTER(?v >= 0)", "FILTER(?v >= %s)" % threshold)


def test_queries_differing_only_in_constants_evaluate_each_range_once_between_them():
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S // 4) for k in range(40)])
    groups = ConstantGroups()
    together = [QueryEvaluator(compile_query(threshold_query(t)), store, groups=groups) for t in (3, 10, 3, 25)]
    alone = [QueryEvaluator(compile_query(threshold_query(t)), store) for t in (3, 10, 3, 25)]
    assert len(groups) == 1 and all(e.r2r.ranges.group is together[0].r2r.ranges.group for e in together)
    evaluated = []
    real = store.evaluate
    store.evaluate = lambda template, elements, *rest, **named: evaluated.append(elements) or real(template, elements, *rest, **named)
    for second in range(1, 11):
        store.advance_watermark(STREAM, T0 + second * S)
        for mine, its_own in zip(together, alone):
            ours = mine.evaluate(T0 + second * S).rows
            assert bag(ours) == bag(its_own.evaluate(T0 + second * S).rows)
    # Each range (a second: 4 elements) once for the four queries, and once for each query alone.
    assert len(evaluated) == 10 + 4 * 10
    # A late element makes new ranges, evaluated once for the group again.
    store.add_elements(STREAM, [element(99, T0 + 9 * S + S // 2)])
    store.advance_watermark(STREAM, T0 + 11 * S)
    for mine, its_own in zip(together, alone):
        ours = mine.evaluate(T0 + 11 * S).rows
        assert bag(ours) == bag(its_own.evaluate(T0 + 11 * S).rows)
        assert '<http://example.org/o99>' in [r["o"] for r in ours]


def test_a_removed_query_leaves_its_group_and_the_rest_go_on_alone():
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S // 4) for k in range(40)])
    groups = ConstantGroups()
    first, second = (QueryEvaluator(compile_query(threshold_query(t)), store, groups=groups) for t in (3, 10))
    reference = QueryEvaluator(compile_query(threshold_query(3)), store)
    store.advance_watermark(STREAM, T0 + 2 * S)
    first.evaluate(T0 + 2 * S)      # leaves the second query's window made, not taken
    group = first.r2r.ranges.group
    assert group.shared() and any(second.r2r.ranges in made for made in group._windows.values())
    second.close()
    assert not group.shared() and all(second.r2r.ranges not in made for made in group._windows.values())
    # The ranges it held are by their rows in a query made for both: let go of (a group no
    # longer shared makes no window that would drop them).
    assert not group._ranges
    # Removed while evaluating (after asking whether the group is shared): it goes alone.
    assert group.window(second.r2r.ranges, STREAM, T0, T0 + S, 0) is None
    for k in range(3, 11):
        store.advance_watermark(STREAM, T0 + k * S)
        assert bag(first.evaluate(T0 + k * S).rows) == bag(reference.evaluate(T0 + k * S).rows)
    first.close()
    assert len(groups) == 0


def test_constants_are_not_shared_when_the_option_is_off_or_the_query_is_partitioned():
    store = StreamStore()
    groups = ConstantGroups()
    evaluator = QueryEvaluator(compile_query(threshold_query(3)), store, QueryOptions(share_constants=False),
                               groups=groups)
    assert evaluator.r2r.ranges.group is None and len(groups) == 0
    # Partitioned, its rows are what its key groups found on Spark's executors: it joins no group.
    evaluator = QueryEvaluator(compile_query(threshold_query(3)), store, QueryOptions(partition="?o"), groups=groups)
    assert evaluator.r2r.kind == "partitioned" and len(groups) == 0
    assert QueryEvaluator(compile_query(threshold_query(3)), store, groups=groups).r2r.ranges.group is not None


def test_queries_differing_in_r2s_and_name_as_well_share_their_ranges():
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S // 4) for k in range(40)])
    groups = ConstantGroups()
    texts = [threshold_query(3), "PREFIX ex: <http://example.org/>\nREGISTER ISTREAM ex:out AS " +
             threshold_query(10).replace("PREFIX ex: <http://example.org/>\n", "")]
    together = [QueryEvaluator(compile_query(t), store, groups=groups) for t in texts]
    alone = [QueryEvaluator(compile_query(t), store) for t in texts]
    assert len(groups) == 1 and together[0].r2r.ranges.group.shared()
    for second in range(1, 11):
        store.advance_watermark(STREAM, T0 + second * S)
        for mine, its_own in zip(together, alone):
            assert bag(mine.evaluate(T0 + second * S).rows) == bag(its_own.evaluate(T0 + second * S).rows)


def test_queries_watching_different_sensors_share_their_ranges():
    # Each query reads one tag (a triple pattern's object); together they match each element once.
    store = StreamStore()
    store.add_elements(OTHER, [tagged(k, T0 + k * S // 4, k % 3 if k % 5 else None) for k in range(40)])
    texts = [JOINED.split("FROM NAMED WINDOW ex:x")[0].replace("ex:s [", "ex:t [") % "?q ?v" +
             "WHERE { WINDOW ex:w { GRAPH ?g { ?q ex:tag ex:o%d ; ex:v ?v } } }" % tag for tag in (0, 1, 2)]
    groups = ConstantGroups()
    together = [QueryEvaluator(compile_query(t), store, groups=groups) for t in texts]
    alone = [QueryEvaluator(compile_query(t), store) for t in texts]
    assert len(groups) == 1 and together[0].r2r.ranges.group.shared()
    seen = set()
    for second in range(1, 11):
        store.advance_watermark(OTHER, T0 + second * S)
        for mine, its_own in zip(together, alone):
            rows = mine.evaluate(T0 + second * S).rows
            assert bag(rows) == bag(its_own.evaluate(T0 + second * S).rows)
            seen.update(row["q"] for row in rows)
    assert len(seen) == 32      # the 8 elements without a tag match none of the queries


def test_a_group_whose_query_does_not_compile_leaves_each_member_to_evaluate_alone(monkeypatch):
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S // 4) for k in range(20)])
    groups = ConstantGroups()
    together = [QueryEvaluator(compile_query(threshold_query(t)), store, groups=groups) for t in (3, 10)]
    alone = QueryEvaluator(compile_query(threshold_query(10)), store)

    def refuse(*_):
        raise QuerySyntaxError("refused", 1, 1)

    # The group's query (of every member's constants) does not compile; each member's own does.
    monkeypatch.setattr(sharing._ConstantGroup, "_compile", refuse)
    store.advance_watermark(STREAM, T0 + 5 * S)
    assert bag(together[1].evaluate(T0 + 5 * S).rows) == bag(alone.evaluate(T0 + 5 * S).rows)
    assert together[1].evaluate(T0 + 5 * S).rows
    assert not together[0].r2r.ranges.group.shared()      # tried once, not at every range


def test_joins_of_windows_whose_blocks_differ_in_constants_share_those_blocks_ranges():
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S // 2) for k in range(40)])
    store.add_elements(OTHER, [tagged(k, T0 + k * S // 3, None if k % 5 == 0 else k % 7) for k in range(60)])
    texts = [JOINED.replace("FILTER(?v >= 2)", "FILTER(?v >= %d)" % t) % "?o ?v ?q" for t in (2, 5, 9)]
    groups = ConstantGroups()
    together = [QueryEvaluator(compile_query(t), store, groups=groups) for t in texts]
    alone = [QueryEvaluator(compile_query(t), store) for t in texts]
    blocks = [e.r2r.parts["http://example.org/w"] for e in together]
    assert len(groups) == 1 and all(b.group is blocks[0].group for b in blocks) and blocks[0].group.shared()
    for second in range(1, 22):
        for stream in (STREAM, OTHER):
            store.advance_watermark(stream, T0 + second * S)
        for mine, its_own in zip(together, alone):
            assert bag(mine.evaluate(T0 + second * S).rows) == bag(its_own.evaluate(T0 + second * S).rows), second
    for evaluator in together:
        evaluator.close()
    assert len(groups) == 0


def test_many_queries_of_one_shape_cost_their_group_not_each_member(monkeypatch):
    """With a thousand queries of one shape, registration checked that each one's group query
    compiled, each member looked its ranges' elements up although the group's evaluation had
    left its rows, and every range a member kept scanned the shared cache's keys: 17x one
    query in a replay where 4x is what their evaluations cost."""
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S // 4) for k in range(40)])
    compiled = []
    for module in (r2r, sharing):
        monkeypatch.setattr(module, "compile_template",
                            lambda *a, real=module.compile_template: compiled.append(a) or real(*a))
    groups, shared = ConstantGroups(), RangeResults()
    members = [QueryEvaluator(compile_query(threshold_query(t)), store, shared=shared, groups=groups) for t in range(30)]
    checks = len(compiled)
    assert len(groups) == 1 and checks <= 2 + len(members)    # the group's query checked once
    looked_up = []
    real_lookup = store.elements_in
    store.elements_in = lambda *a: looked_up.append(a) or real_lookup(*a)
    for second in range(1, 6):
        store.advance_watermark(STREAM, T0 + second * S)
        for member in members:
            member.evaluate(T0 + second * S)
    # Each one-second range holding elements once, by the member that evaluated it (ranges
    # before the stream's first element hold none, and each member sees that for itself).
    assert len([a for a in looked_up if a[1] >= T0]) == 5
    # The group keeps only ranges a window can still reach (the last opens at T0 + 1 s), as it
    # goes; its members' ranges fill no cache of equal queries' (the group holds them once).
    group = members[0].r2r.ranges.group
    assert group._ranges and all(lo >= T0 + S for _, lo, _, _ in group._ranges) and not shared._rows


@pytest.mark.parametrize("held_in", ["evaluation", "compilation"])
def test_queries_join_and_leave_a_group_while_it_evaluates_a_range_without_waiting_for_it(monkeypatch, held_in):
    # A registration or removal waited for the group's evaluation in progress (up to its whole
    # time: 0.1-0.5 s with a thousand members), which the one lock of a group made it do; and for
    # the compilation of the members' constants (tens of milliseconds for a thousand).
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S // 4) for k in range(40)])
    groups = ConstantGroups()
    first, second = (QueryEvaluator(compile_query(threshold_query(t)), store, groups=groups) for t in (3, 10))
    reference = QueryEvaluator(compile_query(threshold_query(3)), store)
    inside, release = threading.Event(), threading.Event()

    def holding(real):
        def held(*args, **kwargs):
            if threading.current_thread() is evaluating:
                inside.set()
                assert release.wait(30)
            return real(*args, **kwargs)
        return held

    if held_in == "evaluation":
        monkeypatch.setattr(store, "evaluate", holding(store.evaluate))
    else:
        monkeypatch.setattr(sharing, "compile_template", holding(sharing.compile_template))
    store.advance_watermark(STREAM, T0 + 2 * S)
    result = []
    evaluating = threading.Thread(target=lambda: result.append(first.evaluate(T0 + 2 * S)))
    evaluating.start()
    assert inside.wait(30)
    joined = threading.Thread(target=lambda: QueryEvaluator(compile_query(threshold_query(25)), store, groups=groups))
    joined.start()
    joined.join(5)
    left = threading.Thread(target=second.close)
    left.start()
    left.join(5)
    done_while_evaluating = not joined.is_alive() and not left.is_alive()
    release.set()
    evaluating.join(30)
    assert done_while_evaluating
    assert bag(result[0].rows) == bag(reference.evaluate(T0 + 2 * S).rows)


def test_an_iri_call_written_with_a_comment_before_its_bracket_resolves_against_each_querys_base():
    # IRI #...\n("o5") is IRI("o5"): it reads the base, so the query keeps it, and copies read
    # from two places neither share a group nor lose the base each resolves against.
    store = StreamStore()
    store.add_elements(STREAM, [element(k, T0 + k * S // 4) for k in range(20)])
    text = QUERY.replace("FILTER(?v >= 0)", 'FILTER(?o = IRI # the sensor\n("o5") || ?v >= 10)')
    groups, shared = ConstantGroups(), RangeResults()
    together = [QueryEvaluator(compile_query(text, base=base), store, groups=groups, shared=shared)
                for base in ("http://example.org/", "http://example.org/other/")]
    store.advance_watermark(STREAM, T0 + 5 * S)
    first, second = ({r["o"] for r in e.evaluate(T0 + 5 * S).rows} for e in together)
    assert "<http://example.org/o5>" in first and "<http://example.org/o5>" not in second
    assert first - second == {"<http://example.org/o5>"}
