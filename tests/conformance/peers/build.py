#!/usr/bin/env python3
"""Builds the peer corpus (README.md here): every query file taken from the public repositories
of the RSP engines and benchmarks people use, copied as it is under `files/`, indexed in
`corpus.json` with its provenance (repository, commit, path, lines for a query written in test
code) and licence, and for each one that runs, a conformance case under `../cases/` over data
taken from its repository or generated as its wrappers generate it, its expected results
computed by the naive reference of `tests/differential/corpus.py` (Oxigraph over a store per
instant, each window's content picked by the spec's formulas: nothing of the engine).

    python tests/conformance/peers/build.py --repo OWNER/NAME=GIT_DIR [--repo ...]

GIT_DIR is a clone (or bare copy) of each repository holding the commit named in REPOSITORIES;
files are read with `git show COMMIT:PATH`, so what is copied is that commit's. Run it again
after changing it: it rewrites `files/`, `corpus.json` and the cases it makes (prefixed with
their source's name), and leaves every other case alone. The reference texts (`reference.rq`)
are derived from each query's text by the rules of `reference_text` below (spec 6.15 for RSP-QL,
6.5 for C-SPARQL and CQELS-QL), written out so that a reader can check each one by eye.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin

import pyoxigraph as ox

HERE = Path(__file__).resolve().parent
CASES = HERE.parent / "cases"
TESTS = HERE.parents[1]
sys.path.insert(0, str(TESTS))

from differential.corpus import records  # noqa: E402  (the reference; after sys.path)

# Repository: (commit, licence, what the licence file says).
REPOSITORIES = {
    "streamreasoning/rsp4j": ("c46e0f674fb740b85543e73d8013196b18763abd", "Apache-2.0"),
    "CityBench/Benchmark": ("8884af6d907d7171910ae322ee66e32b89ebc491", "GPL-3.0"),
    "pbonte/RSP-JS": ("7aaf44a490a6629ee47fca9c055c6dee01cba573", "MIT"),
    "SolidLabResearch/rsp-rs": ("b374875e1de2790295b425d6f3a31c0692b22004", "MIT"),
    "StreamIntelligenceLab/Kolibrie": ("846becb1c59e327bc10f7a3047295045e1f6de5e", "MPL-2.0"),
    "Comparative-Research-in-StreamReasoning/CSRBench-Aligned": ("89dbad1afd729e606788dba97e5659063120d7cf",
                                                                 "Apache-2.0"),
    "YABench/yabench": ("a3acfe24c1a2c1ff6ce409d6a5db287bd054be04", "none stated (no licence file or pom licence)"),
}
SOURCES = {"rsp4j": "streamreasoning/rsp4j", "citybench": "CityBench/Benchmark", "rsp-js": "pbonte/RSP-JS",
           "rsp-rs": "SolidLabResearch/rsp-rs", "kolibrie": "StreamIntelligenceLab/Kolibrie",
           "csrbench-aligned": "Comparative-Research-in-StreamReasoning/CSRBench-Aligned", "yabench": "YABench/yabench"}
GIT_DIRS: dict[str, Path] = {}

PROV = "http://www.w3.org/ns/prov#generatedAtTime"
XSD = "http://www.w3.org/2001/XMLSchema#"


def git_show(repo: str, path: str) -> bytes:
    commit = REPOSITORIES[repo][0]
    return subprocess.run(["git", "--git-dir", str(GIT_DIRS[repo]), "show", "%s:%s" % (commit, path)],
                          check=True, capture_output=True).stdout


def git_files(repo: str) -> list[str]:
    commit = REPOSITORIES[repo][0]
    out = subprocess.run(["git", "--git-dir", str(GIT_DIRS[repo]), "ls-tree", "-r", "--name-only", commit],
                         check=True, capture_output=True, text=True).stdout
    return out.splitlines()


# -- corpus entries -------------------------------------------------------------------------------
@dataclass
class Entry:
    """One query text of the corpus: `files/<source>/<name>`, its provenance, and what it does
    here: `case` (the conformance case running it; `changes` when the case runs it changed,
    `empty` when it answers nothing, as in its own engine, and why) or `refused` (a piece of the
    error message, naming the construct)."""
    source: str
    name: str
    path: str
    text: str
    lines: str | None = None
    case: str | None = None
    changes: list[str] = field(default_factory=list)
    empty: str | None = None
    refused: str | None = None
    note: str = ""
    also: list[str] = field(default_factory=list)        # the same text at other places
    options: dict = field(default_factory=dict)           # a refused entry's options (its dialect)
    base: str | None = None

    @property
    def repo(self) -> str:
        return SOURCES[self.source]

    def index(self) -> dict:
        commit, licence = REPOSITORIES[self.repo]
        found = {"file": "files/%s/%s" % (self.source, self.name), "repository": "https://github.com/%s" % self.repo,
                 "commit": commit, "path": self.path, "licence": licence}
        if self.lines:
            found["lines"] = self.lines
        if self.also:
            found["also_at"] = self.also
        if self.refused is not None:
            found["refused"] = self.refused
            if self.options:
                found["options"] = self.options
            if self.base:
                found["base"] = self.base
        else:
            found["case"] = self.case
            if self.changes:
                found["changes"] = self.changes
            if self.empty:
                found["empty"] = self.empty
        if self.note:
            found["note"] = self.note
        if self.source == "yabench" and self.name.endswith("-fixture"):
            found["query"] = "written here: the fixture is data and windows, read by the case's query"
        return found


ENTRIES: list[Entry] = []


def entry(source: str, name: str, path: str, text: str | None = None, **kw) -> Entry:
    if text is None:
        text = git_show(SOURCES[source], path).decode("utf-8")
    found = Entry(source, name, path, text, **kw)
    ENTRIES.append(found)
    return found


# -- durations and IRIs -------------------------------------------------------------------------
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def ms_text(ms: int) -> str:
    seconds, rest = divmod(ms, 1000)
    return "PT%d%sS" % (seconds, ("." + "%03d" % rest).rstrip("0") if rest else "")


def xsd_ms(text: str) -> int:
    """PT3S, PT1M, PT0.5S, PT1H, or a bare integer of milliseconds (RSP-JS), in milliseconds."""
    if re.fullmatch(r"\d+", text):
        return int(text)
    m = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?", text)
    hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return round((hours * 3600 + minutes * 60 + seconds) * 1000)


def csparql_ms(text: str) -> int:
    """3000ms, 3s, 1m: C-SPARQL's and CQELS's durations."""
    m = re.fullmatch(r"(\d+)\s*(ms|s|m|h|d)", text.strip(), re.I)
    return int(m.group(1)) * _UNITS_MS[m.group(2).lower()]


def prefixes_of(text: str) -> dict[str, str]:
    return {p: iri for p, iri in re.findall(r"PREFIX\s+([\w.-]*):\s*<([^>]*)>", text, re.I)}


def resolve(term: str, prefixes: dict[str, str], base: str) -> str:
    if term.startswith("<"):
        return urljoin(base, term[1:-1])
    prefix, _, local = term.partition(":")
    return prefixes[prefix] + local


def matching_brace(text: str, open_at: int) -> int:
    depth = 0
    for k in range(open_at, len(text)):
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    raise ValueError("unbalanced braces")


# -- reference texts -------------------------------------------------------------------------------
_IRI_OR_NAME = r"(<[^>]*>|[\w.-]*:[\w./-]*)"


def rspql_reference(text: str, base: str) -> tuple[str, dict, list[str]]:
    """The reference's reading of an RSP-QL query (spec 6.15): (reference.rq, windows, FROM
    graphs). REGISTER and the dataset clauses go (the reference puts the windows' contents in
    graphs, the FROM graphs in the default graph); `WINDOW <w> { P }`, P holding no GRAPH
    pattern, becomes `GRAPH $merged(<w>) { P }` (its elements' merged content and timestamps);
    `WINDOW ?w { P }` becomes `{ GRAPH ?w { P } FILTER(?w IN (windows)) }`, the reference naming
    each window's merged graph by the window's IRI."""
    prefixes = prefixes_of(text)
    windows, graphs = {}, []
    body = re.sub(r"REGISTER\s+\w+\s+\S+\s+(COMPUTED\s+EVERY\s+\S+\s+)?AS\b", "", text, flags=re.I)

    def window(m):
        iri, stream = resolve(m.group(1), prefixes, base), resolve(m.group(2), prefixes, base)
        spec = re.fullmatch(r"\s*RANGE\s+(\S+)(?:\s+STEP\s+(\S+))?\s*", m.group(3), re.I)
        width = xsd_ms(spec.group(1))
        windows[iri] = {"stream": stream, "range": ms_text(width), "step": ms_text(xsd_ms(spec.group(2) or spec.group(1)))}
        return ""
    body = re.sub(r"FROM\s+NAMED\s+WINDOW\s+%s\s+ON\s+(?:STREAM\s+)?%s\s*\[([^\]]*)\]" % (_IRI_OR_NAME, _IRI_OR_NAME),
                  window, body, flags=re.I)

    def from_graph(m):
        graphs.append(resolve(m.group(1), prefixes, base))
        return ""
    body = re.sub(r"FROM\s+%s" % _IRI_OR_NAME, from_graph, body, flags=re.I)
    out, at = [], 0
    for m in re.finditer(r"WINDOW\s+(\?\w+|%s)\s*\{" % _IRI_OR_NAME, body, re.I):
        close = matching_brace(body, m.end() - 1)
        inner = body[m.end():close]
        if re.search(r"\bGRAPH\b", inner, re.I):
            raise ValueError("a WINDOW block with GRAPH: write its reference by hand")
        out.append(body[at:m.start()])
        if m.group(1).startswith("?"):
            out.append("{ GRAPH %s {%s} FILTER(%s IN (%s)) }" % (m.group(1), inner, m.group(1),
                                                                 ", ".join("<%s>" % w for w in windows)))
        else:
            out.append("GRAPH $merged(<%s>) {%s}" % (resolve(m.group(1), prefixes, base), inner))
        at = close + 1
    out.append(body[at:])
    return "BASE <%s>\n%s" % (base, "".join(out).strip() + "\n"), windows, graphs


def dialect_reference(text: str, dialect: str, base: str) -> tuple[str, dict, list[str]]:
    """The reference's reading of a C-SPARQL or CQELS-QL query (spec 6.5). C-SPARQL: `FROM
    STREAM <s> [RANGE a STEP b]` declares a window keyed by its stream (<s>#2 for a second one on
    the same stream), bounds (x − a, x]; the WHERE clause reads `$merge`, every window's merged
    content with the default graph outside windows (the FROM graphs). CQELS-QL: `STREAM <s>
    [RANGE a] { P }` becomes `GRAPH $merged(<s>) { P }`, windows (t − a, t] at each arrival."""
    prefixes = prefixes_of(text)
    windows, graphs = {}, []
    body = re.sub(r"REGISTER\s+(QUERY|STREAM)\s+\S+\s+(COMPUTED\s+EVERY\s+\S+\s+)?AS\b", "", text, flags=re.I)

    def add_window(stream: str, spec: str) -> str:
        m = re.fullmatch(r"\s*RANGE\s+(\d+\s*\w+)(?:\s+(?:STEP|SLIDE)\s+(\d+\s*\w+))?\s*", spec, re.I)
        width = csparql_ms(m.group(1))
        step = csparql_ms(m.group(2)) if m.group(2) else width
        same = sum(1 for w in windows.values() if w["stream"] == stream)
        iri = stream if not same else "%s#%d" % (stream, same + 1)
        windows[iri] = {"stream": stream, "range": ms_text(width), "step": ms_text(step), "upper_closed": True}
        return iri
    if dialect == "csparql":
        def stream(m):
            add_window(resolve(m.group(1), prefixes, base), m.group(2))
            return ""
        body = re.sub(r"FROM\s+STREAM\s+%s\s*\[([^\]]*)\]" % _IRI_OR_NAME, stream, body, flags=re.I)

        def from_graph(m):
            graphs.append(resolve(m.group(1), prefixes, base))
            return ""
        body = re.sub(r"FROM\s+%s" % _IRI_OR_NAME, from_graph, body, flags=re.I)
        where = re.search(r"WHERE\s*\{", body, re.I)
        close = matching_brace(body, where.end() - 1)
        body = "%sWHERE { GRAPH $merge {%s} }%s" % (body[:where.start()], body[where.end():close], body[close + 1:])
    else:
        body = re.sub(r"FROM\s+NAMED\s+%s" % _IRI_OR_NAME, "", body, flags=re.I)

        def stream(m):
            iri = add_window(resolve(m.group(1), prefixes, base), m.group(2))
            return "GRAPH $merged(<%s>) {" % iri
        body = re.sub(r"STREAM\s+%s\s*\[([^\]]*)\]\s*\{" % _IRI_OR_NAME, stream, body, flags=re.I)
    return "BASE <%s>\n%s" % (base, body.strip() + "\n"), windows, graphs


# -- cases -----------------------------------------------------------------------------------------
def instant(ms: int) -> str:
    import time as _time
    seconds, rest = divmod(ms, 1000)
    text = "%04d-%02d-%02dT%02d:%02d:%02d" % _time.gmtime(seconds)[:6]
    return text + (("." + "%03d" % rest).rstrip("0") if rest else "") + "Z"


@dataclass
class Element:
    graph: str
    time: int           # ms since the epoch
    turtle: str          # the graph's content, Turtle (prefixes of the stream file)


def stream_trig(elements: list[Element], prefixes: str = "") -> str:
    lines = ["@prefix prov: <http://www.w3.org/ns/prov#> .", "@prefix xsd: <%s> ." % XSD, prefixes.strip()]
    for e in elements:
        lines.append('<%s> prov:generatedAtTime "%s"^^xsd:dateTime .' % (e.graph, instant(e.time)))
        lines.append("<%s> {\n%s\n}" % (e.graph, e.turtle.strip()))
    return "\n".join(line for line in lines if line) + "\n"


@dataclass
class Case:
    name: str
    entry: Entry
    query: str
    streams: dict[str, str]                 # stream IRI: TriG
    start: int                              # ms: evaluation instants after this ...
    end: int                                # ... up to this
    reference: dict                         # reference.json without "query"
    reference_rq: str
    background: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    data: str = ""                          # README: where the data comes from
    semantics: str = ""                     # README: what the engine answers and why
    title: str = ""


def write_case(case: Case) -> list[dict]:
    folder = CASES / case.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "query.rq").write_text(case.query)
    streams = {}
    for k, (iri, trig) in enumerate(sorted(case.streams.items()), 1):
        file = "stream%d.trig" % k
        (folder / file).write_text(trig)
        streams[iri] = file
    manifest = {"description": case.title or "%s, from %s" % (case.entry.name, case.entry.repo), "query": "query.rq",
                "streams": streams}
    if case.background is not None:
        (folder / "background.trig").write_text(case.background)
        manifest["background"] = "background.trig"
    manifest.update({"from": instant(case.start), "to": instant(case.end), "ordered": False})
    if case.options:
        manifest["options"] = case.options
    manifest["expected"] = "expected.jsonl"
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (folder / "reference.json").write_text(json.dumps({"query": "reference.rq", **case.reference}, indent=2) + "\n")
    (folder / "reference.rq").write_text(case.reference_rq)
    import time as _time
    began = _time.perf_counter()
    found = records(folder)
    print("%s: %d records, %.1f s" % (case.name, len(found), _time.perf_counter() - began), file=sys.stderr)
    (folder / "expected.jsonl").write_text(stable_blank_nodes("".join(json.dumps(r, sort_keys=True) + "\n"
                                                                      for r in found)))
    e = case.entry
    commit, licence = REPOSITORIES[e.repo]
    where = "`%s`%s" % (e.path, " lines %s" % e.lines if e.lines else "")
    changes = "\n".join("- %s" % c for c in e.changes) if e.changes else "None: `query.rq` is the file as written."
    answered = sum(bool(r.get("bindings") or r.get("triples") or "boolean" in r) for r in found)
    outcome = ("%d of %d evaluations answer something." % (answered, len(found)) if not e.empty else
               "No evaluation answers anything: %s." % e.empty)
    readme = """# %s

Source: https://github.com/%s at %s, %s (licence: %s); the corpus keeps the text as taken
in `tests/conformance/peers/files/%s/%s`.

## Changes to the query

%s

## Data

%s

## Expected results

%s

%s

Computed by the naive reference (`tests/differential/corpus.py`): `reference.json` (the
windows, their bounds, the report policy, the R2S operator) and `reference.rq` (the query with
each window written out as the specification defines its dataset, by the rules of
`tests/conformance/peers/build.py`), each window's content picked from the stream files by the
spec's formulas at every instant, over a fresh Oxigraph store; `tests/test_peer_corpus.py`
checks that `expected.jsonl` is what it gives.
""" % (case.title or "%s (%s)" % (e.name, e.repo), e.repo, commit, where, licence, e.source, e.name, changes,
       case.data.strip(), case.semantics.strip(), outcome)
    (folder / "README.md").write_text(readme)
    e.case = case.name
    return found


def ntriples(triples) -> str:
    """N-Triples, sorted, blank nodes labelled in order of appearance (the same text at every
    build: Oxigraph's own labels are drawn at random)."""
    triples = list(dict.fromkeys(triples))

    def key(t):
        return tuple("" if isinstance(x, ox.BlankNode) else str(x) for x in (t.subject, t.predicate, t.object))
    labels: dict = {}

    def term(x):
        if isinstance(x, ox.BlankNode):
            return labels.setdefault(x, "_:b%d" % (len(labels) + 1))
        return str(x)
    lines = ["%s %s %s ." % (term(t.subject), term(t.predicate), term(t.object)) for t in sorted(triples, key=key)]
    return "".join(line + "\n" for line in lines)


def stable_blank_nodes(text: str) -> str:
    """A records file with its blank node labels renumbered in order of appearance (any blank
    node matches any in the comparison)."""
    labels: dict = {}
    return re.sub(r"_:[A-Za-z0-9]+", lambda m: labels.setdefault(m.group(0), "_:b%d" % (len(labels) + 1)), text)


def _values(*key) -> "random.Random":
    import random
    return random.Random(int(hashlib.sha256(repr(key).encode()).hexdigest()[:12], 16))


# -- CityBench ------------------------------------------------------------------------------------
SES = "http://www.insight-centre.org/dataset/SampleEventService#"
SSN = "http://purl.oclc.org/NET/ssnx/ssn#"
SAO = "http://purl.oclc.org/NET/sao/"
CT = "http://www.insight-centre.org/citytraffic#"
RDF_TYPE = ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
CITYBENCH_T0 = 1406880000000        # 2014-08-01T08:00:00Z, in the weeks CityBench's data covers
# Users' locations: near the cultural events' venues (within 0.1 degree², which CityBench's
# distance filters keep) and far from them, in turn.
NEAR, FAR = (56.1522, 10.1991), (56.31, 10.61)


class CityBench:
    """A slice of CityBench's static datasets and sensor streams written as its stream
    wrappers write observations (src/org/insight_centre/aceis/io/streams/csparql/*Stream.java:
    per payload of the service, `<ob> a ssn:Observation; ssn:observedBy <service>;
    ssn:observedProperty <property>; sao:hasValue value`, the location stream's value a node
    with ct:hasLatitude and ct:hasLongitude)."""

    def __init__(self):
        repo = SOURCES["citybench"]
        self.sensors = ox.Store()
        self.sensors.load(git_show(repo, "dataset/SensorRepository.n3"), format=ox.RdfFormat.TURTLE)
        self.events = {}
        for name, path in (("cultural", "dataset/AarhusCulturalEvents.n3"), ("library", "dataset/AarhusLibraryEvents.n3")):
            store = ox.Store()
            store.load(git_show(repo, path), format=ox.RdfFormat.TURTLE)
            self.events[name] = store

    def observed(self, service: str) -> list[tuple[str, str]]:
        """(property, its class) of each property the service observes, by IRI."""
        found = []
        for q in self.sensors.quads_for_pattern(ox.NamedNode(SES + service), ox.NamedNode(SSN + "observes"), None):
            for t in self.sensors.quads_for_pattern(q.object, RDF_TYPE, None):
                found.append((q.object.value, t.object.value))
        return sorted(found)

    def sensor_slice(self, services) -> list[ox.Triple]:
        """The services' ssn:observes, their properties and the properties' features of interest."""
        triples = []
        for service in sorted(services):
            s = ox.NamedNode(SES + service)
            triples += [q.triple for q in self.sensors.quads_for_pattern(s, ox.NamedNode(SSN + "observes"), None)]
            for prop, _ in self.observed(service):
                p = ox.NamedNode(prop)
                triples += [q.triple for q in self.sensors.quads_for_pattern(p, None, None)]
                for foi in self.sensors.quads_for_pattern(p, ox.NamedNode(SSN + "isPropertyOf"), None):
                    triples += [q.triple for q in self.sensors.quads_for_pattern(foi.object, None, None)]
        return triples

    def event_slice(self, which: str, count: int = 3) -> list[ox.Triple]:
        """The first `count` events (sao:Point, by IRI) with their features of interest and nodes."""
        store = self.events[which]
        points = sorted({q.subject.value for q in store.quads_for_pattern(None, RDF_TYPE, ox.NamedNode(SAO + "Point"))})
        triples, taken = [], 0
        for point in points:
            foi = [q.object for q in store.quads_for_pattern(ox.NamedNode(point), ox.NamedNode(SSN + "featureOfInterest"), None)]
            nodes = [q.object for f in foi for q in store.quads_for_pattern(f, ox.NamedNode(CT + "hasFirstNode"), None)]
            if not nodes:
                continue
            for subject in [ox.NamedNode(point)] + foi + nodes:
                for q in store.quads_for_pattern(subject, None, None):
                    triples.append(q.triple)
                    if isinstance(q.object, ox.BlankNode) and q.object not in nodes:
                        triples += [r.triple for r in store.quads_for_pattern(q.object, None, None)]
            taken += 1
            if taken == count:
                break
        return triples

    def observation(self, service: str, second: int, n: int, prop: str, kind: str) -> str:
        r = _values(service, second, prop)
        ob = "<%s%s-observation-%g-%d>" % (SES, service, second, n)
        head = "%s a <%sObservation> ; <%sobservedBy> <%s%s> ; <%sobservedProperty> <%s> ;" % (
            ob, SSN, SSN, SES, service, SSN, prop)
        local = kind.rpartition("#")[2]
        if local == "Location":
            lat, lon = NEAR if int(second) % 2 else FAR
            return ('%s <%sfeatureOfInterest> <http://iot.ee.surrey.ac.uk/citypulse/datasets/aarhusculturalevents/'
                    'culturalEvents_aarhus#context_do63jk2t8c3bjkfb119ojgkhs7> ;\n  <%shasValue> [ <%shasLatitude> '
                    '"%s"^^xsd:double ; <%shasLongitude> "%s"^^xsd:double ] .' % (head, SSN, SAO, CT, lat, CT, lon))
        if local in ("ParkingVacancy",):
            value = str(r.choice([0, 0, 3, 7, 12]))
        elif local in ("API", "Humidity"):
            value = str(r.randint(20, 150) if local == "API" else r.randint(60, 95))
        else:
            low, high = {"AvgSpeed": (30, 80), "VehicleCount": (0, 20), "CongestionLevel": (0, 4),
                         "Temperature": (5, 20), "WindSpeed": (0, 12)}.get(local, (50, 120))
            value = '"%.1f"^^xsd:double' % r.uniform(low, high)
        return "%s <%shasValue> %s ." % (head, SAO, value)

    def stream(self, service: str, seconds=range(1, 7)) -> str:
        elements = []
        for second in seconds:
            content = "\n".join(self.observation(service, second, n, prop, kind)
                                for n, (prop, kind) in enumerate(self.observed(service), 1))
            elements.append(Element("http://example.org/citybench/%s/%g" % (service, second),
                                    CITYBENCH_T0 + round(second * 1000), content))
        return stream_trig(elements)

    def background(self, graphs: dict[str | None, str]) -> str:
        """TriG: each graph (None: the default graph) holding a slice: `sensors:A,B` (those
        services'), `cultural`, `library`."""
        parts = []
        for graph, what in graphs.items():
            if what.startswith("sensors:"):
                triples = self.sensor_slice(what[8:].split(","))
            else:
                triples = self.event_slice(what)
            text = ntriples(triples)
            parts.append(text if graph is None else "<%s> {\n%s}\n" % (graph, text))
        return "".join(parts)


def citybench_services(text: str) -> list[str]:
    return sorted(set(re.findall(r"SampleEventService#(Aarhus\w+|UserLocationService)", text)) |
                  set(re.findall(r"ses:(Aarhus\w+|UserLocationService)", text)))


def citybench_case(cb: CityBench, e: Entry, dialect: str, base: str, query: str | None = None,
                   options: dict | None = None) -> list[dict]:
    """A case running a CityBench query (CityBench's own, or RSP4J's CityBench queries) over six
    seconds of its sensors' streams and a slice of its static datasets."""
    query = e.text if query is None else query
    if dialect == "rspql":
        rq, windows, graphs = rspql_reference(query, base)
        m = re.search(r"REGISTER\s+(\w+)", query, re.I)
        r2s = {"STREAM": "RSTREAM"}.get(m.group(1).upper(), m.group(1).upper()) if m else "RSTREAM"
        reference = {"windows": windows, "r2s": r2s}
        semantics = ("RSP-QL: every window closes at x = a + i*b (t0 the epoch), holding [x - a, x); "
                     "a WINDOW block holding no GRAPH pattern reads its elements' merged content and their "
                     "timestamp triples (spec 6.15); R2S %s." % r2s)
    else:
        rq, windows, graphs, reference, semantics = dialect_case_reference(query, dialect, base)
    if graphs:
        reference["from"] = graphs
    named = {}
    for graph in graphs + [resolve(g, prefixes_of(query), base) for g in
                           re.findall(r"FROM\s+NAMED\s+(<[^>]*>)", query, re.I) if "WINDOW" not in g]:
        leaf = graph.rpartition("/")[2].lower()
        if "sensorrepository" in leaf:
            named[graph] = "sensors:" + ",".join(citybench_services(query))
        elif "cultural" in leaf:
            named[graph] = "cultural"
        elif "library" in leaf:
            named[graph] = "library"
    if not graphs:
        named = {None: "sensors:" + ",".join(citybench_services(query)), **named}
    dense = bool(re.search(r"having\s*\(\s*count", query, re.I))
    longest = max(xsd_ms(w["range"]) for w in windows.values())
    # The slice: readings every second (twice a second where the query counts more than three
    # in a window), fewer where the query's joins multiply its rows past what a case should hold.
    slices = ([[k / 2 for k in range(2, 14)]] if dense else
              [list(range(1, 7 if longest <= 6000 else 13)), [1, 4] if longest <= 6000 else [1, 4, 10], [3, 8]])
    for seconds in slices:
        streams = {w["stream"]: cb.stream(w["stream"].rpartition("#")[2], seconds) for w in windows.values()}
        case = citybench_slice(cb, e, query, base, options, streams, seconds, longest, dense, reference, rq,
                               named, semantics)
        found = write_case(case)
        if sum(len(r.get("bindings", r.get("triples", ()))) for r in found) <= MAX_ROWS:
            return found
    raise ValueError("%s: more than %d rows over every slice" % (e.name, MAX_ROWS))


# Rows a case's expected results hold at most (the comparison matches rows pairwise).
MAX_ROWS = 700


def citybench_slice(cb, e, query, base, options, streams, seconds, longest, dense, reference, rq, named,
                    semantics) -> Case:
    case = Case("%s-%s" % (e.source, re.sub(r"[^a-z0-9]+", "-", e.name.lower().rpartition(".")[0]).strip("-")), e,
                query, streams, CITYBENCH_T0, CITYBENCH_T0 + max(9000, longest + 1000), reference, rq,
                cb.background(named), dict(options or {}, base=base))
    when = ("readings at %s s after 2014-08-01T08:00:00Z" % ", ".join("%g" % s for s in seconds))
    case.data = ("The sensor streams the query reads, %s (one element a reading%s), each element one reading of "
                 "the sensor written as CityBench's stream "
                 "wrappers write it (`src/org/insight_centre/aceis/io/streams/csparql/*Stream.java`): per property "
                 "the service observes (`dataset/SensorRepository.n3`), an `ssn:Observation` with `ssn:observedBy`, "
                 "`ssn:observedProperty` and `sao:hasValue` (values drawn from a fixed seed; a user's location "
                 "alternately near the first cultural events' venues and far from them). Background "
                 "(`background.trig`): the slice of `dataset/SensorRepository.n3` describing those services, "
                 "their properties and features of interest, and the first three events of "
                 "`dataset/AarhusCulturalEvents.n3` or `AarhusLibraryEvents.n3` with their venues, under the "
                 "graph names the query reads (%s)." % (when, "" if len(seconds) > 3 else
                                                        ": fewer readings than elsewhere, the query's joins multiplying "
                                                        "its rows", ", ".join("<%s>" % g if g else "the default graph"
                                                                              for g in named) or "none"))
    if dense:
        case.data += (" The query counts more than three readings in a 3 s window: the slice has two readings a "
                      "second (CityBench replays its recorded data faster than it was recorded, its --rate).")
    case.semantics = semantics
    return case


def citybench_corpus(cb: CityBench) -> None:
    repo = SOURCES["citybench"]
    for path in sorted(p for p in git_files(repo) if re.match(r"(cqels|csparql)_query/.*\.txt$", p)):
        dialect = path.split("_")[0]
        e = entry("citybench", path.replace("/", "-"), path)
        e.empty = CITYBENCH_EMPTY.get(path)
        base = "http://example.org/citybench/%s" % path
        citybench_case(cb, e, dialect, base, options={"dialect": dialect})



def rsp4j_citybench(cb: CityBench) -> None:
    """RSP4J's CityBench queries (csparql2/src/test/resources/citybench), over CityBench's data."""
    rsp4j = SOURCES["rsp4j"]
    for path in sorted(p for p in git_files(rsp4j) if p.startswith("csparql2/src/test/resources/citybench/")):
        e = entry("rsp4j", "citybench-" + path.rpartition("/")[2], path)
        if path.endswith("q12.rspql"):
            e.refused = "?p is projected but neither grouped by nor aggregated"
            continue
        query = e.text
        if "ssn:hasValue" in query:
            query = query.replace("ssn:hasValue", "<http://purl.oclc.org/NET/sao/hasValue>")
            e.changes.append("`ssn:hasValue` read as `sao:hasValue`, the predicate CityBench's stream wrappers write "
                             "(issue 59 ran it so): as written, the query answers nothing over CityBench's data, in "
                             "RSP4J as here")
        e.empty = RSP4J_CITYBENCH_EMPTY.get(path.rpartition("/")[2])
        citybench_case(cb, e, "rspql", RSP4J_BASE, query)


# RSP4J's engine configuration (csparql2/src/test/resources/csparql.properties: rsp_engine.base_uri).
RSP4J_BASE = "http://streamreasoning.org/csparql/"
RSP4J_CITYBENCH_EMPTY = {
    "q4.rspql": "its window is on AarhusTrafficData158505 but asks for observations `ssn:observedBy "
                "ses:UserLocationService`, which only the location stream carries",
    "q5.rspql": "its window on UserLocationService asks for cultural events (`sao:value`, "
                "`ssn:featureOfInterest`), which are static data, and for observations of "
                "AarhusTrafficData158505, which that stream does not carry",
    "q6.rspql": "its first window asks for `ssn:observedProperty ses:observedProperty`, a property no sensor "
                "observes",
    "q7.rspql": "both windows bind the same `?obId1`, and no observation is in both parking streams",
}
CITYBENCH_EMPTY = {
    "csparql_query/location_parking_1.txt": "it asks for `ct:hasLongtitude` (sic), which no location carries",
    "cqels_query/location_parking_1.txt": "it asks for `ct:hasLongtitude` (sic), which no location carries",
}


# -- the corpus -------------------------------------------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", action="append", default=[], metavar="OWNER/NAME=GIT_DIR", required=True)
    parser.add_argument("--only", help="build only the sources named (comma-separated)")
    args = parser.parse_args(argv)
    for item in args.repo:
        name, _, path = item.partition("=")
        GIT_DIRS[name] = Path(path)
    builders = {"citybench": lambda: citybench_corpus(CityBench()),
                "rsp4j": lambda: (rsp4j_citybench(CityBench()), rsp4j_corpus())}
    builders.update(OTHER_BUILDERS)
    chosen = args.only.split(",") if args.only else list(builders)
    for source in chosen:
        for old in CASES.glob("%s-*" % source):      # cases this builder made before
            shutil.rmtree(old)
        builders[source]()
    problems = []
    for e in ENTRIES:
        if e.case is None and e.refused is None:
            problems.append("%s: neither a case nor refused" % e.name)
        if e.case:
            found = [json.loads(line) for line in (CASES / e.case / "expected.jsonl").read_text().splitlines()]
            answered = any(r.get("bindings") or r.get("triples") or "boolean" in r for r in found)
            if answered == bool(e.empty):
                problems.append("%s: %s" % (e.case, "answers something though marked empty" if e.empty
                                            else "answers nothing and no reason is given"))
    files = HERE / "files"
    for source in chosen:
        shutil.rmtree(files / source, ignore_errors=True)
    index_path = HERE / "corpus.json"
    kept = [i for i in json.loads(index_path.read_text())] if index_path.exists() else []
    kept = list({i["file"]: i for i in kept if i["file"].split("/")[1] not in chosen}.values())
    for e in ENTRIES:
        path = files / e.source / e.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(e.text)
    index = sorted(kept + [e.index() for e in ENTRIES], key=lambda i: i["file"])
    index_path.write_text(json.dumps(index, indent=2) + "\n")
    write_page(index)
    for p in problems:
        print("problem:", p, file=sys.stderr)
    return 1 if problems else 0


OTHER_BUILDERS: dict = {"rsp-js": lambda: rsp_js_corpus(), "rsp-rs": lambda: rsp_rs_corpus(),
                  "kolibrie": lambda: kolibrie_corpus(), "csrbench-aligned": lambda: csrbench_corpus(),
                  "yabench": lambda: yabench_corpus()}


def write_page(index: list[dict]) -> None:
    """docs/peers.md: the corpus counted, and every file with what it does here."""
    runs = [i for i in index if "case" in i]
    answering = [i for i in runs if not i.get("empty")]
    refused = [i for i in index if "refused" in i]
    by_repo: dict[str, list[dict]] = {}
    for i in index:
        by_repo.setdefault(i["repository"], []).append(i)
    lines = [PAGE_HEAD.strip(), "",
             "**%d files: %d run with rows, %d run and answer nothing (each for the reason given below), %d refused "
             "with an error naming the construct.** None answers nothing silently: a file answering nothing does "
             "so in its own engine too, or registration warns of it (a pattern reading an empty background), as "
             "the reason given with it says."
             % (len(index), len(answering), len(runs) - len(answering), len(refused)), ""]
    for repo, items in by_repo.items():
        commit, licence = items[0]["commit"], items[0]["licence"]
        lines += ["## %s" % repo.rpartition("github.com/")[2], "",
                  "%s at `%s`, licence: %s." % (repo, commit[:12], licence), "",
                  "| file | path | here |", "| --- | --- | --- |"]
        for i in items:
            name = i["file"].rpartition("/")[2]
            where = "`%s`%s" % (i["path"], " (lines %s)" % i["lines"] if i.get("lines") else "")
            if "refused" in i:
                what = "refused: %s" % i["refused"]
            else:
                what = "[%s](../tests/conformance/cases/%s/README.md)" % (i["case"], i["case"])
                if i.get("changes"):
                    what += ", changed: %s" % "; ".join(i["changes"])
                if i.get("empty"):
                    what += "; answers nothing, as in its engine: %s" % i["empty"]
            lines.append("| %s | %s | %s |" % (name, where, what.replace("|", "\\|")))
        lines.append("")
    (TESTS.parent / "docs" / "peers.md").write_text("\n".join(lines))


PAGE_HEAD = """
# The peer corpus: other engines' queries over their data

The queries people write for the RSP engines in use today, taken from the engines' and
benchmarks' public repositories (each file's repository, commit, path and licence below and in
`tests/conformance/peers/corpus.json`, its text kept as taken in `tests/conformance/peers/files/`),
run here as conformance cases over data from their repositories, or generated as their stream
wrappers generate it, their expected results computed by the naive reference
(`tests/differential/corpus.py`), not by the engine. A file runs as its case, or is refused with
an error naming what has no equivalent here; `tests/test_peer_corpus.py` checks each, and
`tests/test_conformance.py` replays every case, in CI. What the engine reads in these queries is
[spec 6.15](spec/rspql-star.md#615-rsp-ql-as-its-reference-implementations-users-write-it-rsp4j-rsp-js-rsp-rs-kolibrie)
and [language.md](language.md#window-blocks-without-graph-spec-615); the cases' READMEs say, each,
where their engine's answers differ and why (window bounds, report policy and R2S are this
engine's, spec section 3 and 6.5). `tests/conformance/peers/build.py` makes the corpus again
from the repositories.
"""



# -- queries written in test code ---------------------------------------------------------------------
_JAVA_TOKENS = re.compile(r'"((?:[^"\\]|\\.)*)"|(//[^\n]*)|(\+)|([A-Za-z_][\w.]*\(\))|(\s+)|(.)', re.S)


def java_queries(src: str) -> list[tuple[int, int, str]]:
    """(first line, last line, text) of each Java string concatenation holding REGISTER and a
    query form; a piece of code inside one is kept as <<code>>."""
    found, pieces, start, last = [], [], None, 0
    for m in _JAVA_TOKENS.finditer(src):
        literal, comment, plus, call, space, other = m.groups()
        if literal is not None:
            start = m.start() if start is None else start
            pieces.append(literal)
            last = m.end()
            continue
        if space is not None or comment is not None or (plus is not None and pieces):
            continue
        if call is not None and pieces:
            pieces.append("<<%s>>" % call)
            last = m.end()
            continue
        if pieces:
            text = "".join(pieces).encode().decode("unicode_escape")
            if "REGISTER" in text and re.search(r"SELECT|CONSTRUCT", text, re.I):
                found.append((src[:start].count("\n") + 1, src[:last].count("\n") + 1, text))
        pieces, start = [], None
    return found


def rust_queries(src: str) -> list[tuple[int, int, str]]:
    """(first line, last line, text) of each Rust raw string (r#"..."#) or JS template literal
    holding REGISTER and a query form, its lines dedented."""
    found = []
    for m in re.finditer(r'r#"(.*?)"#|`([^`]*)`', src, re.S):
        text = m.group(1) if m.group(1) is not None else m.group(2)
        if "REGISTER" in text and re.search(r"\bSELECT\b|\bCONSTRUCT\b", text, re.I):
            lines = text.split("\n")
            body = [line for line in lines[1:] if line.strip()]
            indent = min((len(line) - len(line.lstrip()) for line in body), default=0)
            dedented = "\n".join([lines[0].strip()] + [line[indent:] for line in lines[1:]]).strip() + "\n"
            found.append((src[:m.start()].count("\n") + 1, src[:m.end()].count("\n") + 1, dedented))
    return found


# -- data written as the peers' test generators write it ---------------------------------------------
COLORS = "http://www.streamreasoning.org/ontologies/2018/9/colors#"


def likes_quads(stream: str, extra=(2, 0, 3, 1)) -> list[Element]:
    """csparql-rsp4j's MyRDFStream: `<stream/user<c>> ex:likes ex:O<c>` and a random 0-4 more
    users liking ex:O<c> (a fixed draw here), half a second apart, each quad an element."""
    quads = []
    for c, n in enumerate(extra, 1):
        quads.append("<%s/user%d> <http://myexample.org/likes> <http://myexample.org/O%d> ." % (stream, c, c))
        quads += ["<%s/user%d%d> <http://myexample.org/likes> <http://myexample.org/O%d> ." % (stream, c, i, c)
                  for i in range(n)]
    return [Element("%s/quad/%d" % (stream, k), 500 * (k + 1), q) for k, q in enumerate(quads)]


def dummy_stream(prefix: str, values: bool, stream: str, start: int = 0) -> list[Element]:
    """RSP4J's operatorapi/src/test/java/.../utils/DummyStream.java: populateStream (a colour
    per graph) or populateValueStream (a value per graph), at 1000, 1999, 2001, 3000, 5000, 5000
    and 6001 ms."""
    colors = ["Green", "Red", "Blue", "Green", "Blue", "Red", "Red"]
    numbers = [20, 20, 40, 50, 40, 90, 20]
    times = [1000, 1999, 2001, 3000, 5000, 5000, 6001]
    elements = []
    for k, at in enumerate(times):
        s = "<%sS%d>" % (prefix, k + 1)
        content = ("%s <http://test/hasValue> %d ." % (s, numbers[k]) if values else
                   "%s a <http://color#%s> ." % (s, colors[k]))
        elements.append(Element("%s/element/S%d" % (stream, k + 1), start + at, content))
    return elements


def colors_stream(stream: str, color: str, times=(1, 3, 4, 6, 9, 10, 14, 16)) -> list[Element]:
    """RSP4J's csparql2 ColorsGraphStream: the i-th graph `<stream/c_i> c:generatedAt t ; a c:Colour`
    (Yellow also `c:from <stream/r_i>, <stream/g_i>`), at application times that grow by a random
    1-8 s there and by a fixed draw of those here (seconds)."""
    elements = []
    for i, second in enumerate(times, 1):
        s = "<%s/%s%d>" % (stream, color[0].lower(), i)
        content = '%s <%sgeneratedAt> %d ; a <%s%s> .' % (s, COLORS, second * 1000, COLORS, color)
        if color == "Yellow":
            content += " %s <%sfrom> <%s/r%d> , <%s/g%d> ." % (s, COLORS, stream, i, stream, i)
        elements.append(Element("%s/graph/%d" % (stream, i), second * 1000, content))
    return elements


def artists_stream(stream: str, kind: str = "Artist", count: int = 12) -> list[Element]:
    """RSP4J's csparql2 GraphStream: `<stream/artist1> ars:generatedAt t ; a ars:<kind> ;
    ars:hasAge i` at i seconds."""
    ars = "http://www.streamreasoning/artist#"
    return [Element("%s/graph/%d" % (stream, i), i * 1000,
                    "<%s/artist1> <%sgeneratedAt> %d ; a <%s%s> ; <%shasAge> %d ." % (stream, ars, i * 1000, ars, kind,
                                                                                     ars, i))
            for i in range(1, count + 1)]


def likes_stream(stream: str, first: int = 5, extra=(2, 0, 3, 1, 4, 2, 1, 3)) -> list[Element]:
    """RSP4J's csparql2 LBSMARDFStreamTestGenerator: the i-th graph at i * 2 s, `ex:user<c>
    ex:likes ex:O<c>` and a random 0-4 more users liking ex:O<c> with ex:timestamp (a fixed draw
    here), c counting from `first`."""
    ex = "http://www.streamreasoning/jasper/test#"
    elements = []
    for i, n in enumerate(extra, 1):
        c = first + i - 1
        triples = ["<%suser%d> <%slikes> <%sO%d> ." % (ex, c, ex, ex, c)]
        for j in range(n):
            triples.append("<%suser%d%d> <%stimestamp> %d ; <%slikes> <%sO%d> ." % (ex, c, j, ex, i * 2000, ex, ex, c))
        elements.append(Element("%s/graph/%d" % (stream, i), i * 2000, "\n".join(triples)))
    return elements


def plain_stream(stream: str, subject: str, predicate: str, obj: str, count: int = 10, every: int = 1) -> list[Element]:
    """RSP-JS's and rsp-rs's tests' generate_data: the i-th element one quad `<subject_i>
    <predicate> <object>` at i * `every` (ms)."""
    return [Element("%s/element/%d" % (stream, i), i * every, "<%s%d> <%s> <%s> ." % (subject, i, predicate, obj))
            for i in range(count)]


def dialect_case_reference(query: str, dialect: str, base: str) -> tuple[str, dict, list[str], dict, str]:
    """(reference.rq, its windows, FROM graphs, reference.json without "query", the semantics in
    words) of a C-SPARQL or CQELS-QL query."""
    rq, windows, graphs = dialect_reference(query, dialect, base)
    if dialect == "csparql":
        return rq, windows, graphs, {"windows": windows, "report": "non-empty", "r2s": "RSTREAM"}, (
            "C-SPARQL (spec 6.5): windows (x - a, x] closing at x = a + i*b, keyed by their stream; the WHERE "
            "clause reads the merge of every window's content and the FROM graphs; an evaluation at every close "
            "unless every window is empty; RStream.")
    return rq, windows, graphs, {"windows": windows, "report": "content-change", "r2s": "ISTREAM"}, (
        "CQELS-QL (spec 6.5): an evaluation at every instant an element arrives, each window (t - a, t], keyed by "
        "its stream, its block reading its merged content; IStream.")


def reference_for(query: str, dialect: str, base: str) -> tuple[dict, str, str, list[str]]:
    """(reference.json without "query", reference.rq, the semantics in words, FROM graphs)."""
    if dialect == "rspql":
        rq, windows, graphs = rspql_reference(query, base)
        m = re.search(r"REGISTER\s+(\w+)", query, re.I)
        r2s = {"STREAM": "RSTREAM", "QUERY": "RSTREAM"}.get(m.group(1).upper(), m.group(1).upper()) if m else "RSTREAM"
        m = re.search(r"(?:SELECT|CONSTRUCT)\s+(RSTREAM|ISTREAM|DSTREAM)\b", query, re.I)
        r2s = m.group(1).upper() if m else r2s
        reference = {"windows": windows, "r2s": r2s}
        semantics = ("RSP-QL: every window closes at x = a + i*b (t0 the epoch), holding [x - a, x); "
                     "a WINDOW block holding no GRAPH pattern reads its elements' merged content and their "
                     "timestamp triples (spec 6.15), a pattern outside every window the background; R2S %s."
                     % r2s.capitalize().replace("stream", "Stream"))
    else:
        rq, windows, graphs, reference, semantics = dialect_case_reference(query, dialect, base)
    if graphs:
        reference["from"] = graphs
    if re.match(r"\s*(PREFIX\s+\S+\s+<[^>]*>\s*|BASE\s+<[^>]*>\s*|REGISTER\s+\S+\s+\S+\s+AS\s*)*CONSTRUCT", query, re.I):
        reference["form"] = "CONSTRUCT"
    return reference, rq, semantics, graphs


def refused(e: Entry, query: str, options: dict) -> bool:
    """Whether the engine refuses the entry (its text as written, else `query`): then the entry
    is recorded as refused with the error's first clause, which names the construct."""
    sys.path.insert(0, str(TESTS.parent.parent))
    from rspstar.endpoint.cli import _UNLIMITED
    from rspstar.translator.admission import admit
    from rspstar.translator.errors import TranslatorError
    for text in dict.fromkeys([e.text, query]):
        try:
            admit(text, _UNLIMITED, options)
        except TranslatorError as error:
            if text is query or text == query:
                message = getattr(error, "message", None) or str(error)
                e.refused = re.split(r"(?<=[a-z0-9')]):\s|;\s", message)[0][:90]
                e.changes = []
                e.options = {k: v for k, v in options.items() if k != "base"}
                e.base = options.get("base")
                return True
        else:
            if text == query:
                return False
    return False


def data_case(e: Entry, streams: dict[str, list[Element]], end: int, data: str, base: str,
              query: str | None = None, dialect: str = "rspql", background: str | None = None,
              options: dict | None = None, start: int = 0, title: str = "", rq_change=None) -> list[dict]:
    """A case running entry `e` (or `query`, the entry changed) over the elements given;
    `rq_change` is applied to the reference's text (a rule the derivation needs besides the
    windows', named in the entry's note)."""
    query = e.text if query is None else query
    if refused(e, query, dict(options or {}, base=base, **({"dialect": dialect} if dialect != "rspql" else {}))):
        return []
    reference, rq, semantics, _ = reference_for(query, dialect, base)
    if rq_change is not None:
        rq = rq_change(rq)
    if options and options.get("entailment"):
        reference["entailment"] = options["entailment"]
    name = "%s-%s" % (e.source, re.sub(r"[^a-z0-9]+", "-", e.name.lower().rpartition(".")[0]).strip("-"))
    opts = dict(options or {}, base=base)
    if dialect != "rspql":
        opts["dialect"] = dialect
    case = Case(name, e, query, {iri: stream_trig(elements) for iri, elements in streams.items()}, start, end,
                reference, rq, background, opts, data, semantics, title)
    return write_case(case)


def inline_projection(rq: str) -> str:
    """The reference's reading of a grouping SELECT whose projected expression reads an alias
    bound before it (SPARQL 1.1 18.2.4.4 evaluates them in order): the alias written out as its
    expression, which Oxigraph takes."""
    m = re.search(r"\bSELECT\b(.*?)(?=\bFROM\b|\bWHERE\b|\{)", rq, re.I | re.S)
    head, out, aliases, k = m.group(1), [], {}, 0
    while k < len(head):
        if head[k] != "(":
            out.append(head[k])
            k += 1
            continue
        depth = 0
        for end in range(k, len(head)):
            depth += (head[end] == "(") - (head[end] == ")")
            if depth == 0:
                break
        inner = head[k + 1:end]
        alias = re.search(r"\s+AS\s+\?(\w+)\s*$", inner, re.I)
        if alias:
            expression = re.sub(r"\?(\w+)", lambda v: "(%s)" % aliases[v.group(1)] if v.group(1) in aliases
                                else v.group(0), inner[:alias.start()])
            aliases[alias.group(1)] = expression
            out.append("(%s AS ?%s)" % (expression, alias.group(1)))
        else:
            out.append(head[k:end + 1])
        k = end + 1
    return rq[:m.start(1)] + "".join(out) + rq[m.end(1):]


def rsp4j_corpus() -> None:
    repo = SOURCES["rsp4j"]
    resources = "csparql2/src/test/resources/"
    red, green, blue = ("http://localhost:1255/streams/%s" % c for c in ("red", "green", "blue"))
    colors_owl = ox.Store()
    colors_owl.load(git_show(repo, resources + "colors.owl"), format=ox.RdfFormat.RDF_XML)
    schema = ntriples(q.triple for q in colors_owl)
    colors_base = "http://localhost:1255/"
    colors_data = ("RSP4J's ColorsGraphStream (csparql2/src/test/java/.../color/ColorsGraphStream.java): each graph one "
                   "colour `<stream/r_i> c:generatedAt t ; a c:Red`, at application times growing by a random 1 to 8 s "
                   "there, by a fixed draw of those here (1, 3, 4, 6, 9, 10, 14, 16 s after the epoch).")
    reasoning = ("Background: `colors.owl` of the same folder (Red and Yellow are Warm, Green and Blue Cold; Red, "
                 "Green and Blue Primary, Yellow Derived), the TBox `csparqlColors.properties` gives the engine; "
                 "the query runs with `entailment = rdfs` (spec 6.11), as RSP4J runs it with its rho-df reasoner.")
    for name in ("qOneStream", "qTwoStreams", "qYellowStream", "qReasoningSubClass", "qReasoningSubClassConstruct",
                 "qReasoningDomainRange"):
        e = entry("rsp4j", name + ".rspql", resources + name + ".rspql")
        query = e.text
        if "UUID()" in query:
            query = query.replace("UUID()", "BNODE()")
            e.changes.append("`UUID()` written `BNODE()`: a fresh node per solution either way, and a blank node is "
                             "what an expected file can match (any blank node matches any)")
        streams = {}
        for stream, color in ((red, "Red"), (green, "Green"), (blue, "Blue"), ("http://localhost:1255/red", "Red")):
            if "<%s>" % stream in query or (stream.endswith("/red") and "<red>" in query and "1255/red" in stream):
                streams[stream] = colors_stream(stream, color)
        if "qReasoningDomainRange" in name:
            for stream, color in (("http://localhost:1255/green", "Green"), ("http://localhost:1255/blue", "Blue"),
                                  ("http://localhost:1255/yellow", "Yellow")):
                streams[stream] = colors_stream(stream, color)
        entailed = name.startswith("qReasoning")
        aliased = bool(re.search(r"\?\w+\s*>\s*\?\w+\s*\)?\s+as", query, re.I))
        if aliased:
            e.note = ("the projection reads aliases it binds before (`(?cntr > ?cntg AS ...)`), which SPARQL 1.1 "
                      "evaluates in order; the engine writes them out as their aggregates")
        data_case(e, streams, 25_000, colors_data + (" " + reasoning if entailed else ""), colors_base, query,
                  background=schema if entailed else None, options={"entailment": "rdfs"} if entailed else None,
                  rq_change=inline_projection if aliased else None)
    # The artists' stream (GraphStream) and RSP4J's static file.
    for name in ("q52", "q52_static"):
        e = entry("rsp4j", name + ".rspql", resources + name + ".rspql")
        query = e.text.replace("UUID()", "BNODE()")
        e.changes.append("`UUID()` written `BNODE()`: a fresh node per solution either way, and a blank node is what "
                         "an expected file can match (any blank node matches any)")
        static = None
        if "static" in name:
            graph = re.search(r"FROM\s+<([^>]*)>", e.text).group(1)
            static = "<%s> {\n%s}\n" % (graph, ntriples(ox.parse(git_show(repo, resources + "static.ttl"),
                                                                  format=ox.RdfFormat.TURTLE)))
        data_case(e, {"http://differenthost:12134/stream2": artists_stream("http://differenthost:12134/stream2")},
                  15_000, "RSP4J's GraphStream (csparql2/src/test/java/.../engine/GraphStream.java): each graph "
                  "`<stream/artist1> ars:generatedAt t ; a ars:Artist ; ars:hasAge i` at i seconds."
                  + (" Background: `static.ttl` of the same folder, under the `file:` IRI the query names."
                     if static else ""), RSP4J_BASE, query, background=static)
    # The GDELT streams.
    for kind in ("article", "image"):
        e = entry("rsp4j", "geldt-%s-OneStream.rspql" % kind, resources + "geldt/streams/%s/OneStream.rspql" % kind)
        stream = "https://www.gdeltproject.org/streams/%s" % kind
        cls = "Article" if kind == "article" else "Image"
        elements = [Element("%s/graph/%d" % (stream, i), i * 3000,
                            "<%s/%d> a <https://www.gdeltproject.org/ontology#%s> ." % (stream, i, cls))
                    for i in range(1, 8)]
        data_case(e, {stream: elements}, 30_000, "Seven graphs, one %s each, every 3 s: RSP4J's GELDTGraphStream "
                  "streams samples of the GDELT project's data it reads from files the repository does not hold, "
                  "one `a :%s` each" % (kind, cls), RSP4J_BASE)
    # The 'ready to go' example's likes (LBSMARDFStreamTestGenerator), streams stream2 and stream3.
    for name in ("rtgp-q1", "rtgp-q2", "rtgp-q3"):
        e = entry("rsp4j", name + ".rspql", resources + name + ".rspql")
        streams = {RSP4J_BASE + "stream2": likes_stream(RSP4J_BASE + "stream2")}
        if "stream3" in e.text:
            streams[RSP4J_BASE + "stream3"] = likes_stream(RSP4J_BASE + "stream3", first=50, extra=(1, 3, 0, 2, 4, 1, 2, 0))
        data_case(e, streams, 20_000, "RSP4J's LBSMARDFStreamTestGenerator (csparql2/src/test/java/.../streams/): the "
                  "i-th graph at i * 2 s, `ex:user<c> ex:likes ex:O<c>` and a random 0-4 more users liking it with "
                  "`ex:timestamp` (a fixed draw here)", RSP4J_BASE)
    rsp4j_test_code()


TEST_BASE = "http://test/"
OPERATOR_DATA = ("RSP4J's operatorapi/src/test/java/.../utils/DummyStream.java, as its tests stream it "
                 "(`populateStream`: <S1> a color:Green at 1000 ms, <S2> Red at 1999, <S3> Blue at 2001, <S4> Green "
                 "at 3000, <S5> Blue and <S6> Red at 5000, <S7> Red at 6001; `populateValueStream`: <S1> to <S7> "
                 "test:hasValue 20, 20, 40, 50, 40, 90, 20 at the same instants), the IRIs under %s (the tests "
                 "write them relative or there)." % TEST_BASE)


def rsp4j_test_code() -> None:
    """The RSP-QL queries written in RSP4J's test code (operatorapi, yasper, csparql2's parser
    tests, csparql-rsp4j), each over DummyStream's streams."""
    repo = SOURCES["rsp4j"]
    paths = [p for p in git_files(repo) if "/src/test/" in p and p.endswith(".java")]
    seen: dict[str, Entry] = {}
    for path in sorted(paths):
        source = git_show(repo, path).decode("utf-8")
        if "REGISTER" not in source:
            continue
        for first, last, text in java_queries(source):
            lines = "%d-%d" % (first, last)
            key = " ".join(text.split())
            if key in seen:
                seen[key].also.append("%s lines %s" % (path, lines))
                continue
            stem = path.rpartition("/")[2].rpartition(".")[0]
            e = entry("rsp4j", "%s-L%d.rq" % (stem, first), path, text, lines=lines)
            seen[key] = e
            rsp4j_test_case(e)


def rsp4j_test_case(e: Entry) -> None:
    text = e.text
    if re.search(r"\bSELECT2\b", text):
        e.refused = "expected SELECT, CONSTRUCT or ASK, found 'SELECT2'"
        return
    if "NAMED WINDOW" not in text.upper() and "FROM STREAM" not in text.upper():
        e.refused = "the query has no window, so it would never be evaluated"
        return
    query = text
    background = None
    if "<<fileURL.getPath()>>" in query:
        graph = "file:///rsp4j/operatorapi/src/test/resources/colors.nt"
        query = query.replace("<<fileURL.getPath()>>", graph)
        e.changes.append("`fileURL.getPath()`, the Java expression naming the test's `colors.nt`, written as the file "
                         "IRI <%s>" % graph)
        colors = ox.parse(git_show(e.repo, "operatorapi/src/test/resources/colors.nt"), format=ox.RdfFormat.TURTLE,
                          base_iri=TEST_BASE)
        background = "<%s> {\n%s}\n" % (graph, ntriples(colors))
    stream_from_file = "<<streamURL.getPath()>>" in query
    if stream_from_file:
        query = query.replace("<<streamURL.getPath()>>", "file:///rsp4j/operatorapi/src/test/resources/stream1.nt")
        e.changes.append("`streamURL.getPath()`, the Java expression naming the test's `stream1.nt` (a FileSource "
                         "reading a line a second), written as the file IRI "
                         "<file:///rsp4j/operatorapi/src/test/resources/stream1.nt>")
    dialect = "csparql" if re.search(r"FROM\s+STREAM", query, re.I) else "rspql"
    base = TEST_BASE
    reference, _, _, _ = reference_for(query, dialect, base)
    streams, data = {}, OPERATOR_DATA
    values = "hasValue" in query
    for w in reference["windows"].values():
        if stream_from_file:
            lines = [l for l in git_show(e.repo, "operatorapi/src/test/resources/stream1.nt").decode().splitlines() if l]
            streams[w["stream"]] = [Element("%s/line/%d" % (w["stream"], k), (k + 1) * 1000,
                                            ntriples(ox.parse(line.encode(), format=ox.RdfFormat.TURTLE,
                                                              base_iri=TEST_BASE)))
                                    for k, line in enumerate(lines)]
            data = ("`operatorapi/src/test/resources/stream1.nt`, a line a second (the test's FileSource, period "
                    "1000 ms), its relative IRIs under %s." % TEST_BASE)
        elif "myexample.org/" in query and "likes" in query:
            streams[w["stream"]] = likes_quads(w["stream"])
            data = ("csparql-rsp4j's MyRDFStream (csparql-rsp4j/src/test/java/.../MyRDFStream.java): quads "
                    "`<stream/user<c>> ex:likes ex:O<c>`, then a random 0-4 more users liking ex:O<c> (a fixed draw "
                    "here), half a second apart, each quad an element.")
        elif "<http://example.org#>" in query:
            streams[w["stream"]] = [Element("%s/element/%d" % (w["stream"], k), k * 1000,
                                            '<http://example.org#sensor%d> <http://example.org#value> %d ; '
                                            '<http://example.org#measurement:> "%s" .' % (k % 2, 18 + k,
                                                                                         "temperature" if k % 3 else
                                                                                         "humidity"))
                                    for k in range(1, 9)]
            data = ("Written here for the query (its test only parses it): a reading a second of two sensors, "
                    "`:value` and `:measurement:` \"temperature\" or (every third) \"humidity\".")
        else:
            streams[w["stream"]] = dummy_stream(TEST_BASE, values, w["stream"])
    longest = max(xsd_ms(w["range"]) for w in reference["windows"].values())
    found = data_case(e, streams, longest + 12_000, data, base, query, dialect, background)
    if outside_only(query):
        if any(r.get("bindings") or r.get("triples") for r in found):
            e.note = "it answers, but over an empty background: " + OUTSIDE_EMPTY
        else:
            e.empty = OUTSIDE_EMPTY
            rewrite_readme(e)


def rewrite_readme(e: Entry) -> None:
    """The case's README again, once the entry says why it answers nothing."""
    folder = CASES / e.case
    text = (folder / "README.md").read_text()
    text = re.sub(r"^\d+ of \d+ evaluations answer something\.$", lambda m: "No evaluation answers anything: %s."
                  % e.empty, text, count=1, flags=re.M)
    (folder / "README.md").write_text(text)


OUTSIDE_EMPTY = ("its triple patterns stand outside every WINDOW: yasper reads such patterns in the query's windows, "
                 "RSP-QL* (spec section 3) in the background default graph, which holds nothing here, and registration "
                 "warns so")


def outside_only(query: str) -> bool:
    """Whether an RSP-QL query declares windows but reads none: no WINDOW block in its WHERE."""
    where = query[re.search(r"\bWHERE\b", query, re.I).end():] if re.search(r"\bWHERE\b", query, re.I) else ""
    return "NAMED WINDOW" in query.upper() and not re.search(r"\bWINDOW\b", where, re.I)



# -- RSP-JS and rsp-rs ------------------------------------------------------------------------------
def template_queries(src: str) -> list[tuple[int, int, str]]:
    """(first line, last line, text) of each JavaScript template literal (`...`) or Rust raw
    string (r#"..."#) holding REGISTER and a query form, dedented (a Markdown page's code blocks
    are read the same way)."""
    found = []
    for m in re.finditer(r'r#"(.*?)"#|(?<![`\w])`(?!``)([^`]*)`', src, re.S):
        text = m.group(1) if m.group(1) is not None else m.group(2)
        if "REGISTER" not in text or not re.search(r"\bSELECT\b|\bCONSTRUCT\b", text, re.I):
            continue
        lines = [re.sub(r"^\s*//!\s?", "", line) for line in text.split("\n")]
        body = [line for line in lines[1:] if line.strip()]
        indent = min((len(line) - len(line.lstrip()) for line in body), default=0)
        text = "\n".join([lines[0].strip()] + [line[indent:] for line in lines[1:]]).strip() + "\n"
        found.append((src[:m.start()].count("\n") + 1, src[:m.end()].count("\n") + 1, text))
    return found


def collect(source: str, paths: list[str], extract) -> list[Entry]:
    """One entry per distinct query text found in the files (the other places it stands noted)."""
    seen: dict[str, Entry] = {}
    made = []
    for path in paths:
        for first, last, text in extract(git_show(SOURCES[source], path).decode("utf-8")):
            key = " ".join(text.split())
            where = "%s lines %d-%d" % (path, first, last)
            if key in seen:
                seen[key].also.append(where)
                continue
            stem = path.rpartition("/")[2].partition(".")[0]
            seen[key] = e = entry(source, "%s-L%d.rq" % (stem, first), path, text, lines="%d-%d" % (first, last))
            made.append(e)
    return made


def instantiated(query: str, stream: str, count: int, every: int, base: str) -> list[Element]:
    """Written here for a query whose tests build their data in code: the i-th element one
    instance of the WINDOW block's triple patterns (a variable subject <stream/s{i mod 2}>, a
    variable object the number 20 + i, `?s ?p ?o` the tests' <subject_i> <predicate> <object>)."""
    prefixes = prefixes_of(query)
    block = re.search(r"WINDOW\s+\S+\s*\{(.*?)\}", query, re.S | re.I).group(1)
    patterns = [p.strip() for p in re.split(r"\s\.\s|\s\.$", block.strip() + " ") if p.strip()]
    elements = []
    for i in range(count):
        triples = []
        for pattern in patterns:
            s, p, o = (pattern.split() + ["", "", ""])[:3]
            if p.startswith("?"):
                triples.append("<%s/subject_%d> <%s/predicate> <%s/object> ." % (stream, i, stream, stream))
                continue
            subject = "<%s/s%d>" % (stream, i % 2) if s.startswith("?") else "<%s>" % resolve(s, prefixes, base)
            predicate = "<%s>" % resolve(p, prefixes, base) if p != "a" else "a"
            value = str(20 + i) if o.startswith("?") else "<%s>" % resolve(o, prefixes, base)
            triples.append("%s %s %s ." % (subject, predicate, value))
        elements.append(Element("%s/element/%d" % (stream, i), i * every, "\n".join(triples)))
    return elements


def rsp_js_corpus() -> None:
    entries = collect("rsp-js", ["README.md", "src/rsp.test.ts", "src/rspql.test.ts"], template_queries)
    for e in entries:
        e.also = [a for a in e.also]
        base = "https://rsp.js/queries/"
        prefixes = prefixes_of(e.text)
        streams = {}
        for m in re.finditer(r"ON\s+STREAM\s+(\S+)", e.text):
            stream = resolve(m.group(1), prefixes, base)
            two = "2" if stream.endswith("2") and "?p2" in e.text else ""
            streams[stream] = plain_stream(stream, "https://rsp.js/test_subject_", "http://rsp.js/test_property" + two,
                                           "http://rsp.js/test_object" + two)
        if "[RANGE 20 STEP 10]" in e.text:
            e.empty = ("its second window, [RANGE 20 STEP 10], first closes at 20 ms, when the first, [RANGE 10 STEP 2], "
                       "holds [10, 20) and the test's data (0 to 9 ms) has left both; RSP-JS reports windows from its "
                       "first element on, before their first full RANGE, and so joins them (spec section 3 starts "
                       "them a RANGE after the epoch)")
        background = None
        if ":hasInfo" in e.text:
            background = "<http://rsp.js/test_object> <https://rsp.js/hasInfo> <https://rsp.js/someInfo> .\n"
        data_case(e, streams, 22, "RSP-JS's tests' `generate_data(10, ...)` (src/rsp.test.ts): the i-th element one "
                  "quad `<https://rsp.js/test_subject_i> <http://rsp.js/test_property> <http://rsp.js/test_object>` at "
                  "i ms (the second stream's `test_property2`, `test_object2` where the test writes so)%s. RSP-JS "
                  "reports windows [x - 10, x) at every STEP from its first element on, four windows before its "
                  "first full one (2 + 4 + 6 + 8 results); here the first window closes at a RANGE after the epoch "
                  "(spec section 3), and the window's default graph also holds the elements' timestamp triples "
                  "(spec 6.15), which `?s ?p ?o` matches too." % (
                      "; background: the test's static quad `<http://rsp.js/test_object> :hasInfo :someInfo`"
                      if background else ""), base, background=background)


def rsp_rs_corpus() -> None:
    paths = ["README.md", "src/lib.rs", "src/engine/rsp_engine.rs", "examples/large_timestamps.rs",
             "examples/streaming_lifecycle.rs", "tests/rsp_engine.rs", "tests/test_new_api.rs",
             "tests/large_timestamp_test.rs", "tests/integration/rsp_engine_integration_test.rs"]
    for e in collect("rsp-rs", paths, template_queries):
        base = "https://rsp.rs/queries/"
        streams = {}
        try:
            reference, _, _, _ = reference_for(e.text, "rspql", base)
        except (KeyError, AttributeError):
            reference = {"windows": {}}
        for w in reference["windows"].values():
            streams[w["stream"]] = instantiated(e.text, w["stream"], 12, 1000, base)
        longest = max([xsd_ms(w["range"]) for w in reference["windows"].values()] or [0])
        data_case(e, streams, longest + 6000, "Written here as rsp-rs's tests write theirs (quads added a second "
                  "apart, `stream.add_quads(vec![quad], i * 1000)`): the i-th element one instance of the WINDOW "
                  "block's patterns (`?s ?p ?o`: `<subject_i> <predicate> <object>`; a value: the number 20 + i). "
                  "rsp-rs reports windows [x - RANGE, x) at every STEP from its first element on, before the first "
                  "full one; here the first closes at a RANGE after the epoch (spec section 3), and a block holding "
                  "no GRAPH also reads the elements' timestamp triples (spec 6.15).", base)


# -- Kolibrie ---------------------------------------------------------------------------------------
def kolibrie_corpus() -> None:
    paths = ["kolibrie/tests/rsp_engine_test.rs", "kolibrie/examples/sparql_syntax/rsp_ql_syntax/retrieve.rs",
             "kolibrie/examples/sparql_syntax/rsp_ql_syntax/retrieve_multiple_window.rs"]
    entries = collect("kolibrie", paths, template_queries)
    for e in entries:
        refused(e, e.text, {"base": "http://kolibrie.example/"})
    # Kolibrie's exact ISTREAM and DSTREAM emissions over [RANGE 3 STEP 1], the query declaring
    # its prefix and naming its stream.
    for test, kind, letters, want in (("rsp_ql_istream_semantics", "IType", "ABCD", "[A], [B], [C]"),
                                      ("rsp_ql_dstream_semantics", "DType", "ABCDEF", "[A] once, at ts = 6"),
                                      ("rsp_ql_istream_range3_step1", "RType", "ABCA", "[A], [B], [C]")):
        e = next(x for x in entries if ("<http://test/%s>" % kind) in x.text)
        changed = "PREFIX : <http://test/>\n" + e.text.strip().replace("ON ?stream", "ON :stream") + "\n"
        elements = [Element("http://test/stream/element/%d" % (k + 1), k + 1,
                            "<http://test/subject%s> a <http://test/%s> ." % (letter, kind))
                    for k, letter in enumerate(letters)]
        adapted = Entry("kolibrie", e.name, e.path, changed, lines=e.lines)
        adapted.changes = ["`PREFIX : <http://test/>` declared (Kolibrie reads `:w` undeclared)",
                           "`ON ?stream` written `ON :stream` (Kolibrie reads a variable stream as any stream it is fed)"]
        data_case(adapted, {"http://test/stream": elements}, len(letters) + 2, (
            "The test's own (kolibrie/tests/rsp_engine_test.rs, `%s`): subject%s `a <http://test/%s>` added at ts = "
            "1 to %d (ticks, read as milliseconds: `[RANGE 3 STEP 1]` is bare integers, spec 6.15). Kolibrie fires "
            "a window when an element arrives past its close, from the first element on, so its first window holds "
            "the element at ts = 1 alone, and it emits %s; here the first window closes at 3 ms and holds [0, 3) "
            "(spec section 3), and the last evaluations are at the window closes up to %d ms, which need no later "
            "element." % (test, ", subject".join(letters), kind, len(letters), want, len(letters) + 2)),
            "http://test/", changed, title="Kolibrie's %s, its prefix declared and its stream named" % test)
        folder = CASES / adapted.case
        renamed = CASES / ("kolibrie-" + test.replace("_", "-"))
        if renamed.exists():
            shutil.rmtree(renamed)
        folder.rename(renamed)
        e.note = "runs with its prefix declared and its stream named as case %s" % renamed.name


# -- CSRBench-Aligned --------------------------------------------------------------------------------
CSRBENCH_STREAM = "http://localhost:12345/CSRBenchDataStream/datastream#1"


def properties(text: str) -> list[tuple[str, int, int, str]]:
    """(key, first line, last line, value) of a Java properties file, continuations joined and
    `\\n` read as a line break."""
    found, lines, k = [], text.split("\n"), 0
    while k < len(lines):
        line = lines[k]
        first = k + 1
        if not line.strip() or line.lstrip().startswith("#") or "=" not in line:
            k += 1
            continue
        key, _, value = line.partition("=")
        parts = [value.strip()]
        while parts[-1].endswith("\\") and k + 1 < len(lines):
            parts[-1] = parts[-1][:-1]
            k += 1
            parts.append(lines[k].strip())
        k += 1
        found.append((key.strip(), first, k, "".join(parts).replace("\\n", "\n")))
    return found


def csrbench_corpus() -> None:
    source, repo = "csrbench-aligned", SOURCES["csrbench-aligned"]
    path = "src/main/resources/srbench-queries.properties"
    data = {int(p.rpartition("_")[2][:2]): git_show(repo, p) for p in git_files(repo) if re.match(r"data/data_\d\d\.ttl$", p)}
    for key, first, last, value in properties(git_show(repo, path).decode("utf-8")):
        if not re.fullmatch(r"srb\.query\d\.(rspql|csparql)query", key):
            continue
        e = entry(source, "%s.rq" % key, path, value.strip() + "\n", lines="%d-%d" % (first, last))
        dialect = "rspql" if key.endswith("rspqlquery") else "csparql"
        # The oracle's importer stamps data_NN.ttl NN seconds after t0 (importer.data.interval =
        # 1000 ms); a slice of the seconds where the queries find observations.
        elements = [Element("http://localhost:12345/CSRBenchDataStream/element/%02d" % s, s * 1000,
                            ntriples(ox.parse(data[s], format=ox.RdfFormat.TURTLE))) for s in range(10, 21)]
        data_case(e, {CSRBENCH_STREAM: elements}, 26_000, "CSRBench-Aligned's own data (`data/data_10.ttl` to "
                  "`data_20.ttl`, the SRBench weather observations the oracle streams), each file one element "
                  "stamped NN s after the epoch, as the oracle's importer stamps it (its "
                  "`importer.data.interval`, 1000 ms).", "http://localhost:12345/CSRBenchDataStream/",
                  dialect=dialect)


# -- YABench ----------------------------------------------------------------------------------------
YABENCH_STREAM = "http://ex.org/streams/test"
FIXTURES = "yabench-oracle/src/test/resources/io/github/yabench/oracle/tests/WindowFactoryTest/"


def yabench_stream(fixture: str) -> list[Element]:
    """A fixture's input.stream (N-Triples with a fourth field, the triple's time in ms, as
    YABench's generator writes its streams): the triples of one time one element."""
    by_time: dict[int, list[str]] = {}
    for line in git_show(SOURCES["yabench"], FIXTURES + fixture + "/input.stream").decode().splitlines():
        m = re.match(r'^(.*)\s+"(\d+)"\s*\.\s*$', line)
        if m:
            triple = re.sub(r'(\s)(-?\d+(?:\.\d+)?)\^\^(<[^>]*>)$', r'\1"\2"^^\3', m.group(1).strip())
            by_time.setdefault(int(m.group(2)), []).append(triple + " .")
    return [Element("http://ex.org/streams/test/element/%d" % t, t, "\n".join(triples))
            for t, triples in sorted(by_time.items())]


def sg1(interval: int, stations: int, duration: int, seed: str) -> list[Element]:
    """YABench's SG1 stream: every `interval` ms each station's reading, an AirTemperature
    observation as the oracle's fixtures write it, its value drawn from `seed`."""
    ssw, owl, weather = ("http://knoesis.wright.edu/ssw/", "http://knoesis.wright.edu/ssw/ont/sensor-observation.owl#",
                         "http://knoesis.wright.edu/ssw/ont/weather.owl#")
    elements = []
    for t in range(0, duration, interval):
        triples = []
        for n in range(stations):
            at = t + n * 97 % max(interval, 1)
            value = round(_values(seed, n, t).uniform(0, 100))
            ob, data = "<%sObservation_AirTemperature_A%d_%d>" % (ssw, n, at), "<%sMeasureData_AirTemperature_A%d_%d>" % (
                ssw, n, at)
            triples.append("%s a <%sTemperatureObservation> ; <%sobservedProperty> <%s_AirTemperature> ; <%sprocedure> "
                           "<%sSystem_A%d> ; <%sresult> %s .\n%s a <%sMeasureData> ; <%sfloatValue> \"%d.0\"^^<%sfloat> ; "
                           "<%suom> <%sfahrenheit> ." % (ob, weather, owl, weather, owl, ssw, n, owl, data, data, owl,
                                                         owl, value, XSD, owl, weather))
        elements.append(Element("http://ex.org/streams/test/element/%d" % t, t, "\n".join(triples)))
    return elements


def yabench_corpus() -> None:
    source, repo = "yabench", SOURCES["yabench"]
    tests = sorted({p.split("/")[1] for p in git_files(repo) if p.startswith("tests/") and p.endswith("engine.query")})
    for test in tests:
        e = entry(source, "%s-engine.query" % test, "tests/%s/engine.query" % test)
        config = json.loads(git_show(repo, "tests/%s/config.json" % test))
        query = e.text
        for var, value in config.get("vars", {}).items():
            query = query.replace("${%s}" % var, value)
        e.changes.append("its placeholders filled from the test's `config.json` as YABench's runner fills them (%s)"
                         % ", ".join("`${%s}` = %s" % kv for kv in config.get("vars", {}).items()))
        dialect = "cqels" if test.startswith("cqels") else "csparql"
        run = config["tests"][0]
        interval = csparql_ms(run.get("interval", "1m").replace("m", "m") if "ms" in run.get("interval", "")
                              else run.get("interval", "1m"))
        stations = min(int(run.get("stations", config.get("stations", "10"))), 10)
        duration = csparql_ms(config.get("duration", "5m"))
        width = csparql_ms(config["vars"]["WSIZE"])
        data_case(e, {YABENCH_STREAM: sg1(interval, stations, duration, config.get("seed", "0"))},
                  max(duration, width) + width, (
                      "Written as YABench's generator SG1 writes its weather stations (the shape of its oracle's "
                      "fixtures, `%stestOnWindowClose/input.stream`: per reading an observation of "
                      "`weather:_AirTemperature` by `System_A<n>` with its `MeasureData` and `om-owl:floatValue`), "
                      "as the test's config asks: %d station%s (of %s), a reading every %d s each, for %d s, the "
                      "values drawn from a fixed seed; the triples of one time one element."
                      % (FIXTURES, stations, "s" * (stations > 1), run.get("stations", config.get("stations")),
                         interval // 1000, duration // 1000)), "http://ex.org/queries/", query, dialect)
    # The oracle's window fixtures: the windows YABench's oracle expects of RANGE 60 s STEP 30 s on
    # window close and on content change, each a file of the triples the window holds.
    for fixture, dialect, text in (
            ("testOnWindowClose", "rspql", "PREFIX ex: <http://ex.org/>\nSELECT ?s ?p ?o\n"
                                           "FROM NAMED WINDOW ex:w ON <%s> [RANGE PT60S STEP PT30S]\n"
                                           "WHERE { WINDOW ex:w { GRAPH ?g { ?s ?p ?o } } }\n" % YABENCH_STREAM),
            ("testOnContentChange", "content-change", "PREFIX ex: <http://ex.org/>\nSELECT ?s ?p ?o\n"
                                                      "FROM NAMED WINDOW ex:w ON <%s> [RANGE PT60S STEP PT30S]\n"
                                                      "WHERE { WINDOW ex:w { GRAPH ?g { ?s ?p ?o } } }\n"
                                                      % YABENCH_STREAM)):
        e = entry(source, "%s-fixture" % fixture, FIXTURES + fixture, text="")
        e.text = "\n".join("%s\n%s" % (name, git_show(repo, FIXTURES + fixture + "/" + name).decode())
                           for name in sorted(p.rpartition("/")[2] for p in git_files(repo)
                                              if p.startswith(FIXTURES + fixture + "/")))
        rq = "SELECT ?s ?p ?o WHERE { { GRAPH ?g { ?s ?p ?o } FILTER(?g IN ($elements(<http://ex.org/w>))) } }\n"
        fixture_case(e, fixture, dialect, text, rq)


def fixture_case(e: Entry, fixture: str, dialect: str, query: str, rq: str | None) -> None:
    """A case reading every triple of YABench's fixture stream through one window, its expected
    windows compared (in the README) with the fixture's own."""
    repo = SOURCES["yabench"]
    e.note = "a window fixture (an input stream and the windows the oracle expects): read by a query written here"
    elements = yabench_stream(fixture)
    name = "yabench-%s" % fixture.lower()
    base = "http://ex.org/queries/"
    reference = {"windows": {"http://ex.org/w": {"stream": YABENCH_STREAM, "range": "PT60S", "step": "PT30S"}},
                 "r2s": "RSTREAM"}
    if dialect == "rspql":
        semantics = "RSP-QL: the window closes at 60, 90, 120, ... s, holding [x - 60 s, x); RStream."
        opts = {"base": base}
    else:
        reference["report"] = "content-change"
        semantics = ("RSP-QL under the report policy content-change (the option report, spec 6.3): at every arrival "
                     "t the window holds (t - 60 s, t]; RStream.")
        opts = {"base": base, "report": "content-change"}
    windows = {}
    for path in git_files(repo):
        if path.startswith(FIXTURES + fixture + "/") and path.endswith(".window"):
            triples = sorted(re.sub(r'\s+"\d+"\s*\.\s*$', "", line).strip()
                             for line in git_show(repo, path).decode().splitlines() if line.strip())
            windows[int(path.rpartition("/")[2].partition(".")[0])] = triples
    case = Case(name, e, query, {YABENCH_STREAM: stream_trig(elements)}, -1000, 200_000, reference, rq, None, opts,
                "YABench's fixture `%s%s/input.stream` (the triples of one time one element)." % (FIXTURES, fixture),
                semantics, "YABench's window fixture %s" % fixture)
    found = write_case(case)
    import importlib.util
    spec = importlib.util.spec_from_file_location("compare", HERE.parent / "compare.py")
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    agree = []
    for number, triples in sorted(windows.items()):
        rows = [dict(zip("spo", re.sub(r'\s(-?\d+(?:\.\d+)?)\^\^', r' "\1"^^', t).split(" ", 2))) for t in triples]
        ours = [r for r in found if compare.rows_equal(rows, r.get("bindings", []), False) is None]
        agree.append("%d.window: %s" % (number, "the evaluation at %s" % ours[0]["time"] if ours else "no evaluation"))
    why = ("1.window is YABench's first window, [0, 30 s), before a full RANGE has passed: spec section 3 has "
           "none (its first window closes at 60 s)." if dialect == "rspql" else
           "7.window is YABench's content-change window at 94 125 ms starting on its slide's grid (60 s); CQELS's, "
           "spec 6.3's, starts at t - 60 s and also holds the readings of 37 047 and 42 365 ms.")
    with open(CASES / name / "README.md", "a") as readme:
        readme.write("\nThe fixture's windows and the evaluations here that hold exactly their triples: %s. %s\n"
                     % ("; ".join(agree), why))

if __name__ == "__main__":
    sys.exit(main())
