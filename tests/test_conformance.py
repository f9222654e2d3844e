"""Every case of the repository's conformance suite (tests/conformance, a copy of
../shared/conformance plus the project's own cases), through `rspstar replay`, compared with
the suite's rules in compare.py."""
import json

import pytest

from conftest import CONFORMANCE, compare_lines, conformance_cases, shared_dir
from endpoint.cli import main

CASES = CONFORMANCE / "cases"


def _cases():
    return [p.name for p in conformance_cases()]


def test_the_conformance_suite_is_present():
    assert len(_cases()) >= 15
    assert (CONFORMANCE / "compare.py").is_file()


def test_the_suite_holds_every_shared_case_unchanged():
    # Where ../shared/conformance is beside the checkout (CI lays it out so), a case or file
    # added or changed there and not copied here fails; with nothing beside it, nothing differs.
    shared = shared_dir() / "conformance"
    problems = []
    for path in sorted(p for p in shared.rglob("*") if p.is_file()) if shared.is_dir() else []:
        ours = CONFORMANCE / path.relative_to(shared)
        if not ours.is_file():
            problems.append("missing here: %s" % ours.relative_to(CONFORMANCE))
        elif ours.read_bytes() != path.read_bytes():
            problems.append("differs from %s: %s" % (path, ours.relative_to(CONFORMANCE)))
    assert not problems, "copy ../shared/conformance into tests/conformance:\n" + "\n".join(problems)


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


@pytest.mark.parametrize("incremental", ["true", "false"])
@pytest.mark.parametrize("case", _cases())
def test_conformance_case(case, incremental, tmp_path):
    # Incremental evaluation (the default, where a query allows it) and evaluating every window
    # from scratch must both give the expected results.
    case_dir = CASES / case
    manifest = json.loads((case_dir / "manifest.json").read_text())
    out = tmp_path / "actual.jsonl"
    assert main(replay_arguments(case_dir, manifest, out) + ["--option", "incremental=%s" % incremental]) == 0
    expected = [json.loads(l) for l in (case_dir / manifest["expected"]).read_text().splitlines() if l.strip()]
    actual = [json.loads(l) for l in out.read_text().splitlines() if l.strip()]
    problems = compare_lines(expected, actual, manifest.get("ordered", False))
    assert not problems, "\n".join(problems[:10])
