"""What the SPARQL 1.1 Protocol's dataset parameters mean for an update: `using-graph-uri` and
`using-named-graph-uri` give every DELETE/INSERT ... WHERE operation its dataset, as USING and
USING NAMED clauses would. An update that names a dataset itself (USING, USING NAMED or WITH) as
well is an error, as the protocol says."""
from __future__ import annotations

from .errors import QuerySyntaxError
from .tokens import SourceText, tokenize


def _group_end(tokens, opening: int) -> int:
    depth = 0
    for k in range(opening, len(tokens)):
        if tokens[k].is_punct("{"):
            depth += 1
        elif tokens[k].is_punct("}"):
            depth -= 1
            if depth == 0:
                return k
    return len(tokens) - 1


def with_update_dataset(text: str, using: list[str], using_named: list[str]) -> str:
    """The update with the parameters' USING / USING NAMED clauses before each operation's WHERE."""
    if not using and not using_named:
        return text
    source = SourceText(text)
    tokens = tokenize(source)
    clause = " ".join(["USING <%s>" % g for g in using] + ["USING NAMED <%s>" % g for g in using_named]) + " "
    depth = 0
    cuts = []
    for k, tok in enumerate(tokens):
        if tok.is_punct("{"):
            depth += 1
        elif tok.is_punct("}"):
            depth -= 1
        elif depth == 0 and tok.is_keyword("USING", "WITH"):
            line, column = source.position(tok.offset)
            raise QuerySyntaxError("the update names its dataset with %s, and the request with using-graph-uri or "
                                   "using-named-graph-uri: give it one way" % tok.text.upper(), line, column)
        elif depth == 0 and tok.is_keyword("WHERE"):
            if k and tokens[k - 1].is_keyword("DELETE"):
                # DELETE WHERE { P } is DELETE { P } WHERE { P }, which takes USING clauses.
                close = _group_end(tokens, k + 1)
                pattern = text[tokens[k + 1].offset:tokens[close].end]
                cuts.append((tokens[k - 1].offset, tok.end, "DELETE %s %sWHERE" % (pattern, clause)))
            else:
                cuts.append((tok.offset, tok.offset, clause))
    pieces, at = [], 0
    for start, end, inserted in cuts:
        pieces += [text[at:start], inserted]
        at = end
    pieces.append(text[at:])
    return "".join(pieces)
