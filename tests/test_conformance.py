"""Every case under ../shared/conformance/cases, through `rspstar replay`, compared with the
shared rules of compare.py. A case added there later is picked up with no code change."""
import json

import pytest

from conftest import compare_lines, conformance_cases, shared_dir
from endpoint.cli import main

CASES = shared_dir() / "conformance" / "cases"


def _cases():
    return [p.name for p in conformance_cases()]


def test_the_conformance_suite_is_present():
    assert CASES.is_dir(), "conformance cases not found at %s (set RSPSTAR_SHARED)" % CASES
    assert len(_cases()) >= 15


def replay_arguments(case_dir, manifest, out):
    args = ["replay", str(case_dir / manifest["query"])]
    for iri, file in manifest["streams"].items():
        args += ["--stream", "%s=%s" % (iri, case_dir / file)]
    if manifest.get("background"):
        args += ["--background", str(case_dir / manifest["background"])]
    args += ["--from", manifest["from"], "--to", manifest["to"], "--out", str(out)]
    for key, value in (manifest.get("options") or {}).items():
        args += ["--option", "%s=%s" % (key, value)]
    return args


@pytest.mark.parametrize("case", _cases())
def test_conformance_case(case, tmp_path):
    case_dir = CASES / case
    manifest = json.loads((case_dir / "manifest.json").read_text())
    out = tmp_path / "actual.jsonl"
    assert main(replay_arguments(case_dir, manifest, out)) == 0
    expected = [json.loads(l) for l in (case_dir / manifest["expected"]).read_text().splitlines() if l.strip()]
    actual = [json.loads(l) for l in out.read_text().splitlines() if l.strip()]
    problems = compare_lines(expected, actual, manifest.get("ordered", False))
    assert not problems, "\n".join(problems[:10])
