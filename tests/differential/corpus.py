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
    upper_closed: bool = False      # (x − α, x], the C-SPARQL and CQELS dialects' bounds (spec 6.5)

    def content(self, elements: list[Element], t: int, change: bool = False
                ) -> tuple[list[Element], tuple[int, int]] | None:
        """The window's elements at an evaluation at t: its latest close x <= t, holding
        [x − α, x) ((x − α, x] upper-closed); under content change (spec 6.3), (t − α, t]."""
        if change:
            return [e for e in elements if t - self.range < e.time <= t], (t - self.range, t)
        if t < self.start + self.range:
            return None
        x = self.start + self.range + (t - self.start - self.range) // self.step * self.step
        if self.upper_closed:
            return [e for e in elements if x - self.range < e.time <= x], (x - self.range, x)
        return [e for e in elements if x - self.range <= e.time < x], (x - self.range, x)


def _instants(spec: dict, windows: dict[str, Window], streams: dict, lo: int, hi: int) -> list[int]:
    """The report policy's instants in (lo, hi]: COMPUTED EVERY's, every element's time on a
    stream the query windows (content change), else every window close."""
    if spec.get("every"):
        period = duration(spec["every"])
        starts = [w.start for w in windows.values()]
        origin = min(starts) if starts else 0
        return [t for t in range(origin + ((lo - origin) // period + 1) * period, hi + 1, period)]
    if spec.get("report") == "content-change":
        return sorted({e.time for w in windows.values() for e in streams[w.stream] if lo < e.time <= hi})
    closes = set()
    for w in windows.values():
        x = w.start + w.range
        if x <= lo:                  # the first close after lo, found without walking from τ0
            x += ((lo - x) // w.step + 1) * w.step
        while x <= hi:
            closes.add(x)
            x += w.step
    return sorted(closes)


def records(case: Path) -> list[dict]:
    """The case's records as the reference computes them. `reference.json` says: `windows` (IRI:
    stream, range, step, start, `upper_closed`), `every` (COMPUTED EVERY) or `report`
    (`content-change`: an evaluation at each element's time, windows (t − α, t]; `non-empty`:
    no evaluation while every window is empty), `r2s`, and `from` (the FROM graphs: the
    default graph outside windows). `reference.rq` names the window's graphs with
    `$elements(<w>)` (its elements), `$default(<w>)` (their timestamp triples, section 3),
    `$merged(<w>)` (their timestamp triples and content merged: a block holding no GRAPH
    pattern, spec 6.15) and `$merge` (every window's merged content and the default graph
    outside windows: a C-SPARQL query's default graph, spec 6.5)."""
    manifest = json.loads((case / "manifest.json").read_text())
    spec = json.loads((case / "reference.json").read_text())
    text = (case / spec["query"]).read_text()
    windows = {iri: Window(w["stream"], duration(w["range"]), duration(w["step"]),
                           instant(w["start"]) if w.get("start") else 0, w.get("upper_closed", False))
               for iri, w in spec["windows"].items()}
    streams = {iri: stream_elements(case / file, k) for k, (iri, file) in enumerate(sorted(manifest["streams"].items()))}
    for w in windows.values():
        streams.setdefault(w.stream, [])
    lo, hi = instant(manifest["from"]), instant(manifest["to"])
    change = spec.get("report") == "content-change"
    functions = FunctionLibrary(cache=False).table
    background = (case / manifest["background"]).read_bytes() if manifest.get("background") else None
    from_graphs = [ox.NamedNode(g) for g in spec.get("from", [])]
    if spec.get("entailment") == "rdfs":
        streams = _entailed(streams, background, from_graphs)
    out, previous = [], None
    for t in _instants(spec, windows, streams, lo, hi):
        contents = {iri: w.content(streams[w.stream], t, change) for iri, w in windows.items()}
        if spec.get("report") == "non-empty" and not any(found and found[0] for found in contents.values()):
            continue
        store = ox.Store()
        if background is not None:
            store.load(background, format=ox.RdfFormat.TRIG)
            if spec.get("entailment") == "rdfs":     # the default graph outside windows read as cl(B)
                for g in (from_graphs or [ox.DefaultGraph()]):
                    b = {(q.subject, q.predicate, q.object) for q in store.quads_for_pattern(None, None, None, g)}
                    store.extend(ox.Quad(s_, p_, o_, g) for s_, p_, o_ in naive_closure(b) - b)
        outside = [q.triple for g in (from_graphs or [ox.DefaultGraph()]) for q in store.quads_for_pattern(None, None, None, g)]
        held = {e.name: e for found in contents.values() if found for e in found[0]}
        quads = [ox.Quad(q.subject, q.predicate, q.object, ox.NamedNode(e.name)) for e in held.values() for q in e.quads]
        merge = ox.NamedNode("urn:reference:merge")
        quads += [ox.Quad(tr.subject, tr.predicate, tr.object, merge) for tr in outside]
        sparql = text
        for k, (iri, found) in enumerate(contents.items()):
            graph = ox.NamedNode("urn:reference:window-default:%d" % k)
            merged = ox.NamedNode("urn:reference:window-merged:%d" % k)
            for e in (found[0] if found else []):
                stamp = ox.Literal(instant_text(e.time), datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime"))
                for g in (graph, merged, merge):
                    quads.append(ox.Quad(ox.NamedNode(e.name), PROV_TIME, stamp, g))
                quads += [ox.Quad(q.subject, q.predicate, q.object, g) for q in e.quads for g in (merged, merge)]
            names = ", ".join("<%s>" % e.name for e in (found[0] if found else []))
            sparql = sparql.replace("$elements(<%s>)" % iri, names).replace("$default(<%s>)" % iri, "<%s>" % graph.value)
            sparql = sparql.replace("$merged(<%s>)" % iri, "<%s>" % merged.value)
            # The same merged graph under the window's own IRI: `WINDOW ?w { P }` is written
            # `GRAPH ?w { P }` restricted to the window IRIs.
            named_by_window = ox.NamedNode(iri)
            quads += [ox.Quad(q.subject, q.predicate, q.object, named_by_window) for q in quads if q.graph_name == merged]
        sparql = sparql.replace("$merge", "<%s>" % merge.value)
        store.extend(quads)
        more = {"default_graph": from_graphs} if from_graphs else {}
        result = store.query(sparql, custom_functions=functions, **more)
        record = {"time": instant_text(t),
                  "windows": {(windows[iri].stream if spec.get("keyed_by_stream") else iri):
                              [instant_text(f[1][0]), instant_text(f[1][1])] for iri, f in contents.items() if f}}
        if isinstance(result, ox.QueryBoolean):
            record["boolean"] = bool(result)
        elif isinstance(result, ox.QuerySolutions):
            names = [v.value for v in result.variables]
            rows = [{n: _term(s[n]) for n in names if s[n] is not None} for s in result]
            record["bindings"], previous = r2s(spec.get("r2s", "RSTREAM"), rows, previous)
        else:
            rows = list(dict.fromkeys("%s %s %s ." % (_term(tr.subject), _term(tr.predicate), _term(tr.object))
                                      for tr in result))
            record["triples"], previous = r2s(spec.get("r2s", "RSTREAM"), rows, previous)
        out.append(record)
    return out


def _entailed(streams: dict, background: bytes | None, from_graphs: list) -> dict:
    """Spec 6.11: each element's graph G read as cl(G ∪ S) − (cl(S) − G), S the schema triples
    (rdfs:subClassOf, subPropertyOf, domain, range) of the background default graph (the FROM
    graphs when the query names some); cl the naive fixpoint of test_entailment."""
    from test_entailment import DOMAIN, RANGE, SUBCLASS, SUBPROPERTY, naive_closure as closure
    store = ox.Store()
    if background is not None:
        store.load(background, format=ox.RdfFormat.TRIG)
    schema = {(q.subject, q.predicate, q.object) for g in (from_graphs or [ox.DefaultGraph()])
              for q in store.quads_for_pattern(None, None, None, g)
              if q.predicate.value in (SUBCLASS, SUBPROPERTY, DOMAIN, RANGE)}
    closed_schema = closure(schema)
    out = {}
    for iri, elements in streams.items():
        out[iri] = []
        for e in elements:
            g = {(q.subject, q.predicate, q.object) for q in e.quads}
            read = closure(g | schema) - (closed_schema - g)
            out[iri].append(Element(e.name, e.time, [ox.Quad(s_, p_, o_, ox.NamedNode(e.name)) for s_, p_, o_ in read
                                                       if not isinstance(s_, ox.Literal)]))
    return out


def naive_closure(triples: set) -> set:
    from test_entailment import naive_closure as closure
    return closure(triples)


def _term(term) -> str:
    if isinstance(term, ox.Triple):
        return "<<( %s %s %s )>>" % (_term(term.subject), _term(term.predicate), _term(term.object))
    return str(term)


def write_expected(case: Path) -> None:
    """(Re)compute a peer case's expected.jsonl with the reference (how each was made)."""
    manifest = json.loads((case / "manifest.json").read_text())
    lines = [json.dumps(r, sort_keys=True) for r in records(case)]
    (case / manifest["expected"]).write_text("\n".join(lines) + "\n")
