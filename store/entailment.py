"""RDFS entailment for queries with `option entailment = rdfs` (spec §6.11): rules rdfs2, rdfs3,
rdfs5, rdfs7, rdfs9 and rdfs11 over the schema `S` of a query's background dataset (its
rdfs:subClassOf, rdfs:subPropertyOf, rdfs:domain and rdfs:range triples).

Each element graph `G` is materialised once per schema into a closure graph of its own holding
`cl(G ∪ S) − (cl(S) − G)`: as it is published, for the schemas evaluations have been reading,
else when an evaluation first reads it. The query is rewritten to match the closure graph where
it would match the element graph, while still binding the element's name (translator/rewrite.py,
`$closures` slots). The background default graph `B` is read as `cl(B)`: its inferred triples
`cl(B) − B` are a graph of their own, merged into the query's default graph. The element graphs
themselves are untouched, so queries without entailment read the same elements as before.

The closures are made in the store, by one SPARQL Update per batch of elements whose tables come
from the schema's closure (`_Rules`), so no element crosses into Python; `Closure` computes them
in Python where those tables do not hold (a schema that says something of rdf:type as a property
or names blank nodes, an element or background triple that may entail a schema triple), and is
what the tables are made from.

What entailment may cost is bounded and charged to the query that asks for it: a closure (a
schema's, or of the elements one evaluation reads) derives at most `max_entailed_triples`
([engine] max_entailed_triples; ClosureTooLarge beyond, which fails that evaluation), and a
closure computed in Python looks at the evaluation's budget as it goes (its time limit, its
query's removal, the engine's stop). Python's closures are computed outside the store's lock,
so ingestion and /health go on meanwhile; an element whose closure must be computed in Python is
never closed at its publication (under the lock, on no query's budget) but by the first
evaluation that reads it. What the store computes (the SPARQL Updates of `_Rules`) is bounded
before it runs by what the schema's tables can give for the element's triples.

A schema is known by a digest of its triples: closures made under one schema serve every query
whose background dataset has that schema, and a schema changed by an update gives new closure
graphs at the next evaluation (the old ones go as soon as no dataset has their schema). A closure
goes with its element when the element is evicted. Closure graphs are the engine's own graphs
(`CLOSURE_PREFIX`); they are derived data, dropped when an on-disk store is opened again.

Only asserted triples take part: a triple term is a term like any other (never taken apart, never
the subject of an inferred type), so an annotation stays on the triple it annotates and an
inferred triple has none. A literal is never given a type (an RDF triple's subject cannot be a
literal), and a property that is a literal or a blank node is never inferred as a predicate.
"""
from __future__ import annotations

import hashlib
import logging
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable
import pyoxigraph as ox

from rspstar.translator.namespaces import RDF

from rspstar.config.schema import default
from rspstar.translator.vocabulary import CLOSURE_PREFIX

from .errors import StoreError

if TYPE_CHECKING:
    from .writers import StoreWriting

log = logging.getLogger(__name__)

# Candidate triples looked at between two looks at the evaluation's budget.
CHECK_EVERY = 1024

# Evictions (one per stream per retention round) without an evaluation reading a dataset after
# which its elements are no longer closed as they are published.
IDLE_EVICTIONS = 100

RDFS = "http://www.w3.org/2000/01/rdf-schema#"
TYPE = ox.NamedNode(RDF + "type")
SUBCLASS = ox.NamedNode(RDFS + "subClassOf")
SUBPROPERTY = ox.NamedNode(RDFS + "subPropertyOf")
DOMAIN = ox.NamedNode(RDFS + "domain")
RANGE = ox.NamedNode(RDFS + "range")
SCHEMA_PREDICATES = (SUBCLASS, SUBPROPERTY, DOMAIN, RANGE)

Triple = tuple  # (subject, predicate, object) of pyoxigraph terms


def _resource(term) -> bool:
    """Whether a term may be the subject of an inferred triple."""
    return isinstance(term, (ox.NamedNode, ox.BlankNode))


class ClosureTooLarge(StoreError):
    """A closure past the triples one may derive ([engine] max_entailed_triples)."""


def too_large(bound: int, what: str = "a closure") -> ClosureTooLarge:
    """A chain of n subclasses entails n²/2 triples: past the bound the evaluation that reads it
    fails with this error, instead of holding the engine's memory and time."""
    return ClosureTooLarge("RDFS entailment: %s past %d triples, the most one closure may derive ([engine] "
                           "max_entailed_triples; a schema or an element with chains of subclasses or subproperties "
                           "that long?)" % (what, bound))


class Closure:
    """The closure of a set of triples under rdfs2, 3, 5, 7, 9 and 11, computed once, each
    triple joined with those before it through indexes (semi-naive). Over a `base` closure,
    the triples of the base and their consequences are not derived again: lookups see the base's
    indexes too, and `derived` holds only what is not in the base. At most `bound` triples are
    derived (ClosureTooLarge beyond), and `check()` is called every CHECK_EVERY candidates (it
    raises to stop)."""

    def __init__(self, triples: Iterable[Triple], base: "Closure | None" = None,
                 bound: int = default("engine.max_entailed_triples"), check=None):
        self.base = base
        self.bound = bound
        self._check = check
        self.derived: set[Triple] = set()
        self._supers_of_class: dict = defaultdict(set)      # C -> {D | C subClassOf D}
        self._subs_of_class: dict = defaultdict(set)        # D -> {C | C subClassOf D}
        self._supers_of_property: dict = defaultdict(set)
        self._subs_of_property: dict = defaultdict(set)
        self._domains: dict = defaultdict(set)
        self._ranges: dict = defaultdict(set)
        self._uses: dict = defaultdict(set)                 # p -> {(s, o) | s p o}
        self._typed: dict = defaultdict(set)                # C -> {x | x type C}
        self._add(triples)

    def __contains__(self, triple: Triple) -> bool:
        return triple in self.derived or (self.base is not None and triple in self.base)

    @property
    def triples(self) -> set[Triple]:
        """Every triple of the closure (the base's too)."""
        return self.derived | self.base.triples if self.base is not None else self.derived

    def _look(self, index: str, key) -> set:
        found = getattr(self, index).get(key, ())
        if self.base is None:
            return found
        below = self.base._look(index, key)
        return found | below if found and below else (found or below)

    def _add(self, triples: Iterable[Triple]) -> None:
        todo = list(triples)
        check, looked = self._check, 0
        while todo:
            triple = todo.pop()
            looked += 1
            if check is not None and looked % CHECK_EVERY == 0:
                check()
            if triple in self:
                continue
            if len(self.derived) >= self.bound:
                raise too_large(self.bound)
            self.derived.add(triple)
            self._index(triple)
            todo.extend(self._consequences(triple))

    def _index(self, triple: Triple) -> None:
        s, p, o = triple
        self._uses[p].add((s, o))
        if p == TYPE:
            self._typed[o].add(s)
        elif p == SUBCLASS:
            self._supers_of_class[s].add(o)
            self._subs_of_class[o].add(s)
        elif p == SUBPROPERTY:
            self._supers_of_property[s].add(o)
            self._subs_of_property[o].add(s)
        elif p == DOMAIN:
            self._domains[s].add(o)
        elif p == RANGE:
            self._ranges[s].add(o)

    def _consequences(self, triple: Triple) -> list[Triple]:
        """What `triple` entails with the triples before it (and itself), in either role."""
        s, p, o = triple
        out: list[Triple] = []
        # As the instance premise.
        out += [(s, q, o) for q in self._look("_supers_of_property", p) if isinstance(q, ox.NamedNode)]  # rdfs7
        out += [(s, TYPE, d) for d in self._look("_domains", p)]                                         # rdfs2
        if _resource(o):
            out += [(o, TYPE, r) for r in self._look("_ranges", p)]                                      # rdfs3
        if p == TYPE:
            out += [(s, TYPE, d) for d in self._look("_supers_of_class", o)]                             # rdfs9
        # As the schema premise.
        if p == SUBCLASS:
            out += [(s, SUBCLASS, d) for d in self._look("_supers_of_class", o)]                         # rdfs11
            out += [(c, SUBCLASS, o) for c in self._look("_subs_of_class", s)]
            out += [(x, TYPE, o) for x in self._look("_typed", s)]                                       # rdfs9
        elif p == SUBPROPERTY:
            out += [(s, SUBPROPERTY, q) for q in self._look("_supers_of_property", o)]                   # rdfs5
            out += [(r, SUBPROPERTY, o) for r in self._look("_subs_of_property", s)]
            if isinstance(o, ox.NamedNode):
                out += [(x, o, y) for x, y in self._look("_uses", s)]                                    # rdfs7
        elif p == DOMAIN:
            out += [(x, TYPE, o) for x, _ in self._look("_uses", s)]                                     # rdfs2
        elif p == RANGE:
            out += [(y, TYPE, o) for _, y in self._look("_uses", s) if _resource(y)]                     # rdfs3
        return out


def element_closure(graph: Iterable[Triple], schema: Closure, bound: int = default("engine.max_entailed_triples"),
                    check=None) -> set[Triple]:
    """`cl(G ∪ S) − (cl(S) − G)` for an element graph `G`, `schema` being `cl(S)`."""
    graph = set(graph)
    return graph | Closure(graph, schema, bound, check).derived


def schema_triples(triples: Iterable[Triple]) -> set[Triple]:
    return {t for t in triples if t[1] in SCHEMA_PREDICATES}


def digest_of(triples: Iterable[Triple]) -> str:
    lines = sorted("%s %s %s" % t for t in triples)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:24]


@dataclass
class Dataset:
    """A query's background dataset as entailment reads it at one background version: its
    schema's closure and digest, and the graphs its default graph is the merge of (B and the
    graph of `cl(B) − B`)."""

    key: tuple | None               # the FROM graphs, None for the background default graph
    digest: str                     # of the schema's triples
    schema: Closure
    default_graph: list             # pyoxigraph graph names
    _rules: "_Rules | None" = None
    read: bool = False              # read by an evaluation since the previous eviction
    idle: int = 0                   # evictions since an evaluation last read it
    eager: bool = False             # its elements are closed as they are published

    def rules(self) -> "_Rules | None":
        """The schema's rules as a SPARQL Update's tables, None when elements are closed in
        Python (a schema about rdf:type or naming blank nodes)."""
        if self._rules is None:
            self._rules = _Rules(self.schema)
        return self._rules if self._rules.simple else None


class Entailment:
    """The closure graphs of one stream store. Its bookkeeping is guarded by the store's lock."""

    def __init__(self, store: "StoreWriting"):
        self.store = store
        self._datasets: dict[tuple, Dataset] = {}        # (key, background version, generation) -> Dataset
        self._current: dict[tuple | None, Dataset] = {}  # key -> the latest Dataset made for it
        self._closures: dict[str, dict[str, str]] = {}   # element -> {schema digest: closure graph}
        self.materialised = 0                             # element closures made so far
        self.deferred = 0                                 # elements left unclosed at their publication
        self._made = 0                                    # names given to closure graphs
        self._making = threading.Lock()                   # held while a dataset is made
        # The most triples one closure may derive where no evaluation's limits say otherwise
        # (the engine sets its [engine] max_entailed_triples here).
        self.max_derived = default("engine.max_entailed_triples")

    def _limits(self, budget) -> tuple[int, object]:
        """(the most triples a closure may derive, what to call to look at the budget) for the
        evaluation whose budget (store.limits.Budget) this is, or for none."""
        bound = getattr(getattr(budget, "limits", None), "max_entailed", None) or self.max_derived
        return bound, (budget.check if budget is not None else None)

    # -- datasets ------------------------------------------------------------------------------
    def dataset(self, from_graphs: list[str] | None, budget=None) -> Dataset:
        """The dataset of a query with these FROM graphs (None: the background default graph),
        made again when the background changed since it was last made (an evaluation holds
        the background, so it does not change meanwhile), within `budget`'s limits. One is made
        at a time, without holding the store but to write: ingestion goes on."""
        key = tuple(from_graphs) if from_graphs else None
        store = self.store
        bound, check = self._limits(budget)
        with self._making:
            with store.lock:
                version = (key, store.background.version, id(store.oxigraph))
                found = self._datasets.get(version)
                if found is not None:
                    found.read = found.eager = True
                    return found
                previous = self._current.get(key)
                self._made += 1
                name = ox.NamedNode("%sbackground:%d" % (CLOSURE_PREFIX, self._made))
            graphs = [ox.DefaultGraph()] if key is None else [ox.NamedNode(g) for g in key]
            oxigraph = store.oxigraph
            s = {(q.subject, q.predicate, q.object) for g in graphs for p in SCHEMA_PREDICATES
                 for q in oxigraph.quads_for_pattern(None, p, None, g)}
            digest = digest_of(s)
            reuse = previous is not None and previous.digest == digest and len(previous.schema.derived) <= bound
            schema = previous.schema if reuse else Closure(s, bound=bound, check=check)
            dataset = Dataset(key, digest, schema, graphs + [name], previous._rules if reuse else None)
            rules = dataset.rules()
            if rules is not None and not self._states_schema(graphs, rules) and \
                    rules.estimate(self._background_counts(graphs)) <= bound:
                # cl(B) − B made in the store: cl(S), then what B's other triples entail, less B.
                with store.lock:
                    store.write("extend", [ox.Quad(s_, p, o, name) for s_, p, o in schema.triples])
                    store.write("update", rules.background_update(key, name.value))
            else:
                b = {(q.subject, q.predicate, q.object) for g in graphs
                     for q in oxigraph.quads_for_pattern(None, None, None, g)}
                inferred = (Closure(b, schema, bound, check).derived | schema.derived) - b
                with store.lock:
                    store.write("extend", [ox.Quad(s_, p, o, name) for s_, p, o in inferred])
            with store.lock:
                store.write("add_graph", name)
                dataset.read = dataset.eager = True
                self._datasets = {k: d for k, d in self._datasets.items() if k[0] != key}
                self._datasets[version] = dataset
                self._current[key] = dataset
                if previous is not None:
                    self._drop_unused(previous)
            return dataset

    def _states_schema(self, graphs: list, rules: "_Rules") -> bool:
        """Whether the background holds a triple, other than a schema triple, that may entail a
        schema triple (then its closure is made in Python)."""
        others = rules.affecting_others()
        if not others:
            return False
        where = "?s ?p ?o" if graphs == [ox.DefaultGraph()] else \
            "GRAPH ?b { ?s ?p ?o } VALUES ?b { %s }" % " ".join(map(str, graphs))
        return bool(self.store.oxigraph.query("ASK { %s VALUES ?p { %s } }" % (where, others)))

    def _background_counts(self, graphs: list) -> "Counts":
        """The background's triples counted by predicate and its types by class."""
        where = "?s ?p ?o" if graphs == [ox.DefaultGraph()] else \
            "GRAPH ?b { ?s ?p ?o } VALUES ?b { %s }" % " ".join(map(str, graphs))
        return _counts(self.store.oxigraph, where, None)[None]

    def _drop_unused(self, previous: Dataset) -> None:
        """Remove what only `previous` (replaced by a newer dataset of its key) used: its
        background closure graph and, when no dataset has its schema any more, the closures
        made under that schema."""
        current = self._current.values()
        old_background = previous.default_graph[-1]
        if all(d.default_graph[-1] != old_background for d in current):
            self.store.write("remove_graph", old_background)
        if all(d.digest != previous.digest for d in current):
            for element, closures in self._closures.items():
                graph = closures.pop(previous.digest, None)
                if graph is not None:
                    self.store.write("remove_graph", ox.NamedNode(graph))
            self._closures = {e: c for e, c in self._closures.items() if c}

    def schema_digest(self, from_graphs: list[str] | None, budget=None) -> str:
        return self.dataset(from_graphs, budget).digest

    # -- element closures ------------------------------------------------------------------------
    def closures(self, dataset: Dataset, elements: Iterable[str], budget=None) -> dict[str, str]:
        """The closure graph of each element under `dataset`'s schema, materialising the ones
        not made yet within `budget`'s limits: what the store computes under its lock (so that an
        eviction cannot come in between), what Python computes outside it."""
        store = self.store
        digest = dataset.digest
        bound, check = self._limits(budget)
        with store.lock:
            found: dict[str, str] = {}
            missing: list[str] = []
            for element in dict.fromkeys(elements):
                graph = self._closures.get(element, {}).get(digest)
                if graph is not None:
                    found[element] = graph
                elif store.is_element(element):
                    missing.append(element)
                else:       # evicted: matches nothing, as its own graph would
                    found[element] = CLOSURE_PREFIX + "evicted"
            if not missing:
                return found
            alone = self._materialise(dataset, missing, bound, found)
            graphs = {e: [(q.subject, q.predicate, q.object)
                          for q in store.oxigraph.quads_for_pattern(None, None, None, ox.NamedNode(e))] for e in alone}
        # Closed in Python outside the lock, within the evaluation's limits; written after.
        derived = 0
        closed = {}
        try:
            for element, triples in graphs.items():
                closed[element] = element_closure(triples, dataset.schema, bound - derived, check)
                derived += len(closed[element]) - len(triples)
        except ClosureTooLarge:
            raise too_large(bound, "the closures of the elements one evaluation reads") from None
        with store.lock:
            for element, closure in closed.items():
                made = self._closures.get(element, {}).get(digest)
                if made is not None:                # another evaluation closed it meanwhile
                    found[element] = made
                    continue
                if not store.is_element(element):   # evicted meanwhile
                    found[element] = CLOSURE_PREFIX + "evicted"
                    continue
                found[element] = self._register(element, digest)
                target = ox.NamedNode(found[element])
                store.write("extend", [ox.Quad(s_, p, o, target) for s_, p, o in closure])
                self.materialised += 1
        return found

    def _register(self, element: str, digest: str) -> str:
        self._made += 1
        name = "%s%d" % (CLOSURE_PREFIX, self._made)
        self._closures.setdefault(element, {})[digest] = name
        return name

    def _materialise(self, dataset: Dataset, elements: list[str], bound: int, found: dict[str, str]) -> list[str]:
        """Close in the store, by the schema's tables, the elements that allow it (under the
        store's lock) into `found`; returns the others, to be closed in Python: those that may
        entail a schema triple, and those whose closure the tables could make larger than
        `bound` (Python stops at the bound exactly)."""
        if not elements:
            return []
        rules = dataset.rules()
        alone = set(elements) if rules is None else self._reading_schema(elements, rules)
        in_store = [e for e in elements if e not in alone]
        if in_store:
            counts = _counts(self.store.oxigraph, "VALUES ?g { %s } GRAPH ?g { ?s ?p ?o }"
                             % " ".join("<%s>" % e for e in in_store), "g")
            total, kept = 0, []
            for element in in_store:
                estimate = rules.estimate(counts.get(element, Counts()))
                if total + estimate > bound:
                    alone.add(element)
                else:
                    total += estimate
                    kept.append(element)
            in_store = kept
        if in_store:
            names = {element: self._register(element, dataset.digest) for element in in_store}
            self.store.write("update", rules.update(in_store, names))
            found.update(names)
            self.materialised += len(in_store)
        return [e for e in elements if e in alone]

    def _reading_schema(self, elements: list[str], rules: "_Rules") -> set[str]:
        """The elements holding a triple that may entail a schema triple: closed in Python."""
        text = "SELECT DISTINCT ?g WHERE { { SELECT * WHERE { VALUES ?g { %s } GRAPH ?g { ?s ?p ?o } } } " \
            "VALUES ?p { %s } }" % (
            " ".join("<%s>" % e for e in elements), rules.affecting)
        return {solution["g"].value for solution in self.store.oxigraph.query(text)}

    def published(self, elements: list[str]) -> None:
        """Elements just published (the store's lock is held): closed at once under the schema
        of each dataset an evaluation has read since the previous eviction, so that the
        evaluations find their closures made (materialising at ingestion); the others are
        closed when an evaluation first reads them, and so are the elements whose closure is
        computed in Python (on the budget of the evaluation that reads them, not under the
        store's lock here)."""
        for dataset in list(self._current.values()):
            if dataset.eager and elements:
                try:
                    found: dict[str, str] = {}
                    left = self._materialise(
                        dataset, [e for e in elements if dataset.digest not in self._closures.get(e, ())],
                        self.max_derived, found)
                    self.deferred += len(left)
                except Exception:   # ingestion goes on: the evaluation that reads them meets the error
                    log.exception("RDFS entailment: elements not closed as they were published")

    def forget(self, elements: Iterable[str]) -> None:
        """The elements are evicted: their closures go with them (the store's lock is held). A
        dataset no evaluation has read during the last IDLE_EVICTIONS evictions (of any
        stream) stops being closed at ingestion: its queries may be gone."""
        for dataset in self._current.values():
            dataset.idle = 0 if dataset.read else dataset.idle + 1
            dataset.read = False
            if dataset.idle > IDLE_EVICTIONS:
                dataset.eager = False
        if not self._closures:      # nothing closed (no entailment): a replay evicts 100,000s at a time
            return
        for element in elements:
            for graph in self._closures.pop(element, {}).values():
                self.store.write("remove_graph", ox.NamedNode(graph))

    def held(self) -> int:
        """How many closure graphs are kept."""
        with self.store.lock:
            return sum(len(c) for c in self._closures.values())


@dataclass
class Counts:
    """An element's (or the background's) triples counted by predicate, and its rdf:type
    triples by class."""
    predicates: dict = None
    types: dict = None

    def __post_init__(self):
        self.predicates = self.predicates or {}
        self.types = self.types or {}


def _counts(store: ox.Store, where: str, graph: str | None) -> dict:
    """Counts per binding of ?`graph` (None: one for all) of the triples `where` matches."""
    by = "?%s " % graph if graph else ""
    found: dict = {}
    for solution in store.query("SELECT %s?p (COUNT(*) AS ?n) WHERE { %s } GROUP BY %s?p" % (by, where, by)):
        counts = found.setdefault(solution[graph].value if graph else None, Counts())
        counts.predicates[solution["p"]] = int(solution["n"].value)
    types = where.replace("?s ?p ?o", "?s a ?o")
    for solution in store.query("SELECT %s?o (COUNT(*) AS ?n) WHERE { %s } GROUP BY %s?o" % (by, types, by)):
        counts = found.setdefault(solution[graph].value if graph else None, Counts())
        counts.types[solution["o"]] = int(solution["n"].value)
    if not graph:
        found.setdefault(None, Counts())
    return found


class _Rules:
    """A closed schema's consequences for one instance triple, as tables a SPARQL Update applies
    to many elements at once in the store (no element crosses into Python): for a schema that
    says nothing about rdf:type as a property and names no blank node, an instance triple
    `s p o` whose predicate cannot lead to a schema triple entails
    - `s q o` for each superproperty q of p (rdfs7, with rdfs5 already applied in the schema),
    - `s a t` for t a domain of p or of a superproperty, or a superclass of one (rdfs2, rdfs9),
    - `o a t` likewise for ranges, when o is an IRI or a blank node (rdfs3, rdfs9),
    - and a type triple `s a c`, given or entailed so, `s a d` for each superclass d (rdfs9);
    the triples of `cl(S) − G` so entailed are taken out again."""

    def __init__(self, schema: Closure):
        supers_p = schema._supers_of_property
        supers_c = schema._supers_of_class
        properties = set(supers_p) | set(schema._domains) | set(schema._ranges)

        def up(index, term):
            return {term} | index.get(term, set())
        sup_pairs, x_types, y_types, affecting = [], [], [], set(SCHEMA_PREDICATES)
        for p in properties:
            closure = up(supers_p, p)
            if closure & set(SCHEMA_PREDICATES):
                affecting.add(p)
            sup_pairs += [(p, q) for q in closure - {p} if isinstance(q, ox.NamedNode)]
            x_types += [(p, t) for d in closure for c in schema._domains.get(d, ()) for t in up(supers_c, c)]
            y_types += [(p, t) for d in closure for c in schema._ranges.get(d, ()) for t in up(supers_c, c)]
        sub_pairs = [(c, d) for c, ds in supers_c.items() for d in ds if d != c]
        excluded = [t for t in schema.triples if t[1] not in SCHEMA_PREDICATES]
        self.simple = not (supers_p.get(TYPE) or schema._domains.get(TYPE) or schema._ranges.get(TYPE)) and \
            not any(isinstance(term, ox.BlankNode)
                    for rows in (sup_pairs, x_types, y_types, sub_pairs, excluded, [(p,) for p in affecting])
                    for row in rows for term in row)
        self.affecting = " ".join(map(str, sorted(affecting, key=str)))
        self._affecting_others = " ".join(map(str, sorted(affecting - set(SCHEMA_PREDICATES), key=str)))
        self._tables = [
            ("INSERT { GRAPH ?c { ?s ?q ?o } } WHERE { %s VALUES (?p ?q) { %s } }",
             sup_pairs),
            ("INSERT { GRAPH ?c { ?s a ?t } } WHERE { %s VALUES (?p ?t) { %s } }",
             x_types),
            ("INSERT { GRAPH ?c { ?o a ?t } } WHERE { %s FILTER(isIRI(?o) || isBLANK(?o)) VALUES (?p ?t) { %s } }",
             y_types),
            ("INSERT { GRAPH ?c { ?s a ?d } } WHERE { %s VALUES (?e ?d) { %s } }",
             sub_pairs),
        ]
        self._excluded = excluded
        # What the tables give per triple, for `estimate`.
        self._fan: dict = defaultdict(int)          # predicate -> rows of tables 0-2 it joins
        self._typing: dict = defaultdict(int)       # predicate -> type triples it entails (tables 1-2)
        for p, _ in sup_pairs:
            self._fan[p] += 1
        for p, _ in x_types + y_types:
            self._fan[p] += 1
            self._typing[p] += 1
        self._supers: dict = defaultdict(int)       # class -> its superclasses (table 3)
        for c, _ in sub_pairs:
            self._supers[c] += 1
        self._most_supers = max(self._supers.values(), default=0)

    def estimate(self, counts: "Counts") -> int:
        """The most rows the tables' updates can make of triples counted so (an element's, or
        the background's): each triple copied, joined with its predicate's rows, each type
        triple stated or entailed with its class's superclasses."""
        rows = 0
        for p, n in counts.predicates.items():
            rows += n * (1 + self._fan.get(p, 0) + self._typing.get(p, 0) * self._most_supers)
        for c, n in counts.types.items():
            rows += n * self._supers.get(c, 0)
        return rows

    def affecting_others(self) -> str:
        """The properties other than the schema's own whose triples entail schema triples."""
        return self._affecting_others

    def background_update(self, key: tuple | None, name: str) -> str:
        """The SPARQL Update adding to graph `name`, which holds cl(S), what the triples of the
        background default graph (or of the FROM graphs `key`) entail, then taking out what
        they state: cl(B) − B."""
        if key is None:
            def read(pattern):
                return "{ %s }" % pattern
        else:
            graphs = " ".join("<%s>" % g for g in key)

            def read(pattern):
                return "{ GRAPH ?b { %s } VALUES ?b { %s } }" % (pattern, graphs)
        operations = []
        for k, (text, table) in enumerate(self._tables):
            if not table:
                continue
            rows = " ".join("(%s)" % " ".join(map(str, row)) for row in table)
            if k == 3:      # types stated or entailed: both the background's and the graph's own
                read_types = "{ %s UNION { GRAPH <%s> { ?s a ?e } } }" % (read("?s a ?e"), name)
                operations.append(text.replace("GRAPH ?c", "GRAPH <%s>" % name) % (read_types, rows))
            else:
                operations.append(text.replace("GRAPH ?c", "GRAPH <%s>" % name) % (read("?s ?p ?o"), rows))
        operations.append("DELETE { GRAPH <%s> { ?s ?p ?o } } WHERE { GRAPH <%s> { ?s ?p ?o } %s }"
                          % (name, name, read("?s ?p ?o")))
        return " ;\n".join(operations)

    def update(self, elements: list[str], names: dict[str, str]) -> str:
        """The SPARQL Update writing the closure graphs `names` of `elements`."""
        # Each closure graph is read as a sub-select ahead of the tables it joins: Oxigraph then
        # looks the graphs up one by one instead of scanning every graph of the store.
        pairs = " ".join("(<%s> <%s>)" % (e, names[e]) for e in elements)
        graphs = " ".join("<%s>" % names[e] for e in elements)
        read = "{ SELECT * WHERE { VALUES ?c { %s } GRAPH ?c { ?s ?p ?o } } }" % graphs
        types = "{ SELECT * WHERE { VALUES ?c { %s } GRAPH ?c { ?s a ?e } } }" % graphs
        operations = ["INSERT { GRAPH ?c { ?s ?p ?o } } WHERE { VALUES (?g ?c) { %s } GRAPH ?g { ?s ?p ?o } }" % pairs]
        for k, (text, table) in enumerate(self._tables):
            if table:
                operations.append(text % (types if k == 3 else read,
                                          " ".join("(%s)" % " ".join(map(str, row)) for row in table)))
        if self._excluded:
            operations.append(
                "DELETE { GRAPH ?c { ?s ?p ?o } } WHERE { { SELECT * WHERE { VALUES (?g ?c) { %s } "
                "GRAPH ?c { ?s ?p ?o } } } VALUES (?s ?p ?o) { %s } FILTER NOT EXISTS { GRAPH ?g { ?s ?p ?o } } }"
                % (pairs, " ".join("(%s)" % " ".join(map(str, row)) for row in self._excluded)))
        return " ;\n".join(operations)
