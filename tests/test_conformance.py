"""Every case under ../shared/conformance/cases, through `rspstar replay`, compared with the
shared rules of compare.py. A case added there later is picked up with no code change."""
import importlib.util
import json

import pytest

from conftest import shared_dir
from endpoint.cli import main

CASES = shared_dir() / "conformance" / "cases"


def _compare_module():
    path = shared_dir() / "conformance" / "compare.py"
    spec = importlib.util.spec_from_file_location("conformance_compare", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases():
    return sorted(p.name for p in CASES.iterdir() if (p / "manifest.json").is_file()) if CASES.is_dir() else []


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
    problems = _compare_module().compare_lines(expected, actual, manifest.get("ordered", False))
    assert not problems, "\n".join(problems[:10])
