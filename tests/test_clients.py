"""The clients a user already has, each with its default settings, against the real server
(waitress, in a process of its own, as `rspstar serve` runs it): SPARQLWrapper, rdflib's
SPARQLStore and result parser, pyoxigraph's parser, curl, and a raw socket cut for server-sent
events."""
import io
import json
import shutil
import socket
import subprocess
import time

import pyoxigraph as ox
import pytest
import rdflib
import requests
from rdflib.query import Result
from SPARQLWrapper import SPARQLWrapper

import served

SELECT = "PREFIX ex: <http://example.org/> SELECT ?s ?r WHERE { ?s ex:room ?r }"
ASK = "PREFIX ex: <http://example.org/> ASK { ?s ex:room ex:kitchen }"
CONSTRUCT = "PREFIX ex: <http://example.org/> CONSTRUCT { ?s ex:in ?r } WHERE { ?s ex:room ?r }"
KITCHEN = (rdflib.URIRef("http://example.org/s1"), rdflib.URIRef("http://example.org/kitchen"))


@pytest.fixture(scope="module")
def server():
    process, base, port = served.start(token="t", max_event_streams=8, event_keepalive=0.5, threads=16)
    yield base, port
    process.kill()
    process.wait()


# -- SPARQLWrapper: it adds format=, output= and results= to every query --------------------------
def test_sparqlwrapper_with_its_default_settings_reads_select_ask_and_construct(server):
    base, _ = server
    select = SPARQLWrapper(base + "/sparql")
    select.setQuery(SELECT)
    dom = select.query().convert()                       # XML by default, as a DOM
    assert [u.firstChild.data for u in dom.getElementsByTagName("uri")] == [str(t) for t in KITCHEN]
    ask = SPARQLWrapper(base + "/sparql")
    ask.setQuery(ASK)
    assert ask.query().convert().getElementsByTagName("boolean")[0].firstChild.data == "true"
    construct = SPARQLWrapper(base + "/sparql")
    construct.setQuery(CONSTRUCT)
    graph = construct.query().convert()                  # RDF/XML, parsed by rdflib
    assert set(graph) == {(KITCHEN[0], rdflib.URIRef("http://example.org/in"), KITCHEN[1])}


@pytest.mark.parametrize("form,expected", [("json", {"application/sparql-results+json"}),
                                           ("csv", {"text/csv"}), ("tsv", {"text/tab-separated-values"}),
                                           ("xml", {"application/sparql-results+xml"})])
def test_sparqlwrapper_in_each_results_format_and_over_post(server, form, expected):
    base, _ = server
    for method in ("GET", "POST"):
        client = SPARQLWrapper(base + "/sparql", returnFormat=form)
        client.setMethod(method)
        client.setQuery(SELECT)
        answer = client.query()
        assert answer.info()["content-type"].split(";")[0] in expected
        converted = answer.convert()
        if form == "json":
            assert converted["results"]["bindings"][0]["r"]["value"] == str(KITCHEN[1])
        elif form in ("csv", "tsv"):
            assert str(KITCHEN[1]).encode() in converted


@pytest.mark.parametrize("form,media", [("turtle", "text/turtle"), ("json-ld", "application/ld+json"),
                                        ("n3", "text/turtle"), ("rdf+xml", "application/rdf+xml")])
def test_sparqlwrapper_construct_in_each_graph_format(server, form, media):
    base, _ = server
    client = SPARQLWrapper(base + "/sparql", returnFormat=form)
    client.setQuery(CONSTRUCT)
    answer = client.query()
    assert answer.info()["content-type"].split(";")[0] == media
    body = answer.response.read()
    graph = rdflib.Graph().parse(data=body, format={"text/turtle": "turtle", "application/ld+json": "json-ld",
                                                    "application/rdf+xml": "xml"}[media])
    assert (KITCHEN[0], rdflib.URIRef("http://example.org/in"), KITCHEN[1]) in graph


def test_the_format_parameter_replaces_the_accept_header_and_an_unknown_one_is_a_400(server):
    base, _ = server
    for name, media in (("json", "application/sparql-results+json"), ("xml", "application/sparql-results+xml"),
                        ("csv", "text/csv"), ("tsv", "text/tab-separated-values"),
                        ("text/csv", "text/csv"), ("application/sparql-results+json", "application/sparql-results+json")):
        for parameter in ("format", "output"):
            got = requests.get(base + "/sparql", params={"query": SELECT, parameter: name},
                               headers={"Accept": "application/sparql-results+xml"}, timeout=10)
            assert got.status_code == 200 and got.headers["Content-Type"].split(";")[0] == media, (parameter, name)
    graph = requests.get(base + "/sparql", params={"query": CONSTRUCT, "format": "json"}, timeout=10)
    assert graph.status_code == 200 and graph.headers["Content-Type"].startswith("application/ld+json")
    unknown = requests.get(base + "/sparql", params={"query": SELECT, "format": "yaml"}, timeout=10)
    assert unknown.status_code == 400
    assert "'yaml'" in unknown.json()["message"] and "json, xml, csv, tsv" in unknown.json()["message"]
    not_a_graph = requests.get(base + "/sparql", params={"query": CONSTRUCT, "format": "csv"}, timeout=10)
    assert not_a_graph.status_code == 406 and "graphs are served as" in not_a_graph.json()["message"]
    description = requests.get(base + "/sparql", params={"format": "json-ld"}, timeout=10)
    assert description.status_code == 200 and description.headers["Content-Type"].startswith("application/ld+json")
