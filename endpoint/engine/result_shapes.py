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
"""
from __future__ import annotations

import json
from typing import Sequence

import pyoxigraph as ox

from rspstar.translator.options import SINK_FORMATS

SHAPES = SINK_FORMATS          # the shapes a query's sinks may ask for (translator.options)
SPARQL_JSON, COMPACT = SHAPES
TRIPLE_VARIABLES = ("subject", "predicate", "object")

_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
_LANG_STRINGS = ("http://www.w3.org/1999/02/22-rdf-syntax-ns#langString",
                 "http://www.w3.org/1999/02/22-rdf-syntax-ns#dirLangString")
_ROW = "<urn:rspstar:row> <urn:rspstar:term> %s ."


def term_json(term) -> dict:
    """An Oxigraph term in the SPARQL 1.1 (1.2 for triple terms) Query Results JSON form."""
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
        return {"type": "triple", "value": {"subject": term_json(term.subject), "predicate": term_json(term.predicate),
                                            "object": term_json(term.object)}}
    raise TypeError("not an RDF term: %r" % (term,))


def _terms(texts: list[str]) -> list:
    """N-Triples terms as Oxigraph terms, read in one pass."""
    if not texts:
        return []
    document = "\n".join(_ROW % text for text in texts).encode("utf-8")
    return [quad.object for quad in ox.parse(document, format=ox.RdfFormat.N_TRIPLES)]


def sparql_json(record: dict, variables: Sequence[str] | None = None) -> dict:
    """The record in the SPARQL Query Results JSON shape; `variables` are the SELECT clause's
    (None: SELECT *)."""
    shaped = {key: record[key] for key in sorted(record) if key not in ("bindings", "triples", "boolean")}
    if "boolean" in record:
        shaped["head"] = {}
        shaped["boolean"] = record["boolean"]
        return shaped
    if "triples" in record:
        names = TRIPLE_VARIABLES
        lines = "\n".join(record["triples"]).encode("utf-8")
        bindings = [dict(zip(names, (term_json(t.subject), term_json(t.predicate), term_json(t.object))))
                    for t in (quad.triple for quad in ox.parse(lines, format=ox.RdfFormat.N_TRIPLES))] if lines else []
    else:
        rows = record.get("bindings", [])
        names = tuple(variables) if variables is not None else tuple(sorted({name for row in rows for name in row}))
        terms = iter(_terms([text for row in rows for text in row.values()]))
        bindings = [{name: term_json(next(terms)) for name in row} for row in rows]
    shaped["head"] = {"vars": list(names)}
    shaped["results"] = {"bindings": bindings}
    return shaped


def shaped(record: dict, shape: str, variables: Sequence[str] | None = None) -> dict:
    """The record in `shape` (one of SHAPES)."""
    if shape == COMPACT:
        return record
    if shape == SPARQL_JSON:
        return sparql_json(record, variables)
    raise ValueError("unknown result shape %r (known: %s)" % (shape, ", ".join(SHAPES)))


def shaped_json(record: dict, shape: str, variables: Sequence[str] | None = None) -> str:
    """The record in `shape` as one line of JSON text (no newline). The compact shape's keys
    are sorted, as the history and outboxes have always kept them; the SPARQL JSON shape keeps
    its order (results last)."""
    if shape == COMPACT:
        return json.dumps(record, sort_keys=True)
    return json.dumps(shaped(record, shape, variables))


def has_results(record: dict) -> bool:
    """Whether an evaluation gave anything: a row, a triple, or an ASK's answer."""
    return "boolean" in record or bool(record.get("bindings") or record.get("triples"))
