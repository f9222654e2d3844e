"""Fact windows `[FACTS { template } SINCE { P } TILL { Q } STEP β]` (spec §6.13): seed 004's
Q9, the annotation, SINCE and TILL in stream order, the earliest opening kept, TILL closing
through the shared variables, closes with and without STEP, the facts as query state across a
restart, and the TEF-SPARQL text refused with the RSP-QL* form."""
import pyoxigraph as ox
import pytest

from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.engine.runner import EngineConfig, Runner
from rspstar.store.rdf_input import Element, instant_literal
from rspstar.store.stream_store import StreamStore
from rspstar.translator.errors import QuerySyntaxError
from rspstar.translator.model import FactWindow
from rspstar.translator.parser import parse_query
from rspstar.translator.temporal import parse_instant
from rspstar.translator.validate import compile_query

S = 1_000_000
T0 = parse_instant("2026-03-01T08:00:00Z")
EX = "http://example.org/"
INTEGER = '"%d"^^<http://www.w3.org/2001/XMLSchema#integer>'
PREFIXES = ("PREFIX : <http://example.org/>\nPREFIX ex: <http://example.org/>\nPREFIX rspstar: <https://w3id.org/rspstar#>\n"
            "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n")
PRESENCE = "[FACTS { ?user :isIn ?room } SINCE { ?user :enter ?room } TILL { ?user :leave ?room }%s]"
COUNT = (PREFIXES + "SELECT ?room (COUNT(?user) AS ?people)\nFROM NAMED WINDOW ex:presence ON ex:fb %s\n"
         "WHERE { WINDOW ex:presence { ?user :isIn ?room } } GROUP BY ?room")
LIST = (PREFIXES + "SELECT ?user ?room ?since\nFROM NAMED WINDOW ex:presence ON ex:fb %s\n"
        "WHERE { WINDOW ex:presence { ?user :isIn ?room {| rspstar:since ?since |} } }")
# Seed 004 Q9: Axel enters A at 2, Darko enters A at 3, Axel leaves A and enters B at 6, Darko
# leaves A and enters B at 8 (one element per event).
SEED = [(2, "Axel", "enter", "RoomA"), (3, "Darko", "enter", "RoomA"), (6, "Axel", "leave", "RoomA"),
        (6, "Axel", "enter", "RoomB"), (8, "Darko", "leave", "RoomA"), (8, "Darko", "enter", "RoomB")]


class Events:
    def __init__(self, store: StreamStore):
        self.store = store
        self.n = 0

    def add(self, second: float, *triples) -> None:
        self.n += 1
        graph = EX + "e%d" % self.n
        t = T0 + int(second * S)
        quads = [ox.Quad(ox.NamedNode(EX + s), ox.NamedNode(EX + p), ox.NamedNode(EX + o), ox.NamedNode(graph))
                 for s, p, o in triples]
        self.store.add_elements(EX + "fb", [Element(graph, t, instant_literal(t), quads)])


def run(text, events, until, step=1.0, options=None, engine=None, clock=None, query_id="q"):
    store = engine.store if engine else StreamStore()
    clock = clock or VirtualClock(T0)
    engine = engine or Runner(store, clock)
    registered = engine.register(text, query_id, options=options or {})
    feed = Events(store)
    pending = sorted(events, key=lambda e: e[0])
    t = clock.now()
    while t < T0 + until * S:
        t += int(step * S)
        while pending and T0 + pending[0][0] * S <= t:
            second, *triples = pending.pop(0)
            feed.add(second, *triples)
        store.advance_watermark(EX + "fb", t + 1)
        clock.set(t)
        engine.tick()
    return registered


def seed_events():
    return [(second, (user, verb, room)) for second, user, verb, room in SEED]


def rooms(record):
    return sorted((row["room"].rsplit("/", 1)[-1][:-1], int(row["people"].split('"')[1])) for row in record["bindings"])


def test_seed_004_q9_counts_people_per_room_every_3_seconds():
    # Spec 6.13: counting per room every 3 s from 0 gives A 2 at 3; A 1 and B 1 at 6; B 2 at 9.
    text = COUNT % (PRESENCE % ' STEP PT3S START "2026-03-01T08:00:00Z"^^xsd:dateTime')
    registered = run(text, seed_events(), 10)
    history = registered.history.since()
    assert [r["time"][-3:] for r in history] == ["03Z", "06Z", "09Z"]
    assert [rooms(r) for r in history] == [[("RoomA", 2)], [("RoomA", 1), ("RoomB", 1)], [("RoomB", 2)]]
    assert history[0]["windows"] == {EX + "presence": ["2026-03-01T08:00:03Z", "2026-03-01T08:00:03Z"]}


def test_without_step_it_closes_where_a_fact_opens_or_closes_and_annotates_each_with_its_start():
    registered = run(LIST % (PRESENCE % ""), seed_events() + [(9, ("Axel", "enter", "RoomB"))], 12)
    history = registered.history.since()
    # A SINCE that opens nothing new (Axel enters B again at 9) triggers nothing.
    assert [r["time"][-3:] for r in history] == ["02Z", "03Z", "06Z", "08Z"]
    last = sorted((r["user"], r["room"], r["since"]) for r in history[-1]["bindings"])
    stamp = '"2026-03-01T08:00:0%dZ"^^<http://www.w3.org/2001/XMLSchema#dateTime>'
    assert last == [("<%sAxel>" % EX, "<%sRoomB>" % EX, stamp % 6), ("<%sDarko>" % EX, "<%sRoomB>" % EX, stamp % 8)]


def test_the_earliest_opening_is_kept_and_a_till_that_closes_nothing_triggers_nothing():
    events = [(1, ("Axel", "enter", "RoomA")), (3, ("Axel", "enter", "RoomA")), (4, ("Darko", "leave", "RoomA")),
              (5, ("Axel", "leave", "RoomA")), (7, ("Axel", "enter", "RoomA"))]
    registered = run(LIST % (PRESENCE % ""), events, 9)
    history = registered.history.since()
    assert [r["time"][-3:] for r in history] == ["01Z", "05Z", "07Z"]
    assert [r["since"][1:21] for r in history[0]["bindings"]] == ["2026-03-01T08:00:01Z"]
    assert history[1]["bindings"] == []
    # Reopened after it closed: a new fact, since its new opening.
    assert [r["since"][1:21] for r in history[2]["bindings"]] == ["2026-03-01T08:00:07Z"]


def test_till_closes_what_it_binds_through_the_variables_it_shares_with_the_template():
    # TILL shares only ?user: leaving the building closes every room the user is in.
    text = LIST % "[FACTS { ?user :isIn ?room } SINCE { ?user :enter ?room } TILL { ?user :exits ?building }]"
    events = [(1, ("Axel", "enter", "RoomA")), (1, ("Axel", "enter", "RoomB")), (2, ("Darko", "enter", "RoomA")),
              (4, ("Axel", "exits", "Hall"))]
    history = run(text, events, 6).history.since()
    assert sorted(r["user"] for r in history[-1]["bindings"]) == ["<%sDarko>" % EX]
    assert history[-1]["time"][-3:] == "04Z"


def test_since_and_till_in_one_element_open_then_close_in_stream_order():
    events = [(1, ("Axel", "enter", "RoomA"), ("Axel", "leave", "RoomA")), (2, ("Darko", "enter", "RoomA"))]
    history = run(LIST % (PRESENCE % ""), events, 4).history.since()
    assert [sorted(r["user"] for r in rec["bindings"]) for rec in history] == [[], ["<%sDarko>" % EX]]


def test_equal_timestamps_are_read_in_arrival_order():
    # Leave then enter at the same instant, in that arrival order: in the room since 5.
    events = [(1, ("Axel", "enter", "RoomA")), (5, ("Axel", "leave", "RoomA")), (5, ("Axel", "enter", "RoomA"))]
    history = run(LIST % (PRESENCE % ""), events, 6).history.since()
    assert [r["since"][1:21] for r in history[-1]["bindings"]] == ["2026-03-01T08:00:05Z"]


def test_the_open_facts_survive_a_restart_and_a_fresh_registration_starts_with_none(tmp_path):
    text = COUNT % (PRESENCE % " STEP PT3S")
    store = StreamStore(str(tmp_path / "store"))
    clock = VirtualClock(T0)
    engine = Runner(store, clock, EngineConfig(data_dir=tmp_path / "data"))
    run(text, seed_events()[:2], 4, engine=engine, clock=clock)
    assert [rooms(r) for r in engine.get("q").history.since()] == [[("RoomA", 2)]]
    engine.close()
    store.close()
    store = StreamStore(str(tmp_path / "store"))
    engine = Runner(store, clock, EngineConfig(data_dir=tmp_path / "data"))
    saved = engine.get("q").evaluator.query_state()["facts"][EX + "presence"]
    assert len(saved["facts"]) == 2 and saved["read_through"] == T0 + 3 * S
    feed = Events(store)
    for second, triple in seed_events()[2:4]:
        feed.add(second, triple)
    store.advance_watermark(EX + "fb", T0 + 7 * S)
    clock.set(T0 + 6 * S)
    engine.tick()
    assert rooms(engine.get("q").history.since()[-1]) == [("RoomA", 1), ("RoomB", 1)]
    # Its facts are in a graph of their own that no background pattern sees.
    assert store.background.graphs() == []
    engine.remove("q")
    fresh = engine.register(text, "q")
    clock.set(T0 + 9 * S)
    store.advance_watermark(EX + "fb", T0 + 10 * S)
    engine.tick()
    assert fresh.history.since()[-1]["bindings"] == []
    engine.close()
    store.close()


def test_the_facts_state_is_restored_into_an_in_memory_store_too(tmp_path):
    text = COUNT % (PRESENCE % " STEP PT3S")
    clock = VirtualClock(T0)
    engine = Runner(StreamStore(), clock, EngineConfig(data_dir=tmp_path))
    run(text, seed_events()[:2], 4, engine=engine, clock=clock)
    engine.close()
    engine = Runner(StreamStore(), clock, EngineConfig(data_dir=tmp_path))   # the elements are gone
    clock.set(T0 + 6 * S)
    engine.store.advance_watermark(EX + "fb", T0 + 7 * S)
    engine.tick()
    assert rooms(engine.get("q").history.since()[-1]) == [("RoomA", 2)]


def test_the_fact_window_is_described_and_its_template_checked():
    q = compile_query(COUNT % (PRESENCE % " STEP PT3S"))
    w = q.windows[EX + "presence"]
    assert isinstance(w, FactWindow) and w.template_variables() == ["user", "room"]
    described = w.describe()
    assert described["kind"] == "facts" and described["step"] == "PT3S" and "rspstar:since" in described["explained"]
    for bad, message in [
        ("[FACTS { } SINCE { ?u :enter ?r } TILL { ?u :leave ?r }]", "holds no triple"),
        ("[FACTS { _:b :isIn ?r } SINCE { ?u :enter ?r } TILL { ?u :leave ?r }]", "variable or an IRI"),
        ("[FACTS { ?u :isIn ?r {| :a :b |} } SINCE { ?u :enter ?r } TILL { ?u :leave ?r }]", "no annotation"),
        ("[FACTS { ?u :isIn ?r } SINCE { GRAPH ?g { ?u :enter ?r } } TILL { ?u :leave ?r }]", "GRAPH inside SINCE"),
        ("[FACTS { ?u :isIn ?r } SINCE { ?u :enter ?r }]", "expected TILL"),
        ("[FACTS { ?u :isIn ?r } SINCE { ?u :enter ?r } TILL { ?u :leave ?r } START \"2026-03-01T08:00:00Z\"^^xsd:dateTime]",
         "START needs STEP"),
        ("[FACTS { ?u :isIn ?r } SINCE { ?u :enter ?r FILTER(?u >) } TILL { ?u :leave ?r }]", "SINCE"),
    ]:
        with pytest.raises(QuerySyntaxError) as e:
            compile_query(COUNT % bad)
        assert message in e.value.message, e.value.message
        assert e.value.line == 6


TEF = """PREFIX : <http://example.org/>
CONSTRUCT FACT UserFact  {?user :isIn ?room}
(UNION
         (SINCE   ?user :enter ?room)
         (TILL  ?user :leave ?room)
)"""


def test_the_tef_sparql_text_is_refused_with_the_rsp_ql_form():
    with pytest.raises(QuerySyntaxError) as e:
        compile_query(TEF)
    assert (e.value.line, e.value.column) == (2, 11)
    assert "[FACTS { ?user :isIn ?room } SINCE { ?user :enter ?room } TILL { ?user :leave ?room } STEP PT3S]" \
        in e.value.message
    counting = ("SELECT ?room AS ROOM, ?user as USER (AGGREGATE ? room, COUNT ?user\n"
                "         WHERE (CURRENT ?user isIn ? room)\n         GROUP BY ? room\n"
                '         EVERY  "P3SEC"^^xsd:Duration)')
    with pytest.raises(QuerySyntaxError) as e:
        parse_query("SELECT ?room WHERE (CURRENT ?user :isIn ?room)")
    assert "FACTS" in e.value.message
    with pytest.raises(QuerySyntaxError) as e:
        parse_query(counting)
    assert (e.value.line, e.value.column) == (2, 17) and "[FACTS {" in e.value.message


def test_a_replay_starts_with_no_fact_at_from(tmp_path):
    from rspstar.endpoint.engine.replay import Replay, ReplayInput
    lines = ["@prefix : <http://example.org/> .", "@prefix prov: <http://www.w3.org/ns/prov#> .",
             "@prefix xsd: <http://www.w3.org/2001/XMLSchema#> ."]
    for n, (second, (user, verb, room)) in enumerate(seed_events()):
        lines.append(':e%d prov:generatedAtTime "2026-03-01T08:00:%02dZ"^^xsd:dateTime . :e%d { :%s :%s :%s }'
                     % (n, second, n, user, verb, room))
    (tmp_path / "fb.trig").write_text("\n".join(lines) + "\n")
    text = COUNT % (PRESENCE % ' STEP PT3S START "2026-03-01T08:00:00Z"^^xsd:dateTime')
    # From 08:00:03: Axel's and Darko's entries into A (at 2 and 3) are before it, so nobody is
    # in A; their later leaves close nothing, their entries into B open.
    replay = Replay(ReplayInput.single(text, [(EX + "fb", tmp_path / "fb.trig")], T0 + 3 * S, T0 + 10 * S))
    records = [record for _, record in replay.run()]
    assert [(r["time"][-3:], rooms(r)) for r in records] == [("06Z", [("RoomB", 1)]), ("09Z", [("RoomB", 2)])]
