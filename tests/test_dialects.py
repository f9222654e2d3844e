"""Queries written for C-SPARQL, CQELS-QL and Streaming SPARQL (spec 6.5): recognized,
translated into RSP-QL* with their own semantics, refused with a position where they have no
equivalent. Their evaluation is covered by the conformance cases named after each dialect."""
import json

import pytest

from rspstar.endpoint.cli import main
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import Runner
from rspstar.endpoint.engine.replay import Replay, ReplayInput
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore
from rspstar.translator.dialects import detect
from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.model import CountWindow, R2S, TimeWindow
from rspstar.translator.policy import report_policy
from rspstar.translator.temporal import parse_instant
from rspstar.translator.validate import compile_query

S = 1_000_000
EX = "PREFIX ex: <http://example.org/>\n"
CSPARQL = EX + "SELECT ?t ?v FROM STREAM <http://example.org/temp> [RANGE 4s STEP 2s] WHERE { ?t ex:value ?v }"
CQELS = EX + "SELECT ?t WHERE { STREAM <http://example.org/temp> [RANGE 3s] { ?t ex:value ?v } }"
STREAMING = EX + "SELECT ?t FROM STREAM <http://example.org/temp> WINDOW RANGE 30 MINUTE SLIDE WHERE { ?t ex:value ?v }"
RSPQL = EX + "SELECT ?t FROM NAMED WINDOW ex:w ON STREAM ex:temp [RANGE PT4S] WHERE { WINDOW ex:w { GRAPH ?g { ?t ex:value ?v } } }"


def test_the_dialect_is_recognized_from_the_window_clauses():
    assert [detect(q) for q in (CSPARQL, CQELS, STREAMING, RSPQL)] == ["csparql", "cqels", "streaming-sparql", "rspql"]


def test_csparql_is_translated_with_its_semantics():
    query = compile_query("REGISTER QUERY warm COMPUTED EVERY 5s AS\n" + CSPARQL.replace("[RANGE 4s STEP 2s]",
                                                                                        "[RANGE 10m TUMBLING]"))
    [window] = query.windows.values()
    assert isinstance(window, TimeWindow) and window.upper_closed
    assert (window.iri, window.range, window.step) == ("http://example.org/temp", 600 * S, 600 * S)
    assert (query.name, query.computed_every, query.report, query.r2s) == ("warm", 5 * S, "non-empty", R2S.RSTREAM)
    assert query.option_defaults == {"window_default_graph": "union"} and query.merged_windows is None
    assert "WHERE { WINDOW <http://example.org/temp> { ?t ex:value ?v } }" in query.translation
    count = compile_query(CSPARQL.replace("[RANGE 4s STEP 2s]", "[RANGE TRIPLES 5]"))
    assert count.windows["http://example.org/temp"] == CountWindow("http://example.org/temp", "http://example.org/temp",
                                                                   5, 1, count.windows["http://example.org/temp"].line,
                                                                   count.windows["http://example.org/temp"].column)


def test_csparql_with_several_streams_or_background_matches_their_merge():
    query = compile_query(CSPARQL.replace("WHERE", "FROM STREAM <http://example.org/temp> [RANGE 8s STEP 2s] "
                                                   "FROM <http://example.org/rooms> WHERE"))
    # The same stream twice: the second window is keyed <stream>#2 (spec 6.5).
    assert list(query.windows) == ["http://example.org/temp", "http://example.org/temp#2"]
    assert query.merged_windows == ("http://example.org/temp", "http://example.org/temp#2")
    assert query.from_graphs == ["http://example.org/rooms"]


def test_cqels_is_istream_on_content_change_and_start_sets_t0():
    query = compile_query(CQELS.replace("[RANGE 3s]", "[RANGE 3s SLIDE 1s]"), start="2026-03-01T08:00:01Z")
    [window] = query.windows.values()
    assert (query.r2s, query.report, window.start, window.step) == \
        (R2S.ISTREAM, "content-change", parse_instant("2026-03-01T08:00:01Z"), S)
    now = compile_query(CQELS.replace("[RANGE 3s]", "[NOW]"))
    assert now.windows["http://example.org/temp"].range == 1    # the elements with tau = t
    two = compile_query(EX + "SELECT * WHERE { STREAM ex:a [TRIPLES 2] { ?x ?p ?o } STREAM ex:a [RANGE 1s] { ?x ?q ?z } "
                             "GRAPH <http://example.org/g> { ?x ?r ?w } }")
    assert list(two.windows) == ["http://example.org/a", "http://example.org/a#2"]
    assert isinstance(two.windows["http://example.org/a"], CountWindow)


def test_streaming_sparql_units_slide_and_windows_inside_groups():
    query = compile_query(STREAMING)
    [window] = query.windows.values()
    assert (window.range, window.step, window.upper_closed, query.report) == (1800 * S, 60 * S, False, None)
    # the Streaming SPARQL paper, Listing 1.1: a window in a group applies to that group's patterns.
    listing = """PREFIX wtur: <http://iec.org/61400-25/root/ln/classes/WTUR#>
SELECT ?x ?y ?z
FROM STREAM <http://iec.org/61400-25/root/td.rdf>
  WINDOW RANGE 30 MINUTE SLIDE
WHERE { ?x wtur:StrCnt ?y .
  OPTIONAL { ?x wtur:StopCnt ?z .
    WINDOW ELEMS 1500 }}"""
    query = compile_query(listing)
    stream = "http://iec.org/61400-25/root/td.rdf"
    assert query.windows[stream + "#2"].size == 1500
    assert "OPTIONAL { WINDOW <%s#2> { ?x wtur:StopCnt ?z . } }" % stream in " ".join(query.translation.split())
    milliseconds = compile_query(STREAMING.replace("RANGE 30 MINUTE SLIDE", "RANGE 500 SLIDE 100"))
    assert milliseconds.windows["http://example.org/temp"].step == 100_000


@pytest.mark.parametrize("text, message, line, column", [
    (CSPARQL.replace("4s", "4x"), "unit", 2, 60),
    (CSPARQL.replace("?v }", "?v FILTER(?v >) }"), "invalid expression", 2, 94),   # the FILTER, as in RSP-QL*
    (CQELS.replace("[RANGE 3s]", "[ALL]"), "[ALL] has no equivalent", 2, 53),
    (CQELS.replace("SELECT", "SELECT RSTREAM"), "RSTREAM in CQELS-QL has no equivalent", 2, 8),
    (STREAMING.replace("FROM STREAM", "FROM NAMED STREAM"), "FROM NAMED STREAM has no equivalent", 2, 16),
    (CSPARQL.replace("[RANGE 4s STEP 2s]", "[RANGE 4s HOP 2s]"), "to close the window", 2, 62),
    (CQELS.replace("[RANGE 3s]", "[RANGE 5M]"), "5M: M is months in an xsd:duration; write 5m for minutes", 2, 59),
])
def test_dialect_errors_name_the_construct_at_the_users_position(text, message, line, column):
    with pytest.raises(QuerySyntaxError, match=message.replace("[", r"\[").replace("]", r"\]")) as e:
        compile_query(text)
    assert (e.value.line, e.value.column) == (line, column)


def test_an_explicit_dialect_wins_over_recognition():
    with pytest.raises(QuerySyntaxError, match="FROM STREAM in CQELS-QL has no equivalent"):
        compile_query(CSPARQL, dialect="cqels")
    assert compile_query(RSPQL, dialect="rspql").dialect == "rspql"


def test_csparql_timestamp_function_gives_the_elements_time(tmp_path):
    stream = tmp_path / "temp.trig"
    stream.write_text("""@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:e1 prov:generatedAtTime "2026-03-01T08:00:01Z"^^xsd:dateTime . ex:e1 { ex:t1 ex:value 20 . }
ex:e2 prov:generatedAtTime "2026-03-01T08:00:03Z"^^xsd:dateTime . ex:e2 { ex:t2 ex:value 25 . }
""")
    text = EX + """PREFIX f: <http://larkc.eu/csparql/sparql/jena/ext#>
SELECT ?t (f:timestamp(?t, ex:value, ?v) AS ?at)
FROM STREAM <http://example.org/temp> [RANGE 4s STEP 4s]
WHERE { ?t ex:value ?v FILTER(f:timestamp(?t, ex:value, ?v) > "2026-03-01T08:00:02Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>) }"""
    replay = Replay(ReplayInput.single(text, [("http://example.org/temp", stream)], parse_instant("2026-03-01T08:00:00Z"),
                                       parse_instant("2026-03-01T08:00:04Z")))
    [(_, record)] = list(replay.run())
    assert record["bindings"] == [{"t": "<http://example.org/t2>",
                                   "at": '"2026-03-01T08:00:03Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>'}]


def test_the_engine_registers_dialect_queries_and_describes_their_translation():
    engine = Runner(StreamStore(), VirtualClock(0))
    registered = engine.register(CQELS, "q")
    described = registered.describe()
    assert described["dialect"] == "cqels" and "WINDOW <http://example.org/temp>" in described["translation"]
    assert described["report"].startswith("at every instant an element arrives")
    # An option overrides what the dialect implies.
    other = engine.register(CQELS, "q2", options={"report": "close", "window_default_graph": "timestamps"})
    assert other.evaluator.policy.show() == "close" and not other.evaluator.r2r.compiled.options.window_union


def test_check_prints_the_translation_policy_and_windows(tmp_path, capsys):
    path = tmp_path / "q.rq"
    path.write_text(CSPARQL)
    assert main(["check", str(path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["dialect"] == "csparql" and summary["report"].endswith("skipped when every window is empty")
    assert any("FROM NAMED WINDOW <http://example.org/temp>" in line for line in summary["rspql"])
    assert summary["windows"][0]["bounds"] == "(close - range, close]"
    assert main(["check", str(path), "--option", "dialect=cqels"]) == 2


def test_a_dialect_query_nested_too_deep_is_a_positioned_error():
    deep = EX + "SELECT ?t WHERE { STREAM <http://example.org/temp> [RANGE 3s] " + "{" * 3000 + " ?t ex:value ?v " + \
        "}" * 3000 + " }"
    with pytest.raises(QuerySyntaxError, match="nested deeper than|nested and chained too deeply") as e:
        compile_query(deep)
    assert e.value.line == 2


def test_a_window_closing_the_where_clause_is_the_one_its_patterns_read():
    # the Streaming SPARQL paper: the window of a graph pattern wins over the FROM window, also when the graph
    # pattern is the WHERE clause itself.
    query = compile_query(EX + "SELECT ?x FROM STREAM <http://example.org/s> WINDOW RANGE 10 S SLIDE "
                               "WHERE { ?x ex:p ?y WINDOW ELEMS 5 }")
    assert "WHERE { WINDOW <http://example.org/s> { WINDOW <http://example.org/s#2> { ?x ex:p ?y } } }" in \
        " ".join(query.translation.split())



# -- the community pages' window forms (spec 6.7) ---------------------------------------------
@pytest.mark.parametrize("window, seconds, step", [
    ("[RANGE 10m SLIDE 1m]", 600, 60), ("[RANGE 3s SLIDING 1s]", 3, 1), ("[RANGE 3 sec TUMBLING]", 3, 3),
    ("[RANGE 5 min STEP 30 seconds]", 300, 30), ("[RANGE 2 hours SLIDE 1 hour]", 7200, 3600),
    ("[RANGE 1 day STEP 1 d]", 86400, 86400), ("[RANGE 500 ms STEP 250ms]", 0.5, 0.25),
])
def test_csparql_reads_the_community_pages_window_forms_and_names_them(window, seconds, step):
    query = compile_query(CSPARQL.replace("[RANGE 4s STEP 2s]", window))
    [w] = query.windows.values()
    assert (w.range, w.step) == (int(seconds * S), int(step * S))
    assert query.normalised, "the form read is named"
    assert all(n.startswith("2:") for n in query.normalised)


def test_each_language_notes_only_what_is_not_its_own():
    assert compile_query(CSPARQL.replace("[RANGE 4s STEP 2s]", "[RANGE 10m TUMBLING]")).normalised == []
    slide = compile_query(CSPARQL.replace("[RANGE 4s STEP 2s]", "[RANGE 10m SLIDE 1m]"))
    assert slide.normalised == ["2:63: SLIDE read as STEP (C-SPARQL's [RANGE 10m STEP 1m])"]
    cqels = compile_query(CQELS.replace("[RANGE 3s]", "[RANGE 10m TUMBLING]"))
    assert cqels.windows["http://example.org/temp"].step == 600 * S
    assert cqels.normalised == [
        "2:63: TUMBLING: at each arrival instant t the window holds the elements of the tumbling period "
        "(t0 + k*10m, t0 + (k+1)*10m] that contains t, up to t (CQELS-QL's bounds; t0 the epoch, or the option start)"]
    assert compile_query(CQELS.replace("[RANGE 3s]", "[RANGE 3s SLIDE 1s]")).normalised == []
    words = compile_query(CQELS.replace("[RANGE 3s]", "[range 3 sec]"))
    assert words.normalised == ["2:59: 3 sec read as 3s"]


def test_a_cqels_tumbling_window_holds_the_period_of_each_arrival():
    # [RANGE 3 sec TUMBLING] under CQELS's content change: at an arrival instant t the window holds
    # the elements of the period (3k s, 3k s + 3 s] containing t, with t0 - 3k s < τ <= t; a slide
    # (SLIDE 3s) stays without effect, the window holding (t - 3 s, t] (spec 6.3).
    store = StreamStore()
    for second in (2, 3, 4, 6, 7):
        store.add_elements("http://example.org/temp", [Element("http://example.org/e%d" % second, second * S,
                                                               instant_literal(second * S), [])])

    def names(graphs):
        return [g.rsplit("/", 1)[1] for g in graphs]
    tumbling = compile_query(CQELS.replace("[RANGE 3s]", "[RANGE 3 sec TUMBLING]"))
    sliding = compile_query(CQELS.replace("[RANGE 3s]", "[RANGE 3 sec SLIDE 3s]"))
    held = {}
    for query in (tumbling, sliding):
        policy = report_policy(query)
        [window] = query.windows.values()
        held[query is tumbling] = {t // S: (content.shown, names(content.select(window.stream, store)))
                                   for t in (2 * S, 3 * S, 4 * S, 6 * S, 7 * S)
                                   for content in policy.contents(t, store).values()}
    assert held[True] == {2: ((0, 2 * S), ["e2"]), 3: ((0, 3 * S), ["e2", "e3"]), 4: ((3 * S, 4 * S), ["e4"]),
                          6: ((3 * S, 6 * S), ["e4", "e6"]), 7: ((6 * S, 7 * S), ["e7"])}
    assert held[False][4] == ((1 * S, 4 * S), ["e2", "e3", "e4"])
    assert held[False][7] == ((4 * S, 7 * S), ["e6", "e7"])
    described = tumbling.windows["http://example.org/temp"].describe()
    assert described["tumbling"] == ("at an arrival instant t: the elements of the period (start + k*PT3S, "
                                     "start + (k+1)*PT3S] that contains t, up to t")
    shifted = compile_query(CQELS.replace("[RANGE 3s]", "[RANGE 3 sec TUMBLING]"), start="1970-01-01T00:00:01Z")
    contents = report_policy(shifted).contents(4 * S, store)
    assert [c.shown for c in contents.values()] == [(1 * S, 4 * S)]          # the period (1 s, 4 s]


def test_seed_004s_listings_run_as_their_page_writes_them():
    fb = "PREFIX : <http://example.org/>\n"
    q2 = compile_query(fb + """REGISTER QUERY FastAndFurious AS
SELECT ?person (count(distinct ?room) as ?rooms)
FROM STREAM <http://example.org/S1> [RANGE 5m TUMBLING]
WHERE { ?person :isIn ?room}
GROUPBY ?person
HAVING  (?rooms >= 5)""")
    assert q2.normalised == ["6:1: GROUPBY read as GROUP BY"]
    cqels_q2 = compile_query(fb + """SELECT ?person (count(distinct ?room) as ?rooms)
WHERE {STREAM <http://example.org/S1>  [range 5m] { ?person :isIn ?room}}
GROUPBY ?person
HAVING  (?rooms >= 5)""")
    assert cqels_q2.dialect == "cqels" and cqels_q2.windows["http://example.org/S1"].range == 300 * S
    facts = compile_query(fb + """REGISTER STREAM UseRoomCounts AS
CONSTRUCT {?room :currentCount ?n }
FROM STREAM <http://example.org/fb> [RANGE 3 sec TUMBLING]
WHERE { ?room :enterCount ?n }""")
    assert facts.windows["http://example.org/fb"].step == 3 * S
    # Q5's listing does not balance its braces: still refused.
    with pytest.raises(QuerySyntaxError, match="never closed"):
        compile_query(fb + """SELECT ?person
FROM STREAM <http://example.org/S1> [RANGE 5m TUMBLING]
FROM NAMED <http://example.org/profile>
WHERE {
{ { ?person :isIn :room1 }
FILTER NOT EXISTS
{GRAPH <http://example.org/profile> {?person :hasDegree :doctorate}
}}""")


# -- SPARQLstream (spec 6.8) ---------------------------------------------------------------------
SPARQLSTREAM = """PREFIX : <http://example.org/>
SELECT ISTREAM ?room ?person
FROM NAMED STREAM <http://example.org/fb> [1 MINUTES SLIDE 1 MINUTES]
WHERE {
 ?person :isIn ?room .
}"""


def test_sparqlstream_is_recognised_and_read_with_its_semantics():
    assert detect(SPARQLSTREAM) == "sparqlstream"
    assert detect(SPARQLSTREAM.replace("FROM NAMED STREAM", "FROM STREAM")) == "sparqlstream"   # SELECT ISTREAM
    assert detect(RSPQL.replace("SELECT", "SELECT ISTREAM")) == "rspql"
    query = compile_query(SPARQLSTREAM)
    [window] = query.windows.values()
    assert (query.dialect, query.r2s, query.report) == ("sparqlstream", R2S.ISTREAM, "non-empty")
    assert (window.range, window.step, window.upper_closed) == (60 * S, 60 * S, True)
    assert query.option_defaults == {"window_default_graph": "union"}
    assert "FROM NAMED WINDOW <http://example.org/fb> ON <http://example.org/fb> [RANGE PT60S STEP PT60S]" in \
        query.translation
    for r2s in ("DSTREAM", "RSTREAM"):
        assert compile_query(SPARQLSTREAM.replace("ISTREAM", r2s)).r2s is R2S[r2s]
    assert compile_query(SPARQLSTREAM.replace("SELECT ISTREAM", "SELECT")).r2s is R2S.RSTREAM


def test_sparqlstream_windows_in_the_past_and_units():
    past = compile_query(SPARQLSTREAM.replace("[1 MINUTES SLIDE 1 MINUTES]",
                                              "[NOW - 10 MINUTES TO NOW - 2 MINUTES SLIDE 1 MINUTES]"))
    [window] = past.windows.values()
    assert (window.range, window.lag, window.step, window.upper_closed) == (600 * S, 120 * S, 60 * S, True)
    for spec, seconds in (("[30 S SLIDE 10 SECONDS]", 30), ("[2 HOURS SLIDE 1 HOUR]", 7200), ("[1 DAY SLIDE 1 DAYS]", 86400),
                          ("[500 MS SLIDE 500 MS]", 0.5), ("[1 SECOND SLIDE 1 S]", 1)):
        [w] = compile_query(SPARQLSTREAM.replace("[1 MINUTES SLIDE 1 MINUTES]", spec)).windows.values()
        assert w.range == int(seconds * S)


@pytest.mark.parametrize("window, message, column", [
    ("[1 MINUTES]", "needs SLIDE and a duration", 53),
    ("[TRIPLES 5]", "a count window in SPARQLstream has no equivalent", 44),
    ("[5 TRIPLES]", "FROM NAMED WINDOW <w> ON <s> \\[ELEMS n\\], spec 6.1", 44),
    ("[1 FORTNIGHT SLIDE 1 MINUTES]", "needs a unit", 46),
    ("[NOW - 2 MINUTES TO NOW - 3 MINUTES SLIDE 1 MINUTES]", "ends before it begins", 44),
])
def test_sparqlstream_refuses_what_it_cannot_say(window, message, column):
    with pytest.raises(QuerySyntaxError, match=message) as e:
        compile_query(SPARQLSTREAM.replace("[1 MINUTES SLIDE 1 MINUTES]", window))
    assert (e.value.line, e.value.column) == (3, column)


def test_check_prints_a_sparqlstream_querys_rspql_equivalent(tmp_path, capsys):
    path = tmp_path / "q.rq"
    path.write_text(SPARQLSTREAM)
    assert main(["check", str(path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["dialect"] == "sparqlstream" and summary["r2s"] == "ISTREAM"
    assert summary["policy"] == "non-empty"
    assert any("FROM NAMED WINDOW <http://example.org/fb>" in line for line in summary["rspql"])


# -- HAVING over a SELECT alias (spec 6.7) -----------------------------------------------------
HAVING_ALIAS = """PREFIX : <http://example.org/>
SELECT ?person (COUNT(DISTINCT ?room) AS ?rooms)
FROM STREAM <http://example.org/S1> [RANGE 5m TUMBLING]
WHERE { ?person :isIn ?room }
GROUP BY ?person
HAVING (?rooms >= 2)"""


def test_having_over_a_select_alias_is_warned_of_and_runs_as_written(tmp_path, capsys):
    query = compile_query(HAVING_ALIAS)
    assert query.warnings == [
        "6:9: HAVING reads ?rooms, an alias of the SELECT clause, which HAVING is evaluated before: unbound "
        "there, so the condition never holds and no group is kept; write the aggregate itself: "
        "HAVING (COUNT(DISTINCT ?room) >= 2)"]
    assert compile_query(HAVING_ALIAS.replace("HAVING (?rooms >= 2)", "HAVING (COUNT(DISTINCT ?room) >= 2)")).warnings == []
    # In RSP-QL* and in a sub-select too.
    rspql = EX + """SELECT ?p FROM NAMED WINDOW ex:w ON ex:s [RANGE PT5M]
WHERE { { SELECT ?p (SUM(?v) AS ?total) WHERE { WINDOW ex:w { GRAPH ?g { ?p ex:v ?v } } } GROUP BY ?p HAVING (?total > 3) } }"""
    [warning] = compile_query(rspql).warnings
    assert warning.startswith("3:111: HAVING reads ?total") and warning.endswith("HAVING (SUM(?v) > 3)")
    # The query runs as written: its HAVING never holds, so it answers nothing (and says why).
    stream = tmp_path / "s1.trig"
    stream.write_text("""@prefix : <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
:e1 prov:generatedAtTime "2026-03-01T08:00:01Z"^^xsd:dateTime . :e1 { :axel :isIn :roomA . }
:e2 prov:generatedAtTime "2026-03-01T08:00:02Z"^^xsd:dateTime . :e2 { :axel :isIn :roomB . }
""")
    path = tmp_path / "q2.rq"
    path.write_text(HAVING_ALIAS)
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(path), "--stream", "http://example.org/S1=%s" % stream, "--from", "2026-03-01T08:00:00Z",
                 "--to", "2026-03-01T08:05:00Z", "--out", str(out)]) == 0
    assert [json.loads(line)["bindings"] for line in out.read_text().splitlines()] == [[]]
    assert "%s:6:9: warning: HAVING reads ?rooms" % path in capsys.readouterr().err
    fixed = tmp_path / "fixed.rq"
    fixed.write_text(HAVING_ALIAS.replace("HAVING (?rooms >= 2)", "HAVING (COUNT(DISTINCT ?room) >= 2)"))
    assert main(["replay", str(fixed), "--stream", "http://example.org/S1=%s" % stream, "--from", "2026-03-01T08:00:00Z",
                 "--to", "2026-03-01T08:05:00Z", "--out", str(out)]) == 0
    assert [len(json.loads(line)["bindings"]) for line in out.read_text().splitlines()] == [1]
    assert main(["check", str(path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["warnings"] == query.warnings and summary["normalised"] == []


def test_registration_answers_with_the_forms_normalised_and_the_warnings():
    engine = Runner(StreamStore(), VirtualClock(0))
    described = engine.register(HAVING_ALIAS.replace("[RANGE 5m TUMBLING]", "[RANGE 5 min SLIDE 1 min]"), "q").describe()
    assert described["normalised"] == ["3:44: 5 min read as 5m", "3:50: SLIDE read as STEP (C-SPARQL's [RANGE 5m STEP 1m])",
                                       "3:56: 1 min read as 1m"]
    assert described["warnings"][0].startswith("6:9: HAVING reads ?rooms")


def test_a_cqels_query_naming_its_named_datasets_still_reads_the_default_dataset(tmp_path):
    # CityBench's CQELS queries (cqels_query/Q5.txt, Q8, Q9) name `from named <culturalevents>`
    # and read the sensor repository outside their STREAM blocks: CQELS loads that as its default
    # dataset (CityBench's RDFFileManager: loadDefaultDataset, loadDataset("culturalevents", ...)),
    # so FROM NAMED leaves the default graph the background's there. In RSP-QL* it empties it,
    # as SPARQL's dataset clauses do.
    text = EX + ("SELECT ?t ?room ?label FROM NAMED <http://example.org/rooms> WHERE { ?t ex:in ?room . "
                 "GRAPH <http://example.org/rooms> { ?room ex:label ?label } "
                 "STREAM <http://example.org/temp> [RANGE 3s] { ?t ex:value ?v } }")
    stream = tmp_path / "temp.trig"
    stream.write_text('@prefix ex: <http://example.org/> .\nex:e1 <http://www.w3.org/ns/prov#generatedAtTime> '
                      '"2026-03-01T08:00:01Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\nex:e1 { ex:t1 ex:value 5 }\n')
    background = tmp_path / "bg.trig"
    background.write_text("@prefix ex: <http://example.org/> .\nex:t1 ex:in ex:kitchen .\n"
                          'ex:rooms { ex:kitchen ex:label "kitchen" }\n')
    query = tmp_path / "q.rq"
    query.write_text(text)
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(query), "--stream", "http://example.org/temp=%s" % stream, "--background",
                 str(background), "--from", "2026-03-01T08:00:00Z", "--to", "2026-03-01T08:00:01Z", "--out", str(out)]) == 0
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["bindings"] == [{"t": "<http://example.org/t1>", "room": "<http://example.org/kitchen>",
                                   "label": '"kitchen"'}]
    compiled = compile_query(text)
    assert compiled.named_keep_default and compiled.from_named_graphs == ["http://example.org/rooms"]
    assert not compile_query(RSPQL.replace("WHERE", "FROM NAMED <http://example.org/rooms> WHERE")).named_keep_default


def test_a_dialect_is_one_class_registered_recognized_and_taken_back(tmp_path):
    # docs/design.md's recipe, followed for a small language: `FROM STREAM <s> LAST n` (the
    # elements of the last n seconds). One class, nothing else edited: defining it registers it
    # under its name, detect() recognizes its texts, the option dialect takes its name, the
    # engine evaluates its queries; unregister() takes it back.
    from rspstar.translator.dialects import DIALECTS, Dialect
    from rspstar.translator.options import OptionError, QueryOptions

    class Last(Dialect):
        dialect = "last"
        language = "LAST-QL"
        report = "non-empty"
        option_defaults = {"window_default_graph": "union"}
        precedence = 45

        @classmethod
        def recognizes(cls, scan):
            return scan.is_from_stream() and scan.at(2).is_keyword("LAST")

        def stream_window(self):
            self.expect_keyword("LAST", "after FROM STREAM <iri>")
            seconds = int(self.advance().text)
            return self.time_spec(seconds * S, seconds * S)

        def translate(self):
            self.prologue()
            self.skip_to_dataset()
            background = self.dataset_clauses()
            where_open = self.find_where()
            merged = self.merge_or_wrap(where_open, self.matching(where_open), self.windows, background)
            return self.finish(merged=merged)

    text = EX + "SELECT ?t ?v FROM STREAM <http://example.org/temp> LAST 4 WHERE { ?t ex:value ?v }"
    INTEGER = '"%d"^^<http://www.w3.org/2001/XMLSchema#integer>'
    try:
        assert "last" in DIALECTS and detect(text) == "last"
        assert [detect(q) for q in (CSPARQL, CQELS, STREAMING, RSPQL)] == ["csparql", "cqels", "streaming-sparql", "rspql"]
        assert QueryOptions.from_pairs({"dialect": "last"}).dialect == "last"
        query = compile_query(text)
        [window] = query.windows.values()
        assert (query.dialect, query.report, window.range, window.step) == ("last", "non-empty", 4 * S, 4 * S)
        stream = tmp_path / "temp.trig"
        stream.write_text("""@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:e1 prov:generatedAtTime "2026-03-01T08:00:01Z"^^xsd:dateTime . ex:e1 { ex:t1 ex:value 20 . }
ex:e2 prov:generatedAtTime "2026-03-01T08:00:05Z"^^xsd:dateTime . ex:e2 { ex:t2 ex:value 25 . }
""")
        replay = Replay(ReplayInput.single(text, [("http://example.org/temp", stream)],
                                           parse_instant("2026-03-01T08:00:00Z"), parse_instant("2026-03-01T08:00:08Z")))
        assert [record["bindings"] for _, record in replay.run()] == [
            [{"t": "<http://example.org/t1>", "v": INTEGER % 20}], [{"t": "<http://example.org/t2>", "v": INTEGER % 25}]]
    finally:
        Last.unregister()
    assert "last" not in DIALECTS and detect(text) == "rspql"
    with pytest.raises(OptionError, match="option dialect takes rspql or csparql or"):
        QueryOptions.from_pairs({"dialect": "last"})
