"""The peer corpus (issue 43): conformance cases made from the public query sets of the engines
the seeds cite, each with its source named in its README. The conformance suite replays them
through the engine (test_conformance.py); here their expected results are checked to be what
the differential test's naive reference gives (tests/differential/corpus.py), so that no
expected file was written from the engine's own output."""
import json
import re

import pytest

from conftest import CONFORMANCE, compare_lines
from differential.corpus import records

PEER = sorted(p for p in (CONFORMANCE / "cases").iterdir() if (p / "reference.json").is_file())


def test_the_corpus_holds_the_rspu_and_rspql_star_engines_queries():
    names = [p.name for p in PEER]
    assert sum(name.startswith("tvs-") for name in names) >= 5
    assert any(name.startswith("ehealth-") for name in names)


@pytest.mark.parametrize("case", PEER, ids=lambda p: p.name)
def test_a_peer_case_expects_what_the_reference_gives_and_names_its_source(case):
    manifest = json.loads((case / "manifest.json").read_text())
    expected = [json.loads(line) for line in (case / manifest["expected"]).read_text().splitlines() if line]
    assert not compare_lines(records(case), expected, manifest.get("ordered", False))
    assert any(record["bindings"] for record in expected)        # the slice answers something
    readme = (case / "README.md").read_text()
    assert re.search(r"Source: .*https://github\.com/keski/\w+", readme) and "## Changes to the query" in readme
