"""Fact windows (spec §6.13): the open facts of a window, as state of its query.

A fact window holds no elements. Each element of its stream, in stream order (ties in arrival
order), is matched against SINCE and then TILL: a SINCE match opens the template's triples for
its bindings at the element's τ, unless the same triple is open already (the earliest opening is
kept); a TILL match closes the open triples that agree with it on the variables the template
shares with TILL. The open facts live in a graph of the store of their own (one per query and
window, `vocabulary.facts_graph`), each asserted and annotated `rspstar:since τs` through a
reifier the rewrite's annotation patterns match; the query reads that graph as the window's
default graph. So the window's memory is the facts that hold, whatever the stream's length,
and the elements it has read can be evicted.

The facts are read forward only: an evaluation at t reads the elements with τ in (the last
instant read, t]. They are part of the query's state: saved with its progress after each
evaluation and put back at a restart (`state` / `restore`); a query registered afresh, and a
replay, start with none."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pyoxigraph as ox

from rspstar.store.stream_store import StreamStore
from rspstar.store.terms import term_to_ntriples
from rspstar.translator.facts import ELEMENT, GRAPHS, constants_query, match_query, since_variables, till_variables
from rspstar.translator.model import ContinuousQuery, FactWindow, WindowContent
from rspstar.translator.namespaces import RDF, XSD
from rspstar.translator.temporal import format_instant, parse_instant
from rspstar.translator.vocabulary import RSPSTAR_SINCE, SKOLEM_PREFIX, facts_graph

# Elements matched per SINCE / TILL query (their graphs are the query's VALUES).
ELEMENTS_PER_MATCH = 500
_REIFIES = ox.NamedNode(RDF + "reifies")
_SINCE = ox.NamedNode(RSPSTAR_SINCE)
_DATETIME = ox.NamedNode(XSD + "dateTime")
_REIFIER_PREFIX = SKOLEM_PREFIX + "fact-"


@dataclass(frozen=True)
class _Variable:
    name: str


class FactState:
    """One fact window's open facts and how far its stream has been read."""

    def __init__(self, window: FactWindow, store: StreamStore, graph: str):
        self.window = window
        self.store = store
        self.name = graph
        self.graph = ox.NamedNode(graph)
        self.read_through: int | None = None      # elements with τ <= this have been read
        self.open = 0                             # facts open now
        self.since_query = match_query(window, "SINCE")
        self.till_query = match_query(window, "TILL")
        self.since_variables = since_variables(window)
        self.till_variables = till_variables(window)
        self.template = self._template()
        self._saved_facts: list | None = None     # what `state` last read of the graph (None: changed since)

    def _template(self) -> list[tuple]:
        """The template's triples with constants as terms and variables as _Variable."""
        literals: dict[str, object] = {}
        found = constants_query(self.window)
        if found is not None:
            text, written = found
            [solution] = list(self.store.query(text))
            literals = {literal: solution["c%d" % k] for k, literal in enumerate(written)}

        def term(text: str):
            if text.startswith("?"):
                return _Variable(text[1:])
            if text.startswith("<"):
                return ox.NamedNode(text[1:-1])
            return literals[text]

        return [tuple(term(t) for t in triple.terms()) for triple in self.window.template]

    # -- the query's state ---------------------------------------------------------------------
    def begin(self, after: int) -> None:
        """A query registered afresh (or a replay at --from): no fact, the elements after
        `after` to read."""
        self.store.replace_graph(self.graph, [])
        self.read_through = after
        self.open = 0
        self._saved_facts = None

    def state(self) -> dict:
        """The open facts and the instant read through, as JSON. The facts are read from their
        graph again only after a fact opened or closed (two reads of the graph, not one per fact)."""
        if self._saved_facts is None:
            reified = {quad.subject: quad.object for quad in self.store.quads_in(self.graph, predicate=_REIFIES)}
            self._saved_facts = [
                [term_to_ntriples(triple.subject), term_to_ntriples(triple.predicate), term_to_ntriples(triple.object),
                 quad.object.value]
                for quad in self.store.quads_in(self.graph, predicate=_SINCE)
                if (triple := reified.get(quad.subject)) is not None]
        return {"read_through": self.read_through, "facts": self._saved_facts}

    def restore(self, saved: dict) -> None:
        """The state `state` gave, back in the store (whatever the store held of it)."""
        facts = saved.get("facts") or []
        quads = []
        text = "\n".join("%s %s %s ." % tuple(fact[:3]) for fact in facts)
        triples = [quad.triple for quad in ox.parse(text, format=ox.RdfFormat.N_TRIPLES)] if facts else []
        for triple, fact in zip(triples, facts):
            quads += self._fact_quads(triple, parse_instant(fact[3]))
        self.store.replace_graph(self.graph, quads)
        self.read_through = saved.get("read_through")
        self.open = len(triples)
        self._saved_facts = None

    def drop(self) -> None:
        self.store.replace_graph(self.graph, [])

    # -- reading the stream --------------------------------------------------------------------
    def at(self, instant: int) -> WindowContent:
        """The facts that hold at `instant`, after reading the elements up to it; `changed`
        says whether a fact opened or closed on the way."""
        changed = False
        if self.read_through is None or instant > self.read_through:
            opens = -2**63 if self.read_through is None else self.read_through + 1
            elements = self.store.timed_elements_in(self.window.stream, opens, instant + 1)
            for first in range(0, len(elements), ELEMENTS_PER_MATCH):
                changed |= self._read(elements[first:first + ELEMENTS_PER_MATCH])
            self.read_through = instant
        return WindowContent((instant, instant), graphs=[self.name] if self.open else [], facts=True,
                             changed=changed)

    def reach(self) -> int:
        """The earliest τ the window has still to read."""
        return 0 if self.read_through is None else self.read_through + 1

    def _matches(self, query: str, variables: list[str], graphs: list[str]) -> dict[str, list[tuple]]:
        """Each element's matches: the terms bound to `variables` (None where unbound)."""
        found: dict[str, list[tuple]] = {}
        text = query.replace(GRAPHS, " ".join("<%s>" % g for g in graphs))
        for solution in self.store.query(text):
            found.setdefault(solution[ELEMENT].value, []).append(tuple(solution[v] for v in variables))
        return found

    def _read(self, elements: list[tuple[int, str]]) -> bool:
        graphs = [graph for _, graph in elements]
        since = self._matches(self.since_query, self.since_variables, graphs)
        till = self._matches(self.till_query, self.till_variables, graphs)
        changed = False
        for timestamp, graph in elements:
            for match in since.get(graph, ()):
                binding = dict(zip(self.since_variables, match))
                for triple in self._instances(binding):
                    changed |= self._open(triple, timestamp)
            for match in till.get(graph, ()):
                binding = {v: t for v, t in zip(self.till_variables, match) if t is not None}
                for pattern in self.template:
                    changed |= self._close(pattern, binding)
        return changed

    def _instances(self, binding: dict) -> list[ox.Triple]:
        """The template's triples under `binding`: a triple with an unbound variable or a term
        out of place is left out (as CONSTRUCT does)."""
        made = []
        for pattern in self.template:
            terms = [binding.get(t.name) if isinstance(t, _Variable) else t for t in pattern]
            if None in terms:
                continue
            try:
                made.append(ox.Triple(*terms))
            except TypeError:
                continue
        return made

    def _reifier(self, triple: ox.Triple) -> ox.NamedNode:
        digest = hashlib.sha1(("%s %s" % (self.name, triple)).encode("utf-8")).hexdigest()[:24]
        return ox.NamedNode(_REIFIER_PREFIX + digest)

    def _fact_quads(self, triple: ox.Triple, since: int) -> list[ox.Quad]:
        reifier = self._reifier(triple)
        return [ox.Quad(triple.subject, triple.predicate, triple.object, self.graph),
                ox.Quad(reifier, _REIFIES, triple, self.graph),
                ox.Quad(reifier, _SINCE, ox.Literal(format_instant(since), datatype=_DATETIME), self.graph)]

    def _open(self, triple: ox.Triple, since: int) -> bool:
        if self.store.holds(ox.Quad(triple.subject, triple.predicate, triple.object, self.graph)):
            return False        # the earliest opening is kept
        self.store.change_graph(self._fact_quads(triple, since), [])
        self.open += 1
        self._saved_facts = None
        return True

    def _close(self, pattern: tuple, binding: dict) -> bool:
        """Close the open facts matching one template triple with the variables TILL bound."""
        terms = [binding.get(t.name) if isinstance(t, _Variable) else t for t in pattern]
        if all(t is not None for t in terms):
            try:
                candidates = [ox.Quad(*terms, self.graph)]
            except TypeError:
                return False
            candidates = [q for q in candidates if self.store.holds(q)]
        else:
            candidates = [q for q in self.store.quads_in(self.graph, *terms)
                          if not q.subject.value.startswith(_REIFIER_PREFIX) and self._agrees(pattern, q)]
        for quad in candidates:
            reifier = self._reifier(quad.triple)
            self.store.change_graph([], [quad] + self.store.quads_in(self.graph, subject=reifier))
            self.open -= 1
            self._saved_facts = None
        return bool(candidates)

    @staticmethod
    def _agrees(pattern: tuple, quad: ox.Quad) -> bool:
        """A variable the template repeats stands for one term (TILL left it unbound)."""
        seen: dict[str, object] = {}
        for term, value in zip(pattern, (quad.subject, quad.predicate, quad.object)):
            if isinstance(term, _Variable):
                if seen.setdefault(term.name, value) != value:
                    return False
        return True


class WindowView:
    """The store as a query's windows read it: the streams, and the facts of the query's fact
    windows (what translator.model.FactWindow asks of its view)."""

    def __init__(self, store: StreamStore, facts: dict[str, FactState]):
        self.store = store
        self.facts = facts

    def __getattr__(self, name: str):
        return getattr(self.store, name)

    def facts_at(self, window: FactWindow, instant: int) -> WindowContent:
        return self.facts[window.iri].at(instant)

    def fact_reach(self, window: FactWindow) -> int:
        return self.facts[window.iri].reach()


def fact_states(query: ContinuousQuery, store: StreamStore, query_id: str) -> dict[str, FactState]:
    return {iri: FactState(w, store, facts_graph(query_id, iri)) for iri, w in query.windows.items()
            if w.reads_facts}
