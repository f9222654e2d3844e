"""RDF terms as N-Triples / RDF 1.2 strings, the form results are reported in."""
from __future__ import annotations

import pyoxigraph as ox

from rspstar.translator.rewrite import INTERNAL_VARIABLE_PREFIX
from rspstar.translator.vocabulary import SKOLEM_PREFIX

_SKOLEM_LEN = len(SKOLEM_PREFIX)


_SKOLEM_TEXT = "<" + SKOLEM_PREFIX
_TRIPLE = ox.Triple


def term_to_ntriples(term) -> str:
    """`<iri>`, `_:id`, `"lex"^^<dt>` / `"lex"@lang`, or `<<( s p o )>>` for a triple term.
    Skolemized blank graph names are shown as the blank nodes they stand for."""
    if type(term) is _TRIPLE:
        return "<<( %s %s %s )>>" % (term_to_ntriples(term.subject), term_to_ntriples(term.predicate),
                                     term_to_ntriples(term.object))
    text = str(term)
    if text.startswith(_SKOLEM_TEXT):
        return "_:" + text[_SKOLEM_LEN + 1:-1]
    return text


def triple_to_ntriples(triple) -> str:
    return "%s %s %s ." % (term_to_ntriples(triple.subject), term_to_ntriples(triple.predicate),
                           term_to_ntriples(triple.object))


def _solutions(result):
    """Each solution with its row: its terms as N-Triples by variable, without the variables
    the rewrite introduced (SELECT * would show them)."""
    # By position: looking a solution's terms up by name was much of reading a large result
    # (bench/out/NOTES.md#figures-from-comments).
    kept = [(position, variable.value) for position, variable in enumerate(result.variables)
            if not variable.value.startswith(INTERNAL_VARIABLE_PREFIX)]
    for solution in result:
        row = {}
        for position, name in kept:
            term = solution[position]
            if term is not None:
                row[name] = term_to_ntriples(term)
        yield solution, row


def select_rows(result) -> list[dict]:
    """SELECT solutions as rows of N-Triples terms."""
    return [row for _, row in _solutions(result)]


def select_rows_by(result, marker: str) -> dict[int, list[dict]]:
    """SELECT solutions as in `select_rows`, apart by the integer each binds to `marker`."""
    at = [variable.value for variable in result.variables].index(marker)
    apart: dict[int, list[dict]] = {}
    for solution, row in _solutions(result):
        apart.setdefault(int(solution[at].value), []).append(row)
    return apart


class Guarded:
    """An Oxigraph result (solutions or triples) read under an evaluation's budget
    (store.limits): the rows are counted as they come, past `bound` the reading stops with
    ResultTooLarge (so a huge result is never materialised), and every CHECK_EVERY rows the
    budget is asked whether the evaluation is past its time limit or its query removed."""

    def __init__(self, result, budget, bound: int | None, every: int):
        self._result = result
        self._budget = budget
        self._bound = bound
        self._every = every
        self.read = 0

    @property
    def variables(self):
        return self._result.variables

    def __iter__(self):
        budget, bound, every = self._budget, self._bound, self._every
        budget.check()
        read = 0
        for item in self._result:
            read += 1
            if bound is not None and read > bound:
                self.read = read
                raise budget.limits.too_large(max(bound, budget.limits.max_rows))
            if read % every == 0:
                budget.check()
            yield item
        self.read = read
        budget.check()


def select_rows_matched(result, marker: str, variable: str, keep: bool, match) -> dict[int, list[dict]]:
    """SELECT solutions as in `select_rows`, each under every key `match` returns for the
    integer bound to `marker` and the term bound to `variable` as N-Triples (none when it is
    unbound): a row is made only for a solution some key takes. Without `variable` unless `keep`."""
    names = [v.value for v in result.variables]
    at_marker = names.index(marker)
    at = names.index(variable) if variable in names else None
    kept = [(position, name) for position, name in enumerate(names)
            if not name.startswith(INTERNAL_VARIABLE_PREFIX) and (keep or name != variable)]
    apart: dict[int, list[dict]] = {}
    if at is None:
        return apart
    for solution in result:
        term = solution[at]
        if term is None:
            continue
        keys = match(int(solution[at_marker].value), term if isinstance(term, str) else term_to_ntriples(term))
        if not keys:
            continue
        row = {}
        for position, name in kept:
            found = solution[position]
            if found is not None:
                row[name] = term_to_ntriples(found)
        for key in keys:
            apart.setdefault(key, []).append(row)
    return apart
