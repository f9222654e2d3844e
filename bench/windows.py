"""The costs of the windows of spec 6.9, 6.10 and 6.13 (issue 46), each a subcommand:

  landmark     a landmark COUNT/SUM over 1,000,000 elements: the time of each close, close by
               close (the engine's default) and evaluating the whole window (incremental=false),
               at growing landmark lengths; a close should cost what arrived since the last one;
  facts        a fact window holding 100,000 open facts: the resident memory it adds (its facts
               graph, after its elements are evicted and the store rebuilt) against the memory
               of the same facts loaded into an Oxigraph store of their own (the facts themselves);
  partitioned  live, on the wall clock: [ELEMS 1 PARTITION BY sosa:madeBySensor] over 1,000
               sensors at 4,000 elements/s, published in 100 ms batches with their watermark, the
               scheduler-free runner ticking as fast as it can: close-to-result p50 / p99 (the
               status' `close_to_result_ms`) under a report policy (--report, default the window's
               own closes with overrun = skip).

Run by hand, one at a time, with nothing else running: python bench/windows.py landmark|facts|partitioned
"""
from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Table, machine, publish  # noqa: E402

import pyoxigraph as ox  # noqa: E402

from rspstar.endpoint.engine.clock import VirtualClock, WallClock  # noqa: E402
from rspstar.endpoint.engine.runner import EngineConfig, Runner  # noqa: E402
from rspstar.store.rdf_input import Element, instant_literal  # noqa: E402
from rspstar.store.stream_store import StreamStore  # noqa: E402
from rspstar.translator.temporal import format_instant, parse_instant  # noqa: E402

S = 1_000_000
T0 = parse_instant("2026-03-01T00:00:00Z")
EX = "http://example.org/"
SOSA = "http://www.w3.org/ns/sosa/"
INTEGER = ox.NamedNode("http://www.w3.org/2001/XMLSchema#integer")
LANDMARK = """PREFIX ex: <http://example.org/>
SELECT (COUNT(?v) AS ?n) (SUM(?v) AS ?sum)
FROM NAMED WINDOW ex:all ON ex:s [RANGE UNBOUNDED STEP PT1S START "2026-03-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>]
WHERE { WINDOW ex:all { GRAPH ?g { ?o ex:v ?v } } }"""
FACTS = """PREFIX ex: <http://example.org/>
SELECT (COUNT(*) AS ?n)
FROM NAMED WINDOW ex:f ON ex:s [FACTS { ?u ex:isIn ?r } SINCE { ?u ex:enter ?r } TILL { ?u ex:leave ?r } STEP PT1S START "2026-03-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>]
WHERE { WINDOW ex:f { ?u ex:isIn ?r } }"""
PARTITIONED = """PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
SELECT ?sensor ?value
FROM NAMED WINDOW ex:latest ON ex:s [ELEMS 1 PARTITION BY sosa:madeBySensor]
WHERE { WINDOW ex:latest { GRAPH ?g { ?o sosa:madeBySensor ?sensor ; sosa:hasSimpleResult ?value } } }"""


def rss_mib() -> float:
    """Resident memory now (not the peak)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096 / 2**20


def value_elements(first: int, count: int, timestamp: int) -> list[Element]:
    made = []
    for n in range(first, first + count):
        graph = ox.NamedNode(EX + "e%d" % n)
        made.append(Element(graph.value, timestamp, instant_literal(timestamp),
                            [ox.Quad(ox.NamedNode(EX + "o%d" % n), ox.NamedNode(EX + "v"),
                                     ox.Literal(str(n % 100), datatype=INTEGER), graph)]))
    return made


# -- landmark ---------------------------------------------------------------------------------
def landmark_run(incremental: bool, elements: int, per_close: int, marks: list[int]) -> dict[int, float]:
    """Median evaluation time (ms) of the 5 closes after each mark (elements in the landmark)."""
    store = StreamStore(compact_after=2**62, remove_evicted=False)
    clock = VirtualClock(T0)
    engine = Runner(store, clock, EngineConfig(landmark_elements=2 * elements))
    registered = engine.register(LANDMARK, "landmark", options={"incremental": "true" if incremental else "false"})
    timings: dict[int, list[float]] = {}
    for close in range(1, elements // per_close + 1):
        t = T0 + close * S
        store.add_elements(EX + "s", value_elements((close - 1) * per_close, per_close, t - S // 2))
        store.advance_watermark(EX + "s", t)
        clock.set(t)
        engine.tick()
        held = close * per_close
        for mark in marks:
            if mark <= held - per_close < mark + 25 * per_close:
                timings.setdefault(mark, []).append(registered.status.durations[-1] * 1000)
    last = registered.history.since()[-1]["bindings"][0]["n"]
    assert last.startswith('"%d"' % elements), last
    return {mark: statistics.median(values) for mark, values in timings.items()}


def cmd_landmark(args) -> None:
    marks = [m for m in (10_000, 100_000, 250_000, 500_000, 1_000_000) if m < args.elements]
    marks.append(args.elements - 26 * args.per_close)
    fast = landmark_run(True, args.elements, args.per_close, marks)
    whole_elements = min(args.elements, args.whole_elements)
    whole_marks = [m for m in marks if m < whole_elements - 26 * args.per_close] + [whole_elements - 26 * args.per_close]
    whole = landmark_run(False, whole_elements, args.per_close, whole_marks)
    table = Table("Landmark COUNT/SUM, %d elements per 1 s close: ms per close (median of the 25 closes from there)" % args.per_close,
                  ["elements in the landmark", "close by close (default)", "whole window (incremental=false)"])
    for mark in sorted(set(fast) | set(whole)):
        table.add("{:,}".format(mark), "%.2f" % fast[mark] if mark in fast else "-",
                  "%.1f" % whole[mark] if mark in whole else "-")
    publish("windows_landmark", "# Landmark windows\n\n%s\n\n%s" % (machine(), table.markdown()))


# -- facts --------------------------------------------------------------------------------------
def facts_themselves(count: int) -> None:
    """Print the resident memory (MiB) that `count` facts with their rspstar:since annotations
    take in an Oxigraph store of their own."""
    gc.collect()
    before = rss_mib()
    store = ox.Store()
    graph = ox.NamedNode("urn:facts")
    since = ox.NamedNode("https://w3id.org/rspstar#since")
    reifies = ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#reifies")
    literal = ox.Literal("2026-03-01T00:00:01Z", datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime"))
    for first in range(0, count, 10_000):
        quads = []
        for n in range(first, min(count, first + 10_000)):
            triple = ox.Triple(ox.NamedNode(EX + "u%d" % n), ox.NamedNode(EX + "isIn"), ox.NamedNode(EX + "r%d" % (n % 100)))
            reifier = ox.NamedNode("urn:rspstar:genid:fact-%024x" % n)
            quads += [ox.Quad(triple.subject, triple.predicate, triple.object, graph),
                      ox.Quad(reifier, reifies, triple, graph), ox.Quad(reifier, since, literal, graph)]
        store.extend(quads)
        del quads
    gc.collect()
    settle()
    print("%.1f" % (rss_mib() - before))


def settle() -> None:
    """Let the allocator give back what is free: glibc's malloc_trim, and jemalloc's decay of
    unused pages (10 s by default) waited out."""
    from rspstar.endpoint.allocator import trimmer
    trimmer()()
    time.sleep(12)


def fact_window(count: int, per_close: int) -> None:
    """Print the resident memory (MiB) a fact window holding `count` open facts adds to an engine,
    once the elements it read are evicted and the store rebuilt, and the seconds it took."""
    store = StreamStore()
    clock = VirtualClock(T0)
    engine = Runner(store, clock)
    registered = engine.register(FACTS, "facts")
    gc.collect()
    before = rss_mib()
    started = time.perf_counter()
    for close in range(1, count // per_close + 1):
        t = T0 + close * S
        elements = []
        for n in range((close - 1) * per_close, close * per_close):
            graph = ox.NamedNode(EX + "e%d" % n)
            elements.append(Element(graph.value, t - S // 2, instant_literal(t - S // 2),
                                    [ox.Quad(ox.NamedNode(EX + "u%d" % n), ox.NamedNode(EX + "enter"),
                                             ox.NamedNode(EX + "r%d" % (n % 100)), graph)]))
        store.add_elements(EX + "s", elements)
        del elements
        store.advance_watermark(EX + "s", t + 1)
        clock.set(t)
        engine.tick()
    seconds = time.perf_counter() - started
    assert registered.history.since()[-1]["bindings"][0]["n"].startswith('"%d"' % count)
    assert store.streams()[EX + "s"].elements == 0, store.streams()
    store.compact()
    gc.collect()
    settle()
    print("%.1f %.1f" % (rss_mib() - before, seconds))


def cmd_facts(args) -> None:
    import os
    from rspstar.endpoint.allocator import allocator_environment
    jemalloc = allocator_environment(dict(os.environ), "")
    environments = [("glibc malloc (trimmed)", dict(os.environ))]
    if jemalloc is not None:
        environments.append(("jemalloc, as rspstar serve runs", jemalloc))
        environments.append(("jemalloc with background purging", dict(jemalloc, MALLOC_CONF="background_thread:true")))

    def child(what: str, environment: dict) -> list[str]:
        # Each measure in a fresh process.
        done = subprocess.run([sys.executable, __file__, what, "--facts", str(args.facts), "--per-close",
                               str(args.per_close)], capture_output=True, text=True, check=True, env=environment)
        return done.stdout.split()

    table = Table("%s open facts (each with its rspstar:since annotation), opened %s per 1 s close"
                  % ("{:,}".format(args.facts), "{:,}".format(args.per_close)),
                  ["allocator", "the facts in an Oxigraph store of their own (MiB)",
                   "a fact window holding them (MiB)", "ratio", "seconds to open them"])
    for name, environment in environments:
        themselves = float(child("_facts_themselves", environment)[0])
        window, seconds = map(float, child("_fact_window", environment))
        table.add(name, "%.1f" % themselves, "%.1f" % window, "%.2f" % (window / themselves), "%.1f" % seconds)
    publish("windows_facts", "# Fact windows\n\n%s\n\nResident memory added: the facts alone, loaded into an "
            "Oxigraph store; and an engine whose fact window opened them from as many elements, once those are "
            "evicted and the store rebuilt (after the allocator is given 12 s and malloc_trim to hand back what is "
            "free).\n\n%s" % (machine(), table.markdown()))


# -- partitioned --------------------------------------------------------------------------------
def cmd_partitioned(args) -> None:
    store = StreamStore()
    clock = WallClock()
    engine = Runner(store, clock, EngineConfig(max_delay=S))
    options = {"overrun": args.overrun}
    if args.report:
        options["report"] = args.report
    registered = engine.register(PARTITIONED, "latest", options=options)
    stop = threading.Event()
    published = [0]

    def feed() -> None:
        batch = args.rate // 10
        n = 0
        next_at = time.monotonic()
        while not stop.is_set():
            now = clock.now()
            elements = []
            for k in range(batch):
                t = now - 100_000 + k * 100_000 // batch
                graph = ox.NamedNode(EX + "r%d" % n)
                o = ox.NamedNode(EX + "o%d" % n)
                elements.append(Element(graph.value, t, instant_literal(t), [
                    ox.Quad(o, ox.NamedNode(SOSA + "madeBySensor"), ox.NamedNode(EX + "sensor%d" % (n % args.sensors)), graph),
                    ox.Quad(o, ox.NamedNode(SOSA + "hasSimpleResult"), ox.Literal(str(n % 50), datatype=INTEGER), graph)]))
                n += 1
            store.add_elements(EX + "s", elements)
            store.advance_watermark(EX + "s", now + 1)
            published[0] = n
            next_at += 0.1
            time.sleep(max(0.0, next_at - time.monotonic()))

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    started = time.monotonic()
    evicted_at = started
    while time.monotonic() - started < args.seconds:
        # As the scheduler drives a query: a run evaluates what is due, at most
        # MAX_EVALUATIONS_PER_RUN instants (catch-up) or the latest one (skip); retention now and then.
        if not engine.run_query("latest"):
            time.sleep(0.005)
        if time.monotonic() - evicted_at > 0.5:
            engine.evict()
            evicted_at = time.monotonic()
    stop.set()
    feeder.join()
    elapsed = time.monotonic() - started
    status = registered.status.describe()
    latencies = sorted(registered.status.latencies)
    table = Table("[ELEMS 1 PARTITION BY sosa:madeBySensor], %d sensors, %d elements/s for %d s (report %s, overrun %s)"
                  % (args.sensors, args.rate, args.seconds, args.report or "the window's closes", args.overrun),
                  ["measure", "value"])
    table.add("elements published (per second)", "%d (%.0f)" % (published[0], published[0] / elapsed))
    table.add("evaluations (skipped instants)", "%d (%d)" % (status["evaluations"], status["skipped_instants"]))
    table.add("close-to-result p50 / p99 / max (ms)", "%.0f / %.0f / %.0f" % (
        latencies[len(latencies) // 2] / 1000, latencies[int(0.99 * len(latencies))] / 1000, latencies[-1] / 1000)
        if latencies else "-")
    table.add("evaluation p50 / p99 (ms)", "%s / %s" % (status.get("evaluation_ms", {}).get("p50"),
                                                        status.get("evaluation_ms", {}).get("p99")))
    table.add("rows in the last evaluation", str(len(registered.history.since()[-1]["bindings"])))
    name = "windows_partitioned" + ("_" + args.label if args.label else "")
    publish(name, "# Partitioned window live\n\n%s\n\n%s" % (machine(), table.markdown()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    landmark = sub.add_parser("landmark")
    landmark.add_argument("--elements", type=int, default=1_000_000)
    landmark.add_argument("--per-close", type=int, default=1_000)
    landmark.add_argument("--whole-elements", type=int, default=100_000,
                          help="the whole evaluation grows with the landmark: run it this far only")
    landmark.set_defaults(run=cmd_landmark)
    for name, run in (("facts", cmd_facts), ("_facts_themselves", None), ("_fact_window", None)):
        p = sub.add_parser(name)
        p.add_argument("--facts", type=int, default=100_000)
        p.add_argument("--per-close", type=int, default=1_000)
        p.set_defaults(run=run)
    partitioned = sub.add_parser("partitioned")
    partitioned.add_argument("--sensors", type=int, default=1_000)
    partitioned.add_argument("--rate", type=int, default=4_000)
    partitioned.add_argument("--seconds", type=int, default=60)
    partitioned.add_argument("--report", default=None, help="a report policy, e.g. periodic(PT1S)")
    partitioned.add_argument("--overrun", default="skip", choices=("skip", "catch-up"))
    partitioned.add_argument("--label", default="")
    partitioned.set_defaults(run=cmd_partitioned)
    args = parser.parse_args()
    if args.command == "_facts_themselves":
        facts_themselves(args.facts)
    elif args.command == "_fact_window":
        fact_window(args.facts, args.per_close)
    else:
        args.run(args)


if __name__ == "__main__":
    main()
