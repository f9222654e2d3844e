"""The one registry of input formats: every way data enters the engine (a posted body, a file
in a landing directory, a socket or Kafka line, a replayed recording, background data) names
its format here, by name, file extension or media type."""
from __future__ import annotations

from dataclasses import dataclass

import pyoxigraph as ox

from .errors import StoreError


@dataclass(frozen=True)
class InputFormat:
    name: str                       # as a configuration or a payload names it
    rdf: ox.RdfFormat | None        # None: JSON envelopes, one element per line
    extensions: tuple[str, ...]     # the first is the one files of this format are given
    media_types: tuple[str, ...]
    line_based: bool                # a bad line can be set aside and the others read

    @property
    def extension(self) -> str:
        return self.extensions[0]


FORMATS = (
    InputFormat("trig", ox.RdfFormat.TRIG, (".trig",), ("application/trig",), False),
    InputFormat("nquads", ox.RdfFormat.N_QUADS, (".nq", ".nquads"), ("application/n-quads",), True),
    InputFormat("turtle", ox.RdfFormat.TURTLE, (".ttl",), ("text/turtle",), False),
    InputFormat("ntriples", ox.RdfFormat.N_TRIPLES, (".nt",), ("application/n-triples",), True),
    InputFormat("jsonl", None, (".jsonl",), ("application/x-ndjson", "application/jsonl"), True),
)
DEFAULT = FORMATS[0]
_BY_NAME = {f.name: f for f in FORMATS}
_BY_MEDIA_TYPE = {m: f for f in FORMATS for m in f.media_types}


class UnknownFormat(StoreError):
    """A format name no input format has."""


def by_name(name: str) -> InputFormat:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise UnknownFormat("unknown format %r (known: %s)" % (name, ", ".join(_BY_NAME))) from None


def by_path(path) -> InputFormat:
    """The format a file name says (TriG when it says nothing known)."""
    name = str(path).lower()
    return next((f for f in FORMATS for e in f.extensions if name.endswith(e)), DEFAULT)


def by_rdf(rdf: ox.RdfFormat) -> InputFormat:
    """The input format an Oxigraph RDF format is read as."""
    return next(f for f in FORMATS if f.rdf == rdf)


def by_media_type(media_type: str) -> InputFormat | None:
    return _BY_MEDIA_TYPE.get(media_type)


def media_types(rdf_only: bool = False) -> list[str]:
    return [m for f in FORMATS if f.rdf is not None or not rdf_only for m in f.media_types]
