"""Partitioned queries: which queries give the same results evaluated per partition key as over
the whole stream, checked at registration (docs/partitioned-queries.md).

A stream's partition key is a one-step path from an element's content: `<p>` (the object of
the element's `p` triples) or `^<p>` (their subject). Every element has exactly one key value;
elements with none or several are set aside where they are read.

A query asking to run partitioned on `?v` (option `partition = ?v`) is accepted when, for every
element any of its solutions reads, `?v` is bound to that element's key, so solutions never mix
keys and the union of the per-key results is the query's result (SELECT solutions; CONSTRUCT
triples, since each solution instantiates the template on its own, a triple that several keys
make kept once; ASK, true when some key's is):

- `window`: every window a time window of an RSP-QL* query (no count window, no dialect
  bounds), on a stream that has a partition key; or every window a partitioned window (spec
  6.9) whose key includes its stream's partition key `<p>` (so that all of a window partition's
  elements are in one key group);
- `binds`: every WINDOW block has triple patterns only inside GRAPH ?g blocks, and
  every GRAPH block inside it (also inside OPTIONAL, MINUS, UNION or EXISTS) has a triple
  pattern `?s <p> ?v` (`?v <p> ?s` for `^<p>`) of its own, with `<p>` its stream's key;
- `joins`: WINDOW blocks are items of the WHERE clause itself (so each joins the others on
  `?v`), not inside OPTIONAL, MINUS, UNION, EXISTS, sub-selects or other groups;
- `aggregates`: a query that aggregates groups by `?v`;
- `distinct`: DISTINCT or REDUCED projects `?v`;
- `modifiers`: no ORDER BY, LIMIT or OFFSET (they would apply per key);
- `service`: no SERVICE (executors do not call out);
- `report`: reported at window closes (of any window or of named ones) or periodically, so
  that the instants do not depend on the data, or, over partitioned windows, at every window's
  closes (each key group says where its windows closed); `non-empty` strategies may join them
  (each key group says which windows held elements).

Triple patterns outside the windows read the background, which every partition has whole.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import TranslatorError
from .incremental import _AGGREGATES, _words
from .model import ContinuousQuery
from .policy import ReportPolicy
from .syntax import GraphPattern, Group, ParsedBody, Span, Term, TriplesBlock, nested_groups
from .tokens import NAME, VAR

RULES = ("window", "binds", "joins", "aggregates", "distinct", "modifiers", "service", "report")


class PartitionError(TranslatorError):
    """A query that cannot run partitioned, naming the rule it breaks, or a bad key."""

    def __init__(self, rule: str, message: str):
        super().__init__("partition rule %r: %s" % (rule, message))
        self.rule = rule


@dataclass(frozen=True)
class PartitionKey:
    """`predicate`'s object in an element (its subject when `inverse`)."""

    predicate: str
    inverse: bool = False

    @classmethod
    def parse(cls, text: str) -> "PartitionKey":
        """`<iri>`, `iri` or `^<iri>`; PartitionError("key", ...) otherwise."""
        if not isinstance(text, str):
            raise PartitionError("key", "a partition key is a string such as \"<http://www.w3.org/ns/sosa/"
                                        "hasFeatureOfInterest>\" or \"^<...>\", not %s" % type(text).__name__)
        inverse = text.startswith("^")
        iri = text[1:] if inverse else text
        if iri.startswith("<") and iri.endswith(">"):
            iri = iri[1:-1]
        if not iri or ":" not in iri or any(c in iri for c in ' <>"{}|^`\\'):
            raise PartitionError("key", "partition key %r: write an absolute IRI, <iri> (its object) or "
                                        "^<iri> (its subject)" % text)
        return cls(iri, inverse)

    def show(self) -> str:
        return ("^<%s>" if self.inverse else "<%s>") % self.predicate


def check_partitioned(query: ContinuousQuery, variable: str, keys: dict[str, PartitionKey],
                      policy: ReportPolicy) -> None:
    """PartitionError naming the first rule `query` breaks when run partitioned on `variable`
    (with or without its '?'), given the streams' keys and the query's report policy."""
    name = variable.lstrip("?$")
    body = query.body
    tokens = body.tokens
    if query.dialect != "rspql" or query.merged_windows is not None:
        raise PartitionError("window", "a %s query's windows read merged content; write it in RSP-QL*"
                             % query.dialect)
    if not query.windows:
        raise PartitionError("window", "the query reads no window")
    partitioned = [w for w in query.windows.values() if w.keyed]
    if partitioned and len(partitioned) < len(query.windows):
        raise PartitionError("window", "window <%s> is a partitioned window beside windows of other kinds, which "
                                       "runs on the single store only" % partitioned[0].iri)
    for window in query.windows.values():
        refused = window.partition_refusal()
        if refused:
            raise PartitionError("window", refused)
        if window.stream not in keys:
            raise PartitionError("window", "stream <%s> (window <%s>) has no partition key configured"
                                 % (window.stream, window.iri))
        refused = window.key_refusal(keys[window.stream])
        if refused:
            raise PartitionError("window", refused)
    if policy.content_change or not (policy.fixed or partitioned):
        raise PartitionError("report", "report policy %r takes its instants from the elements; use close, "
                                       "close(<w>), periodic and non-empty strategies" % policy.show())
    if partitioned and not (policy.fixed or policy.at_every_close):
        # A key group's late element may add an instant before those already due, where every
        # group must say what it held: each says so as of its latest close, which is then the
        # instant's only when every close is an instant.
        raise PartitionError("report", "report policy %r reports at the closes of some of the partitioned windows "
                                       "only; partitioned, a query over partitioned windows reports at every "
                                       "window's closes (close) or periodically, with or without non-empty "
                                       "strategies" % policy.show())
    head = _words(body.form_head, tokens)
    modifiers = _words(body.modifiers, tokens)
    if any(t.kind == NAME and t.text.upper() == "SERVICE" for t in tokens):
        raise PartitionError("service", "SERVICE is not called from partitions")
    if modifiers & {"ORDER", "LIMIT", "OFFSET"}:
        raise PartitionError("modifiers", "ORDER BY, LIMIT and OFFSET would apply to each key's results")
    if (head & _AGGREGATES) or "GROUP" in modifiers:
        grouped = _group_by_variables(body)
        if name not in grouped:
            raise PartitionError("aggregates", "the query aggregates, so it must GROUP BY ?%s" % name)
    if head & {"DISTINCT", "REDUCED"} and body.projected is not None and name not in body.projected:
        raise PartitionError("distinct", "DISTINCT or REDUCED needs ?%s projected" % name)
    seen = set()
    for item in body.where.items:
        if isinstance(item, GraphPattern) and item.is_window:
            iri = body.resolve(item.name) if tokens[item.name].kind != VAR else None
            if iri not in query.windows:
                raise PartitionError("binds", "a WINDOW block named by a variable reads every window")
            seen.add(iri)
            _check_window(body, item, keys[query.windows[iri].stream], name)
        else:
            _no_window_inside(body, item)
    missing = sorted(set(query.windows) - seen)
    if missing:
        raise PartitionError("joins", "window <%s> is not read by a WINDOW block of the WHERE clause itself"
                             % missing[0])


def _group_by_variables(body: ParsedBody) -> set[str]:
    tokens = body.tokens
    found = set()
    for part in body.modifiers.parts:
        if not isinstance(part, Span):
            continue
        grouping = False
        for k in range(part.start, part.end):
            word = tokens[k].text.upper()
            if word == "GROUP":
                grouping = True
            elif word in ("HAVING", "ORDER", "LIMIT", "OFFSET", "VALUES"):
                grouping = False
            elif grouping and tokens[k].kind == VAR:
                found.add(tokens[k].text[1:])
    return found


def _check_window(body: ParsedBody, window: GraphPattern, key: PartitionKey, name: str) -> None:
    tokens = body.tokens
    label = tokens[window.name].text
    if _default_graph_patterns(window.group):
        raise PartitionError("binds", "WINDOW %s has triple patterns outside its GRAPH blocks: a window's "
                                      "default graph holds every key's elements" % label)
    if not any(isinstance(item, GraphPattern) for item in window.group.items):
        raise PartitionError("binds", "WINDOW %s has no GRAPH block binding ?%s" % (label, name))
    for graph in _graph_blocks(window.group):
        if tokens[graph.name].kind != VAR:
            raise PartitionError("binds", "GRAPH %s inside WINDOW %s names one graph, not an element"
                                 % (tokens[graph.name].text, label))
        if not _binds_key(body, graph.group, key, name):
            raise PartitionError("binds", "GRAPH %s inside WINDOW %s has no triple pattern binding ?%s to its "
                                          "stream's key %s" % (tokens[graph.name].text, label, name, key.show()))


def _default_graph_patterns(group: Group) -> bool:
    """Whether `group` has triple patterns outside GRAPH blocks, at any depth."""
    for item in group.items:
        if isinstance(item, TriplesBlock):
            return True
        if not isinstance(item, GraphPattern) and any(_default_graph_patterns(g) for g in nested_groups(item)):
            return True
    return False


def _graph_blocks(group: Group):
    """Every GRAPH block in `group`, at any depth."""
    for item in group.items:
        if isinstance(item, GraphPattern):
            if item.is_window:
                raise PartitionError("joins", "a WINDOW inside a WINDOW")
            yield item
            yield from _graph_blocks(item.group)
        else:
            for nested in nested_groups(item):
                yield from _graph_blocks(nested)


def _no_window_inside(body: ParsedBody, item) -> None:
    for group in nested_groups(item) + ([item.group] if isinstance(item, GraphPattern) else []):
        for nested in group.items:
            if isinstance(nested, GraphPattern) and nested.is_window:
                raise PartitionError("joins", "WINDOW %s is inside another pattern, not joined by the WHERE "
                                              "clause itself" % body.tokens[nested.name].text)
            _no_window_inside(body, nested)


def _binds_key(body: ParsedBody, group: Group, key: PartitionKey, name: str) -> bool:
    """Whether the group's own triples (not nested ones) hold `?s <p> ?name` (or the inverse)."""
    tokens = body.tokens
    for item in group.items:
        if not isinstance(item, TriplesBlock):
            continue
        for triple in item.triples:
            for values in triple.properties:
                verb = values.verb
                if not values.is_simple or tokens[verb.start].kind == VAR or tokens[verb.start].is_keyword("A"):
                    continue
                if body.resolve(verb.start) != key.predicate:
                    continue
                ends = [triple.subject] if key.inverse else [o.node for o in values.objects]
                if any(isinstance(end, Term) and end.span.end - end.span.start == 1
                       and tokens[end.span.start].kind == VAR and tokens[end.span.start].text[1:] == name
                       for end in ends):
                    return True
    return False
