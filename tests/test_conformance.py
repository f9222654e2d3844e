"""Every case of the repository's conformance suite (tests/conformance, a copy of
../shared/conformance plus the project's own cases), through `rspstar replay`, compared with
the suite's rules in compare.py."""
import json

import pytest

from conftest import CONFORMANCE, compare_lines, conformance_cases, shared_dir
from rspstar.endpoint.cli import main
from rspstar.translator.constants import parameterized
from rspstar.translator.incremental import distributive_window
from rspstar.translator.validate import compile_query

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
    assert_replay_gives_expected(case_dir, json.loads((case_dir / "manifest.json").read_text()), tmp_path,
                                 ["--option", "incremental=%s" % incremental])


def assert_replay_gives_expected(case_dir, manifest, tmp_path, extra_arguments=()):
    out = tmp_path / "actual.jsonl"
    assert main(replay_arguments(case_dir, manifest, out) + list(extra_arguments)) == 0
    expected = [json.loads(l) for l in (case_dir / manifest["expected"]).read_text().splitlines() if l.strip()]
    actual = [json.loads(l) for l in out.read_text().splitlines() if l.strip()]
    problems = compare_lines(expected, actual, manifest.get("ordered", False))
    assert not problems, "\n".join(problems[:10])


@pytest.mark.parametrize("case", _cases())
def test_conformance_case_with_its_stream_files_written_in_parts(case, tmp_path, monkeypatch):
    # A replay writes a large stream file part by part while it evaluates; every case's files
    # cut into parts of 64 bytes must give the expected results too.
    import rspstar.store.documents as stream_store
    from rspstar.store.document_parts import document_parts
    from rspstar.store.rdf_input import format_for_path
    case_dir = CASES / case
    manifest = json.loads((case_dir / "manifest.json").read_text())
    assert any(document_parts((case_dir / file).read_bytes(), format_for_path(file), 64)
               for file in manifest["streams"].values())
    monkeypatch.setattr(stream_store, "PART_BYTES", 64)
    assert_replay_gives_expected(case_dir, manifest, tmp_path)


def _with_constants():
    """The cases whose query is evaluated together with queries differing in constants, and
    the copy of it with each numeric literal of its row-wise FILTERs and BINDs scaled by 0.9."""
    found = []
    for case_dir in conformance_cases():
        manifest = json.loads((case_dir / "manifest.json").read_text())
        options = manifest.get("options") or {}
        # The replay's streams: a query naming none (EP-SPARQL, spec 6.12) reads them.
        query = compile_query((case_dir / manifest["query"]).read_text(), dialect=options.get("dialect"),
                              start=options.get("start"),
                              base=options.get("base") or (case_dir / manifest["query"]).resolve().as_uri(),
                              streams=tuple(manifest["streams"]))
        shared = parameterized(query) if distributive_window(query)[0] else None
        text = query.body.source.text
        numbers = [(a, b) for a, b in (shared.spans if shared else ()) if text[a:b][0] in "+-.0123456789"]
        if numbers:
            for a, b in reversed(numbers):
                text = text[:a] + repr(float(text[a:b]) * 0.9) + text[b:]
            found.append(pytest.param(case_dir, text, id=case_dir.name))
    return found


@pytest.mark.parametrize("case_dir,copy", _with_constants())
def test_conformance_case_evaluated_together_with_a_query_differing_in_constants(case_dir, copy, tmp_path):
    # Replayed beside its copy (one evaluation of each range for both), the case gives its
    # expected results and the copy gives what it gives replayed alone.
    manifest = json.loads((case_dir / "manifest.json").read_text())
    (tmp_path / "copy.rspql").write_text(copy)
    args = replay_arguments(case_dir, manifest, tmp_path / "unused.jsonl")
    cut = args.index("--out")
    together = args[:2] + [str(tmp_path / "copy.rspql")] + args[2:cut] + ["--out-dir", str(tmp_path / "together")] + args[cut + 2:]
    assert main(together) == 0
    alone = [args[0], str(tmp_path / "copy.rspql")] + args[2:cut] + ["--out", str(tmp_path / "alone.jsonl")] + args[cut + 2:]
    assert main(alone) == 0
    expected = [json.loads(l) for l in (case_dir / manifest["expected"]).read_text().splitlines() if l.strip()]
    stem = (case_dir / manifest["query"]).stem
    actual = [json.loads(l) for l in (tmp_path / "together" / (stem + ".jsonl")).read_text().splitlines() if l.strip()]
    problems = compare_lines(expected, actual, manifest.get("ordered", False))
    assert not problems, "\n".join(problems[:10])
    copy_together, copy_alone = ([json.loads(l) for l in path.read_text().splitlines() if l.strip()]
                                 for path in (tmp_path / "together" / "copy.jsonl", tmp_path / "alone.jsonl"))
    assert not compare_lines(copy_alone, copy_together, manifest.get("ordered", False))
    assert copy_together != actual
