"""The peer corpus (issue 43): conformance cases made from the public query sets of the engines
the seeds cite, each with its source named in its README. The conformance suite replays them
through the engine (test_conformance.py); here their expected results are checked to be what
the differential test's naive reference gives (tests/differential/corpus.py), or CSRBench's
cases what tests/test_csrbench.py's oracle gives, so that no expected file was written from the
engine's own output."""
import json
import re

import pytest

from conftest import CONFORMANCE, compare_lines
from differential.corpus import records

PEER = sorted(p for p in (CONFORMANCE / "cases").iterdir() if (p / "reference.json").is_file())


def test_the_corpus_holds_the_rspu_and_rspql_star_engines_and_csrbenchs_queries():
    names = [p.name for p in PEER]
    assert sum(name.startswith("tvs-") for name in names) >= 5
    assert any(name.startswith("ehealth-") for name in names)
    assert len(CSRBENCH) >= 3


@pytest.mark.parametrize("case", PEER, ids=lambda p: p.name)
def test_a_peer_case_expects_what_the_reference_gives_and_names_its_source(case):
    manifest = json.loads((case / "manifest.json").read_text())
    expected = [json.loads(line) for line in (case / manifest["expected"]).read_text().splitlines() if line]
    assert not compare_lines(records(case), expected, manifest.get("ordered", False))
    assert any(record["bindings"] for record in expected)        # the slice answers something
    readme = (case / "README.md").read_text()
    assert re.search(r"Source: .*https://github\.com/keski/\w+", readme) and "## Changes to the query" in readme


CSRBENCH = sorted(p for p in (CONFORMANCE / "cases").iterdir() if p.name.startswith("csrbench-"))


@pytest.mark.parametrize("case", CSRBENCH, ids=lambda p: p.name)
def test_a_csrbench_case_expects_what_the_benchmarks_oracle_gives_over_its_slice(case, monkeypatch):
    import test_csrbench
    from rspstar.translator.temporal import format_instant
    manifest = json.loads((case / "manifest.json").read_text())
    dialect, query = case.name.split("-")[1:]
    full = test_csrbench.data_files()
    monkeypatch.setattr(test_csrbench, "data_files", lambda: {s: p for s, p in full.items() if 14 <= s <= 18})
    monkeypatch.setattr(test_csrbench, "TO", 24 * test_csrbench.S)
    oracle = [{"time": format_instant(t), "bindings": rows} for t, rows in test_csrbench.oracle(query, dialect)]
    expected = [json.loads(line) for line in (case / manifest["expected"]).read_text().splitlines() if line]
    assert not compare_lines(oracle, expected, False) and any(r["bindings"] for r in expected)
    assert (case / "query.rq").read_text() == (test_csrbench.BENCH / dialect / ("%s.rq" % query)).read_text()
    assert "https://github.com/dellaglio/csrbench-oracle" in (case / "README.md").read_text()
