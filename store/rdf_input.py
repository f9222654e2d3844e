"""Reading stream elements out of RDF 1.2 documents (spec §1).

A TriG or N-Quads document holds any number of elements: every named graph with a timestamp
triple (`n <ts> τ` in the default graph) is one element. Blank graph names and the blank
nodes inside an element (reifiers of `{| |}` and `<< >>`) get names derived from the input,
so reading the same input twice gives the same graphs and never a second reifier.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import pyoxigraph as ox

from translator.errors import TemporalValueError
from translator.temporal import format_instant, parse_instant

from .errors import RdfInputError
from .vocabulary import PROV_GENERATED_AT_TIME, SKOLEM_PREFIX

FORMATS = {
    "trig": ox.RdfFormat.TRIG,
    "nquads": ox.RdfFormat.N_QUADS,
    "turtle": ox.RdfFormat.TURTLE,
    "ntriples": ox.RdfFormat.N_TRIPLES,
}


@dataclass
class Element:
    """One stream element: a named graph, its timestamp and its content quads (already in
    graph `graph`)."""

    graph: str
    timestamp: int
    timestamp_literal: ox.Literal
    quads: list[ox.Quad]


@dataclass
class ReadResult:
    elements: list[Element] = field(default_factory=list)
    untimed_graphs: list[str] = field(default_factory=list)
    ignored_default_triples: int = 0


def _digest(*parts: str) -> str:
    return hashlib.blake2b("\x00".join(parts).encode(), digest_size=12).hexdigest()


def parse_rdf(data: bytes | str, fmt: ox.RdfFormat, source: str, rename_blank_nodes: bool = False):
    """All quads of a document, or RdfInputError naming the source, line and column."""
    try:
        return list(ox.parse(data, format=fmt, rename_blank_nodes=rename_blank_nodes))
    except SyntaxError as e:
        line, column = _syntax_position(e)
        message = str(e.args[0]) if e.args else str(e)
        if message.startswith("Parser error at line"):
            message = message.split(": ", 1)[-1]
        raise RdfInputError(message, source, line, column) from None


def _syntax_position(e: SyntaxError) -> tuple[int | None, int | None]:
    if e.lineno is not None:
        return e.lineno, e.offset
    return None, None


class _BlankRenamer:
    """Names blank nodes of one element from the element's graph and their order of first
    appearance: deterministic for the same input."""

    def __init__(self, element_key: str):
        self.prefix = "e" + element_key + "b"
        self.names: dict[str, ox.BlankNode] = {}

    def term(self, term):
        if isinstance(term, ox.BlankNode):
            node = self.names.get(term.value)
            if node is None:
                node = self.names[term.value] = ox.BlankNode(self.prefix + str(len(self.names)))
            return node
        if isinstance(term, ox.Triple):
            return ox.Triple(self.term(term.subject), term.predicate, self.term(term.object))
        return term


def _has_blank(term) -> bool:
    if isinstance(term, ox.BlankNode):
        return True
    if isinstance(term, ox.Triple):
        return _has_blank(term.subject) or _has_blank(term.object)
    return False


def read_elements(data: bytes | str, source: str, fmt: ox.RdfFormat = ox.RdfFormat.TRIG,
                  timestamp_predicate: str = PROV_GENERATED_AT_TIME,
                  processing_time: int | None = None) -> ReadResult:
    """Split a document into stream elements.

    Named graphs without a timestamp triple get `processing_time` when one is given, and are
    listed in `untimed_graphs` otherwise (the caller decides; nothing is dropped silently)."""
    quads = parse_rdf(data, fmt, source)
    ts_predicate = ox.NamedNode(timestamp_predicate)
    timestamps: dict = {}
    content: dict = {}
    ignored = 0
    for quad in quads:
        graph = quad.graph_name
        if isinstance(graph, ox.DefaultGraph):
            if quad.predicate == ts_predicate and isinstance(quad.subject, (ox.NamedNode, ox.BlankNode)):
                previous = timestamps.get(quad.subject)
                if previous is not None and previous != quad.object:
                    raise RdfInputError("graph %s has two timestamps (%s and %s)"
                                        % (quad.subject, previous, quad.object), source)
                timestamps[quad.subject] = quad.object
            else:
                ignored += 1
            continue
        content.setdefault(graph, []).append(quad)

    result = ReadResult(ignored_default_triples=ignored)
    for graph, graph_quads in content.items():
        literal = timestamps.get(graph)
        if literal is None:
            if processing_time is None:
                result.untimed_graphs.append(str(graph))
                continue
            instant = processing_time
            literal = ox.Literal(format_instant(processing_time), datatype=ox.NamedNode(
                "http://www.w3.org/2001/XMLSchema#dateTime"))
        else:
            instant = _instant_of(literal, graph, source)
        result.elements.append(_element(graph, instant, literal, graph_quads, source))
    for subject in timestamps:
        if subject not in content:
            # A timestamp for an empty graph is an element with no content: keep it, so that
            # a window still sees its timestamp triple.
            result.elements.append(_element(subject, _instant_of(timestamps[subject], subject, source),
                                            timestamps[subject], [], source))
    result.elements.sort(key=lambda e: e.timestamp)
    return result


def _instant_of(literal, graph, source: str) -> int:
    if not isinstance(literal, ox.Literal):
        raise RdfInputError("timestamp of graph %s is not a literal: %s" % (graph, literal), source)
    try:
        return parse_instant(literal.value)
    except TemporalValueError as e:
        raise RdfInputError("timestamp of graph %s: %s" % (graph, e), source) from None


def _element(graph, instant: int, literal, quads: list[ox.Quad], source: str) -> Element:
    if isinstance(graph, ox.BlankNode):
        iri = SKOLEM_PREFIX + _digest(source, graph.value)
    else:
        iri = graph.value
    name = ox.NamedNode(iri)
    if isinstance(graph, ox.BlankNode) or any(_has_blank(q.subject) or _has_blank(q.object) for q in quads):
        renamer = _BlankRenamer(_digest(iri))
        quads = [ox.Quad(renamer.term(q.subject), q.predicate, renamer.term(q.object), name) for q in quads]
    return Element(iri, instant, literal, quads)


_EXTENSIONS = {
    ".trig": ox.RdfFormat.TRIG,
    ".nq": ox.RdfFormat.N_QUADS,
    ".nquads": ox.RdfFormat.N_QUADS,
    ".ttl": ox.RdfFormat.TURTLE,
    ".nt": ox.RdfFormat.N_TRIPLES,
}


def format_for_path(path) -> ox.RdfFormat:
    """The RDF format a file name says (TriG when it says nothing known)."""
    suffix = str(path).lower()
    for extension, fmt in _EXTENSIONS.items():
        if suffix.endswith(extension):
            return fmt
    return ox.RdfFormat.TRIG
