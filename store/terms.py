"""RDF terms as N-Triples / RDF 1.2 strings, the form results are reported in."""
from __future__ import annotations

import pyoxigraph as ox

from .vocabulary import SKOLEM_PREFIX

_SKOLEM_LEN = len(SKOLEM_PREFIX)


def term_to_ntriples(term) -> str:
    """`<iri>`, `_:id`, `"lex"^^<dt>` / `"lex"@lang`, or `<<( s p o )>>` for a triple term.
    Skolemized blank graph names are shown as the blank nodes they stand for."""
    if isinstance(term, ox.NamedNode):
        value = term.value
        if value.startswith(SKOLEM_PREFIX):
            return "_:" + value[_SKOLEM_LEN:]
        return "<%s>" % value
    if isinstance(term, ox.Triple):
        return "<<( %s %s %s )>>" % (term_to_ntriples(term.subject), term_to_ntriples(term.predicate),
                                     term_to_ntriples(term.object))
    return str(term)


def triple_to_ntriples(triple) -> str:
    return "%s %s %s ." % (term_to_ntriples(triple.subject), term_to_ntriples(triple.predicate),
                           term_to_ntriples(triple.object))
