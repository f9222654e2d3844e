"""The tunnel-ventilation (TVS) workload of the RSPU paper: the cost of the `rspu:` functions and of
the optimizations (cache, lazy variables, H4, fused calls), and exact functions against the
10,000-sample Monte Carlo of the RSPU prototype.

Run by hand: python bench/uncertainty_tvs.py [--sectors 10 100 1000] [--profile selective|simulator]
             python bench/uncertainty_tvs.py --variants 4   (Listing 2 variants sharing their blocks)
Each sector has an oxygen and a temperature sensor reporting once a second; oxygen readings
carry their measurement uncertainty as an annotation. 95% of readings are within the
thresholds, as in the paper. The queries are Listing 2 (FILTER) and a BIND variant reporting
the probability, evaluated at COMPUTED EVERY PT4S instants after the windows fill.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyoxigraph as ox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import PREFIXES, Table, iso, machine, publish  # noqa: E402

from rspstar.endpoint.engine.evaluation import QueryEvaluator  # noqa: E402
from rspstar.endpoint.engine.r2r import FilterPlacement  # noqa: E402
from rspstar.endpoint.engine.sharing import ConstantGroups  # noqa: E402
from rspstar.translator.options import QueryOptions  # noqa: E402
from rspstar.store.stream_store import StreamStore  # noqa: E402
from rspstar.translator.temporal import parse_instant  # noqa: E402
from rspstar.translator.uncertainty import FunctionLibrary  # noqa: E402
from rspstar.translator.validate import compile_query  # noqa: E402
from rspstar.translator.policy import report_policy  # noqa: E402

HEADER = """PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX rspu: <http://w3id.org/rsp/rspu#>
PREFIX ex: <http://example.org/>
REGISTER STREAM ex:warning/tvs COMPUTED EVERY PT4S AS
"""
WINDOWS = """FROM NAMED WINDOW ex:w1 ON ex:stream/oxygen [RANGE PT10S STEP PT1S]
FROM NAMED WINDOW ex:w2 ON ex:stream/temperature [RANGE PT10S STEP PT1S]
"""
LISTING_2 = HEADER + "SELECT ?location ?oxValue ?tempValue\n" + WINDOWS + """WHERE {
  WINDOW ex:w1 { GRAPH ?g1 {
      ?o1 sosa:hasSimpleResult ?oxValue ; sosa:hasFeatureOfInterest ?location .
      << ?o1 sosa:hasSimpleResult ?oxValue >> rspu:uncertainty ?unc .
      FILTER(rspu:lessThan(rspu:add(?unc, ?oxValue), 0.18) >= 0.80) } }
  WINDOW ex:w2 { GRAPH ?g2 {
      ?o2 sosa:hasSimpleResult ?tempValue ; sosa:hasFeatureOfInterest ?location .
      FILTER(?tempValue > 30) } }
}"""
BIND_VARIANT = HEADER + "SELECT ?location ?oxValue ?tempValue ?p\n" + WINDOWS + """WHERE {
  WINDOW ex:w1 { GRAPH ?g1 {
      ?o1 sosa:hasSimpleResult ?oxValue ; sosa:hasFeatureOfInterest ?location .
      << ?o1 sosa:hasSimpleResult ?oxValue >> rspu:uncertainty ?unc .
      BIND(rspu:add(?unc, ?oxValue) AS ?d)
      BIND(rspu:lessThan(?d, 0.18) AS ?p)
      BIND(rspu:greaterThan(?d, 0.21) AS ?high) } }
  WINDOW ex:w2 { GRAPH ?g2 {
      ?o2 sosa:hasSimpleResult ?tempValue ; sosa:hasFeatureOfInterest ?location .
      FILTER(?tempValue > 30) } }
}"""
START = parse_instant("2026-03-01T08:00:00Z")
SECONDS = 30


def tvs_streams(sectors: int, seconds: int, seed: int = 2, per_second: int = 1,
                hot: float = 0.05) -> tuple[str, str]:
    """Oxygen (annotated with N(0, σ²) uncertainty) and temperature TriG streams: `per_second`
    readings per sensor per second, a fraction `hot` of temperatures above 30 °C. The default
    makes the joins of Listing 2 selective; per_second=2, hot=0.09 is what the simulator emits
    (the joins then multiply rows)."""
    rng = random.Random(seed)
    oxygen, temperature = [PREFIXES], [PREFIXES]
    t0 = START // 1_000_000
    for tick in range(seconds * per_second):
        stamp = iso(t0, tick * 1000 // per_second)
        for sector in range(sectors):
            value = round(rng.uniform(0.172, 0.178) if rng.random() < 0.05 else rng.uniform(0.185, 0.21), 4)
            variance = round(rng.uniform(1e-6, 2e-5), 8)
            oxygen.append('ex:ox-%d-%d prov:generatedAtTime "%s"^^xsd:dateTime .\nex:ox-%d-%d { ex:oxo-%d-%d '
                          'sosa:hasSimpleResult %s {| rspu:uncertainty "N(0, %s)"^^rspu:distribution |} ; '
                          'sosa:hasFeatureOfInterest ex:sector%d . }\n'
                          % (sector, tick, stamp, sector, tick, sector, tick, value, variance, sector))
            temp = round(rng.uniform(30.5, 35) if rng.random() < hot else rng.uniform(15, 29), 2)
            temperature.append('ex:t-%d-%d prov:generatedAtTime "%s"^^xsd:dateTime .\nex:t-%d-%d { ex:to-%d-%d '
                               'sosa:hasSimpleResult %s ; sosa:hasFeatureOfInterest ex:sector%d . }\n'
                               % (sector, tick, stamp, sector, tick, sector, tick, temp, sector))
    return "".join(oxygen), "".join(temperature)


class MonteCarloLibrary(FunctionLibrary):
    """The RSPU prototype's approach: probabilities from 10,000 samples (about ±0.005 at
    p = 0.5), for the same calls. Only N and U and sums of them with numbers are needed here."""

    SAMPLES = 10_000

    def __init__(self, cache: bool = True):
        self.rng = np.random.default_rng(0)
        super().__init__(cache=cache, operations={"lessThan": ("dv", self._mc_less),
                                                  "greaterThan": ("dv", self._mc_greater)})

    def _samples(self, d):
        draws = self.rng.normal(d.mu, np.sqrt(d.variance), self.SAMPLES) if d.variance else np.zeros(self.SAMPLES)
        for a, b in d.uniforms:
            draws = draws + self.rng.uniform(a, b, self.SAMPLES)
        return draws

    def _mc_less(self, d, x):
        return float(np.mean(self._samples(d) < x))

    def _mc_greater(self, d, x):
        return float(np.mean(self._samples(d) > x))


def load(sectors: int, **profile) -> StreamStore:
    oxygen, temperature = tvs_streams(sectors, SECONDS, **profile)
    store = StreamStore()
    for stream, data in (("http://example.org/stream/oxygen", oxygen),
                         ("http://example.org/stream/temperature", temperature)):
        result = store.documents.stage(stream, data.encode(), ox.RdfFormat.TRIG, stream)
        store.publish(stream, result.staged)
    return store


class AlwaysDeferred(FilterPlacement):
    """H4 on every evaluation (the engine keeps it only while it saves calls)."""

    def next(self) -> bool:
        return True


def measure(store: StreamStore, text: str, options: QueryOptions, library=None,
            always_deferred: bool = False) -> tuple[float, float, float, int]:
    """(median ms per evaluation, calls per evaluation, computed per evaluation, rows)."""
    query = compile_query(text)
    evaluator = QueryEvaluator(query, store, options, library)
    compiled = evaluator.r2r.compiled
    if always_deferred and compiled.placement is not None:
        compiled.placement = AlwaysDeferred()
    times, rows = [], 0
    instants = report_policy(query).fixed_instants(START + 8 * 1_000_000, START + SECONDS * 1_000_000)
    for instant in instants:
        started = time.perf_counter()
        evaluation = evaluator.evaluate(instant)
        times.append(time.perf_counter() - started)
        rows += len(evaluation.rows)
    counts = evaluator.functions.counts
    n = len(instants)
    return statistics.median(times) * 1000, counts.calls / n, counts.computed / n, rows


CONFIGURATIONS = [
    ("all on", QueryOptions()),
    ("all on, H4 on every evaluation", QueryOptions()),
    ("cache off", QueryOptions(rspu_cache=False)),
    ("lazy off", QueryOptions(lazy_bind=False)),
    ("H4 off", QueryOptions(h4=False)),
    ("fusion off", QueryOptions(fuse_rspu=False)),
    ("all off", QueryOptions(rspu_cache=False, lazy_bind=False, h4=False, fuse_rspu=False)),
]


PROFILES = {
    "selective": ({}, "readings once a second, 5% of temperatures above 30 °C"),
    "simulator": ({"per_second": 2, "hot": 0.09}, "as the simulator emits them: twice a second, 9% above 30 °C"),
}


def run(sector_counts: list[int], profile: str = "selective") -> str:
    out = ["Machine: %s\n" % machine()]
    settings, description = PROFILES[profile]
    for sectors in sector_counts:
        store = load(sectors, **settings)
        table = Table("TVS, %d sectors (%d observations/s; %s), COMPUTED EVERY PT4S over RANGE 10 s windows"
                      % (sectors, 2 * sectors * settings.get("per_second", 1), description),
                      ["query", "configuration", "ms / evaluation", "calls / evaluation",
                       "computed / evaluation", "result rows", "ratio to all on"])
        for label, text in (("Listing 2 (FILTER)", LISTING_2), ("BIND variant", BIND_VARIANT)):
            baseline = None
            for name, options in CONFIGURATIONS:
                ms, calls, computed, rows = measure(store, text, options, always_deferred="every" in name)
                baseline = baseline or ms
                table.add(label, name, ms, round(calls), round(computed), rows, "%.2f" % (ms / baseline))
            mc = MonteCarloLibrary()
            ms, calls, computed, rows = measure(store, text, QueryOptions(), mc)
            table.add(label, "all on, 10k-sample Monte Carlo", ms, round(calls), round(computed), rows,
                      "%.2f" % (ms / baseline))
        out.append(table.markdown())
    return "\n".join(out)


VARIANT_THRESHOLDS = [(0.80, 30), (0.90, 31), (0.70, 29), (0.95, 32), (0.85, 30), (0.75, 33), (0.60, 28), (0.99, 31)]


def run_variants(count: int, sectors: int = 1000) -> str:
    """`count` variants of Listing 2 with other probability and temperature thresholds, each
    evaluated at the COMPUTED EVERY instants, with their windows' blocks shared (queries
    differing only in constants evaluate each range together) and each alone; the simulator's
    data profile, watermarks past the data (so ranges are evaluated incrementally)."""
    texts = [LISTING_2.replace(">= 0.80", ">= %s" % p).replace("> 30", "> %d" % t)
             for p, t in VARIANT_THRESHOLDS[:count]]
    store = load(sectors, **PROFILES["simulator"][0])
    for stream in ("http://example.org/stream/oxygen", "http://example.org/stream/temperature"):
        store.advance_watermark(stream, START + (SECONDS + 1) * 1_000_000)
    instants = report_policy(compile_query(texts[0])).fixed_instants(START + 8 * 1_000_000, START + SECONDS * 1_000_000)
    table = Table("Listing 2 variants with other thresholds, %d sectors (simulator's profile), %d evaluations each"
                  % (sectors, len(instants)), ["variants", "blocks shared (s)", "each alone (s)", "ratio", "same rows"])
    for n in sorted({1, count}):
        seconds, rows = {}, {}
        for mode in ("shared", "alone"):
            groups = ConstantGroups() if mode == "shared" else None
            evaluators = [QueryEvaluator(compile_query(t), store, groups=groups) for t in texts[:n]]
            started = time.perf_counter()
            rows[mode] = [sorted(tuple(sorted(r.items())) for r in e.evaluate(instant).rows)
                          for instant in instants for e in evaluators]
            seconds[mode] = time.perf_counter() - started
        table.add(n, "%.2f" % seconds["shared"], "%.2f" % seconds["alone"], "%.2fx" % (seconds["alone"] / seconds["shared"]),
                  "yes (%d)" % sum(map(len, rows["shared"])) if rows["shared"] == rows["alone"] else "NO")
    return "Machine: %s\n\n%s" % (machine(), table.markdown())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sectors", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="selective")
    parser.add_argument("--variants", type=int, choices=range(2, len(VARIANT_THRESHOLDS) + 1),
                        help="instead: this many Listing 2 variants, shared and alone (bench/out/listing2_variants.md)")
    args = parser.parse_args()
    if args.variants:
        publish("listing2_variants", run_variants(args.variants))
        return
    text = run(args.sectors, args.profile)
    publish("uncertainty_tvs", text)


if __name__ == "__main__":
    main()
