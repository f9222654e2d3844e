"""Relative IRIs in query text: every IRI a query writes (dataset, GRAPH, windows and streams,
the output stream, expressions, templates, SERVICE) resolves against one base, in RSP-QL* and
in every dialect: the query's BASE, itself resolved against the IRI the query was retrieved
from (its file, the URL it was registered at, a configured base), else that IRI; a relative
IRI with no base at all is refused at its line and column (docs/language.md, "Relative IRIs")."""
import json
import random
from datetime import datetime, timezone

import pyoxigraph as ox
import pytest

import rspstar
from http_app import AUTH, TOKEN
from rspstar.endpoint.cli import main
from rspstar.endpoint.config import load_config, register_configured
from rspstar.translator.options import OptionError, QueryOptions
from rspstar.endpoint.engine.runner import EngineConfig, Runner
from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.store.stream_store import StreamStore
from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.federation import FederationNotAllowed, check_federation
from rspstar.translator.syntax import resolve_iri
from rspstar.translator.tokens import IRI
from rspstar.translator.validate import compile_query

START = datetime(2026, 3, 1, 8, tzinfo=timezone.utc)
BASE = "http://example.org/citybench/queries/q4.rq"
HERE = "http://example.org/citybench/queries/"
STREAM = "http://example.org/citybench/UserLocationService"

# The issue's smallest reproduction (CQELS-QL): GRAPH <rel> beside a STREAM block.
REPRODUCTION = ("SELECT ?s WHERE { GRAPH <rel> { ?s ?p ?o } "
                "STREAM <http://ex.org/s> [RANGE 3s] { ?s ?p ?o } }")


def trig(graph: str, time: str, triples: str) -> str:
    return ('<%s> <http://www.w3.org/ns/prov#generatedAtTime> "%s"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
            "<%s> { %s }\n" % (graph, time, graph, triples))


def test_the_issues_reproduction_reads_graph_rel_against_the_querys_base():
    engine = rspstar.Engine(start=START)
    engine.load_background("<http://example.org/q/rel> { <http://example.org/a> <http://example.org/p> 1 . }\n"
                           "<http://example.org/other> { <http://example.org/b> <http://example.org/p> 1 . }")
    query = engine.register(REPRODUCTION, base="http://example.org/q/query.rq")
    engine.push("http://ex.org/s", trig("http://example.org/e1", "2026-03-01T08:00:01Z",
                                        "<http://example.org/a> <http://example.org/p> 1 . "
                                        "<http://example.org/b> <http://example.org/p> 1 ."))
    engine.advance("2026-03-01T08:00:02Z")
    assert [row["s"] for row in query.rows()] == ["http://example.org/a"]


@pytest.mark.parametrize("text,where", [
    (REPRODUCTION, (1, 25)),
    ("SELECT ?s FROM NAMED <libraryevents> WHERE { STREAM <http://ex.org/s> [RANGE 3s] { ?s ?p ?o } }", (1, 22)),
    ("SELECT ?s FROM <bg> WHERE { STREAM <http://ex.org/s> [RANGE 3s] { ?s ?p ?o } }", (1, 16)),
    ("SELECT ?s WHERE {\n  STREAM <s> [RANGE 3s] { ?s ?p ?o } }", (2, 10)),
    ("SELECT ?s FROM NAMED WINDOW <w> ON <http://ex.org/s> [RANGE PT3S] WHERE { WINDOW <w> { ?s ?p ?o } }", (1, 29)),
    ("SELECT ?s FROM NAMED WINDOW <http://ex.org/w> ON <s> [RANGE PT3S] WHERE { WINDOW <http://ex.org/w> { ?s ?p ?o } }",
     (1, 50)),
    ("REGISTER RSTREAM <out> AS CONSTRUCT { ?s ?p ?o } FROM NAMED WINDOW <http://ex.org/w> ON <http://ex.org/s> "
     "[RANGE PT3S] WHERE { WINDOW <http://ex.org/w> { ?s ?p ?o } }", (1, 18)),
    ("SELECT ?s FROM NAMED WINDOW <http://ex.org/w> ON <http://ex.org/s> [RANGE PT3S] "
     "WHERE { WINDOW <http://ex.org/w> { ?s ?p ?o FILTER(?o != <x>) } }", (1, 138)),
    ("SELECT ?s FROM NAMED WINDOW <http://ex.org/w> ON <http://ex.org/s> [RANGE PT3S] "
     "WHERE { WINDOW <http://ex.org/w> { ?s ?p ?o } VALUES ?o { <x> } }", (1, 139)),
    ("CONSTRUCT { ?s <level> ?o } FROM NAMED WINDOW <http://ex.org/w> ON <http://ex.org/s> [RANGE PT3S] "
     "WHERE { WINDOW <http://ex.org/w> { ?s ?p ?o } }", (1, 16)),
    ("PREFIX ex: <vocab#> SELECT ?s FROM NAMED WINDOW <http://ex.org/w> ON <http://ex.org/s> [RANGE PT3S] "
     "WHERE { WINDOW <http://ex.org/w> { ?s ex:p ?o } }", (1, 12)),
    ("BASE <queries/> SELECT ?s FROM NAMED WINDOW <http://ex.org/w> ON <http://ex.org/s> [RANGE PT3S] "
     "WHERE { WINDOW <http://ex.org/w> { ?s ?p ?o } }", (1, 6)),
    # the dialects: C-SPARQL, Streaming SPARQL, SPARQLstream
    ("REGISTER QUERY q AS SELECT ?s FROM STREAM <s> [RANGE 3s STEP 1s] WHERE { ?s ?p ?o }", (1, 43)),
    ("SELECT ?s FROM STREAM <s> WINDOW RANGE 3 S SLIDE WHERE { ?s ?p ?o }", (1, 23)),
    ("SELECT ISTREAM ?s FROM NAMED STREAM <s> [3 S SLIDE 1 S] WHERE { ?s ?p ?o }", (1, 37)),
    ("REGISTER QUERY q AS SELECT ?s FROM STREAM <http://ex.org/s> [RANGE 3s STEP 1s] "
     "WHERE { GRAPH <culturalevents> { ?s ?p ?o } }", (1, 94)),
])
def test_a_relative_iri_with_no_base_is_refused_at_its_position(text, where):
    with pytest.raises(QuerySyntaxError) as refused:
        compile_query(text)
    assert (refused.value.line, refused.value.column) == where
    assert "relative IRI" in refused.value.message and "BASE" in refused.value.message
    assert "option base" in refused.value.message
    assert ("in BASE" in refused.value.message) == text.startswith("BASE")


def test_every_iri_of_a_query_resolves_against_the_same_base():
    text = ("REGISTER RSTREAM <out/levels> AS\n"
            "CONSTRUCT { ?s <level> ?o . ?s <seenIn> ?room }\n"
            "FROM NAMED <rooms>\n"
            "FROM NAMED WINDOW <w> ON <sensors/oxygen> [RANGE PT2S]\n"
            "WHERE { WINDOW <w> { GRAPH ?g { ?s <value> ?o FILTER(?o != <nothing>) } } GRAPH <rooms> { ?s <in> ?room } }")
    query = compile_query(text, base=BASE)
    assert list(query.windows) == [HERE + "w"] and query.windows[HERE + "w"].stream == HERE + "sensors/oxygen"
    assert query.output_stream == HERE + "out/levels" and query.from_named_graphs == [HERE + "rooms"]
    engine = rspstar.Engine(start=START)
    engine.load_background("<%srooms> { <http://example.org/s1> <%sin> <http://example.org/kitchen> . }" % (HERE, HERE))
    registered = engine.register(text, base=BASE)
    engine.push(HERE + "sensors/oxygen", trig("http://example.org/e1", "2026-03-01T08:00:01Z",
                                               "<http://example.org/s1> <%svalue> 18 ." % HERE))
    engine.advance("2026-03-01T08:00:02Z")
    assert sorted((r["subject"], r["predicate"], r["object"]) for r in registered.rows()) == [
        ("http://example.org/s1", HERE + "level", 18),
        ("http://example.org/s1", HERE + "seenIn", "http://example.org/kitchen")]


@pytest.mark.parametrize("declared,resolved", [
    ("BASE <../streams/>", "http://example.org/citybench/streams/"),     # relative to the retrieval IRI
    ("BASE <http://example.org/other/>", "http://example.org/other/"),  # absolute: the retrieval IRI is not used
])
def test_base_resolves_against_the_retrieval_iri_as_sparql_says(declared, resolved):
    text = "%s SELECT ?s FROM NAMED WINDOW <w> ON <oxygen> [RANGE PT2S] WHERE { WINDOW <w> { ?s ?p ?o } }" % declared
    query = compile_query(text, base=BASE)
    assert query.windows[resolved + "w"].stream == resolved + "oxygen"
    assert query.body.base == resolved
    # and with no retrieval IRI, only an absolute BASE serves
    if declared.startswith("BASE <http"):
        assert compile_query(text).windows[resolved + "w"].stream == resolved + "oxygen"


# RFC 3986 section 5.4's examples, and references a query writes: the engine's resolution (which
# names windows, streams and background graphs) and Oxigraph's (which evaluates the SPARQL the
# engine writes with the base before it) must give the same IRI.
_RFC_BASE = "http://a/b/c/d;p?q"
_REFERENCES = ["g:h", "g", "./g", "g/", "/g", "//g", "?y", "g?y", "#s", "g#s", "g?y#s", ";x", "g;x", "g;x?y#s", "",
               ".", "./", "..", "../", "../g", "../..", "../../", "../../g", "../../../g", "../../../../g", "/./g",
               "/../g", "g.", ".g", "g..", "..g", "./../g", "./g/.", "g/./h", "g/../h", "g;x=1/./y", "g;x=1/../y",
               "g?y/./x", "g?y/../x", "g#s/./x", "g#s/../x", "http:g", "http://x/a/../b", "file:///t/./q", "#",
               "culturalevents", "%41b", "\u00e9t\u00e9/"]


@pytest.mark.parametrize("base", [_RFC_BASE, "file:///tmp/queries/q4.rq", "http://host", "urn:example:q"])
def test_the_engine_resolves_as_oxigraph_does(base):
    store = ox.Store()
    for reference in _REFERENCES:
        try:
            [row] = store.query("SELECT (<%s> AS ?i) WHERE {}" % reference, base_iri=base)
        except SyntaxError:
            continue            # no IRI Oxigraph would evaluate (a urn: base has no hierarchy)
        assert resolve_iri("<%s>" % reference, IRI, {}, base) == row["i"].value, reference


def test_the_engine_resolves_generated_references_as_oxigraph_does():
    store = ox.Store()
    generator = random.Random(50)
    segments = ["", ".", "..", "a", "g;x", "%41", "\u00e9"]
    bases = [_RFC_BASE, "http://a", "urn:a/b/c", "mailto:x", "file:a/b", "tag:x:/a/b", "http://a/b/../c/", "x:"]
    compared = 0
    for _ in range(1500):
        path = "/".join(generator.choice(segments) for _ in range(generator.randint(0, 5)))
        reference = generator.choice(["", "", "/", "//h", "//h/"]) + path + generator.choice(["", "?y", "#s", "/"])
        base = generator.choice(bases)
        try:
            [row] = store.query("SELECT (<%s> AS ?i) WHERE {}" % reference, base_iri=base)
        except SyntaxError:
            with pytest.raises(ValueError):
                resolve_iri("<%s>" % reference, IRI, {}, base)
            continue
        assert resolve_iri("<%s>" % reference, IRI, {}, base) == row["i"].value, (base, reference)
        compared += 1
    assert compared > 1400


def test_service_targets_resolve_as_the_query_does():
    select = "SELECT * WHERE { SERVICE <sparql> { ?s ?p ?o } }"
    check_federation(select, ["http://allowed.example"], "http://allowed.example/queries")
    with pytest.raises(FederationNotAllowed, match="SERVICE <http://other.example/sparql>"):
        check_federation(select, ["http://allowed.example"], "http://other.example/queries")
    with pytest.raises(FederationNotAllowed, match="SERVICE <http://other.example/x/sparql>"):
        check_federation("BASE <http://other.example/x/> " + select, ["http://allowed.example"],
                         "http://allowed.example/queries")
    check_federation("BASE <x/> PREFIX s: <svc/> SELECT * WHERE { SERVICE s:sparql { ?s ?p ?o } }",
                     ["http://allowed.example"], "http://allowed.example/queries")
    with pytest.raises(FederationNotAllowed):
        check_federation(select, ["http://allowed.example"])       # nothing to resolve against: no origin


@pytest.mark.parametrize("given", ["queries/q4.rq", "http://example.org/a b", "http://example.org/a>", ""])
def test_the_base_option_takes_an_absolute_iri(given):
    with pytest.raises(OptionError, match="option base takes an absolute IRI"):
        QueryOptions.from_pairs({"base": given})


def test_check_prints_the_base_it_used(tmp_path, capsys):
    query = tmp_path / "q4.rq"
    query.write_text("SELECT ?s FROM NAMED <culturalevents> WHERE { GRAPH <culturalevents> { ?s ?p ?o } "
                     "STREAM <http://ex.org/s> [RANGE 3s] { ?s ?p ?o } }")
    assert main(["check", str(query)]) == 0
    checked = json.loads(capsys.readouterr().out)
    assert checked["base"] == query.resolve().as_uri()
    assert checked["base_from"] == "the query file's IRI (the query has no BASE)"
    assert checked["from_named"] == [query.resolve().parent.as_uri() + "/culturalevents"]
    assert main(["check", str(query), "--option", "base=" + BASE]) == 0
    checked = json.loads(capsys.readouterr().out)
    assert (checked["base"], checked["base_from"], checked["from_named"]) == (BASE, "option base",
                                                                              [HERE + "culturalevents"])
    query.write_text("BASE <../> " + query.read_text())
    assert main(["check", str(query), "--option", "base=" + BASE]) == 0
    checked = json.loads(capsys.readouterr().out)
    assert checked["base"] == "http://example.org/citybench/"
    assert checked["base_from"] == "the query's BASE (resolved against %s, the option base)" % BASE


def test_replay_resolves_against_the_query_files_iri(tmp_path):
    directory = tmp_path / "city bench"          # a space: the file: IRI escapes it
    directory.mkdir()
    query = directory / "q8.rq"
    query.write_text("select ?evtId ?title ?obId1\nfrom named <libraryevents>\nwhere {\n"
                     "graph <libraryevents> { ?evtId <http://purl.oclc.org/NET/sao/value> ?title . }\n"
                     "stream <http://example.org/parking> [range 2s slide 1s] { ?obId1 <http://example.org/v> ?v . }\n}\n")
    events = directory.resolve().as_uri() + "/libraryevents"
    (directory / "background.trig").write_text('<%s> { <http://example.org/evt1> <http://purl.oclc.org/NET/sao/value> '
                                               '"Reading club" . }\n' % events)
    (directory / "parking.trig").write_text(trig("http://example.org/e1", "2026-03-01T08:00:01Z",
                                                 "<http://example.org/ob1> <http://example.org/v> 3 ."))
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(query), "--stream", "http://example.org/parking=%s" % (directory / "parking.trig"),
                 "--background", str(directory / "background.trig"), "--from", "2026-03-01T08:00:00Z",
                 "--to", "2026-03-01T08:00:01Z", "--out", str(out)]) == 0
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["bindings"] == [{"evtId": "<http://example.org/evt1>", "title": '"Reading club"',
                                   "obId1": "<http://example.org/ob1>"}]


def test_a_query_registered_over_http_resolves_against_the_registration_url(client, engine):
    created = client.post("/queries", query_string={"id": "rel"}, headers=AUTH, content_type="application/sparql-query",
                          data="SELECT ?s FROM NAMED WINDOW <w> ON <streams/s> [RANGE PT2S] "
                               "WHERE { WINDOW <w> { GRAPH ?g { ?s ?p ?o } } }")
    assert created.status_code == 201, created.get_json()
    described = created.get_json()
    assert described["options"]["base"] == "http://localhost/queries"
    assert described["windows"][0]["stream"] == "http://localhost/streams/s"
    given = client.post("/queries", headers=AUTH, json={"id": "given", "options": {"base": "http://example.org/q/"},
                                                        "query": "SELECT ?s WHERE { GRAPH <rel> { ?s ?p ?o } "
                                                                 "STREAM <http://ex.org/s> [RANGE 3s] { ?s ?p ?o } }"})
    assert given.status_code == 201 and given.get_json()["options"]["base"] == "http://example.org/q/"
    refused = client.post("/queries", headers=AUTH, json={"query": "SELECT * WHERE { ?s ?p ?o }",
                                                          "options": {"base": "relative/"}})
    assert refused.status_code == 400 and "option base" in refused.get_json()["message"]


def test_post_and_put_resolve_against_the_configured_base_iri_alike(engine, tmp_path):
    # [http] base_iri is the base of every query registered at /queries: a PUT of the text a
    # POST registers means the same IRIs (it used to drop the base's last segment, as it drops
    # the query's id from the URL it was sent to).
    from rspstar.endpoint.http import HttpSettings, create_app
    client = create_app(engine, HttpSettings(token=TOKEN, base_iri="http://example.org/app/queries",
                                             landing_dir=tmp_path / "landing")).test_client()
    text = "SELECT ?s FROM NAMED WINDOW <w> ON <streams/s> [RANGE PT2S] WHERE { WINDOW <w> { GRAPH ?g { ?s ?p ?o } } }"
    posted = client.post("/queries", query_string={"id": "posted"}, headers=AUTH,
                         content_type="application/sparql-query", data=text)
    put = client.put("/queries/put", headers=AUTH, content_type="application/sparql-query", data=text)
    assert (posted.status_code, put.status_code) == (201, 201), (posted.get_json(), put.get_json())
    for described in (posted.get_json(), put.get_json()):
        assert described["options"]["base"] == "http://example.org/app/queries"
        assert described["windows"][0]["stream"] == "http://example.org/app/streams/s"


def test_configured_queries_resolve_against_their_base_or_their_file(tmp_path):
    (tmp_path / "queries").mkdir()
    text = "SELECT ?s FROM NAMED WINDOW <w> ON <oxygen> [RANGE PT2S] WHERE { WINDOW <w> { GRAPH ?g { ?s ?p ?o } } }"
    (tmp_path / "queries" / "a.rq").write_text(text)
    (tmp_path / "queries" / "b.rq").write_text(text)
    config = tmp_path / "rspstar.toml"
    config.write_text('[[queries]]\nfile = "queries/a.rq"\nid = "a"\n\n'
                      '[[queries]]\nfile = "queries/b.rq"\nid = "b"\nbase = "http://example.org/tunnel/"\n')
    loaded = load_config(config)
    engine = Runner(StreamStore(), VirtualClock(0), loaded.engine)
    assert register_configured(engine, loaded) == ["a", "b"]
    assert engine.get("a").query.streams == [(tmp_path / "queries").resolve().as_uri() + "/oxygen"]
    assert engine.get("b").query.streams == ["http://example.org/tunnel/oxygen"]
    config.write_text('[[queries]]\nfile = "queries/a.rq"\noptions = { base = "http://example.org/" }\n')
    with pytest.raises(Exception, match="base is a key of \\[\\[queries\\]\\] itself"):
        load_config(config)


def test_a_restarted_engine_reads_a_query_with_the_base_it_was_registered_with(tmp_path):
    text = "SELECT ?s FROM NAMED WINDOW <w> ON <oxygen> [RANGE PT2S] WHERE { WINDOW <w> { GRAPH ?g { ?s ?p ?o } } }"
    first = Runner(StreamStore(), VirtualClock(0), EngineConfig(data_dir=tmp_path))
    first.register(text, "q", options={"base": "http://example.org/tunnel/"})
    again = Runner(StreamStore(), VirtualClock(0), EngineConfig(data_dir=tmp_path))
    assert again.get("q").query.streams == ["http://example.org/tunnel/oxygen"]


def test_parts_made_from_a_query_keep_its_base(tmp_path):
    # A join of two windows is evaluated window by window (each part is a text parsed again), and
    # queries differing in constants share one text: both must read relative IRIs as the query does.
    query = tmp_path / "join.rq"
    query.write_text("SELECT ?s ?t ?v ?w FROM NAMED WINDOW <a> ON <oxygen> [RANGE PT2S] "
                     "FROM NAMED WINDOW <b> ON <temperature> [RANGE PT2S] "
                     "WHERE { WINDOW <a> { GRAPH ?g { ?s <value> ?v FILTER(?v < 19.5) } } "
                     "WINDOW <b> { GRAPH ?h { ?t <value> ?w } } }")
    copy = tmp_path / "copy.rq"
    copy.write_text(query.read_text().replace("19.5", "17.5"))
    for stream, value in (("oxygen", 18), ("temperature", 21)):
        (tmp_path / (stream + ".trig")).write_text(trig("http://example.org/%s1" % stream, "2026-03-01T08:00:01Z",
                                                        "<http://example.org/%s> <%svalue> %d ." % (stream, HERE, value)))
    results = {}
    for incremental in ("true", "false"):
        out = tmp_path / incremental
        assert main(["replay", str(query), str(copy), "--option", "base=" + BASE, "--option", "incremental=" + incremental,
                     "--stream", HERE + "oxygen=%s" % (tmp_path / "oxygen.trig"),
                     "--stream", HERE + "temperature=%s" % (tmp_path / "temperature.trig"),
                     "--from", "2026-03-01T08:00:00Z", "--to", "2026-03-01T08:00:02Z", "--out-dir", str(out)]) == 0
        results[incremental] = [(out / name).read_text() for name in ("join.jsonl", "copy.jsonl")]
    assert results["true"] == results["false"]
    integer = '"%d"^^<http://www.w3.org/2001/XMLSchema#integer>'
    assert json.loads(results["true"][0])["bindings"] == [{"s": "<http://example.org/oxygen>", "v": integer % 18,
                                                           "t": "<http://example.org/temperature>", "w": integer % 21}]
    assert json.loads(results["true"][1])["bindings"] == []
