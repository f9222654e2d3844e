"""What an evaluation pays to turn a query into SPARQL before Oxigraph sees it: rewriting the
query from its parse (as every evaluation did) against filling the template compiled once at
registration, for the example queries, with 100 and 10,000 elements per window.

Run by hand: python bench/compile_once.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Table, machine, publish  # noqa: E402

from rspstar.translator.rewrite import compile_template, rewrite  # noqa: E402
from rspstar.translator.validate import compile_query  # noqa: E402

QUERIES = Path(__file__).resolve().parents[1] / "config" / "queries"


def per_call(function, repeat: int) -> float:
    started = time.perf_counter()
    for _ in range(repeat):
        function()
    return 1000 * (time.perf_counter() - started) / repeat


def run() -> Table:
    table = Table("Preparing one evaluation's SPARQL (%s)" % machine(),
                  ["query", "elements per window", "rewrite each time (ms)", "fill the template (ms)", "ratio"])
    for path in sorted(QUERIES.glob("*.rq")):
        query = compile_query(path.read_text())
        template = compile_template(query)
        for size in (100, 10_000):
            elements = {w: ["http://example.org/e%d" % k for k in range(size)] for w in query.windows}
            repeat = 2000 if size == 100 else 50
            before = per_call(lambda: rewrite(query, elements, ["http://example.org/bg"]), repeat)
            after = per_call(lambda: template.instantiate(elements, ["http://example.org/bg"]), repeat)
            table.add(path.stem, size, "%.3f" % before, "%.3f" % after, "%.1fx" % (before / after))
    return table


def main() -> None:
    table = run()
    publish("compile_once", table.markdown())


if __name__ == "__main__":
    main()
