"""The one codec from input to stream elements: every payload, whatever brought it (a posted
body, a file in a landing directory, a socket or Kafka line, a simulator row), is decoded here
into elements per stream, or into rejects that say where and why. A posted body is decoded once,
at the edge, and lands as canonical N-Quads (`canonical`), the form recordings also take.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace

import pyoxigraph as ox

from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.nesting import check_nesting
from rspstar.translator.temporal import format_duration, format_instant
from rspstar.translator.vocabulary import PROV_GENERATED_AT_TIME, is_internal_graph, is_reserved, timestamps_graph

from . import formats
from .errors import EventTimeAhead, RdfInputError
from .heap import WORKER_HEAP
from .rdf_input import XSD_DATETIME, Element, instant_literal, read_elements, read_envelope

_GENERATED_AT_TIME = ox.NamedNode(PROV_GENERATED_AT_TIME)
CANONICAL = formats.by_name("nquads")     # the format of `canonical`


@dataclass(frozen=True)
class Payload:
    """One unit of input: a document, or a run of lines starting at `line`."""

    stream: str
    format: str          # a name in the format registry
    origin: str          # file path, socket address, simulator name, "request body"
    text: str | bytes    # bytes are read as UTF-8, strictly (a source's raw input)
    ingest_time: int     # processing time, µs: the timestamp of graphs that carry none
    line: int | None = None
    # What the names the codec makes (blank graph names, envelopes without "graph") are
    # derived from, beside the text: the origin, unless it is not unique to this input (every
    # posted body is a "request body": each post gets a scope of its own, else the same body
    # posted twice would be named alike and the second set aside as a duplicate).
    scope: str | None = None

    @property
    def names_from(self) -> str:
        return self.scope or self.origin


@dataclass(frozen=True)
class Rejected:
    """Input set aside: the text (the whole payload, or the one bad line of line-based input)
    and where it went wrong."""

    payload: Payload
    line: int | None
    column: int | None
    reason: str

    def error(self) -> RdfInputError:
        return RdfInputError(self.reason, self.payload.origin, self.line, self.column)


@dataclass
class Decoded:
    elements: dict[str, list[Element]] = field(default_factory=dict)   # per stream, in input order
    rejected: list[Rejected] = field(default_factory=list)
    ignored_default_triples: int = 0                                   # not timestamps: not stored

    def add(self, stream: str, element: Element) -> None:
        if is_internal_graph(element.graph):
            self.rejected.append(Rejected(Payload(stream, "nquads", element.graph, canonical([element]), 0), None, None,
                                          "graph <%s> is reserved by the engine" % element.graph))
        else:
            self.elements.setdefault(stream, []).append(element)


@dataclass(frozen=True)
class EventTimeBound:
    """How far ahead of the engine's clock an element's event time may be ([engine]
    max_event_ahead). A stream's watermark follows the newest event time it has seen, so one
    element stamped years ahead (a sensor whose clock went wrong, a typo) would make every
    reading after it late, for years: such an element is refused where a client hears of it
    (a post) and set aside with the reason where none does (a source's micro-batch). `clock`
    is the engine's (`now()`: µs since the epoch)."""

    clock: object
    ahead: int              # µs

    def limit(self) -> int:
        return self.clock.now() + self.ahead

    def reason(self, element: Element, limit: int) -> str:
        return ("graph <%s> is stamped %s, more than %s ahead of the engine's clock (%s; [engine] max_event_ahead): "
                "taken, it would move its stream's watermark past every reading to come (is the clock of what sent "
                "it right?)" % (element.graph[:200], element.timestamp_literal.value[:80],
                                format_duration(self.ahead), format_instant(limit - self.ahead)))

    def check(self, decoded: "Decoded", origin: str) -> None:
        """EventTimeAhead naming the first element of `decoded` stamped past the bound."""
        limit = self.limit()
        for elements in decoded.elements.values():
            for element in elements:
                if element.timestamp > limit:
                    raise EventTimeAhead(self.reason(element, limit), origin)


def decode(payload: Payload, timestamp_predicate: str = PROV_GENERATED_AT_TIME) -> Decoded:
    """The elements of one payload, or its rejects: no input raises (a line-based payload sets
    each bad line aside and reads the others)."""
    decoded = Decoded()
    try:
        fmt = formats.by_name(payload.format)
    except formats.UnknownFormat as e:
        decoded.rejected.append(Rejected(payload, payload.line, None, str(e)))
        return decoded
    if isinstance(payload.text, bytes):
        payload = _as_text(payload, fmt, decoded)
        if payload is None:
            return decoded
    if fmt.rdf is None:
        _decode_envelopes(payload, decoded)
    else:
        _decode_rdf(payload, fmt.rdf, timestamp_predicate, decoded)
    return decoded


def _as_text(payload: Payload, fmt: formats.InputFormat, decoded: Decoded) -> Payload | None:
    """A payload of bytes as text, read as UTF-8 (RDF's syntaxes are; nothing is replaced):
    a line-based payload sets aside each line that is not UTF-8 and keeps the others, any other
    is rejected whole, with the line and byte of the first bad sequence."""
    data = payload.text
    try:
        return replace(payload, text=data.decode("utf-8"))
    except UnicodeDecodeError:
        pass
    lines = data.split(b"\n")
    kept = []
    first = payload.line or 1
    for k, line in enumerate(lines):
        try:
            kept.append(line.decode("utf-8"))
            continue
        except UnicodeDecodeError as e:
            at = e.start
        reason = "not UTF-8: byte 0x%02X at byte %d of the line" % (line[at], at + 1)
        if not fmt.line_based:
            decoded.rejected.append(Rejected(payload, first + k, at + 1, reason))
            return None
        decoded.rejected.append(Rejected(Payload(payload.stream, payload.format, payload.origin, line,
                                                 payload.ingest_time), first + k, at + 1, reason))
        kept.append("")             # the line stays counted, empty
    return replace(payload, text="\n".join(kept))


def decode_body(payload: Payload, timestamp_predicate: str = PROV_GENERATED_AT_TIME,
                event_time: EventTimeBound | None = None) -> Decoded:
    """The elements of one body a client hands in at once (a post, a push), all of it or
    RdfInputError naming where it is bad: no reject is set aside, the client hears of it (of an
    element stamped past `event_time` too: EventTimeAhead). A body of plain triples (no named
    graph, nothing but triples that are not timestamps in the default graph) is one element
    stamped with its ingest time, as an envelope of them would be; such triples beside elements
    are refused, naming them."""
    decoded = decode(payload, timestamp_predicate)
    if decoded.rejected:
        raise decoded.rejected[0].error()
    stray = decoded.ignored_default_triples
    if not stray:
        if event_time is not None:
            event_time.check(decoded, payload.origin)
        return decoded
    if decoded.elements:
        raise RdfInputError("the default graph holds %d triple%s that %s not timestamps: an element is a named graph, "
                            "and the default graph says when each was generated; put them in a named graph, or send "
                            "them on their own (one element)" % (stray, "s" * (stray != 1), "are" if stray != 1 else "is"),
                            payload.origin)
    text = payload.text.decode("utf-8") if isinstance(payload.text, bytes) else payload.text
    envelope = json.dumps({"time": format_instant(payload.ingest_time), "data": text})
    plain = decode(Payload(payload.stream, "jsonl", payload.origin, envelope, payload.ingest_time, 1, payload.scope))
    if plain.rejected:
        raise plain.rejected[0].error()
    return plain


def _decode_rdf(payload: Payload, fmt: ox.RdfFormat, timestamp_predicate: str, decoded: Decoded) -> None:
    text, lines = payload.text, None
    first_line = payload.line or 1
    while True:
        try:
            result = read_elements(text.encode("utf-8"), payload.origin, fmt, timestamp_predicate,
                                   processing_time=payload.ingest_time, scope=payload.scope)
            break
        except RdfInputError as e:
            if lines is None and payload.line is not None:
                lines = text.split("\n")       # only once a line is bad: the lines of a large body cost memory
            if lines is None or e.line is None or not 1 <= e.line <= len(lines):
                decoded.rejected.append(Rejected(payload, e.line, e.column, e.message))
                return
            bad = lines.pop(e.line - 1)
            decoded.rejected.append(Rejected(Payload(payload.stream, payload.format, payload.origin, bad,
                                                     payload.ingest_time), first_line + e.line - 1, e.column,
                                             e.message))
            text = "\n".join(lines)
    decoded.ignored_default_triples += result.ignored_default_triples
    for element in result.elements:
        decoded.add(payload.stream, element)


def _decode_envelopes(payload: Payload, decoded: Decoded) -> None:
    """Each line `{"stream"?, "time"?, "graph"?, "data": Turtle}` is one element."""
    first = payload.line or 1
    for offset, text in enumerate(payload.text.split("\n")):
        if not text.strip():
            continue
        line = Payload(payload.stream, payload.format, payload.origin, text, payload.ingest_time, first + offset,
                       payload.scope)
        try:
            stream, element = _envelope(line)
        except RdfInputError as e:
            decoded.rejected.append(Rejected(line, line.line, e.column, "bad envelope: %s" % e.message))
            continue
        decoded.add(stream, element)


def _envelope(payload: Payload) -> tuple[str, Element]:
    envelope = read_envelope(payload.text, payload.origin, payload.line)
    stream = envelope.stream or payload.stream
    instant = envelope.instant if envelope.instant is not None else payload.ingest_time
    graph = envelope.graph or "urn:rspstar:element:%s" % hashlib.blake2b(
        ("%s\x00%s\x00%s" % (payload.names_from, payload.line, payload.text)).encode(), digest_size=16).hexdigest()
    try:
        check_nesting(envelope.data)
    except QuerySyntaxError as e:
        raise RdfInputError("data, line %d, column %d of it: %s" % (e.line, e.column, e.message), payload.origin,
                            payload.line) from None
    try:
        quads = list(ox.parse(envelope.data.encode("utf-8"), format=ox.RdfFormat.TRIG, rename_blank_nodes=True))
    except SyntaxError as e:
        raise RdfInputError("data: %s" % e, payload.origin, payload.line) from None
    if any(not isinstance(q.graph_name, ox.DefaultGraph) for q in quads):
        raise RdfInputError("data: an envelope's data is one graph (no GRAPH blocks)", payload.origin, payload.line)
    name = ox.NamedNode(graph)
    literal = ox.Literal(envelope.time, datatype=XSD_DATETIME) if envelope.time is not None \
        else instant_literal(instant)
    return stream, Element(graph, instant, literal, [ox.Quad(q.subject, q.predicate, q.object, name) for q in quads])


def group_lines(payloads) -> list[Payload]:
    """Consecutive line rows of one origin and stream become one payload (parsed together,
    bad lines set aside one by one); documents and envelopes stay as they are."""
    grouped: list[Payload] = []
    for p in payloads:
        last = grouped[-1] if grouped else None
        if (p.line is not None and p.format != "jsonl" and last is not None and last.line is not None
                and last.format == p.format and last.origin == p.origin and last.stream == p.stream):
            separator = b"\n" if isinstance(last.text, bytes) else "\n"
            grouped[-1] = Payload(last.stream, last.format, last.origin, last.text + separator + p.text,
                                  last.ingest_time, last.line)
        else:
            grouped.append(p)
    return grouped


def decode_all(payloads, timestamp_predicate: str = PROV_GENERATED_AT_TIME, on_unexpected=None) -> Decoded:
    """The elements of a micro-batch's payloads per stream (in input order) and their rejects
    together. No input raises: a payload whose reading fails unexpectedly is rejected whole
    (after `on_unexpected(payload)`, which may log it)."""
    decoded = Decoded()
    for payload in group_lines(payloads):
        try:
            one = decode(payload, timestamp_predicate)
        except Exception as e:  # no input may stop a source
            if on_unexpected is not None:
                on_unexpected(payload)
            decoded.rejected.append(Rejected(payload, payload.line, None, "unexpected: %s: %s" % (type(e).__name__, e)))
            continue
        decoded.rejected += one.rejected
        decoded.ignored_default_triples += one.ignored_default_triples
        for stream, elements in one.elements.items():
            decoded.elements.setdefault(stream, []).extend(elements)
    return decoded


# -- decoded where the input is read (the executors), stored in one Rust call on the driver ----
# A micro-batch decoded as rows of plain values (Spark carries them back as Arrow): one per
# stream's elements, one per reject, one for default-graph triples that were not timestamps.
ELEMENTS, REJECTED, IGNORED = "elements", "rejected", "ignored"
# Each column of those rows with its Spark SQL type: the schema Spark is told and the one the
# workers' Arrow batches are built with both come from here.
_ENCODED = (("kind", "string"), ("stream", "string"), ("text", "binary"), ("graphs", "array<string>"),
            ("instants", "array<bigint>"), ("stamps", "array<string>"), ("stamp_types", "array<string>"),
            ("lines", "array<int>"), ("format", "string"), ("origin", "string"), ("ingest_time", "bigint"),
            ("line", "int"), ("column", "int"), ("reason", "string"), ("count", "bigint"))
ENCODED_SCHEMA = ", ".join("%s %s" % column for column in _ENCODED)
ENCODED_COLUMNS = tuple(name for name, _ in _ENCODED)


def _arrow_schema():
    import pyarrow as pa     # on the workers only: the driver never builds these batches
    scalars = {"string": pa.string(), "binary": pa.binary(), "bigint": pa.int64(), "int": pa.int32()}
    return pa.schema([(name, pa.list_(scalars[kind[6:-1]]) if kind.startswith("array<") else scalars[kind])
                      for name, kind in _ENCODED])


def stored_form(stream: str, elements: list[Element], timestamp_predicate: str = PROV_GENERATED_AT_TIME) -> bytes:
    """Elements as the store holds them, in N-Quads 1.2: each element's timestamp quad (in the
    stream's timestamps graph) first, then its content."""
    predicate, graph = ox.NamedNode(timestamp_predicate), ox.NamedNode(timestamps_graph(stream))
    quads = []
    for element in elements:
        quads.append(ox.Quad(ox.NamedNode(element.graph), predicate, element.timestamp_literal, graph))
        quads.extend(element.quads)
    return ox.serialize(quads, format=ox.RdfFormat.N_QUADS)


def stored_to_canonical(stream: str, stored: bytes) -> bytes:
    """`canonical` of elements from their `stored_form`: the timestamp quads moved back to the
    default graph. A line that ends in the timestamps graph is a timestamp quad: N-Quads has no
    raw line break inside a term, and no element's content is in an engine graph."""
    return stored.replace(b" <%s> .\n" % timestamps_graph(stream).encode(), b" .\n")


def encode(payloads, timestamp_predicate: str = PROV_GENERATED_AT_TIME) -> list[dict]:
    """A micro-batch's payloads decoded (`decode_all`) into rows of ENCODED_COLUMNS. A stream's
    row names, as its origin, every origin the payloads came from, one per line (what the
    landing files read are: store.landing.LandedFiles)."""
    payloads = list(payloads)
    origins = "\n".join(dict.fromkeys(p.origin for p in payloads))
    decoded = decode_all(payloads, timestamp_predicate)
    empty = dict.fromkeys(ENCODED_COLUMNS)
    rows = []
    for stream, elements in decoded.elements.items():
        rows.append({**empty, "kind": ELEMENTS, "stream": stream, "origin": origins,
                     "text": stored_form(stream, elements, timestamp_predicate),
                     "graphs": [e.graph for e in elements], "instants": [e.timestamp for e in elements],
                     "stamps": [e.timestamp_literal.value for e in elements],
                     "stamp_types": [_literal_type(e.timestamp_literal) for e in elements],
                     # Each element's lines in the text (its timestamp's and one per quad).
                     "lines": [1 + len(e.quads) for e in elements]})
    for r in decoded.rejected:
        p = r.payload
        rows.append({**empty, "kind": REJECTED, "stream": p.stream,
                     "text": p.text if isinstance(p.text, bytes) else p.text.encode("utf-8"),
                     "format": p.format, "origin": p.origin, "ingest_time": p.ingest_time, "line": r.line,
                     "column": r.column, "reason": r.reason})
    if decoded.ignored_default_triples:
        rows.append({**empty, "kind": IGNORED, "count": decoded.ignored_default_triples})
    return rows


def _literal_type(literal: ox.Literal) -> str:
    """A literal's datatype IRI, or "@" and its language tag (staged.literal_of reads it back)."""
    return "@" + literal.language if literal.language else literal.datatype.value


class EncodeBatches:
    """mapInArrow: a source's rows to ENCODED rows, decoded where Spark reads them; `payloads`
    turns rows (mappings) into payloads as the source reads them."""

    def __init__(self, payloads, timestamp_predicate: str = PROV_GENERATED_AT_TIME):
        self.payloads = payloads
        self.timestamp_predicate = timestamp_predicate

    def __call__(self, batches):
        import pyarrow as pa
        WORKER_HEAP.settle()
        schema = None
        for batch in batches:
            rows = batch.to_pylist()
            if not rows:
                continue
            encoded = encode(self.payloads(rows), self.timestamp_predicate)
            schema = schema or _arrow_schema()
            yield pa.RecordBatch.from_pylist(encoded, schema=schema)


def canonical(elements: list[Element]) -> bytes:
    """Elements as N-Quads 1.2, each graph's timestamp triple first: the form that posted
    bodies land in and recordings keep, read back into the same elements. The timestamp's line
    is written from its terms' N-Triples forms (which N-Quads writes as they are; an element's
    graph is an IRI) rather than from a quad made for it: pyoxigraph takes a literal or the
    default graph as a new quad's term slowly, and that quad cost more than writing the whole
    element (bench/out/NOTES.md#partitioned-cost-keying)."""
    return b"".join(("<%s> %s %s .\n" % (element.graph, _GENERATED_AT_TIME, element.timestamp_literal)).encode("utf-8")
                    + ox.serialize(element.quads, format=ox.RdfFormat.N_QUADS) for element in elements)


def canonical_chunks(elements: list[Element], limit: int) -> list[tuple[bytes, list[Element]]]:
    """`canonical` of elements cut, at elements' edges, into runs of at most `limit` bytes (an
    element larger than that alone), each with its elements."""
    data = canonical(elements)
    if len(data) <= limit:
        return [(data, elements)]
    lines = data.split(b"\n")            # one line per quad, in order: each element's timestamp, then its quads
    chunks, run, start, size, at = [], [], 0, 0, 0
    for element in elements:
        count = 1 + len(element.quads)
        length = sum(len(line) + 1 for line in lines[at:at + count])
        if run and size + length > limit:
            chunks.append((b"\n".join(lines[start:at]) + b"\n", run))
            run, start, size = [], at, 0
        run.append(element)
        size += length
        at += count
    chunks.append((b"\n".join(lines[start:at]) + b"\n", run))
    return chunks


def envelope_of(stream: str, element: Element) -> bytes:
    """One element as a JSON envelope line naming its stream, graph and time (an element's time
    from an envelope is an xsd:dateTime, which the envelope's `time` gives back). A name the
    codec made (an envelope's without "graph") is the engine's, which no envelope may give: it is
    left out, and made again where the line is read, from where it is."""
    data = ox.serialize([q.triple for q in element.quads], format=ox.RdfFormat.N_TRIPLES).decode("utf-8")
    envelope = {"stream": stream, "time": element.timestamp_literal.value, "data": data}
    if not is_reserved(element.graph):
        envelope["graph"] = element.graph
    return (json.dumps(envelope, ensure_ascii=False) + "\n").encode("utf-8")
