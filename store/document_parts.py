"""A large TriG or N-Quads document cut into parts that each parse, alone, to what they hold
in the whole document, so a replay can write its stream files part by part while windows over
the parts already written are evaluated (one Oxigraph store takes one write at a time, and reads
go on beside it).

A cut is only made where it is sure to be a statement boundary, and a document is left whole
when that cannot be told from its bytes without parsing it:
- a newline is between two tokens: no long string (three quotes) may span lines;
- blank node labels are scoped to one parse (Oxigraph renames them per load), so a document
  with a `_:` label is not cut;
- a TriG cut follows a line ending in `}` (outside a comment: the line has no `#`), which can
  only close a graph block (annotations close with `|}`, and graph blocks do not nest); in
  N-Quads and N-Triples every line ends a statement;
- every part after the first starts with the PREFIX / BASE / VERSION directives written
  before it, in their order. So each must be a line of its own: a directive keyword anywhere
  else (even inside a literal) leaves the document whole.
"""
from __future__ import annotations

import re

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


def document_parts(data: bytes, fmt: ox.RdfFormat, part_bytes: int) -> list[bytes] | None:
    """`data` cut into parts of about `part_bytes` each, in document order; None when it is
    smaller than two parts or cannot be cut safely (then it is written whole)."""
    if len(data) < 2 * part_bytes or fmt not in (ox.RdfFormat.TRIG, ox.RdfFormat.N_QUADS, ox.RdfFormat.N_TRIPLES):
        return None
    if b'"""' in data or b"'''" in data or b"_:" in data:
        return None
    directives = _directive_lines(data)
    if directives is None:
        return None
    line_based = formats.by_rdf(fmt).line_based
    cuts = [0]
    while len(data) - cuts[-1] >= 2 * part_bytes:
        cut = _boundary_after(data, cuts[-1] + part_bytes, line_based)
        if cut is None or len(data) - cut < part_bytes // 2:
            break
        cuts.append(cut)
    if len(cuts) == 1:
        return None
    cuts.append(len(data))
    parts = []
    for start, end in zip(cuts, cuts[1:]):
        header = b"".join(line.strip() + b"\n" for at, line in directives if at < start)
        parts.append(header + data[start:end])
    return parts


def _directive_lines(data: bytes) -> list[tuple[int, bytes]] | None:
    """(offset, text) of every directive line, in document order; None when a directive
    keyword (a word followed by a space, in any case, `@` or not) stands anywhere else.
    Found with `bytes.find`: a case-insensitive regular expression took 0.5 s over 21 MB."""
    lowered = data.lower()
    lines: dict[int, bytes] = {}
    for word in _DIRECTIVE_WORDS:
        at = lowered.find(word)
        while at != -1:
            start = at - 1 if lowered[at - 1:at] == b"@" else at
            before = lowered[start - 1:start] if start else b""
            after = lowered[at + len(word):at + len(word) + 1]
            if after.isspace() and not (before.isalnum() or before in (b"_", b":")):
                line_start = data.rfind(b"\n", 0, at) + 1
                line_end = data.find(b"\n", at)
                line = data[line_start:len(data) if line_end == -1 else line_end]
                if not _DIRECTIVE_LINE.fullmatch(line):
                    return None
                lines[line_start] = line
            at = lowered.find(word, at + 1)
    return sorted(lines.items())


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
