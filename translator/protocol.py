"""What the SPARQL 1.1 Protocol's dataset parameters mean for an update: `using-graph-uri` and
`using-named-graph-uri` give every DELETE/INSERT ... WHERE operation its dataset, as USING and
USING NAMED clauses would. An update that names a dataset itself (USING, USING NAMED or WITH) as
well is an error, as the protocol says."""
from __future__ import annotations

from .errors import QuerySyntaxError
from .tokens import SourceText, tokenize


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
                line, column = source.position(tok.offset)
                raise QuerySyntaxError("DELETE WHERE takes no dataset: with using-graph-uri or using-named-graph-uri, "
                                       "write DELETE { ... } WHERE { ... }", line, column)
            cuts.append(tok.offset)
    pieces, at = [], 0
    for cut in cuts:
        pieces += [text[at:cut], clause]
        at = cut
    pieces.append(text[at:])
    return "".join(pieces)
