import os
from pathlib import Path

import pyoxigraph as ox
import pytest

from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import Runner, EngineConfig
from rspstar.endpoint.http import HttpSettings, create_app
from http_app import BACKGROUND, T0, TOKEN
from rspstar.store.stream_store import StreamStore

REPO = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """`../shared` beside the checkout (as CI lays it out), or RSPSTAR_SHARED."""
    return Path(os.environ.get("RSPSTAR_SHARED", REPO.parent / "shared"))


# Markers of runs too long for the default one, collected only when the -m expression names
# them: the differential test's long run (tens of thousands of examples: pytest -m
# differential_long) and the runs to completion however long (pytest -m exhaustive). A run
# selecting by another marker (-m "not slow") leaves them out too, where an `-m 'not
# exhaustive'` among the default options would be replaced by it.
ONLY_WHEN_NAMED = ("differential_long", "exhaustive")


def pytest_collection_modifyitems(config, items):
    expression = config.getoption("markexpr") or ""
    for marker in ONLY_WHEN_NAMED:
        if marker in expression:
            continue
        deselected = [item for item in items if item.get_closest_marker(marker)]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if not item.get_closest_marker(marker)]


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


def live_options(manifest: dict) -> dict:
    """A case's query options for a live engine: the case's own, and the streams a replay would
    give (an EP-SPARQL query naming no stream reads them, spec 6.12)."""
    return {"streams": " ".join(manifest["streams"]), **(manifest.get("options") or {})}


def compare_lines(expected, actual, ordered):
    """The suite's comparison rules (conformance/compare.py)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("conformance_compare", CONFORMANCE / "compare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compare_lines(expected, actual, ordered)


# The HTTP tests' engine (background data, a virtual clock) and a client of the app with a
# token, CORS for one origin and a landing directory.
@pytest.fixture
def engine(tmp_path):
    store = StreamStore()
    store.background.load(BACKGROUND, ox.RdfFormat.TRIG, "bg.trig")
    return Runner(store, VirtualClock(T0), EngineConfig(data_dir=tmp_path, allowed_sinks=["http://localhost:9"],
                                                      max_delay=0))


@pytest.fixture
def client(engine, tmp_path):
    app = create_app(engine, HttpSettings(token=TOKEN, cors_origins=["http://dash.test"], max_body=4096,
                                          query_timeout=5, landing_dir=tmp_path / "landing"),
                     ingestion_status=lambda: {"landing": {"quarantined": {"http://example.org/s": 2}, "active": True}})
    return app.test_client()
