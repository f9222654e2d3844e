"""The house: the layers form a line, translator at the bottom, store above it, endpoint on
top, and nothing imports against it; pyspark is imported by the Spark ingestion only."""
import ast

import pytest

from conftest import REPO

LAYERS = ["translator", "store", "endpoint"]


def imports(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_imports_only_the_layers_below_it(layer):
    above = LAYERS[LAYERS.index(layer) + 1:]
    wrong = sorted("%s imports %s" % (path.relative_to(REPO), name)
                   for path in (REPO / layer).rglob("*.py") for name in imports(path)
                   if name.split(".")[0] in above)
    assert not wrong


def test_pyspark_is_imported_by_the_spark_ingestion_only():
    importers = sorted(str(path.relative_to(REPO)) for layer in LAYERS for path in (REPO / layer).rglob("*.py")
                       if any(name.split(".")[0] in ("pyspark", "py4j") for name in imports(path)))
    assert importers == ["store/ingestion.py"]
