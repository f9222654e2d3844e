"""A large TriG or N-Quads document cut into parts that each parse, alone, to what they hold
in the whole document, so a replay can write its stream files part by part while windows over
the parts already written are evaluated (one Oxigraph store takes one write at a time, and reads
go on beside it).

A cut is only made where it is sure to be a statement boundary; from where that cannot be
told from the bytes without parsing them, the rest of the document is one part:
- a newline is between two tokens: no long string (three quotes) may span lines before a cut;
- blank node labels are scoped to one parse (Oxigraph renames them per load), so a document
  with a `_:` label is not cut;
- a TriG cut follows a line ending in `}` (outside a comment: the line has no `#`), which can
  only close a graph block (annotations close with `|}`, and graph blocks do not nest); in
  N-Quads and N-Triples every line ends a statement;
- every part after the first starts with the PREFIX / BASE / VERSION directives written
  before it, in their order. So each must be a line of its own: a directive keyword anywhere
  else (even inside a literal) ends the cutting there.
"""
from __future__ import annotations

import re
from typing import Iterator

import pyoxigraph as ox

from . import formats

_IRI = rb"<[^>\s]*>"
_STRING = rb"(?:\"[^\"\n]*\"|'[^'\n]*')"
_DIRECTIVE_LINE = re.compile(
    rb"[ \t]*(?:@prefix[ \t]+[^\s<]*:[ \t]*" + _IRI + rb"[ \t]*\.|@base[ \t]+" + _IRI + rb"[ \t]*\."
    rb"|@version[ \t]+" + _STRING + rb"[ \t]*\.|(?i:prefix)[ \t]+[^\s<]*:[ \t]*" + _IRI
    + rb"|(?i:base)[ \t]+" + _IRI + rb"|(?i:version)[ \t]+" + _STRING + rb")[ \t]*\r?")
_DIRECTIVE_WORDS = (b"prefix", b"base", b"version")
_GRAPH_END = re.compile(rb"\}[ \t\r]*\n")
_CUTTABLE = (ox.RdfFormat.TRIG, ox.RdfFormat.N_QUADS, ox.RdfFormat.N_TRIPLES)


def document_parts(data: bytes, fmt: ox.RdfFormat, part_bytes: int) -> list[bytes] | None:
    """`iter_document_parts` as a list; None when the document stays whole."""
    parts = list(iter_document_parts(data, fmt, part_bytes))
    return parts if len(parts) > 1 else None


def iter_document_parts(data: bytes, fmt: ox.RdfFormat, part_bytes: int) -> Iterator[bytes]:
    """`data` in parts of about `part_bytes`, in document order, each given as soon as it is
    cut (the first can be written while the rest are cut): the document itself when it is
    smaller than two parts or has a blank node label. Each region is checked before a cut
    ends it; from the first that cannot be cut safely, the rest of the document is one part."""
    if len(data) < 2 * part_bytes or fmt not in _CUTTABLE or b"_:" in data:
        yield data
        return
    line_based = formats.by_rdf(fmt).line_based
    directives: list[bytes] = []
    start = 0
    while len(data) - start >= 2 * part_bytes:
        cut = _boundary_after(data, start + part_bytes, line_based)
        if cut is None or len(data) - cut < part_bytes // 2:
            break
        region = data[start:cut]
        found = _directive_lines(region)
        if found is None or b'"""' in region or b"'''" in region:
            break
        yield b"".join(directives) + region
        directives += found
        start = cut
    yield b"".join(directives) + data[start:]


def _directive_lines(region: bytes) -> list[bytes] | None:
    """Every directive line of a region, in order, stripped and ending in a newline; None
    when a directive keyword (a word followed by a space, in any case, `@` or not) stands
    anywhere else. Found with `bytes.find`, which runs in C over the lowered bytes: a
    case-insensitive regular expression was many times slower on large documents."""
    lowered = region.lower()
    lines: dict[int, bytes] = {}
    for word in _DIRECTIVE_WORDS:
        at = lowered.find(word)
        while at != -1:
            start = at - 1 if lowered[at - 1:at] == b"@" else at
            before = lowered[start - 1:start] if start else b""
            after = lowered[at + len(word):at + len(word) + 1]
            if after.isspace() and not (before.isalnum() or before in (b"_", b":")):
                line_start = region.rfind(b"\n", 0, at) + 1
                line_end = region.find(b"\n", at)
                line = region[line_start:len(region) if line_end == -1 else line_end]
                if not _DIRECTIVE_LINE.fullmatch(line):
                    return None
                lines[line_start] = line.strip() + b"\n"
            at = lowered.find(word, at + 1)
    return [line for _, line in sorted(lines.items())]


def _boundary_after(data: bytes, position: int, line_based: bool) -> int | None:
    """The first statement boundary at a line end at or after `position`."""
    if line_based:
        end = data.find(b"\n", position)
        return None if end == -1 else end + 1
    for found in _GRAPH_END.finditer(data, position):
        line_start = data.rfind(b"\n", 0, found.start()) + 1
        line = data[line_start:found.start() + 1]
        if not line.endswith(b"|}") and b"#" not in line:
            return found.end()
    return None
