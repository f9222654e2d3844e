"""Every construct that nests or chains in a text the engine's parsers read from outside, as
builders of such text `n` levels or links deep, and the ways each reaches a parser: the SPARQL
query and update parsers (a query, an update's pattern, an update's data), the RSP-QL* parser
(a registered query's window), the RDF parsers (Turtle, TriG, N-Triples, N-Quads, RDF/XML,
JSON-LD). tests/parser_stack.py measures what each costs Oxigraph's stack; the tests of
test_parser_limits.py send them to every route."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pyoxigraph as ox

P = "<http://example.org/p>"
S = "<http://example.org/s>"
O = "<http://example.org/o>"


@dataclass(frozen=True)
class Construct:
    name: str
    place: str                        # "expression", "pattern", "data", "root", "update", or an RDF format's name
    build: Callable[[int], str]       # the construct n levels or links deep

    def text(self, n: int, route: str = "query") -> str:
        """The whole text a parser reads, `n` deep, for `route` ("query", "update", "window",
        or the RDF format of `place`)."""
        return wrap(self.place, self.build(n), route)


def _join(separator: str, item: str) -> Callable[[int], str]:
    return lambda n: separator.join([item] * n)


def _nest(opening: str, inside: str, closing: str) -> Callable[[int], str]:
    return lambda n: opening * n + inside + closing * n


def _numbered(template: str, separator: str = " ") -> Callable[[int], str]:
    return lambda n: separator.join(template % k for k in range(n))


EXPRESSIONS = [
    Construct("not", "expression", lambda n: "!" * n + "?o"),
    Construct("or", "expression", _join(" || ", "?o")),
    Construct("and", "expression", _join(" && ", "?o")),
    Construct("add", "expression", _join(" + ", "?o")),
    Construct("subtract", "expression", _join(" - ", "?o")),
    Construct("multiply", "expression", _join(" * ", "?o")),
    Construct("divide", "expression", _join(" / ", "?o")),
    Construct("signed numbers", "expression", lambda n: "1" + " -1" * n),
    Construct("brackets", "expression", _nest("(", "?o", ")")),
    Construct("negation", "expression", _nest("-(", "?o", ")")),
    Construct("comparisons", "expression", _nest("(?o = ", "?o", ")")),
    Construct("calls", "expression", _nest("IF(true, ", "1", ", 1)")),
    Construct("one-argument calls", "expression", _nest("STR(", "?o", ")")),
    Construct("exists", "expression", _nest("EXISTS { FILTER(", "true", ") }")),
    # What a careless reader would take for one token: an IRI after an operand (`<` is less-than
    # there), a word with hyphens (they are minus signs), the rest of a line after a comment
    # that a carriage return ends.
    Construct("operators in an IRI's place", "expression", lambda n: "?o <?o" + "&&?o" * n + "> ?o"),
    Construct("minus signs in a word", "expression", _join("-", "true")),
    Construct("operators after a comment", "expression", lambda n: "# a comment\r" + "!" * n + "?o\n"),
]
PATTERNS = [
    Construct("groups nested", "pattern", _nest("{ ", "", " }")),
    Construct("groups", "pattern", _join(" ", "{ ?s ?p ?o }")),
    Construct("union", "pattern", _join(" UNION ", "{ ?s ?p ?o }")),
    Construct("union nested", "pattern", _nest("{ ", "?s ?p ?o", " } UNION { ?s ?p ?o }")),
    Construct("optional", "pattern", _join(" ", "OPTIONAL { ?s ?p ?o }")),
    Construct("optional nested", "pattern", _nest("OPTIONAL { ", "?s ?p ?o", " }")),
    Construct("minus", "pattern", _join(" ", "MINUS { ?s ?p ?o }")),
    Construct("minus nested", "pattern", _nest("MINUS { ", "?s ?p ?o", " }")),
    Construct("filters", "pattern", _join(" ", "FILTER(?o)")),
    Construct("binds", "pattern", _numbered("BIND(1 AS ?b%d)")),
    Construct("values", "pattern", _numbered("VALUES ?v%d { 1 }")),
    Construct("graphs", "pattern", _join(" ", "GRAPH ?g { ?s ?p ?o }")),
    Construct("graphs nested", "pattern", _nest("GRAPH ?g { ", "?s ?p ?o", " }")),
    Construct("sub-selects", "pattern", _nest("{ SELECT * WHERE ", "{ }", " }")),
    Construct("triple patterns", "pattern", _numbered(". ?s %s ?o%%d" % P, "")),
    Construct("predicate lists", "pattern", lambda n: ". ?s " + " ; ".join("%s ?o%d" % (P, k) for k in range(n))),
    Construct("object lists", "pattern", lambda n: ". ?s %s " % P + " , ".join("?o%d" % k for k in range(n))),
    Construct("path sequences", "pattern", lambda n: ". ?s " + "/".join([P] * n) + " ?o"),
    Construct("path alternatives", "pattern", lambda n: ". ?s " + "|".join([P] * n) + " ?o"),
    Construct("path groups", "pattern", lambda n: ". ?s " + "(" * n + P + ")" * n + " ?o"),
    Construct("path modifiers", "pattern", lambda n: ". ?s " + "(" * n + P + ")*" * n + " ?o"),
    Construct("path inverses", "pattern", lambda n: ". ?s " + "^(" * n + P + ")" * n + " ?o"),
    Construct("collections nested", "pattern", lambda n: ". ?s %s " % P + "(" * n + "1" + ")" * n),
    Construct("collection items", "pattern", lambda n: ". ?s %s (" % P + " 1" * n + " )"),
    Construct("blank nodes nested", "pattern", lambda n: ". ?s %s " % P + ("[ %s " % P) * n + "1" + " ]" * n),
    Construct("reifiers nested", "pattern", lambda n: ". " + "<< " * n + "?s" + (" %s ?o >>" % P) * n + " %s ?o" % P),
    Construct("triple terms nested", "pattern", lambda n: ". ?s %s " % P + ("<<( ?s %s " % P) * n + "?o" + " )>>" * n),
    Construct("annotations nested", "pattern", lambda n: ". ?s %s ?o" % P + (" {| %s ?o" % P) * n + " |}" * n),
    Construct("projections", "root", _numbered("(1 AS ?v%d)")),
    # What a careless reader would pair wrongly: `<<` after an operand (less-than and an IRI:
    # `?o<<b>` is `?o < <b>`), so that the groups after it seem to be inside the FILTER; a
    # reified triple in a collection, which is no less-than there.
    Construct("groups after a less-than", "pattern",
              lambda n: "FILTER(?o<<http://example.org/o>) " + "{ ?s ?p ?o } " * n),
    Construct("collection items after a reifier", "pattern",
              lambda n: ". ?s %s ( ?o << ?s %s ?o >>" % (P, P) + " 1" * n + " )"),
]
DATA = [
    Construct("data triples", "data", _numbered("%s %s %%d ." % (S, P))),
    Construct("data collections nested", "data", lambda n: "%s %s " % (S, P) + "(" * n + "1" + ")" * n),
    Construct("data collection items", "data", lambda n: "%s %s (" % (S, P) + " 1" * n + " )"),
    Construct("data blank nodes nested", "data", lambda n: "%s %s " % (S, P) + ("[ %s " % P) * n + "1" + " ]" * n),
    Construct("data reifiers nested", "data", lambda n: "<< " * n + S + (" %s %s >>" % (P, O)) * n + " %s 1" % P),
    Construct("data triple terms nested", "data", lambda n: "%s %s " % (S, P) + ("<<( %s %s " % (S, P)) * n + O
              + " )>>" * n),
    Construct("data annotations nested", "data", lambda n: "%s %s %s" % (S, P, O) + (" {| %s %s" % (P, O)) * n
              + " |}" * n),
    Construct("operations", "update", _join(" ;\n", "DELETE DATA { %s %s 1 }" % (S, P))),
    # (The templates' patterns match nothing: what they would write is not the point.)
    Construct("template triples", "update", lambda n: "INSERT { " + " ".join("?s %s %d ." % (P, k) for k in range(n))
              + " } WHERE { ?s ?p ?o FILTER(false) }"),
    Construct("template collection items", "update", lambda n: "INSERT { ?s %s (" % P + " 1" * n + " ) } WHERE { }"),
    Construct("construct template triples", "query", lambda n: "CONSTRUCT { " + " ".join(
        "?s %s %d ." % (P, k) for k in range(n)) + " } WHERE { ?s ?p ?o FILTER(false) }"),
    Construct("values rows", "query", lambda n: "SELECT * WHERE { VALUES (?a ?b) {" + " (1 2)" * n + " } }"),
]
_TTL = {
    "collections nested": lambda n: "%s %s " % (S, P) + "(" * n + "1" + ")" * n + " .",
    "collection items": lambda n: "%s %s (" % (S, P) + " 1" * n + " ) .",
    "blank nodes nested": lambda n: "%s %s " % (S, P) + ("[ %s " % P) * n + "1" + " ]" * n + " .",
    "reifiers nested": lambda n: "<< " * n + S + (" %s %s >>" % (P, O)) * n + " %s 1 ." % P,
    "triple terms nested": lambda n: "%s %s " % (S, P) + ("<<( %s %s " % (S, P)) * n + O + " )>>" * n + " .",
    "annotations nested": lambda n: "%s %s %s" % (S, P, O) + (" {| %s %s" % (P, O)) * n + " |}" * n + " .",
    "predicate lists": lambda n: S + " " + " ; ".join("%s %d" % (P, k) for k in range(n)) + " .",
    "object lists": lambda n: "%s %s " % (S, P) + " , ".join(str(k) for k in range(n)) + " .",
}
_XML_HEAD = ('<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
             'xmlns:e="http://example.org/">\n')
RDF = [
    *(Construct(name, "turtle", build) for name, build in _TTL.items()),
    *(Construct(name, "trig", lambda n, build=build: "<http://example.org/g> { %s }" % build(n))
      for name, build in _TTL.items()),
    Construct("triple terms nested", "ntriples", lambda n: "%s %s " % (S, P) + ("<<( %s %s " % (S, P)) * n + O
              + " )>>" * n + " ."),
    Construct("triple terms nested", "nquads", lambda n: "%s %s " % (S, P) + ("<<( %s %s " % (S, P)) * n + O
              + " )>>" * n + " <http://example.org/g> ."),
    Construct("elements nested", "rdfxml", lambda n: _XML_HEAD + '<rdf:Description rdf:about="http://example.org/s">'
              + "<e:p><rdf:Description>" * n + "</rdf:Description></e:p>" * n + "</rdf:Description></rdf:RDF>"),
    Construct("literal elements nested", "rdfxml", lambda n: _XML_HEAD + '<rdf:Description '
              'rdf:about="http://example.org/s"><e:p rdf:parseType="Literal">' + "<e:x>" * n + "</e:x>" * n
              + "</e:p></rdf:Description></rdf:RDF>"),
    Construct("objects nested", "jsonld", lambda n: '{"@id": "http://example.org/s", '
              + '"http://example.org/p": {' * n + '"@id": "http://example.org/o"' + "}" * n + "}"),
    Construct("arrays nested", "jsonld", lambda n: '{"@id": "http://example.org/s", "http://example.org/p": '
              + "[" * n + "1" + "]" * n + "}"),
]
SPARQL = EXPRESSIONS + PATTERNS + DATA
ALL = SPARQL + RDF
FORMATS = {"turtle": ox.RdfFormat.TURTLE, "trig": ox.RdfFormat.TRIG, "ntriples": ox.RdfFormat.N_TRIPLES,
           "nquads": ox.RdfFormat.N_QUADS, "rdfxml": ox.RdfFormat.RDF_XML, "jsonld": ox.RdfFormat.JSON_LD}
MEDIA_TYPES = {"turtle": "text/turtle", "trig": "application/trig", "ntriples": "application/n-triples",
               "nquads": "application/n-quads", "rdfxml": "application/rdf+xml", "jsonld": "application/ld+json"}
WINDOW = ("SELECT * FROM NAMED WINDOW <http://example.org/w> ON <http://example.org/s> [RANGE PT1S]\n"
          "WHERE { WINDOW <http://example.org/w> { GRAPH ?g { ?s ?p ?o %s } } }")


def wrap(place: str, fragment: str, route: str = "query") -> str:
    """`fragment` where its place is, in the text `route` reads: a query (/sparql), a
    registered query's window (/queries), an update (/update)."""
    if place in FORMATS or place in ("update", "query"):
        return fragment
    if place == "data":
        return "INSERT DATA { %s }" % fragment
    if place == "root":
        if route == "update":
            return "DELETE { <http://example.org/nothing> ?p ?o } WHERE { { SELECT %s WHERE { } } }" % fragment
        if route == "window":
            return WINDOW.replace("SELECT *", "SELECT %s" % fragment) % ""
        return "SELECT %s WHERE { }" % fragment
    pattern = "FILTER(%s)" % fragment if place == "expression" else fragment
    if route == "update":
        return "DELETE { <http://example.org/nothing> ?p ?o } WHERE { ?s ?p ?o %s }" % pattern
    if route == "window":
        return WINDOW % pattern
    return "SELECT * WHERE { ?s ?p ?o %s }" % pattern


def routes(construct: Construct) -> tuple[str, ...]:
    """The routes a construct reaches a parser by: SPARQL patterns and expressions by the query,
    the window and the update; data and update sequences by the update; RDF by its format."""
    if construct.place in ("expression", "pattern", "root"):
        return ("query", "window", "update")
    if construct.place in ("data", "update"):
        return ("update",)
    if construct.place == "query":
        return ("query",)
    return (construct.place,)


def parse(construct: Construct, text: str, route: str) -> None:
    """Have Oxigraph read `text` as `route` does (a query is evaluated over an empty store, its
    solutions read), raising what it raises."""
    if route in FORMATS:
        list(ox.parse(text.encode(), format=FORMATS[route]))
    elif route == "update":
        ox.Store().update(text)
    else:
        if route == "window":
            text = text.replace("WINDOW <http://example.org/w> ", "").replace(WINDOW.split("\n")[0][len("SELECT * "):], "")
        result = ox.Store().query(text)
        if not isinstance(result, bool):
            list(result)


def by_name(name: str, place: str | None = None) -> Construct:
    return next(c for c in ALL if c.name == name and (place is None or c.place == place))
