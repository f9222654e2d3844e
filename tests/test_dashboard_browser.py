"""The dashboard in headless Chromium (Debian's `chromium`, installed by tools/system-setup)
against a running server: a registered query's results appear with distributions written as a
person reads them, the plotly charts draw (values with their bands, results per evaluation,
close-to-result latency) and break their lines where evaluations gave nothing, the queries
table fits a 1,400 and a 1,000 px window with headers of at most two lines and compact times,
and screenshots are saved under tests/artifacts/."""
import json
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pyoxigraph as ox
import pytest
from flask import request
from werkzeug.serving import make_server

from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import Runner, EngineConfig
from rspstar.endpoint.http import create_app
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import parse_instant

pytestmark = pytest.mark.slow
T0 = parse_instant("2026-03-01T08:00:00Z")
S = 1_000_000
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync",
                  "--virtual-time-budget=5000"]


@pytest.fixture
def server():
    store = StreamStore()
    lines = ["@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> ."]
    for i in range(30):
        lines.append('ex:e%d prov:generatedAtTime "2026-03-01T08:00:%02dZ"^^<http://www.w3.org/2001/XMLSchema#dateTime> .'
                     " ex:e%d { ex:o%d ex:v %d . }" % (i, i, i, i, 10 + (i * 7) % 13))
    store.publish("http://example.org/s", store.documents.stage(
        "http://example.org/s", "\n".join(lines).encode(), ox.RdfFormat.TRIG, "s.trig").staged)
    engine = Runner(store, VirtualClock(T0), EngineConfig(max_delay=0))
    engine.register("PREFIX ex: <http://example.org/> PREFIX rspu: <http://w3id.org/rsp/rspu#> "
                    "SELECT ?o ?d ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT4S STEP PT2S] "
                    "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v "
                    'BIND(STRDT(CONCAT("N(", STR(?v), ", 0.25)"), rspu:distribution) AS ?d) } } }', "demo")
    engine.register("PREFIX ex: <http://example.org/> SELECT (COUNT(*) AS ?n) FROM NAMED WINDOW ex:c ON ex:s "
                    "[ELEMS 5 STEP 2] WHERE { WINDOW ex:c { GRAPH ?g { ?o ex:v ?v } } }", "counted")
    # A CONSTRUCT query with a long id, whose rows (four per window, squared: 16) and their
    # numeric objects the dashboard must show and chart.
    engine.register("PREFIX ex: <http://example.org/> CONSTRUCT { ?o ex:pairedWith ?v2 . ?o ex:level ?v } "
                    "FROM NAMED WINDOW ex:w ON ex:s [RANGE PT4S STEP PT2S] WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } "
                    "GRAPH ?h { ?o2 ex:v ?v2 } } }", "oxygen-warning-constructed")
    # A query that goes on from the latest due instant: the dashboard counts what it skipped.
    engine.register("PREFIX ex: <http://example.org/> SELECT ?o FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S] "
                    "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }", "freshest", options={"overrun": "skip"})
    # A stream with a gap: readings at 0-3 s and 8-9 s, so the windows closing at :06 and :08
    # are empty and a chart's line must break there.
    gappy = ["@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> ."]
    for i in (0, 1, 2, 3, 8, 9):
        gappy.append('ex:g%d prov:generatedAtTime "2026-03-01T08:00:%02dZ"^^<http://www.w3.org/2001/XMLSchema#dateTime> .'
                     " ex:g%d { ex:p%d ex:v %d . }" % (i, i, i, i, 20 + i))
    store.publish("http://example.org/gappy", store.documents.stage(
        "http://example.org/gappy", "\n".join(gappy).encode(), ox.RdfFormat.TRIG, "gappy.trig").staged)
    engine.register("PREFIX ex: <http://example.org/> SELECT ?o ?v FROM NAMED WINDOW ex:w ON ex:gappy "
                    "[RANGE PT2S STEP PT2S] WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }", "gappy")
    # Its columns come in the SELECT clause's order, not alphabetically.
    engine.register("PREFIX ex: <http://example.org/> SELECT ?v ?o (?v * 2 AS ?double) FROM NAMED WINDOW ex:w ON ex:gappy "
                    "[RANGE PT2S STEP PT2S] WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }", "ordered")
    sources = {name: {"active": True, "last_batch": 3, "quarantined": {}} for name in ("tvs", "homecare", "landing")}
    app = create_app(engine, ingestion_status=lambda: sources)
    app.add_url_rule("/layout-check", "layout_check", lambda: LAYOUT_PAGE.replace("WIDTH", request.args["width"]).replace(
        "QUERY", request.args["query"]))
    app.add_url_rule("/layout-check.js", "layout_check_js",
                     lambda: (LAYOUT_SCRIPT, 200, {"Content-Type": "text/javascript"}))
    http = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    yield engine, "http://127.0.0.1:%d/?refresh=poll" % http.server_port
    http.shutdown()


# The dashboard in a narrow frame, its layout read by a script of the test's own: every word of
# the queries table and of the headers must lie on one line (a column narrower than a word
# broke "oxygen-warning" into "oxyge/n-warnin/g").
LAYOUT_PAGE = """<!doctype html><html><body style="margin:0">
<iframe id="frame" src="/?refresh=poll&query=QUERY" width="WIDTH" height="1300" style="border:0"></iframe>
<pre id="out">pending</pre><script src="/layout-check.js"></script></body></html>"""
LAYOUT_SCRIPT = """
function broken(doc) {
  const found = [];
  for (const cell of doc.querySelectorAll("#queries th, #queries td, #results th")) {
    const walker = doc.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const re = /\\S+/g;
      for (let m = re.exec(node.data); m; m = re.exec(node.data)) {
        const range = doc.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        if (tops.size > 1) found.push(m[0]);
      }
    }
  }
  return found;
}
// The lines a cell's text takes (the tops of its text's boxes).
function lines(doc, cell) {
  const tops = new Set();
  const walker = doc.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const range = doc.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) if (r.width > 0) tops.add(Math.round(r.top));
  }
  return tops.size;
}
function trace(doc, id, k) {
  const data = doc.getElementById(id).data || [];
  const t = data[k] || {};
  return {x: (t.x || []).length, nulls: (t.y || []).filter(v => v === null).length, connectgaps: t.connectgaps,
          mode: t.mode};
}
setTimeout(() => {
  const doc = document.getElementById("frame").contentDocument;
  const table = doc.getElementById("queries");
  const scroll = table.parentElement;
  const headers = [...doc.querySelectorAll("#queries th")];
  const times = [...doc.querySelectorAll("#queries td.time")].map(td => [td.textContent, td.title]);
  document.getElementById("out").textContent = JSON.stringify({
    rows: doc.querySelectorAll("#queries tbody tr").length, broken: broken(doc),
    viewport: doc.documentElement.clientWidth, table_right: Math.round(table.getBoundingClientRect().right),
    scrolls: scroll.scrollWidth > scroll.clientWidth + 1,
    headers: headers.map(th => [th.textContent, lines(doc, th), Math.round(th.getBoundingClientRect().width)]),
    cells: Math.max(...[...doc.querySelectorAll("#queries td")].map(td => lines(doc, td))),
    times: times,
    means: trace(doc, "chart-values", 0), latency: trace(doc, "chart-latency", 0),
    // Evaluations every 2 s, then none for 14 s (an engine stopped): the line breaks there.
    paused: document.getElementById("frame").contentWindow.withGaps(
      ["2026-03-01T08:00:02Z", "2026-03-01T08:00:04Z", "2026-03-01T08:00:06Z", "2026-03-01T08:00:20Z",
       "2026-03-01T08:00:22Z"], [1, 2, 3, 4, 5]).y});
}, 4000);
"""


def layout_report(tmp_path, base: str, width: int, query: str) -> dict:
    page = "%s/layout-check?width=%d&query=%s" % (base, width, query)
    layout = chromium(tmp_path, "--dump-dom", "--window-size=%d,1400" % (width + 40), page)
    return json.loads(re.search(r'<pre id="out">([^<]*)</pre>', layout).group(1))


def chromium(tmp_path, *args) -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "Debian's chromium is needed for this test (.ci/run installs it)"
    done = subprocess.run([binary, *CHROMIUM_FLAGS, "--user-data-dir=%s" % (tmp_path / "profile"), *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_results_appear_and_the_chart_draws(server, tmp_path):
    engine, url = server
    empty = chromium(tmp_path, "--dump-dom", url)
    assert 'data-id="demo"' in empty
    window = '<td class="windows" title="http://example.org/s"><div><span class="part">%s</span> <span class="part">on s</span>'
    assert window % "PT4S/PT2S" in empty and window % "5 elements/2" in empty
    assert 'class="result"' not in empty

    engine.clock.set(T0 + 10 * S)
    engine.tick()                       # five evaluations: :02 ... :10
    # An element stamped :01 comes now, after every query evaluated :01: each counts it late.
    engine.store.add_elements("http://example.org/s", [Element(
        "http://example.org/late", T0 + S, instant_literal(T0 + S),
        [ox.Quad(ox.NamedNode("http://example.org/o-late"), ox.NamedNode("http://example.org/v"), ox.Literal("1"),
                 ox.NamedNode("http://example.org/late"))])])
    page = chromium(tmp_path, "--dump-dom", url)
    assert len(re.findall(r'<span class="part behind" title="elements that came after[^"]*">\(1 late\)</span>', page)) == 4
    assert page.count('class="result"') == 4   # the latest window [6 s, 10 s) holds four observations
    assert "2026-03-01T08:00:10Z" in page
    assert '<td class="num skips">0.0 <span class="part">(4 skipped)</span></td>' in page   # "freshest": :10 only
    assert "<td>N(μ=13, σ²=0.25)</td>" in page and "rspu#distribution" not in page   # o6: 10 + 42 mod 13
    values = re.search(r'<div id="chart-values"[^>]*>', page).group(0)
    # ?d comes first among the numeric variables (in the SELECT clause): 2 + 4 + 4 + 4 + 4 distributions, with bands.
    assert 'data-points="18"' in values and 'data-banded="true"' in values and "js-plotly-plot" in values
    assert page.count('class="errorbar"') == 18
    for chart in ("chart-results", "chart-latency"):
        assert re.search(r'<div id="%s"[^>]*js-plotly-plot' % chart, page)
    assert page.count('class="point"') >= 18 + 5   # the values, and a latency marker per evaluation

    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "dashboard.png"
    screenshot.unlink(missing_ok=True)
    chromium(tmp_path, "--window-size=1400,1300", "--screenshot=%s" % screenshot, url)
    assert screenshot.stat().st_size > 10_000


def test_words_stay_whole_and_a_construct_query_shows_its_triples_and_chart(server, tmp_path):
    engine, url = server
    engine.clock.set(T0 + 10 * S)
    engine.tick()
    base = url.split("/?")[0]
    report = layout_report(tmp_path, base, 760, "oxygen-warning-constructed")
    assert report["rows"] == 6 and report["broken"] == [], report
    page = chromium(tmp_path, "--dump-dom", base + "/?refresh=poll&query=oxygen-warning-constructed")
    # The header counts sources and the streams they feed; the folded polls column says what it counts.
    assert "3 sources feeding 2 streams" in page
    assert re.search(r'<th class="num" title="Scheduler polls that found[^"]*">folded polls</th>', page)
    # The latest CONSTRUCT evaluation holds 16 + 4 triples: 20 shown, the count said when more.
    assert page.count('class="result"') == 20
    assert re.search(r'<p id="results-more"[^>]*hidden', page)
    values = re.search(r'<div id="chart-values"[^>]*>', page).group(0)
    assert 'data-points="0"' not in values and "js-plotly-plot" in values      # ex:level's and ex:pairedWith's numbers
    assert '<option selected="">level</option>' in page or '<option selected="">pairedWith</option>' in page
    many = chromium(tmp_path, "--dump-dom", base + "/?refresh=poll&query=demo")
    assert "2026-03-01T08:00:10Z" in many


@pytest.mark.parametrize("width", [1400, 1000])
def test_the_queries_table_fits_the_window_and_charts_break_at_gaps(server, tmp_path, width):
    engine, url = server
    engine.clock.set(T0 + 10 * S)
    engine.tick()
    base = url.split("/?")[0]
    report = layout_report(tmp_path, base, width, "gappy")
    # Every column on screen, the table needing no sideways scrolling.
    assert not report["scrolls"] and report["table_right"] <= report["viewport"], report
    # Headers of at most two lines, no word broken; a cell breaks only between its parts.
    assert report["broken"] == [] and max(n for _, n, _ in report["headers"]) <= 2, report["headers"]
    assert report["cells"] <= 2, report
    # Times as a clock shows them (the date and zone on hover), not full ISO timestamps.
    assert report["times"] and all(re.fullmatch(r"(\d\d:\d\d:\d\d(\.\d+)?|–)", text) for text, _ in report["times"]), report["times"]
    assert ["08:00:10", "2026-03-01T08:00:10Z"] in report["times"]
    # "gappy" evaluated at :02 ... :10, its windows at :06 and :08 empty: the mean's line has a
    # break there (a null point, gaps not connected) rather than a line drawn across.
    assert report["means"]["nulls"] >= 1 and report["means"]["connectgaps"] is False, report["means"]
    assert report["latency"]["connectgaps"] is False, report["latency"]
    assert report["paused"] == [1, 2, 3, None, 4, 5]
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / ("dashboard-%d.png" % width)
    screenshot.unlink(missing_ok=True)
    chromium(tmp_path, "--window-size=%d,1300" % width, "--screenshot=%s" % screenshot, base + "/?refresh=poll&query=gappy")
    assert screenshot.stat().st_size > 10_000


def test_partitioned_landmark_and_fact_windows_are_shown_as_declared(tmp_path):
    engine = Runner(StreamStore(), VirtualClock(T0), EngineConfig(max_delay=0))
    prefixes = "PREFIX ex: <http://example.org/> PREFIX sosa: <http://www.w3.org/ns/sosa/> "
    engine.register(prefixes + "SELECT ?v FROM NAMED WINDOW ex:p ON ex:s [ELEMS 1 PARTITION BY sosa:madeBySensor] "
                    "WHERE { WINDOW ex:p { GRAPH ?g { ?o ex:v ?v } } }", "latest")
    engine.register(prefixes + "SELECT (COUNT(*) AS ?n) FROM NAMED WINDOW ex:l ON ex:s [RANGE UNBOUNDED STEP PT1H] "
                    "WHERE { WINDOW ex:l { GRAPH ?g { ?o ex:v ?v } } }", "landmark")
    engine.register(prefixes + "SELECT ?u FROM NAMED WINDOW ex:f ON ex:s [FACTS { ?u ex:isIn ?r } SINCE { ?u ex:enter ?r } "
                    "TILL { ?u ex:leave ?r } STEP PT3S] WHERE { WINDOW ex:f { ?u ex:isIn ?r } }", "facts")
    http = make_server("127.0.0.1", 0, create_app(engine), threaded=True)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    try:
        page = chromium(tmp_path, "--dump-dom", "http://127.0.0.1:%d/?refresh=poll" % http.server_port)
    finally:
        http.shutdown()
    shapes = re.findall(r'<span class="part">([^<]*)</span> <span class="part">on s</span>', page)
    assert sorted(shapes) == ["facts ?u &lt;http://example.org/isIn&gt; ?r/PT3S", "last 1 per madeBySensor",
                              "since 1970-01-01T00:00:00Z/PT3600S"]


def test_the_results_table_has_the_select_clauses_order_and_the_numbers_chart_in_it(server, tmp_path):
    engine, url = server
    engine.clock.set(T0 + 10 * S)
    engine.tick()
    page = chromium(tmp_path, "--dump-dom", url.split("/?")[0] + "/?refresh=poll&query=ordered")
    head = re.search(r'<table id="results"><thead>(.*?)</thead>', page).group(1)
    assert re.findall(r"<th>([^<]*)</th>", head) == ["?v", "?o", "?double"]
    assert re.findall(r"<option[^>]*>([^<]*)</option>", page) == ["v", "double"]
