"""The documentation: every relative link in README.md and docs/ resolves (to a file, and to a
heading where it names one), the specification's copy equals the shared one wherever that is
beside the checkout, and the README stays a front door."""
import re

import pytest

from conftest import REPO, shared_dir

PAGES = [REPO / "README.md"] + sorted((REPO / "docs").rglob("*.md")) + sorted((REPO / "bench" / "out").glob("*.md"))
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path):
    """GitHub's anchors of a Markdown file's headings."""
    found = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^#{1,6} (.*)", line)
        if m:
            text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower().replace("`", ""))
            found.add(text.replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    broken = []
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target in _LINK.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#") and not target[1:]:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(target)
    assert not broken, "%s: %s" % (page.relative_to(REPO), broken)


def test_the_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Title\n[ok](p.md#title) [gone](missing.md) [bad anchor](p.md#nothing)\n")
    text = page.read_text()
    targets = _LINK.findall(text)
    assert targets == ["p.md#title", "missing.md", "p.md#nothing"]
    assert "title" in anchors(page) and "nothing" not in anchors(page)


def test_the_specification_copy_equals_the_shared_one():
    shared = shared_dir() / "spec"
    problems = []
    for path in sorted(shared.glob("*.md")) if shared.is_dir() else []:
        ours = REPO / "docs" / "spec" / path.name
        if not ours.is_file() or ours.read_bytes() != path.read_bytes():
            problems.append(path.name)
    assert not problems, "copy ../shared/spec into docs/spec: %s" % problems


def test_the_readme_is_a_front_door():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300
    assert max(len(line) for line in lines) <= 140
    text = "\n".join(lines)
    for page in ("docs/configuration.md", "docs/http-api.md", "docs/language.md", "docs/performance.md",
                 "docs/python-api.md", "docs/partitioned-queries.md", "docs/replay.md", "docs/uncertainty.md",
                 "docs/design.md", "docs/references.md"):
        assert "(%s)" % page in text, page


def shown(setting) -> str:
    """A setting's default as the limits table (docs/running.md) writes it."""
    from rspstar.config.schema import MIB
    value = setting.default
    if getattr(setting.kind, "unit", None) == "bytes":
        return "%d MiB" % (value // MIB)
    if isinstance(value, float) and setting.key not in ("max_reports_per_second", "max_load"):
        return "%g s" % value
    if isinstance(value, (int, float)):
        return "{:,}".format(int(value)) if value == int(value) else "%g" % value
    return str(value)


def test_the_limits_table_lists_every_limit_with_its_default_and_key():
    # The table lives in docs/running.md; the README links it.
    from rspstar.config.schema import SETTINGS
    assert "(docs/running.md#security-and-limits)" in (REPO / "README.md").read_text(encoding="utf-8")
    text = (REPO / "docs" / "running.md").read_text(encoding="utf-8")
    section = text.split("## Security and limits", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\| .* \| (.*) \| `\[(\w+)\] (\w+)` \|$", line)
        if m:
            rows[(m.group(2), m.group(3))] = m.group(1)
    limits = [s for s in SETTINGS if s.table in ("http", "recording", "quarantine")
              and s.key not in ("host", "port", "token", "cors_origins", "base_iri")]
    limits += [s for s in SETTINGS if s.table == "engine" and (s.key.startswith(("max_", "min_", "history"))
                                                                and s.key != "max_delay")]
    missing = [s.name for s in limits if (s.table, s.key) not in rows]
    assert not missing, "running.md's Security and limits lacks %s" % missing
    wrong = ["%s: %s, not %s" % (s.name, rows[(s.table, s.key)], shown(s)) for s in limits
             if rows[(s.table, s.key)] != shown(s)]
    assert not wrong, wrong


def test_every_configuration_example_in_the_documentation_is_valid(tmp_path):
    """The TOML blocks of the README and docs/ read as configurations, each key known and each
    value of its kind (a renamed or removed setting breaks its examples here)."""
    from rspstar.config.schema import load
    blocks = []
    for page in [REPO / "README.md"] + sorted((REPO / "docs").rglob("*.md")):
        blocks += [(page.name, m.group(1)) for m in re.finditer(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"),
                                                                 re.S)]
    assert len(blocks) >= 3
    for k, (page, text) in enumerate(blocks):
        path = tmp_path / ("%d.toml" % k)
        path.write_text(text, encoding="utf-8")
        try:
            load(path)
        except Exception as e:
            raise AssertionError("%s, TOML example %d: %s" % (page, k, e)) from None


def test_the_performance_page_gives_one_current_figure_per_benchmark_with_its_date_and_machine():
    # A lab log in a table cell (three days of runs in one) reads as history: it lives in
    # bench/out/HISTORY.md, and the page gives each benchmark's last run.
    text = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| ") and not line.startswith(("| ---",
                                                                                                          "| benchmark"))]
    assert len(rows) >= 15
    for row in rows:
        figure = row[2]
        assert re.match(r"^\d{4}-\d{2}-\d{2}, (AMD EPYC|Intel Xeon)", figure), row[0]
        assert len(re.findall(r"\b20\d\d-\d\d-\d\d\b", figure)) == 1, "%s: more than one run's date" % row[0]
    history = (REPO / "bench" / "out" / "HISTORY.md").read_text(encoding="utf-8")
    assert "## docs/performance.md as it read on 2026-11-26" in history


def test_running_md_gives_max_delays_default_as_the_schema_declares_it():
    from rspstar.config.schema import SETTINGS
    from rspstar.translator.temporal import parse_duration
    [setting] = [s for s in SETTINGS if (s.table, s.key) == ("engine", "max_delay")]
    text = (REPO / "docs" / "running.md").read_text(encoding="utf-8")
    assert re.findall(r'`trigger: "max_delay"`, default (\d+) s', text) == ["%d" % (parse_duration(setting.default) // 10**6)]


def test_the_layers_the_docs_name_are_the_ones_the_code_keeps():
    from test_layers import LAYERS
    for page in ("README.md", "docs/design.md"):
        text = (REPO / page).read_text(encoding="utf-8")
        assert "%s layers in a line" % ["One", "Two", "Three", "Four", "Five"][len(LAYERS) - 1] in text, page
        assert all("`%s/`" % layer in text or "`rspstar.%s`" % layer in text for layer in LAYERS), page
        assert not re.search(r"\b(Three|Five) layers\b", text), page


def test_user_documentation_names_the_papers_not_the_seed_files():
    # Readers never saw the files the project was built from: a paper is named by what it is
    # (references.md), not by "seed 002".
    pages = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md")) + sorted((REPO / "config" / "queries").glob("*.rq"))
    mentions = ["%s: %s" % (page.relative_to(REPO), m.group(0)) for page in pages
                for m in re.finditer(r"(?i)\bseeds?\b(?! ?0\d\d-)(?!\d)[^\n]{0,20}", page.read_text(encoding="utf-8"))]
    assert not mentions, mentions


def test_the_mqtt_examples_query_is_shown_and_compiles():
    from rspstar.translator.validate import compile_query
    text = (REPO / "docs" / "running.md").read_text(encoding="utf-8")
    [query] = [m.group(1) for m in re.finditer(r"```sparql\n(.*?)```", text, re.S) if m.group(1).startswith("# hot.rq")]
    compiled = compile_query(query)
    assert compiled.streams == ["http://example.org/stream/sensors"] and compiled.variables == ("sensor", "celsius")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert 'file = "hot.rq"                         # the query: docs/running.md#mqtt' in readme
    assert "sink_empty = false" in readme and "sink_empty = false" in text


def test_the_sections_the_tools_cite_exist():
    # tools/system-setup once sent its reader to a README section that was never written.
    cited = []
    for script in (REPO / "tools" / "system-setup", REPO / "Makefile", REPO / ".ci" / "run"):
        if script.exists():
            cited += re.findall(r'\(((?:docs/)?[\w.-]+\.md|README), "([^"]+)"\)', script.read_text(encoding="utf-8"))
    assert cited, "the scripts cite no section (the check would check nothing)"
    for page, section in cited:
        path = REPO / (page if page.endswith(".md") else page + ".md")
        headings = re.findall(r"^#+ (.*)$", path.read_text(encoding="utf-8"), re.M)
        assert section in headings, "%s has no section %r" % (page, section)


def test_the_query_options_page_is_the_option_table():
    # Declared once (translator/options.py OPTIONS), like the settings: the page is made from
    # the table, and the command line's help and the configuration's [[queries]] options name
    # every option too.
    from rspstar.config.schema import settings_of
    from rspstar.endpoint.cli import build_parser
    from rspstar.translator.options import OPTIONS, markdown
    assert (REPO / "docs" / "query-options.md").read_text(encoding="utf-8") == markdown() + "\n", \
        "docs/query-options.md is generated: python -c 'from rspstar.translator.options import markdown; print(markdown())'"
    assert markdown().count("\n| `") == len(OPTIONS)
    for command in ("replay", "check"):
        [subparsers] = [a for a in build_parser()._actions if a.dest == "command"]
        [option] = [a for a in subparsers.choices[command]._actions if a.dest == "option"]
        assert all("%s=" % o.name in option.help for o in OPTIONS), command
    [queries] = [s for s in settings_of("queries") if s.key == "options"]
    assert all(o.name in queries.help for o in OPTIONS if o.name != "base") and "docs/query-options.md" in queries.help
