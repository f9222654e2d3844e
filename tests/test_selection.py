"""The runs the documentation names select what it says: `pytest -m "not slow"` (README.md's quick
run) leaves out the runs to completion however long and the differential test's long run as
the default run does, and naming their marker runs them."""
import subprocess
import sys

import pytest

from conftest import REPO

FILES = ["tests/test_api_fuzz.py", "tests/test_parser_limits.py", "tests/test_differential.py"]
LONG = ("test_schemathesis_run_to_completion", "test_the_measured_costs_still_hold", "test_the_long_differential_run")


def collected(*options: str) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           *options, *FILES], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


@pytest.mark.parametrize("options", [(), ("-m", "not slow")], ids=["default", "not slow"])
def test_the_long_runs_are_left_out_unless_their_marker_is_named(options):
    tests = collected(*options)
    assert tests and not [t for t in tests if any(name in t for name in LONG)]


def test_naming_the_marker_runs_the_exhaustive_tests():
    tests = collected("-m", "exhaustive")
    assert any("test_schemathesis_run_to_completion" in t for t in tests)
    assert any("test_the_measured_costs_still_hold" in t for t in tests)
    assert any("test_the_long_differential_run" in t for t in collected("-m", "differential_long"))
