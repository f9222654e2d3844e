"""The shapes a query's evaluation takes on its way out, made here and nowhere else.

A record (what an evaluation emits: `time`, `windows`, and `bindings` of N-Triples terms,
`triples` as N-Triples lines or a `boolean`) is the compact shape: the conformance format that
`rspstar replay` writes and the history keeps. Over HTTP (history, server-sent events) and to
sinks, an evaluation goes by default in the SPARQL 1.1 Query Results JSON shape, its metadata
beside `head` and `results` (or `boolean`):

    {"time": "...", "windows": {...}, "head": {"vars": ["room", "t"]},
     "results": {"bindings": [{"room": {"type": "uri", "value": "..."},
                               "t": {"type": "literal", "value": "31", "datatype": "...#integer"}}]}}

The metadata comes first and `results` last: a streaming parser (Oxigraph's) reads nothing
after the bindings. Terms are written as Oxigraph's own SPARQL results serializer writes them (a triple term as
SPARQL 1.2 JSON does: `{"type": "triple", "value": {"subject", "predicate", "object"}}`, a
literal's base direction as `its:dir`). A CONSTRUCT's triples are solutions of `subject`,
`predicate` and `object`. The head's variables are the SELECT clause's, in its order; for
`SELECT *`, the variables the evaluation bound, sorted.

Readers of SPARQL 1.1 results know no triple term (rdflib 7 raises NotImplementedError on one,
in JSON and in XML alike). For them a triple term may be written as an IRI instead
(`triple_terms = "iri"`): `urn:rspstar:triple:` followed by the term's N-Triples text
(`<<( s p o )>>`) percent-encoded, which `triple_term_of` turns back into the term, as RDF4J
encodes triple terms for clients that cannot read them.
"""
from __future__ import annotations

import json
from typing import Sequence
from urllib.parse import quote, unquote
from xml.sax.saxutils import escape as _escape

import pyoxigraph as ox

from rspstar.translator.options import SINK_FORMATS

SHAPES = SINK_FORMATS          # the shapes a query's sinks may ask for (translator.options)
SPARQL_JSON, COMPACT = SHAPES
TRIPLE_VARIABLES = ("subject", "predicate", "object")

_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"


def xml_escape(text: str) -> str:
    return _escape(text, {'"': "&quot;"})
_LANG_STRINGS = ("http://www.w3.org/1999/02/22-rdf-syntax-ns#langString",
                 "http://www.w3.org/1999/02/22-rdf-syntax-ns#dirLangString")
_ROW = "<urn:rspstar:row> <urn:rspstar:term> %s ."
# How a triple term is written in the SPARQL JSON shape: as SPARQL 1.2 writes it, or as an IRI.
TRIPLE_TERMS = ("triple", "iri")
TRIPLE_IRI = "urn:rspstar:triple:"


def triple_iri(term: ox.Triple) -> str:
    """The IRI a triple term is written as for SPARQL 1.1 readers: TRIPLE_IRI and the term's
    N-Triples text, percent-encoded."""
    return TRIPLE_IRI + quote(_ntriples(term), safe="")


def _ntriples(term) -> str:
    """A term's N-Triples 1.2 text (a triple term, nested ones too, as `<<( s p o )>>`)."""
    if isinstance(term, ox.Triple):
        return "<<( %s %s %s )>>" % (_ntriples(term.subject), _ntriples(term.predicate), _ntriples(term.object))
    return str(term)


def triple_term_of(iri: str) -> ox.Triple:
    """The triple term an IRI made by `triple_iri` stands for (ValueError for another IRI)."""
    if not iri.startswith(TRIPLE_IRI):
        raise ValueError("%r is not a triple term written as an IRI (%s...)" % (iri[:80], TRIPLE_IRI))
    return _terms([unquote(iri[len(TRIPLE_IRI):])])[0]


def term_json(term, triple_terms: str = TRIPLE_TERMS[0]) -> dict:
    """An Oxigraph term in the SPARQL 1.1 (1.2 for triple terms) Query Results JSON form; with
    triple_terms="iri", a triple term as the IRI `triple_iri` makes."""
    if isinstance(term, ox.NamedNode):
        return {"type": "uri", "value": term.value}
    if isinstance(term, ox.BlankNode):
        return {"type": "bnode", "value": term.value}
    if isinstance(term, ox.Literal):
        data = {"type": "literal", "value": term.value}
        if term.language is not None:
            data["xml:lang"] = term.language
            if term.direction is not None:
                data["its:dir"] = str(term.direction)
        elif term.datatype.value not in (_XSD_STRING, *_LANG_STRINGS):
            data["datatype"] = term.datatype.value
        return data
    if isinstance(term, ox.Triple):
        if triple_terms == "iri":
            return {"type": "uri", "value": triple_iri(term)}
        return {"type": "triple", "value": {"subject": term_json(term.subject), "predicate": term_json(term.predicate),
                                            "object": term_json(term.object)}}
    raise TypeError("not an RDF term: %r" % (term,))


def _terms(texts: list[str]) -> list:
    """N-Triples terms as Oxigraph terms, read in one pass."""
    if not texts:
        return []
    document = "\n".join(_ROW % text for text in texts).encode("utf-8")
    return [quad.object for quad in ox.parse(document, format=ox.RdfFormat.N_TRIPLES)]


def sparql_json(record: dict, variables: Sequence[str] | None = None, triple_terms: str = TRIPLE_TERMS[0]) -> dict:
    """The record in the SPARQL Query Results JSON shape; `variables` are the SELECT clause's
    (None: SELECT *); `triple_terms` how a triple term is written (TRIPLE_TERMS)."""
    shaped = {key: record[key] for key in sorted(record) if key not in ("bindings", "triples", "boolean")}
    if "boolean" in record:
        shaped["head"] = {}
        shaped["boolean"] = record["boolean"]
        return shaped
    if "triples" in record:
        names = TRIPLE_VARIABLES
        lines = "\n".join(record["triples"]).encode("utf-8")
        bindings = [dict(zip(names, (term_json(t.subject, triple_terms), term_json(t.predicate, triple_terms),
                                     term_json(t.object, triple_terms))))
                    for t in (quad.triple for quad in ox.parse(lines, format=ox.RdfFormat.N_TRIPLES))] if lines else []
    else:
        rows = record.get("bindings", [])
        names = tuple(variables) if variables is not None else tuple(sorted({name for row in rows for name in row}))
        terms = iter(_terms([text for row in rows for text in row.values()]))
        bindings = [{name: term_json(next(terms), triple_terms) for name in row} for row in rows]
    shaped["head"] = {"vars": list(names)}
    shaped["results"] = {"bindings": bindings}
    return shaped


def shaped(record: dict, shape: str, variables: Sequence[str] | None = None,
           triple_terms: str = TRIPLE_TERMS[0]) -> dict:
    """The record in `shape` (one of SHAPES)."""
    if shape == COMPACT:
        return record
    if shape == SPARQL_JSON:
        return sparql_json(record, variables, triple_terms)
    raise ValueError("unknown result shape %r (known: %s)" % (shape, ", ".join(SHAPES)))


def shaped_json(record: dict, shape: str, variables: Sequence[str] | None = None,
                triple_terms: str = TRIPLE_TERMS[0]) -> str:
    """The record in `shape` as one line of JSON text (no newline). The compact shape's keys
    are sorted, as the history and outboxes have always kept them; the SPARQL JSON shape keeps
    its order (results last)."""
    if shape == COMPACT:
        return json.dumps(record, sort_keys=True)
    return json.dumps(shaped(record, shape, variables, triple_terms))


_XML_NS = "http://www.w3.org/2005/sparql-results#"


def _xml_term(term) -> str:
    """A term (no triple term: written as its IRI already) in SPARQL Query Results XML."""
    if isinstance(term, ox.NamedNode):
        return "<uri>%s</uri>" % xml_escape(term.value)
    if isinstance(term, ox.BlankNode):
        return "<bnode>%s</bnode>" % xml_escape(term.value)
    if term.language is not None:
        return '<literal xml:lang="%s">%s</literal>' % (xml_escape(term.language), xml_escape(term.value))
    if term.datatype.value != _XSD_STRING:
        return '<literal datatype="%s">%s</literal>' % (xml_escape(term.datatype.value), xml_escape(term.value))
    return "<literal>%s</literal>" % xml_escape(term.value)


def with_triple_iris(body: bytes, media: str) -> bytes:
    """SPARQL solutions (JSON or XML, as Oxigraph serialized them) again, each triple term written
    as the IRI `triple_iri` makes, for readers of SPARQL 1.1 results; a boolean, or another
    format, as it is."""
    form = {"application/sparql-results+json": ox.QueryResultsFormat.JSON, "application/json": ox.QueryResultsFormat.JSON,
            "application/sparql-results+xml": ox.QueryResultsFormat.XML}.get(media)
    if form is None:
        return body
    solutions = ox.parse_query_results(body, format=form)
    if not isinstance(solutions, ox.QuerySolutions):
        return body
    names = [v.value for v in solutions.variables]
    rows = [[(name, solution[name]) for name in names if solution[name] is not None] for solution in solutions]
    if form is ox.QueryResultsFormat.JSON:
        return json.dumps({"head": {"vars": names}, "results": {"bindings": [
            {name: term_json(term, "iri") for name, term in row} for row in rows]}}).encode("utf-8")
    parts = ['<?xml version="1.0"?><sparql xmlns="%s"><head>' % _XML_NS]
    parts += ['<variable name="%s"/>' % xml_escape(name) for name in names]
    parts.append("</head><results>")
    for row in rows:
        parts.append("<result>%s</result>" % "".join('<binding name="%s">%s</binding>' % (xml_escape(name), _xml_term(
        ox.NamedNode(triple_iri(term)) if isinstance(term, ox.Triple) else term))
                                                     for name, term in row))
    parts.append("</results></sparql>")
    return "".join(parts).encode("utf-8")


def has_results(record: dict) -> bool:
    """Whether an evaluation gave anything: a row, a triple, or an ASK's answer."""
    return "boolean" in record or bool(record.get("bindings") or record.get("triples"))
