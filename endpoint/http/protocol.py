"""What a request says, read strictly, in one place for every route: its parameters (from the
URL and from a form body), its text body, and the charset it is written in.

- Text is UTF-8, as RDF's and SPARQL's syntaxes are: a body labelled with another charset is
  refused with 415, and bytes that are not UTF-8 with 400 naming the line and byte of the first
  bad sequence; nothing is ever decoded with replacement characters.
- A parameter given more than once where the protocol allows one (`query`, `update`) is refused
  before anything runs.
"""
from __future__ import annotations

from urllib.parse import parse_qsl

from flask import request

from .errors import BadRequest, UnsupportedMediaType
from .bodies import body

_UTF8 = {"utf-8", "utf8"}
_ASCII = {"us-ascii", "ascii"}
FORM = "application/x-www-form-urlencoded"


def utf8(data: bytes, what: str) -> str:
    """`data` as UTF-8 text, or BadRequest naming the line and byte of the first bad sequence."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise BadRequest("%s is not UTF-8: byte 0x%02X at line %d, byte %d of the line (RDF and SPARQL "
                         "are written in UTF-8)" % (what, data[e.start], line, column)) from None


def text_body(what: str = "the request body") -> str:
    """The body as text, in the charset the request names (UTF-8, or ASCII, its subset)."""
    charset = request.mimetype_params.get("charset")
    if charset is not None and charset.strip().lower() not in _UTF8 | _ASCII:
        raise UnsupportedMediaType("%s is labelled charset=%s: send it in UTF-8" % (what, charset[:40]))
    return utf8(body(), what)


def _pairs(raw: bytes, where: str) -> list[tuple[str, str]]:
    try:
        return parse_qsl(raw.decode("utf-8"), keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise BadRequest("%s: a parameter is not UTF-8 once percent-decoded (%s)" % (where, e.reason)) from None


def params(known: tuple[str, ...] | None = None) -> dict[str, list[str]]:
    """Every parameter, by name, from the URL's query string and a form body, in order; with
    `known`, one by any other name is refused (a misspelt parameter would otherwise be
    ignored without a word)."""
    found: dict[str, list[str]] = {}
    sources = [(request.query_string, "the URL")]
    if request.method == "POST" and request.mimetype == FORM:
        text_body("the form")             # the charset and the bytes checked as for any body
        sources.append((body(), "the form"))
    for raw, where in sources:
        for name, value in _pairs(raw, where):
            if known is not None and name not in known:
                raise BadRequest("unknown parameter %r in %s (this route takes %s)"
                                 % (name[:60], where, ", ".join(known) or "none"))
            found.setdefault(name, []).append(value)
    return found


def single(found: dict[str, list[str]], name: str) -> str | None:
    """The one value of `name`, or None; BadRequest when it is given more than once."""
    values = found.get(name, [])
    if len(values) > 1:
        raise BadRequest("the %s parameter is given %d times: a request carries one %s" % (name, len(values), name))
    return values[0] if values else None


def iris(found: dict[str, list[str]], name: str) -> list[str]:
    """The values of a parameter that takes IRIs (default-graph-uri, ...), each checked."""
    import pyoxigraph as ox
    values = found.get(name, [])
    for value in values:
        try:
            ox.NamedNode(value)
        except ValueError:
            raise BadRequest("%s takes IRIs, got %r" % (name, value[:120])) from None
    return values
