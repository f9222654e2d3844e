"""Reading stream elements out of RDF 1.2 documents (spec §1).

A TriG or N-Quads document holds any number of elements: every named graph with a timestamp
triple (`n <ts> τ` in the default graph) is one element. Blank graph names are skolemized
from the source and their order of appearance, so the same input gives the same graph names.
Blank nodes inside elements (reifiers of `{| |}` and `<< >>`) are fresh per read, as Oxigraph
makes them; re-ingesting the same input is prevented by batch markers, not by blank labels.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import pyoxigraph as ox

from rspstar.translator.errors import QuerySyntaxError, TemporalValueError
from rspstar.translator.nesting import check_nesting
from rspstar.translator.temporal import format_instant, parse_instant
from rspstar.translator.vocabulary import PROV_GENERATED_AT_TIME, RESERVED_PREFIX, SKOLEM_PREFIX, is_reserved

from . import formats
from .errors import RdfInputError

XSD_DATETIME = ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")


def format_for_path(path) -> ox.RdfFormat:
    """The RDF format a file name says (TriG when it says nothing known or no RDF format)."""
    return formats.by_path(path).rdf or formats.DEFAULT.rdf


@dataclass
class Element:
    """One stream element: a named graph, its timestamp and its content quads (already in
    graph `graph`)."""

    graph: str
    timestamp: int
    timestamp_literal: ox.Literal
    quads: list[ox.Quad] = field(default_factory=list)


@dataclass
class DocumentScan:
    """What one pass over a document found, before anything is written. Graph names are kept
    as their IRIs: a term object per element would be one more object for Python's cycle
    collector to walk while a replay stages its files (bench/out/NOTES.md#replay-collections)."""

    stamps: dict                # graph name's IRI -> timestamp literal (from the default graph)
    graphs: dict                # named graph's IRI -> None, in order of first appearance
    other_default_triples: int  # default-graph triples that are not timestamps
    unnamed: bool = False       # a blank node names a graph or has a timestamp

    @property
    def needs_rewriting(self) -> bool:
        """Blank graph names, untimed graphs or other default-graph triples: the document
        cannot be loaded as it is."""
        return self.other_default_triples > 0 or self.unnamed or not self.graphs.keys() <= self.stamps.keys()


def _syntax_error(e: SyntaxError, source: str) -> RdfInputError:
    message = str(e.args[0]) if e.args else str(e)
    if message.startswith("Parser error at line"):
        message = message.split(": ", 1)[-1]
    return RdfInputError(message, source, e.lineno, e.offset)


def check_rdf_nesting(data: bytes | str, source: str, fmt: ox.RdfFormat | None = None) -> None:
    """RdfInputError with the line and column where a document nests deeper than a parser may
    follow, or (RDF/XML) declares an entity (translator/nesting.py): checked before Oxigraph
    parses anything."""
    try:
        check_nesting(data, language="xml" if fmt == ox.RdfFormat.RDF_XML else "rdf")
    except QuerySyntaxError as e:
        raise RdfInputError(e.message, source, e.line, e.column) from None


def parse_rdf(data: bytes | str, fmt: ox.RdfFormat, source: str):
    """All quads of a document (blank nodes fresh), or RdfInputError with source:line:column."""
    check_rdf_nesting(data, source, fmt)
    try:
        return list(ox.parse(data, format=fmt, rename_blank_nodes=True))
    except SyntaxError as e:
        raise _syntax_error(e, source) from None


def _record_timestamp(stamps: dict, quad: ox.Quad, ts_predicate: ox.NamedNode, source: str) -> bool:
    """Note a default-graph quad that is a timestamp triple; False for any other triple."""
    if quad.predicate != ts_predicate or isinstance(quad.subject, ox.Triple):
        return False
    previous = stamps.get(quad.subject)
    if previous is not None and previous != quad.object:
        raise _two_timestamps(quad.subject, previous, quad.object, source)
    stamps[quad.subject] = quad.object
    return True


def _two_timestamps(graph, first, second, source: str) -> RdfInputError:
    return RdfInputError("graph %s has two timestamps (%s and %s)" % (graph, first, second), source)


def scan_document(data: bytes | str, fmt: ox.RdfFormat, source: str,
                  timestamp_predicate: str = PROV_GENERATED_AT_TIME, nesting_checked: bool = False) -> DocumentScan:
    """One pass: the timestamps and graph names of a document, with syntax errors located.
    `nesting_checked`: the caller ran check_rdf_nesting on these very bytes before handing
    them to a writer, which must not wait for the scan."""
    ts_predicate = ox.NamedNode(timestamp_predicate)
    stamps: dict = {}
    graphs: dict = {}
    other = 0
    unnamed = False
    last = None
    default, named, triple = ox.DefaultGraph, ox.NamedNode, ox.Triple
    if not nesting_checked:
        check_rdf_nesting(data, source, fmt)
    try:
        for quad in ox.parse(data, format=fmt, rename_blank_nodes=True):
            graph = quad.graph_name
            if type(graph) is not default:
                # A graph block's quads come one after another: its name is read once per block.
                if graph != last:
                    last = graph
                    if type(graph) is named:
                        graphs[graph.value] = None
                    else:
                        unnamed = True
                continue
            subject = quad.subject
            if quad.predicate != ts_predicate or type(subject) is triple:
                other += 1
            elif type(subject) is not named:
                unnamed = True
            else:
                value = quad.object
                previous = stamps.setdefault(subject.value, value)
                if previous is not value and previous != value:
                    raise _two_timestamps(subject, previous, value, source)
    except SyntaxError as e:
        raise _syntax_error(e, source) from None
    return DocumentScan(stamps, graphs, other, unnamed)


def instant_of(literal, graph, source: str) -> int:
    if not isinstance(literal, ox.Literal):
        raise RdfInputError("timestamp of graph %s is not a literal: %s" % (graph, literal), source)
    try:
        return parse_instant(literal.value)
    except TemporalValueError as e:
        raise RdfInputError("timestamp of graph %s: %s" % (graph, e), source) from None


def instant_literal(instant: int) -> ox.Literal:
    """An instant (µs since the epoch) as an xsd:dateTime literal."""
    return ox.Literal(format_instant(instant), datatype=XSD_DATETIME)


@dataclass
class ReadResult:
    elements: list[Element] = field(default_factory=list)
    untimed_graphs: list[str] = field(default_factory=list)
    ignored_default_triples: int = 0


def read_elements(data: bytes | str, source: str, fmt: ox.RdfFormat = ox.RdfFormat.TRIG,
                  timestamp_predicate: str = PROV_GENERATED_AT_TIME,
                  processing_time: int | None = None, scope: str | None = None) -> ReadResult:
    """Split a document into stream elements, building their quads in Python (the general
    path: any graph names, untimed graphs, stray default-graph triples).

    Named graphs without a timestamp triple get `processing_time` when one is given, and are
    listed in `untimed_graphs` otherwise (the caller decides; nothing is dropped silently).
    Blank graph names are named from `scope` (by default `source`) and their order."""
    ts_predicate = ox.NamedNode(timestamp_predicate)
    timestamps: dict = {}
    content: dict = {}
    ignored = 0
    for quad in parse_rdf(data, fmt, source):
        graph = quad.graph_name
        if isinstance(graph, ox.DefaultGraph):
            ignored += not _record_timestamp(timestamps, quad, ts_predicate, source)
            continue
        content.setdefault(graph, []).append(quad)
    for subject in timestamps:
        # A timestamp for a graph with no content is an element with no content: a window
        # still sees its timestamp triple.
        content.setdefault(subject, [])

    result = ReadResult(ignored_default_triples=ignored)
    blank_ordinal = 0
    for graph, quads in content.items():
        literal = timestamps.get(graph)
        if literal is None:
            if processing_time is None:
                result.untimed_graphs.append(str(graph))
                continue
            instant, literal = processing_time, instant_literal(processing_time)
        else:
            instant = instant_of(literal, graph, source)
        if isinstance(graph, ox.BlankNode):
            iri = skolem_iri(scope or source, blank_ordinal)
            blank_ordinal += 1
            name = ox.NamedNode(iri)
            quads = [ox.Quad(q.subject, q.predicate, q.object, name) for q in quads]
        else:
            iri = graph.value
        result.elements.append(Element(iri, instant, literal, quads))
    result.elements.sort(key=lambda e: e.timestamp)
    return result


def skolem_iri(source: str, ordinal: int) -> str:
    """The stable name of the `ordinal`-th blank graph name of `source`."""
    digest = hashlib.blake2b(("%s\x00%d" % (source, ordinal)).encode(), digest_size=12).hexdigest()
    return SKOLEM_PREFIX + digest


@dataclass
class Envelope:
    """One JSON-lines stream element: `{"stream"?, "time"?, "graph"?, "data"}`."""
    stream: str | None
    instant: int | None
    time: str | None
    graph: str | None
    data: str


def read_envelope(text: str, source: str, line: int | None) -> Envelope:
    """Check every field of a JSON envelope; RdfInputError names the line and the field."""
    def fail(message: str):
        raise RdfInputError(message, source, line)

    try:
        envelope = json.loads(text)
    except ValueError as e:
        fail("not JSON: %s" % e)
    except RecursionError:
        fail("nested too deeply to be read as JSON")
    if not isinstance(envelope, dict):
        fail("an envelope is a JSON object, got %s" % type(envelope).__name__)
    if not isinstance(envelope.get("data"), str):
        fail('field "data": the element\'s content as a string of N-Triples or Turtle is required')
    fields = {}
    for name in ("stream", "graph", "time"):
        value = envelope.get(name)
        if value is not None and not isinstance(value, str):
            fail('field "%s": a string is required, got %s' % (name, json.dumps(value)[:80]))
        fields[name] = value
    for name in ("stream", "graph"):
        if fields[name] is not None:
            try:
                ox.NamedNode(fields[name])
            except ValueError:
                fail('field "%s": not an IRI: %s' % (name, json.dumps(fields[name])[:120]))
    if fields["graph"] is not None and is_reserved(fields["graph"]):
        fail('field "graph": names under %s are reserved by the engine' % RESERVED_PREFIX)
    instant = None
    if fields["time"] is not None:
        try:
            instant = parse_instant(fields["time"])
        except TemporalValueError as e:
            fail('field "time": %s' % e)
    return Envelope(fields["stream"], instant, fields["time"], fields["graph"], envelope["data"])
