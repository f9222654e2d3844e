"""RDFS entailment, `option entailment = rdfs` (spec §6.11; store/entailment.py): what queries
match is compared with a closure computed here independently, a naive fixpoint of the six rules
over drawn graphs and schemas (blank nodes, cycles in rdfs:subClassOf, domains and ranges on
subproperties, triple terms and annotations, schema triples in elements)."""
from __future__ import annotations

import threading

import pyoxigraph as ox
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rspstar.endpoint.engine.evaluation import QueryEvaluator
from rspstar.endpoint.engine.sharing import ConstantGroups, RangeResults
from rspstar.store.entailment import Closure, element_closure
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore
from rspstar.store.terms import term_to_ntriples
from rspstar.translator.options import OptionError, QueryOptions
from rspstar.translator.temporal import parse_instant
from rspstar.translator.validate import compile_query
from rspstar.translator.vocabulary import CLOSURE_PREFIX

EX = "http://example.org/"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
TYPE, SUBCLASS, SUBPROPERTY, DOMAIN, RANGE = (RDF + "type", RDFS + "subClassOf", RDFS + "subPropertyOf",
                                              RDFS + "domain", RDFS + "range")
T0 = parse_instant("2026-03-01T08:00:00Z")
S = 1_000_000
STREAM = EX + "s"


def iri(name: str) -> ox.NamedNode:
    return ox.NamedNode(name if ":" in name else EX + name)


# -- the closure computed independently: every rule applied to every pair until nothing changes --
def naive_closure(triples: set) -> set:
    """The six rules of RDF 1.1 Semantics §9.2 written out as they read, applied to the whole set
    until it stops growing (terms are pyoxigraph terms; a literal or triple term is never made a
    subject, a non-IRI never a predicate)."""
    closed = set(triples)

    def resource(term):
        return isinstance(term, (ox.NamedNode, ox.BlankNode))
    while True:
        new = set()
        for (a, p1, x) in closed:
            for (y, p2, z) in closed:
                if p1.value == DOMAIN and p2 == a:                                  # rdfs2
                    new.add((y, iri(TYPE), x))
                if p1.value == RANGE and p2 == a and resource(z):                   # rdfs3
                    new.add((z, iri(TYPE), x))
                if p1.value == SUBPROPERTY and p2.value == SUBPROPERTY and y == x:  # rdfs5
                    new.add((a, iri(SUBPROPERTY), z))
                if p1.value == SUBPROPERTY and p2 == a and isinstance(x, ox.NamedNode):  # rdfs7
                    new.add((y, x, z))
                if p1.value == SUBCLASS and p2.value == TYPE and z == a:            # rdfs9
                    new.add((y, iri(TYPE), x))
                if p1.value == SUBCLASS and p2.value == SUBCLASS and y == x:        # rdfs11
                    new.add((a, iri(SUBCLASS), z))
        if new <= closed:
            return closed
        closed |= new


def expected_element(graph: set, schema: set) -> set:
    return naive_closure(graph | schema) - (naive_closure(schema) - graph)


# -- drawn graphs -------------------------------------------------------------------------------
classes = st.sampled_from([iri("C%d" % k) for k in range(4)])
properties = st.sampled_from([iri("p%d" % k) for k in range(4)])
individuals = st.one_of(st.sampled_from([iri("a%d" % k) for k in range(3)]),
                        st.sampled_from([ox.BlankNode("b%d" % k) for k in range(2)]), classes)
literals = st.sampled_from([ox.Literal("v"), ox.Literal(3)])


def schema_triple(blank_classes: bool):
    klass = st.one_of(classes, st.just(ox.BlankNode("k"))) if blank_classes else classes
    return st.one_of(
        st.tuples(klass, st.just(iri(SUBCLASS)), klass),
        st.tuples(properties, st.just(iri(SUBPROPERTY)), properties),
        st.tuples(properties, st.just(iri(DOMAIN)), klass),
        st.tuples(properties, st.just(iri(RANGE)), klass),
    )


@st.composite
def instance_triples(draw):
    kind = draw(st.sampled_from(["plain", "plain", "type", "literal", "term", "annotated"]))
    s = draw(individuals)
    if kind == "type":
        return [(s, iri(TYPE), draw(classes))]
    p = draw(properties)
    if kind == "literal":
        return [(s, p, draw(literals))]
    o = draw(individuals)
    if kind == "term":              # a triple term as object: opaque, never typed
        return [(s, p, ox.Triple(draw(individuals), draw(properties), o))]
    if kind == "annotated":         # s p o {| q z |}: asserted and annotated through a reifier
        reifier = ox.BlankNode("r%d" % draw(st.integers(0, 1)))
        return [(s, p, o), (reifier, iri(RDF + "reifies"), ox.Triple(s, p, o)), (reifier, draw(properties), draw(literals))]
    return [(s, p, o)]


@st.composite
def graphs(draw, schema_in_elements: bool = True):
    graph = {t for triples in draw(st.lists(instance_triples(), max_size=6)) for t in triples}
    if schema_in_elements and draw(st.booleans()):
        graph |= set(draw(st.lists(schema_triple(False), max_size=2)))
    return graph


@st.composite
def schemas(draw):
    schema = set(draw(st.lists(schema_triple(draw(st.booleans())), max_size=7)))
    if draw(st.integers(0, 5)) == 0:       # a schema saying something of rdf:type itself
        schema.add((iri(TYPE), iri(draw(st.sampled_from([SUBPROPERTY, DOMAIN, RANGE]))),
                    draw(st.one_of(properties, classes))))
    if draw(st.integers(0, 3)) == 0:       # a property under rdf:type: its objects are classes
        schema.add((draw(properties), iri(SUBPROPERTY), iri(TYPE)))
    if draw(st.integers(0, 5)) == 0:       # a property under a schema property
        schema.add((draw(properties), iri(SUBPROPERTY), iri(SUBCLASS)))
    if draw(st.integers(0, 3)) == 0:       # a schema property under an ordinary one, or typed by a domain:
        schema.add((iri(SUBCLASS), iri(draw(st.sampled_from([SUBPROPERTY, DOMAIN]))),   # cl(S) then holds
                    draw(st.one_of(properties, classes))))                               # instance triples
    return schema


@settings(max_examples=300, deadline=None)
@given(graph=graphs(), schema=schemas())
def test_an_elements_closure_is_the_spec_formula_computed_naively(graph, schema):
    assert element_closure(graph, Closure(schema)) == expected_element(graph, schema)


# -- end to end: queries over the store ---------------------------------------------------------------
def store_with(schema: set, background: set = frozenset(), elements: list[set] = ()) -> StreamStore:
    store = StreamStore()
    # Written as terms, not parsed: the blank nodes keep their labels for the comparison.
    with store.background.changing(), store.lock:
        store.write("extend", [ox.Quad(*t, ox.DefaultGraph()) for t in schema | set(background)])
    publish(store, elements)
    return store


def publish(store: StreamStore, elements: list[set], first: int = 0) -> None:
    for k, graph in enumerate(elements, first):
        name = ox.NamedNode(EX + "e%d" % k)
        at = T0 + k * S // 10
        store.add_elements(STREAM, [Element(name.value, at, instant_literal(at), [ox.Quad(*t, name) for t in graph])])
        store.advance_watermark(STREAM, at + S // 10)     # complete up to the next element: none is late


ALL_TRIPLES = """SELECT ?g ?s ?p ?o FROM NAMED WINDOW <http://example.org/w> ON <http://example.org/s> [RANGE PT10S STEP PT1S]
WHERE { WINDOW <http://example.org/w> { GRAPH ?g { ?s ?p ?o } } }"""
BACKGROUND_TRIPLES = """SELECT ?s ?p ?o FROM NAMED WINDOW <http://example.org/w> ON <http://example.org/s> [RANGE PT10S STEP PT1S]
WHERE { ?s ?p ?o }"""


def rows(store, text, instant=T0 + 10 * S, **options):
    """The rows as tuples, in the order of the projection's variables."""
    query = compile_query(text)
    evaluation = QueryEvaluator(query, store, QueryOptions(**options)).evaluate(instant)
    order = [v for v in ("g", "o", "s", "p", "v") if v in (query.body.projected or ())]
    order = [v for v in ("g", "s", "p", "o") if v in order] + [v for v in ("v",) if v in order]
    return [tuple(r[v] for v in order if v in r) for r in evaluation.rows]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(elements=st.lists(graphs(), min_size=1, max_size=3), schema=schemas(),
       background=st.lists(st.one_of(instance_triples()), max_size=3))
def test_a_window_and_the_background_match_the_naive_closures(elements, schema, background):
    background = {t for triples in background for t in triples}
    store = store_with(schema, background, elements)
    got = rows(store, ALL_TRIPLES, entailment="rdfs")
    expected = {(EX + "e%d" % k, *t) for k, graph in enumerate(elements) for t in ntriples_rows(expected_element(graph, schema))}
    assert sorted(got) == sorted(("<%s>" % g, s, p, o) for g, s, p, o in expected)
    assert len(got) == len(set(got))
    assert sorted(rows(store, BACKGROUND_TRIPLES, entailment="rdfs")) == \
        sorted(ntriples_rows(naive_closure(schema | background)))
    # Without the option the same elements read as they are.
    plain = {(EX + "e%d" % k, *t) for k, graph in enumerate(elements) for t in ntriples_rows(graph)}
    assert sorted(rows(store, ALL_TRIPLES)) == sorted(("<%s>" % g, s, p, o) for g, s, p, o in plain)


def ntriples_rows(triples) -> list[tuple[str, str, str]]:
    return [tuple(term_to_ntriples(term) for term in t) for t in triples]


SENSORS = """@prefix ex: <http://example.org/> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:Galvanic rdfs:subClassOf ex:Oxygen . ex:Oxygen rdfs:subClassOf ex:Gas . ex:Gas rdfs:subClassOf ex:Sensor .
ex:madeBy rdfs:range ex:Sensor . ex:measuredBy rdfs:subPropertyOf ex:madeBy .
"""


def sensor_element(k: int, klass: str, value: float, prop: str = "madeBy") -> set:
    obs, sensor = iri("o%d" % k), iri("sensor%d" % k)
    return {(obs, iri(prop), sensor), (sensor, iri(TYPE), iri(klass)), (obs, iri("value"), ox.Literal(value))}


GAS = """PREFIX ex: <http://example.org/>
SELECT ?o ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S STEP PT1S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:madeBy ?s . ?s a ex:Gas . ?o ex:value ?v } } }"""


def sensors_store(elements: list[set]) -> StreamStore:
    store = StreamStore()
    store.background.load(SENSORS.encode(), ox.RdfFormat.TURTLE, "schema")
    publish(store, elements)
    return store


def test_rdfs_matches_subclasses_and_subproperties_and_leaves_queries_without_it_alone():
    store = sensors_store([sensor_element(0, "Galvanic", 0.1), sensor_element(1, "Oxygen", 0.2, "measuredBy"),
                           sensor_element(2, "Thermo", 0.3)])
    got = sorted(rows(store, GAS, T0 + 2 * S, entailment="rdfs"))
    assert [o for o, _ in got] == ["<http://example.org/o0>", "<http://example.org/o1>"]
    assert rows(store, GAS, T0 + 2 * S) == []
    assert rows(store, GAS, T0 + 2 * S, entailment="none") == []


def test_an_inferred_triple_has_no_annotation():
    data = """@prefix ex: <http://example.org/> .
    ex:o1 ex:measuredBy ex:s1 {| ex:confidence 0.9 |} ."""
    graph = {(q.subject, q.predicate, q.object) for q in ox.parse(data.encode(), format=ox.RdfFormat.TURTLE)}
    store = sensors_store([graph])
    text = """PREFIX ex: <http://example.org/>
    SELECT ?p ?c FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S STEP PT1S]
    WHERE { WINDOW ex:w { GRAPH ?g { ex:o1 ?p ex:s1 . OPTIONAL { << ex:o1 ?p ex:s1 >> ex:confidence ?c } } } }"""
    got = QueryEvaluator(compile_query(text), store, QueryOptions(entailment="rdfs")).evaluate(T0 + S).rows
    assert sorted(got, key=lambda r: r["p"]) == [
        {"p": "<http://example.org/madeBy>"},
        {"p": "<http://example.org/measuredBy>", "c": '"0.9"^^<http://www.w3.org/2001/XMLSchema#decimal>'},
    ]
    # The annotation's reifier names the asserted triple only: the triple term is not reasoned over.
    reified = text.replace("ex:o1 ?p ex:s1 . OPTIONAL { << ex:o1 ?p ex:s1 >> ex:confidence ?c }",
                           "<< ex:o1 ex:madeBy ex:s1 >> ex:confidence ?c . BIND(ex:madeBy AS ?p)")
    assert QueryEvaluator(compile_query(reified), store, QueryOptions(entailment="rdfs")).evaluate(T0 + S).rows == []


def test_the_option_takes_none_or_rdfs():
    assert QueryOptions.from_pairs({"entailment": "rdfs"}).entailment == "rdfs"
    with pytest.raises(OptionError, match="entailment takes none or rdfs"):
        QueryOptions.from_pairs({"entailment": "owl"})


def test_what_the_schema_alone_entails_is_not_an_elements_unless_the_element_states_it():
    # cl(S) holds C0 p1 C1 (rdfs7 over C0 subClassOf C1); the element entails it too, through
    # p0, and states C0 p2 C1, which cl(S) holds as well: only the latter is the element's.
    schema = {(iri("C0"), iri(SUBCLASS), iri("C1")), (iri(SUBCLASS), iri(SUBPROPERTY), iri("p1")),
              (iri("p0"), iri(SUBPROPERTY), iri("p1")), (iri(SUBCLASS), iri(SUBPROPERTY), iri("p2"))}
    graph = {(iri("C0"), iri("p0"), iri("C1")), (iri("C0"), iri("p2"), iri("C1"))}
    assert expected_element(graph, schema) == graph
    store = store_with(schema, set(), [graph])
    assert sorted(rows(store, ALL_TRIPLES, entailment="rdfs")) == sorted(
        ("<%se0>" % EX, *t) for t in ntriples_rows(graph))


# -- a schema that changes, and the fast paths ------------------------------------------------------
INCREMENTAL = """PREFIX ex: <http://example.org/>
SELECT ?o ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S STEP PT1S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:madeBy ?s . ?s a %s . ?o ex:value ?v FILTER(?v < 10) } } }"""
JOINED = """PREFIX ex: <http://example.org/>
SELECT ?o ?v ?where FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S STEP PT1S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:madeBy ?s . ?s a ex:Gas . ?o ex:value ?v } } ?s ex:in ?where }"""


def test_fast_paths_give_the_plain_evaluations_rows_and_see_a_schema_change_at_the_next_evaluation():
    elements = [sensor_element(k, ["Galvanic", "Oxygen", "Thermo", "Pt100"][k % 4], k % 7, "measuredBy" if k % 3 else "madeBy")
                for k in range(60)]
    store = sensors_store([])
    store.background.load(b"<http://example.org/sensor2> <http://example.org/in> <http://example.org/tunnel> . "
                          b"<http://example.org/sensor6> <http://example.org/in> <http://example.org/tunnel> .",
                          ox.RdfFormat.TURTLE, "where")
    shared, groups = RangeResults(), ConstantGroups()
    texts = [INCREMENTAL % "ex:Gas", INCREMENTAL % "ex:Oxygen", INCREMENTAL % "ex:Sensor", JOINED]
    fast = [QueryEvaluator(compile_query(t), store, QueryOptions(entailment="rdfs"), shared=shared, groups=groups)
            for t in texts]
    assert [e.r2r.kind for e in fast] == ["incremental"] * 3 + ["joined"]
    assert fast[0].r2r.ranges.group is not None and \
        fast[0].r2r.ranges.group is fast[1].r2r.ranges.group is fast[2].r2r.ranges.group
    changes = {20: b"PREFIX ex: <http://example.org/> PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> "
                   b"INSERT DATA { ex:Thermo rdfs:subClassOf ex:Gas . ex:sensor2 a ex:Pt100 }",
               40: b"PREFIX ex: <http://example.org/> PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> "
                   b"DELETE DATA { ex:Oxygen rdfs:subClassOf ex:Gas }"}
    seen = []
    for k, element in enumerate(elements):
        publish(store, [element], first=k)
        if k in changes:
            store.background.update(changes[k].decode())
        if k % 5 == 4:
            instant = T0 + (k + 1) * S // 10
            plain = [QueryEvaluator(compile_query(t), store, QueryOptions.all_off(entailment="rdfs")) for t in texts]
            for f, p in zip(fast, plain):
                got, want = (sorted(tuple(sorted(r.items())) for r in e.evaluate(instant).rows) for e in (f, p))
                assert got == want
                seen.append(len(got))
    assert any(seen) and store.entailment.materialised > 0
    assert store.late_count(STREAM) == 0
    # After the change at 40, an oxygen sensor is no gas sensor: the last evaluation says so.
    last = QueryEvaluator(compile_query(INCREMENTAL % "ex:Gas"), store, QueryOptions(entailment="rdfs"))
    rows_now = last.evaluate(T0 + 60 * S // 10).rows
    assert rows_now and all(int(r["o"][len("<http://example.org/o"):-1]) % 4 in (0, 2) for r in rows_now)


def test_closures_go_with_their_elements_and_with_their_schema():
    store = sensors_store([sensor_element(k, "Galvanic", k) for k in range(10)])
    evaluator = QueryEvaluator(compile_query(GAS), store, QueryOptions(entailment="rdfs"))
    assert len(evaluator.evaluate(T0 + 1 * S).rows) == 10
    assert store.entailment.held() == 10
    publish(store, [sensor_element(10, "Galvanic", 10)], first=10)      # closed as it is published
    assert store.entailment.held() == 11
    store.evict_before(STREAM, T0 + S // 2)
    assert store.entailment.held() == 6
    closure_graphs = [g for g in store.oxigraph.named_graphs() if g.value.startswith(CLOSURE_PREFIX)]
    assert len(closure_graphs) == 7          # six elements', the background's
    store.background.update("INSERT DATA { <http://example.org/x> <http://www.w3.org/2000/01/rdf-schema#subClassOf> "
                            "<http://example.org/y> }")
    assert len(evaluator.evaluate(T0 + 2 * S).rows) == 6
    assert store.entailment.held() == 6      # made again under the new schema; the old ones gone
    assert len([g for g in store.oxigraph.named_graphs() if g.value.startswith(CLOSURE_PREFIX)]) == 7


def test_an_on_disk_store_opened_again_drops_its_closure_graphs(tmp_path):
    store = StreamStore(str(tmp_path / "store"))
    store.background.load(SENSORS.encode(), ox.RdfFormat.TURTLE, "schema")
    publish(store, [sensor_element(0, "Galvanic", 1)])
    assert len(QueryEvaluator(compile_query(GAS), store, QueryOptions(entailment="rdfs")).evaluate(T0 + S).rows) == 1
    store.close()
    store = StreamStore(str(tmp_path / "store"))
    assert not [g for g in store.oxigraph.named_graphs() if g.value.startswith(CLOSURE_PREFIX)]
    assert store.background.graphs() == []
    assert len(QueryEvaluator(compile_query(GAS), store, QueryOptions(entailment="rdfs")).evaluate(T0 + S).rows) == 1
    store.close()


def test_a_background_change_waits_for_the_evaluations_reading_it():
    store = sensors_store([])
    reading, release, changed = threading.Event(), threading.Event(), threading.Event()

    def evaluation():
        with store.background.reading():
            reading.set()
            release.wait(10)

    def change():
        store.background.update("INSERT DATA { <http://example.org/a> <http://example.org/b> <http://example.org/c> }")
        changed.set()
    threads = [threading.Thread(target=evaluation)]
    threads[0].start()
    assert reading.wait(10)
    version = store.background.version
    threads.append(threading.Thread(target=change))
    threads[1].start()
    assert not changed.wait(0.2)             # held back while the evaluation reads
    assert store.background.version == version
    release.set()
    assert changed.wait(10)
    for t in threads:
        t.join(10)
    assert store.background.version == version + 1


def test_check_shows_what_entailment_does_to_the_query(tmp_path, capsys):
    import json

    from rspstar.endpoint.cli import main
    query = tmp_path / "q.rq"
    query.write_text(GAS)
    assert main(["check", str(query), "--option", "entailment=rdfs"]) == 0
    checked = json.loads(capsys.readouterr().out)
    assert any("VALUES (?g ?__rsp1) { $closures(<http://example.org/w>) }" in line for line in checked["sparql"])
    assert checked["incremental"] == "http://example.org/w"
    assert checked["entailment"][0].startswith("rdfs (rules 2, 3, 5, 7, 9, 11) over the schema S of the background "
                                               "default graph")
    assert "kept per schema" in checked["entailment"][-1]
    assert main(["check", str(query)]) == 0
    assert "entailment" not in json.loads(capsys.readouterr().out)


def test_the_schema_of_a_query_with_from_graphs_is_theirs():
    store = StreamStore()
    store.background.load(b"""PREFIX ex: <http://example.org/> PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
        GRAPH ex:schema { ex:Oxygen rdfs:subClassOf ex:Gas . ex:s9 a ex:Oxygen }
        ex:Thermo rdfs:subClassOf ex:Gas .""", ox.RdfFormat.TRIG, "bg")
    publish(store, [sensor_element(0, "Oxygen", 1), sensor_element(1, "Thermo", 2)])
    text = GAS.replace("SELECT ?o ?v", "SELECT ?o ?v ?gas FROM <http://example.org/schema>").replace(
        "?o ex:value ?v } } }", "?o ex:value ?v } } OPTIONAL { ?gas a ex:Gas } }")
    got = QueryEvaluator(compile_query(text), store, QueryOptions(entailment="rdfs")).evaluate(T0 + S).rows
    assert got == [{"o": "<http://example.org/o0>", "v": '"1"^^<http://www.w3.org/2001/XMLSchema#integer>',
                    "gas": "<http://example.org/s9>"}]
    plain = QueryEvaluator(compile_query(GAS), store, QueryOptions(entailment="rdfs")).evaluate(T0 + S).rows
    assert [r["o"] for r in plain] == ["<http://example.org/o1>"]


def test_elements_are_closed_as_they_are_published_while_evaluations_read_their_schema():
    from rspstar.store.entailment import IDLE_EVICTIONS
    store = sensors_store([sensor_element(0, "Galvanic", 0)])
    evaluator = QueryEvaluator(compile_query(GAS), store, QueryOptions(entailment="rdfs"))
    assert evaluator.evaluate(T0 + S).rows and store.entailment.held() == 1
    publish(store, [sensor_element(1, "Galvanic", 1)], first=1)
    assert store.entailment.held() == 2                 # closed at publication
    last = IDLE_EVICTIONS + 4
    for k in range(2, last):                            # no evaluation reads the schema meanwhile
        publish(store, [sensor_element(k, "Galvanic", k)], first=k)
        store.evict_before(STREAM, T0 + k * S // 10)
    held = store.entailment.held()
    publish(store, [sensor_element(last, "Galvanic", 1)], first=last)
    assert store.entailment.held() == held              # no more
    assert len(evaluator.evaluate(T0 + (last // 10 + 1) * S).rows) == 2     # the last two, closed now
    publish(store, [sensor_element(last + 1, "Galvanic", 1)], first=last + 1)
    assert store.entailment.held() == held + 2          # read again: closed at publication again


def test_a_property_under_rdf_type_gives_its_objects_superclasses_in_elements_and_in_the_background():
    schema = {(iri("p0"), iri(SUBPROPERTY), iri(TYPE)), (iri("C0"), iri(SUBCLASS), iri("C1"))}
    background = {(iri("a0"), iri("p0"), iri("C0"))}
    graph = {(iri("a1"), iri("p0"), iri("C0"))}
    store = store_with(schema, background, [graph])
    assert sorted(rows(store, BACKGROUND_TRIPLES, entailment="rdfs")) == sorted(ntriples_rows(naive_closure(schema | background)))
    assert (iri("a0"), iri(TYPE), iri("C1")) in naive_closure(schema | background)
    assert sorted(rows(store, ALL_TRIPLES, entailment="rdfs")) == sorted(
        ("<%se0>" % EX, *t) for t in ntriples_rows(expected_element(graph, schema)))
    assert (iri("a1"), iri(TYPE), iri("C1")) in expected_element(graph, schema)


@pytest.mark.parametrize("pattern, options", [
    ("GRAPH ex:e0 { ?s a ex:Gas }", {}),                                  # an element named in the query
    ("?s a ex:Gas", {"window_default_graph": "union"}),                   # the window's merged content
    ("GRAPH ?g { ?s a ex:Gas }", {"window_default_graph": "union"}),
])
def test_every_way_a_window_reads_its_elements_reads_their_closures(pattern, options):
    store = sensors_store([sensor_element(0, "Galvanic", 1), sensor_element(1, "Thermo", 2)])
    text = """PREFIX ex: <http://example.org/>
    SELECT ?s FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S STEP PT1S] WHERE { WINDOW ex:w { %s } }""" % pattern
    got = QueryEvaluator(compile_query(text), store, QueryOptions(entailment="rdfs", **options)).evaluate(T0 + S).rows
    assert got == [{"s": "<http://example.org/sensor0>"}]
    assert QueryEvaluator(compile_query(text), store, QueryOptions(**options)).evaluate(T0 + S).rows == []


def test_a_csparql_query_reads_its_merged_windows_through_their_closures():
    store = sensors_store([sensor_element(0, "Galvanic", 1), sensor_element(1, "Thermo", 2)])
    query = compile_query("""REGISTER QUERY q AS PREFIX ex: <http://example.org/>
    SELECT ?s FROM STREAM <http://example.org/s> [RANGE 2s STEP 1s] WHERE { ?s a ex:Gas }""")
    assert query.dialect == "csparql"
    assert QueryEvaluator(query, store, QueryOptions(entailment="rdfs")).evaluate(T0 + S).rows == [
        {"s": "<http://example.org/sensor0>"}]
    assert QueryEvaluator(query, store, QueryOptions()).evaluate(T0 + S).rows == []


def test_a_closure_past_its_limit_fails_the_evaluation_that_reads_it_and_nothing_else():
    from rspstar.endpoint.engine.clock import VirtualClock
    from rspstar.endpoint.engine.runner import EngineConfig, Runner
    chain = {(iri("K%d" % k), iri(SUBCLASS), iri("K%d" % (k + 1))) for k in range(40)}    # 820 with its closure
    store = store_with(set(), set(), [])
    runner = Runner(store, VirtualClock(T0), EngineConfig(max_delay=0, max_entailed_triples=500))
    runner.register(GAS, "entailed", options={"entailment": "rdfs"})
    runner.register(GAS, "plain")
    publish(store, [sensor_element(0, "Galvanic", 1)])
    runner.clock.set(T0 + S)
    runner.tick()                                   # reads the schema: elements are closed as published
    assert runner.get("entailed").status.evaluations == 1
    deferred = store.entailment.deferred
    publish(store, [chain | sensor_element(1, "Galvanic", 1)], first=1)      # published all the same
    assert store.elements_in(STREAM, T0, T0 + S) == [EX + "e0", EX + "e1"]
    # Its closure is Python's (it states schema triples): left to the evaluation that reads it.
    assert store.entailment.deferred == deferred + 1
    runner.clock.set(T0 + 2 * S)
    runner.tick()
    entailed, plain = runner.get("entailed").status, runner.get("plain").status
    assert entailed.state == "failed" and "past 500 triples" in entailed.last_error
    assert "max_entailed_triples" in entailed.last_error
    assert plain.state == "running" and plain.evaluations == 2
