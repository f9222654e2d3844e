"""Run every benchmark and write their tables to bench/out/RESULTS.md (quoted in README.md).

Run by hand (never part of the test suite): python bench/run_all.py
It needs node and npm (rsp-js is installed into bench/scratch/) and starts a local Spark.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import annotated_vs_reified  # noqa: E402
import compile_once  # noqa: E402
import partitioned  # noqa: E402
import entailment_tvs  # noqa: E402
import eviction  # noqa: E402
import replay_throughput  # noqa: E402
import rsp_js_compare  # noqa: E402
import spark_ingestion  # noqa: E402
import tvs_live  # noqa: E402
import uncertainty_tvs  # noqa: E402
from common import machine, publish  # noqa: E402


def main() -> None:
    sections = ["# rspstar benchmarks", "", "Machine: %s" % machine(), "",
                replay_throughput.run(100_000).markdown(), compile_once.run().markdown(), eviction.run().markdown(),
                uncertainty_tvs.run([10, 100, 1000]), uncertainty_tvs.run([1000], "simulator"),
                entailment_tvs.run([10, 100, 1000], False),
                rsp_js_compare.run(1000, 100), annotated_vs_reified.run(), spark_ingestion.throughput(100_000),
                tvs_live.run(90), tvs_live.run_sensors(60), partitioned.run(1000, 30),
                "The soak benchmarks run separately: python bench/spark_ingestion.py soak, python bench/serve_soak.py, python bench/serve_memory.py and python bench/mqtt_ingestion.py (see docs/performance.md)."]
    text = "\n".join(sections)
    publish("RESULTS", text)


if __name__ == "__main__":
    main()
