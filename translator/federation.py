"""What a query or update may fetch from elsewhere: SERVICE calls and LOAD.

Oxigraph carries out SERVICE and LOAD by itself, so a request that names them makes the
engine reach out to whatever address the request names. Both are refused unless their
target's origin is in a configured allow-list (the same rule as HTTP sinks); a SERVICE whose
target is a variable cannot be checked and is refused too."""
from __future__ import annotations

import re
from urllib.parse import urlsplit

from .errors import PositionedError
from .syntax import is_absolute_iri, resolve_reference
from .tokens import IRI, NAME, PNAME, VAR, SourceText, tokenize


class FederationNotAllowed(PositionedError):
    """A SERVICE or LOAD whose target is not allowed, with its position."""


def origin_of(url: str) -> str | None:
    """scheme://host:port of an http(s) URL, None for anything else."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return "%s://%s" % (parts.scheme, parts.netloc)


def origin_allowed(url: str, allowed: list[str]) -> bool:
    origin = origin_of(url)
    return origin is not None and origin in {a.rstrip("/") for a in allowed}


_CALLS = re.compile(r"(?i)(?<![\w:])(?:SERVICE|LOAD)(?![\w:])")


def check_federation(text: str, allowed: list[str], base: str | None = None) -> None:
    """FederationNotAllowed at the first SERVICE or LOAD whose target is not allowed. Targets
    are resolved as Oxigraph resolves them: prefixed names through the PREFIX declarations
    before them, relative IRIs against the BASE before them, else against `base` (the IRI the
    text was retrieved from)."""
    if not _CALLS.search(text):     # most queries: no keyword there (in a string or comment: read on)
        return
    source = SourceText(text)
    tokens = tokenize(source)
    prefixes: dict[str, str] = {}
    for k, token in enumerate(tokens):
        declared = tokens[k + 1] if k + 1 < len(tokens) else None
        if token.is_keyword("BASE") and declared is not None and declared.kind == IRI:
            base = _resolved(declared.text, base)
        elif token.is_keyword("PREFIX") and k + 2 < len(tokens) and declared.kind == PNAME \
                and tokens[k + 2].kind == IRI:
            prefixes[declared.text] = _resolved(tokens[k + 2].text, base)
        if token.kind != NAME or not token.is_keyword("SERVICE", "LOAD"):
            continue
        target_at = k + 2 if k + 1 < len(tokens) and tokens[k + 1].is_keyword("SILENT") else k + 1
        target = tokens[target_at] if target_at < len(tokens) else None
        keyword = token.text.upper()
        if target is not None and target.kind == IRI:
            url = _resolved(target.text, base)
        elif target is not None and target.kind == PNAME and target.text.split(":", 1)[0] + ":" in prefixes:
            prefix, local = target.text.split(":", 1)
            url = prefixes[prefix + ":"] + local
        elif target is not None and target.kind == VAR:
            raise FederationNotAllowed("%s with a variable target cannot be checked against the allow-list"
                                       % keyword, *source.position(target.offset))
        else:
            continue   # not a SERVICE or LOAD call: the query parser says what is wrong
        if not origin_allowed(url, allowed):
            raise FederationNotAllowed(
                "%s <%s>: the engine only reaches origins in the federation allow-list (%s)"
                % (keyword, url, ", ".join(allowed) or "empty: SERVICE and LOAD are off"),
                *source.position(target.offset))


def _resolved(token_text: str, base: str | None) -> str:
    """An IRI token's IRI, resolved against `base` (a relative one without a base stays
    relative: its origin is none, so it is refused)."""
    iri = token_text[1:-1]
    return resolve_reference(base, iri) if base is not None and not is_absolute_iri(iri) else iri
