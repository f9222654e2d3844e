"""The peer corpus (issues 43 and 59): conformance cases made from the public query sets of the
RSP engines and benchmarks people use, each with its source named in its README. The conformance
suite replays them through the engine (test_conformance.py); here their expected results are
checked to be what the differential test's naive reference gives (tests/differential/corpus.py),
or CSRBench's cases what tests/test_csrbench.py's oracle gives, so that no expected file was
written from the engine's own output; and every file of the corpus index
(tests/conformance/peers/corpus.json) either runs, as a case, or is refused with an error
naming the construct, as the documentation counts them."""
import json
import re

import pytest

from conftest import CONFORMANCE, REPO, compare_lines
from differential.corpus import records
from rspstar.endpoint.cli import _UNLIMITED
from rspstar.translator.admission import admit
from rspstar.translator.errors import TranslatorError

PEER = sorted(p for p in (CONFORMANCE / "cases").iterdir() if (p / "reference.json").is_file())
PEERS = CONFORMANCE / "peers"
CORPUS = json.loads((PEERS / "corpus.json").read_text())


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
    readme = (case / "README.md").read_text()
    assert re.search(r"Source: .*https://github\.com/[\w.-]+/[\w.-]+", readme) and "## Changes to the query" in readme
    empty = [e for e in CORPUS if e.get("case") == case.name and e.get("empty")]
    answered = any(r.get("bindings") or r.get("triples") or "boolean" in r for r in expected)
    # The slice answers something, unless the query answers nothing in its own engine too, as
    # the corpus index and the README say and why.
    assert answered != bool(empty), case.name
    if empty:
        assert empty[0]["empty"] in " ".join(readme.split())


CSRBENCH = sorted(p for p in (CONFORMANCE / "cases").iterdir() if p.name.startswith("csrbench-")
                  and not (p / "reference.json").is_file())


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


# -- the corpus index -------------------------------------------------------------------------------
@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e["file"])
def test_every_file_of_the_corpus_runs_as_a_case_or_is_refused_by_name(entry):
    text = (PEERS / entry["file"]).read_text()
    assert entry["repository"].startswith("https://github.com/") and re.fullmatch(r"[0-9a-f]{40}", entry["commit"])
    assert entry["path"] and entry["licence"]
    if "refused" in entry:
        options = dict(entry.get("options", {}), base=entry.get("base", "http://example.org/peers/"))
        with pytest.raises(TranslatorError) as info:
            admit(text, _UNLIMITED, options)
        assert entry["refused"] in str(info.value)
        return
    case = CONFORMANCE / "cases" / entry["case"]
    readme = (case / "README.md").read_text()
    assert entry["repository"] in readme and entry["commit"] in readme and entry["path"] in readme
    query = (case / json.loads((case / "manifest.json").read_text())["query"]).read_text()
    if entry.get("query", "").startswith("written here"):
        assert entry["path"] in readme
    elif entry.get("changes"):
        assert query != text and all(" ".join(change.split()) in " ".join(readme.split()) for change in entry["changes"])
    else:
        assert query == text


def test_the_documentation_counts_the_corpus():
    runs = [e for e in CORPUS if "case" in e]
    answering = [e for e in runs if not e.get("empty")]
    refused = [e for e in CORPUS if "refused" in e]
    page = " ".join((REPO / "docs" / "peers.md").read_text().split())
    counted = "%d files: %d run with rows, %d run and answer nothing (each for the reason given below), %d refused" % (
        len(CORPUS), len(answering), len(runs) - len(answering), len(refused))
    assert counted in page, counted
    for e in refused:
        assert e["refused"] in page or e["file"] in page
