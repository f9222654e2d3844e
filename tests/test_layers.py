"""The house: the layers form a line, translator at the bottom, the settings (config) above it,
then store, endpoint on top, and nothing imports against it; pyspark is imported by the Spark
ingestion only. Every import is read, absolute (`rspstar.store...`) or relative (`..store`)."""
import ast

import pytest

from conftest import REPO

LAYERS = ["translator", "config", "store", "endpoint"]


def imports(path, text=None):
    """The modules a file imports, as absolute names (rspstar.x.y, or a third party's)."""
    package = ["rspstar"] + list(path.relative_to(REPO).parent.parts)
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                yield node.module or ""
            else:
                base = package[:len(package) - (node.level - 1)]
                yield ".".join(base + ([node.module] if node.module else []))


def layer_of(name):
    parts = name.split(".")
    return parts[1] if parts[0] == "rspstar" and len(parts) > 1 else None


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_imports_only_the_layers_below_it(layer):
    above = LAYERS[LAYERS.index(layer) + 1:]
    wrong = sorted("%s imports %s" % (path.relative_to(REPO), name)
                   for path in (REPO / layer).rglob("*.py") for name in imports(path)
                   if layer_of(name) in above)
    assert not wrong


def test_no_part_imports_the_old_top_level_names():
    # translator, store, endpoint are importable only as rspstar.translator, ... (pip installs
    # nothing else at the top level).
    wrong = sorted("%s imports %s" % (path.relative_to(REPO), name)
                   for folder in LAYERS + ["tests", "bench", "tools"] for path in (REPO / folder).rglob("*.py")
                   for name in imports(path) if name.split(".")[0] in LAYERS)
    assert not wrong


def test_the_layer_check_sees_relative_imports():
    text = "from ..engine import Engine\nfrom . import context\nfrom ...store.errors import StoreError\n"
    assert list(imports(REPO / "endpoint" / "http" / "x.py", text)) == [
        "rspstar.endpoint.engine", "rspstar.endpoint.http", "rspstar.store.errors"]
    assert layer_of("rspstar.endpoint.engine") == "endpoint" and layer_of("pyoxigraph") is None


def test_pyspark_is_imported_by_the_spark_ingestion_only():
    importers = sorted(str(path.relative_to(REPO)) for layer in LAYERS for path in (REPO / layer).rglob("*.py")
                       if any(name.split(".")[0] in ("pyspark", "py4j") for name in imports(path)))
    assert importers == ["store/ingestion.py"]


DOORS = ("rspstar.endpoint.http", "rspstar.endpoint.cli", "rspstar.endpoint.serve", "rspstar.endpoint.api",
         "rspstar.endpoint.config", "rspstar.endpoint.adhoc")


def test_the_engine_imports_no_door():
    # The engine (runner, scheduler, evaluation, R2S, sinks) is driven by the doors, never the
    # other way round: a door can be added or replaced without touching it.
    wrong = sorted("%s imports %s" % (path.relative_to(REPO), name)
                   for path in (REPO / "endpoint" / "engine").rglob("*.py") for name in imports(path)
                   if any(name == door or name.startswith(door + ".") for door in DOORS))
    assert not wrong
