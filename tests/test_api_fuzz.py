"""Schemathesis against the API's own OpenAPI document, every phase (examples, coverage,
fuzzing, stateful: registrations followed to /queries/{id} through the document's links) and
every check (`--checks all`: no server error, only documented statuses, media types, headers
and bodies, valid requests accepted and invalid ones refused, authentication honoured, deleted
queries gone), against the real server (waitress) in a process of its own. Bounded: a fixed
number of examples per operation, a fixed seed, a time budget."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import served

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parent


@pytest.fixture
def server():
    # Event streams end after 0.3 s here, so the fuzzer reads each to its end.
    process, base, port = served.start(token="t", max_body=65536, event_stream_seconds=0.3, max_event_streams=16,
                                       threads=24)
    yield base
    process.kill()
    process.wait()


def run_schemathesis(server: str, cwd, *arguments: str, timeout: float) -> str:
    """schemathesis with every phase and every check against `server`; its summary."""
    executable = shutil.which("schemathesis", path=os.path.dirname(sys.executable))
    assert executable, "schemathesis is a test dependency"
    done = subprocess.run(
        [executable, "run", server + "/openapi.json", "--checks", "all",
         "--phases", "examples,coverage,fuzzing,stateful", "--header", "Authorization: Bearer t",
         "--seed", "1", "--no-color", "--generation-database", "none", *arguments],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "SCHEMATHESIS_HOOKS": "schemathesis_hooks", "PYTHONPATH": str(TESTS)})
    summary = done.stdout[-6000:]
    assert done.returncode == 0, summary
    for phase in ("Examples", "Coverage", "Fuzzing", "Stateful"):
        assert phase in summary
    assert "0 failures" in summary or " failed" not in summary, summary
    return summary


def test_every_phase_and_check_of_schemathesis_passes(server, tmp_path):
    run_schemathesis(server, tmp_path, "--max-examples", "30", "--request-timeout", "10", timeout=600)


@pytest.mark.exhaustive
def test_schemathesis_run_to_completion_finds_no_server_error_and_no_failing_example(server, tmp_path):
    """Every phase to its end, with 300 examples an operation and no time budget (the run
    continues past a failure, to report them all): no 5xx, every documented example taken."""
    summary = run_schemathesis(server, tmp_path, "--max-examples", "300", "--request-timeout", "30",
                               "--continue-on-failure", timeout=4 * 3600)
    assert "No issues found" in summary, summary
    assert "Server error" not in summary and "5xx" not in summary, summary
