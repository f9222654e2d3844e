"""What a fact window (spec §6.13) asks of the store, as SPARQL text: the matches of its SINCE
and TILL patterns in elements' graphs, and the constants of its template as terms. The engine
keeps the facts (endpoint/engine/facts.py); validation checks these texts with the query."""
from __future__ import annotations

from .model import FactWindow
from .rewrite import INTERNAL_VARIABLE_PREFIX
from .tokens import VAR, SourceText, tokenize

# The element graph a match is in.
ELEMENT = INTERNAL_VARIABLE_PREFIX + "element"
# The slot an evaluation fills with the elements' graphs, as VALUES data.
GRAPHS = "$graphs"


def pattern_variables(pattern: str) -> set[str]:
    return {tok.text[1:] for tok in tokenize(SourceText(pattern)) if tok.kind == VAR}


def since_variables(window: FactWindow) -> list[str]:
    """The template's variables, each bound by a SINCE match (or left unbound)."""
    return window.template_variables()


def till_variables(window: FactWindow) -> list[str]:
    """The variables the template shares with TILL: a TILL match closes the open facts that
    agree with it on these."""
    in_till = pattern_variables(window.till)
    return [v for v in window.template_variables() if v in in_till]


def match_query(window: FactWindow, which: str) -> str:
    """`SINCE` or `TILL`: the pattern's matches in the graphs of the slot GRAPHS, each with its
    element and the template variables it binds."""
    pattern = window.since if which == "SINCE" else window.till
    variables = since_variables(window) if which == "SINCE" else till_variables(window)
    projection = " ".join("?" + v for v in [ELEMENT] + variables)
    return "%sSELECT %s WHERE { GRAPH ?%s %s VALUES ?%s { %s } }" % (
        window.prologue, projection, ELEMENT, pattern, ELEMENT, GRAPHS)


def constants_query(window: FactWindow) -> tuple[str, list[str]] | None:
    """A query binding each literal constant of the template (as written, the query's prefixes
    in force) to a variable, and those constants in order; None when there is none."""
    literals = list(dict.fromkeys(term for triple in window.template for term in triple.terms()
                                  if not term.startswith(("?", "<"))))
    if not literals:
        return None
    binds = " ".join("BIND(%s AS ?c%d)" % (literal, k) for k, literal in enumerate(literals))
    return "%sSELECT * WHERE { %s }" % (window.prologue, binds), literals
