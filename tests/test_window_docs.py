"""The examples of docs/language.md's sections on partitioned, landmark and fact windows run as
written and answer what the page says."""
import re

import pytest

from conftest import REPO
from rspstar.endpoint.cli import main

SECTIONS = {
    "## Partitioned windows": ("http://example.org/readings", "2026-03-01T08:00:00Z", "2026-03-01T08:00:03Z",
                               [("08:00:01Z", {("t1", "20.5")}), ("08:00:02Z", {("t1", "20.5"), ("t2", "19.5")}),
                                ("08:00:03Z", {("t1", "21.5"), ("t2", "19.5")})]),
    "## Landmark windows": ("http://example.org/doors", "2026-03-01T00:00:00Z", "2026-03-01T02:00:00Z",
                            [("01:00:00Z", {("front", "1"), ("back", "1")}), ("02:00:00Z", {("front", "2"), ("back", "1")})]),
    "## Fact windows": ("http://example.org/fb", "2026-03-01T08:00:00Z", "2026-03-01T08:00:10Z",
                        [("08:00:03Z", {("RoomA", "2")}), ("08:00:06Z", {("RoomA", "1"), ("RoomB", "1")}),
                         ("08:00:09Z", {("RoomB", "2")})]),
}


def _short(term: str) -> str:
    if term.startswith("<"):
        return term.rsplit("/", 1)[-1][:-1]
    return term.split('"')[1]


@pytest.mark.parametrize("heading", SECTIONS)
def test_the_windows_examples_of_the_language_page_run_as_written(heading, tmp_path):
    import json
    page = (REPO / "docs" / "language.md").read_text(encoding="utf-8")
    section = page.split(heading, 1)[1].split("\n## ", 1)[0]
    query = re.search(r"```sparql\n(.*?)```", section, re.S).group(1)
    data = re.search(r"```trig\n(.*?)```", section, re.S).group(1)
    stream, start, end, expected = SECTIONS[heading]
    assert "--stream %s=" % stream in section.replace("\n", " ")
    (tmp_path / "q.rq").write_text(query)
    (tmp_path / "s.trig").write_text(data)
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(tmp_path / "q.rq"), "--stream", "%s=%s" % (stream, tmp_path / "s.trig"),
                 "--from", start, "--to", end, "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    shown = [(r["time"][-9:], {tuple(sorted(_short(v) for v in row.values())) for row in r["bindings"]})
             for r in records]
    assert shown == [(time, {tuple(sorted(row)) for row in rows}) for time, rows in expected]
