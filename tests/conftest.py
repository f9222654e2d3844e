import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """`../shared` beside the checkout (as CI lays it out), or RSPSTAR_SHARED."""
    return Path(os.environ.get("RSPSTAR_SHARED", REPO.parent / "shared"))


@pytest.fixture
def write(tmp_path):
    """Write a text file under tmp_path and return its path."""
    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path
    return _write


# The repository's own copy of the conformance suite (test_conformance.py keeps it equal to
# ../shared/conformance wherever that is present).
CONFORMANCE = REPO / "tests" / "conformance"


def conformance_cases() -> list[Path]:
    return sorted(p for p in (CONFORMANCE / "cases").iterdir() if (p / "manifest.json").is_file())


def compare_lines(expected, actual, ordered):
    """The suite's comparison rules (conformance/compare.py)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("conformance_compare", CONFORMANCE / "compare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compare_lines(expected, actual, ordered)
