"""A window kind is one class (translator/windows.py) plus one parser clause: the rest of the
engine asks the window, never which kind it is (docs/design.md, "Adding a window kind")."""
import ast

import pytest

from conftest import REPO
from rspstar.translator.parser import parse_query
from rspstar.translator.windows import Window

KINDS = Window.__subclasses__()

# One declaration of each kind, as the parser's clause for it reads it.
DECLARED = {
    "TimeWindow": "[RANGE PT10S STEP PT5S]",
    "CountWindow": "[ELEMS 3 STEP 2]",
    "PartitionedWindow": "[ELEMS 1 PARTITION BY <http://example.org/sensor>]",
    "LandmarkWindow": "[RANGE UNBOUNDED STEP PT10S]",
    "FactWindow": "[FACTS { ?u <http://example.org/in> ?r } SINCE { ?u <http://example.org/enters> ?r } "
                  "TILL { ?u <http://example.org/leaves> ?r }]",
}


def test_no_module_asks_a_window_which_kind_it_is():
    names = {kind.__name__ for kind in KINDS} | {"Window"}
    asked = []
    for layer in ("translator", "config", "store", "endpoint"):
        for path in (REPO / layer).rglob("*.py"):
            if path == REPO / "translator" / "windows.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                    named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                    if named & names:
                        asked.append("%s:%d" % (path.relative_to(REPO), node.lineno))
    assert asked == []


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.__name__)
def test_every_kind_answers_what_a_window_is_asked(kind):
    # What Window leaves to each kind: the methods it declares by raising NotImplementedError.
    required = [name for name, member in vars(Window).items()
                if "NotImplementedError" in getattr(getattr(member, "__code__", None), "co_names", ())]
    assert required, "Window declares the reads every kind must answer"
    missing = [name for name in required if getattr(kind, name) is getattr(Window, name)]
    assert missing == []


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.__name__)
def test_every_kind_has_its_parser_clause(kind):
    assert kind.__name__ in DECLARED, "a new kind of window comes with a declaration its parser clause reads"
    query = parse_query("SELECT * FROM NAMED WINDOW <http://example.org/w> ON <http://example.org/s> %s "
                        "WHERE { WINDOW <http://example.org/w> { ?s ?p ?o } }" % DECLARED[kind.__name__])
    window = query.windows["http://example.org/w"]
    assert type(window) is kind and window.stream == "http://example.org/s"
