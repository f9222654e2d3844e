"""The naive reference for the peer corpus: conformance cases made from other engines' public
query sets (tests/conformance/cases/<case>/README.md names each one's source).

Each such case holds, beside the conformance files, `reference.json`: the reference's reading of
the query, written by hand from the query text and the specification, not from the engine:
its windows (stream, RANGE, STEP, START), its report policy (COMPUTED EVERY, or every close),
its R2S operator, and `reference.rq`, the query's WHERE clause written out as section 3 defines
the windows' datasets: `$elements(<w>)` where a window's element names go (a GRAPH ?g inside
`WINDOW <w>` is `{ GRAPH ?g { ... } FILTER(?g IN ($elements(<w>))) }`) and `$default(<w>)` for
the graph holding the window's default graph (its elements' timestamp triples).

For every instant in (from, to] the reference picks each window's elements from the case's
stream files by the formulas of section 3 (the latest close x = τ0 + α + i·β at or before the
instant, the elements with x − α <= τ < x), loads a fresh Oxigraph store with them and the
background, runs `reference.rq` with translator/uncertainty's rspu: functions (each call on its
own: no fused call, no cache) and applies R2S. `expected.jsonl` is what this gives
(tests/test_peer_corpus.py keeps it so).
"""
from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pyoxigraph as ox

from rspstar.translator.uncertainty import FunctionLibrary

from .model import instant_text
from .reference import r2s

PROV_TIME = ox.NamedNode("http://www.w3.org/ns/prov#generatedAtTime")
_DURATION = re.compile(r"^PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?$")


def duration(text: str) -> int:
    """µs of a duration such as PT10S, PT5M, PT1M30S."""
    m = _DURATION.match(text)
    if not m or not any(m.groups()):
        raise ValueError("not a duration the corpus uses: %r" % text)
    hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return round((hours * 3600 + minutes * 60 + seconds) * 1_000_000)


def instant(text: str) -> int:
    """µs since the epoch of an xsd:dateTime; without a time zone, UTC (spec section 1)."""
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    delta = moment - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@dataclass
class Element:
    name: str                          # the graph's IRI (a blank graph name made an IRI here)
    time: int
    quads: list


def stream_elements(path: Path, stream_index: int) -> list[Element]:
    """A stream file's elements in stream order: each named graph whose timestamp triple is in
    the default graph, by time, ties in the order of their timestamp triples (spec 6.1)."""
    quads = list(ox.parse(path=str(path), format=ox.RdfFormat.TRIG))

    def name(term) -> str:
        # Blank graph names are distinct per element (spec section 1); the reference writes
        # them as IRIs to name them in FILTER(?g IN (...)). No corpus query shows them.
        return term.value if isinstance(term, ox.NamedNode) else "urn:reference:blank:%d:%s" % (stream_index, term.value)

    stamps = [(q.subject, q.object.value) for q in quads if q.graph_name == ox.DefaultGraph() and q.predicate == PROV_TIME]
    content: dict = {}
    for q in quads:
        if q.graph_name != ox.DefaultGraph():
            content.setdefault(q.graph_name, []).append(q)
    found = [Element(name(graph), instant(time), content.get(graph, [])) for graph, time in stamps]
    return sorted(found, key=lambda e: e.time)       # stable: ties keep the file's order


@dataclass
class Window:
    stream: str
    range: int
    step: int
    start: int = 0

    def content(self, elements: list[Element], t: int) -> tuple[list[Element], tuple[int, int]] | None:
        if t < self.start + self.range:
            return None
        x = self.start + self.range + (t - self.start - self.range) // self.step * self.step
        return [e for e in elements if x - self.range <= e.time < x], (x - self.range, x)


def records(case: Path) -> list[dict]:
    manifest = json.loads((case / "manifest.json").read_text())
    spec = json.loads((case / "reference.json").read_text())
    text = (case / spec["query"]).read_text()
    windows = {iri: Window(w["stream"], duration(w["range"]), duration(w["step"]),
                           instant(w["start"]) if w.get("start") else 0) for iri, w in spec["windows"].items()}
    streams = {iri: stream_elements(case / file, k) for k, (iri, file) in enumerate(sorted(manifest["streams"].items()))}
    lo, hi = instant(manifest["from"]), instant(manifest["to"])
    if spec.get("every"):
        period = duration(spec["every"])
        starts = [w.start for w in windows.values()]
        origin = min(starts) if starts else 0
        instants = [t for t in range(origin + ((lo - origin) // period + 1) * period, hi + 1, period)]
    else:
        closes = set()
        for w in windows.values():
            x = w.start + w.range
            while x <= hi:
                if x > lo:
                    closes.add(x)
                x += w.step
        instants = sorted(closes)
    functions = FunctionLibrary(cache=False).table
    background = (case / manifest["background"]).read_bytes() if manifest.get("background") else None
    out, previous = [], None
    for t in instants:
        contents = {iri: w.content(streams[w.stream], t) for iri, w in windows.items()}
        store = ox.Store()
        if background is not None:
            store.load(background, format=ox.RdfFormat.TRIG)
        held = {e.name: e for found in contents.values() if found for e in found[0]}
        quads = [ox.Quad(q.subject, q.predicate, q.object, ox.NamedNode(e.name)) for e in held.values() for q in e.quads]
        sparql = text
        for k, (iri, found) in enumerate(contents.items()):
            graph = ox.NamedNode("urn:reference:window-default:%d" % k)
            for e in (found[0] if found else []):
                quads.append(ox.Quad(ox.NamedNode(e.name), PROV_TIME, ox.Literal(
                    instant_text(e.time), datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")), graph))
            names = ", ".join("<%s>" % e.name for e in (found[0] if found else []))
            sparql = sparql.replace("$elements(<%s>)" % iri, names).replace("$default(<%s>)" % iri, "<%s>" % graph.value)
        store.extend(quads)
        result = store.query(sparql, custom_functions=functions)
        names = [v.value for v in result.variables]
        rows = [{n: str(s[n]) for n in names if s[n] is not None} for s in result]
        emitted, previous = r2s(spec.get("r2s", "RSTREAM"), rows, previous)
        out.append({"time": instant_text(t),
                    "windows": {iri: [instant_text(f[1][0]), instant_text(f[1][1])] for iri, f in contents.items() if f},
                    "bindings": emitted})
    return out


def write_expected(case: Path) -> None:
    """(Re)compute a peer case's expected.jsonl with the reference (how each was made)."""
    manifest = json.loads((case / "manifest.json").read_text())
    lines = [json.dumps(r, sort_keys=True) for r in records(case)]
    (case / manifest["expected"]).write_text("\n".join(lines) + "\n")
