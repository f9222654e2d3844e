"""The continuous-query blueprint: registration, status, results and their parameters, server-sent events."""
import json

import pyoxigraph as ox
import pytest

from http_app import AUTH, RSPQL, S, STREAM, T0

S_IRI = "http://example.org/s"


def test_query_lifecycle_results_and_status(client, engine):
    created = client.post("/queries", query_string={"id": "q1"}, data=RSPQL,
                          content_type="application/sparql-query", headers=AUTH)
    assert created.status_code == 201 and created.headers["Location"] == "/queries/q1"
    engine.store.publish("http://example.org/s",
                         engine.store.documents.stage("http://example.org/s", STREAM, ox.RdfFormat.TRIG, "s").staged)
    engine.clock.set(T0 + 4 * S)
    engine.tick()
    described = client.get("/queries/q1").get_json()
    assert described["status"]["evaluations"] == 2 and described["windows"][0]["stream"] == "http://example.org/s"
    lines = client.get("/queries/q1/results").get_data(as_text=True).splitlines()
    assert [json.loads(l)["time"] for l in lines] == ["2026-03-01T08:00:02Z", "2026-03-01T08:00:04Z"]
    since = client.get("/queries/q1/results", query_string={"since": "2026-03-01T08:00:02Z", "limit": "5"})
    assert len(since.get_data(as_text=True).splitlines()) == 1
    assert client.get("/queries/q1/results", query_string={"since": "soon"}).status_code == 400
    assert client.get("/queries/q1/results", query_string={"limit": "-1"}).status_code == 400
    assert [q["id"] for q in client.get("/queries").get_json()["queries"]] == ["q1"]
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'rspstar_evaluations_total{query="q1"} 2.0' in metrics
    assert 'rspstar_ingested_elements_total{stream="http://example.org/s"} 1.0' in metrics
    assert client.delete("/queries/q1", headers=AUTH).status_code == 204
    assert client.get("/queries/q1").status_code == 404


def test_server_sent_events_carry_each_record(client, engine):
    client.post("/queries", query_string={"id": "q1"}, data=RSPQL, content_type="application/sparql-query",
                headers=AUTH)
    response = client.get("/queries/q1/events", buffered=False)
    assert response.mimetype == "text/event-stream"
    chunks = iter(response.response)
    assert next(chunks).startswith(b": subscribed")
    engine.clock.set(T0 + 2 * S)
    engine.tick()
    event = next(chunks).decode()
    # Its id is the evaluation's instant, which a client reconnecting sends as Last-Event-ID.
    assert event.startswith("id: 2026-03-01T08:00:02Z\nevent: result\ndata: ")
    assert json.loads(event.split("data: ", 1)[1])["time"] == "2026-03-01T08:00:02Z"
    response.close()


def test_results_parameters_are_checked(client):
    client.post("/queries", query_string={"id": "q1"}, data=RSPQL, content_type="application/sparql-query", headers=AUTH)
    for params in ({"limit": "²"}, {"limit": "9999999999999999999"}, {"since": ""}, {"limit": "-1"}):
        response = client.get("/queries/q1/results", query_string=params)
        assert response.status_code == 400, params
    assert client.get("/queries/q1/results", query_string={"limit": "1000000"}).status_code == 200


def test_limit_gives_the_latest_records_and_since_reads_on_from_an_instant_exclusive(client, engine):
    client.post("/queries", query_string={"id": "q1"}, data=RSPQL, content_type="application/sparql-query", headers=AUTH)
    engine.clock.set(T0 + 10 * S)
    engine.tick()

    def times(**params):
        body = client.get("/queries/q1/results", query_string=params).get_data(as_text=True)
        return [json.loads(line)["time"][17:19] for line in body.splitlines()]
    assert times() == ["02", "04", "06", "08", "10"]
    assert times(limit="2") == ["08", "10"]                      # the latest two, oldest first
    assert times(limit="0") == [] and times(limit="9") == ["02", "04", "06", "08", "10"]
    assert times(since="2026-03-01T08:00:04Z") == ["06", "08", "10"]      # after the instant, not at it
    assert times(since="2026-03-01T08:00:04Z", limit="2") == ["06", "08"]  # the next two: reading on misses none
    assert times(since="2026-03-01T08:00:03Z", limit="1") == ["04"]


def test_dialect_queries_register_over_http_with_errors_at_their_position(client):
    cqels = ("PREFIX ex: <http://example.org/>\n"
             "SELECT ?o WHERE { STREAM <http://example.org/s> [RANGE 2s] { ?o ex:p ?v } }")
    created = client.post("/queries", json={"id": "c", "query": cqels, "options": {"dialect": "cqels"}}, headers=AUTH)
    assert created.status_code == 201
    described = client.get("/queries/c").get_json()
    assert described["dialect"] == "cqels" and described["r2s"] == "ISTREAM"
    bad = client.post("/queries", query_string={"id": "d", "option": "dialect=cqels"},
                      data=cqels.replace("[RANGE 2s]", "[RANGE 2 s]"), content_type="application/sparql-query",
                      headers=AUTH)
    assert bad.status_code == 400
    assert (bad.get_json()["line"], bad.get_json()["column"]) == (2, 58)   # the unit apart from its number
    unknown = client.post("/queries", json={"query": cqels, "options": {"dialect": "esper"}}, headers=AUTH)
    assert unknown.status_code == 400 and "dialect" in unknown.get_json()["message"]


def test_a_query_that_cannot_run_partitioned_is_a_400_naming_the_rule(client):
    created = client.post("/queries", json={"id": "p", "query": RSPQL, "options": {"partition": "?o"}}, headers=AUTH)
    assert created.status_code == 400
    assert "partition rule 'window'" in created.get_json()["message"]
    bad = client.post("/queries", json={"id": "p", "query": RSPQL, "options": {"partition": "location"}}, headers=AUTH)
    assert bad.status_code == 400 and "takes a variable" in bad.get_json()["message"]
    assert client.get("/queries").get_json()["queries"] == []


def test_while_the_engine_starts_reads_are_answered_and_writes_wait(engine, tmp_path):
    from http_app import AUTH, RSPQL
    from rspstar.endpoint.http import HttpSettings, Readiness, create_app
    readiness = Readiness(ready=False)
    client = create_app(engine, HttpSettings(token="s3cret"), readiness=readiness).test_client()
    health = client.get("/health")
    assert health.status_code == 503 and health.get_json()["status"] == "starting"
    assert health.headers["Retry-After"] == "5"
    assert client.get("/queries").status_code == 200
    refused = client.post("/queries", data=RSPQL, content_type="application/sparql-query", headers=AUTH)
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "5"
    assert "starting" in refused.get_json()["message"]
    readiness.set()
    assert client.get("/health").get_json()["status"] == "ok"
    assert client.post("/queries", data=RSPQL, content_type="application/sparql-query", headers=AUTH).status_code == 201


def test_a_slow_subscriber_loses_its_oldest_records_counted_and_a_closed_feed_ends_it():
    import queue

    from rspstar.endpoint.engine.sinks import EventFeed, FeedClosed
    feed = EventFeed()
    subscription = feed.subscribe(backlog=3)
    for k in range(5):
        feed.publish({"k": k})
    assert subscription.dropped == 2 and [subscription.get(0)["k"] for _ in range(3)] == [2, 3, 4]
    with pytest.raises(queue.Empty):
        subscription.get(timeout=0.01)
    feed.publish({"k": 5})
    feed.close()
    assert subscription.get(0) == {"k": 5}          # what was published before the close is read first
    with pytest.raises(FeedClosed):
        subscription.get(0)
    with pytest.raises(FeedClosed):
        feed.subscribe().get(0)                     # a subscriber after the close hears of it at once


def test_a_query_that_skips_its_overrun_says_so_in_its_status_and_the_metrics(client, engine):
    created = client.post("/queries", json={"id": "q1", "query": RSPQL, "options": {"overrun": "skip"}}, headers=AUTH)
    assert created.status_code == 201
    engine.clock.set(T0 + 10 * S)                  # five instants due at once: the latest runs
    engine.tick()
    status = client.get("/queries/q1").get_json()["status"]
    assert status["evaluations"] == 1 and status["skipped_instants"] == 4
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'rspstar_query_skipped_instants_total{query="q1"} 4.0' in metrics
    assert 'rspstar_query_behind_seconds{query="q1"} 0.0' in metrics
    refused = client.post("/queries", json={"id": "q2", "query": RSPQL, "options": {"overrun": "later"}}, headers=AUTH)
    assert refused.status_code == 400 and "overrun takes catch-up or skip" in refused.get_json()["message"]


def test_answers_end_with_a_newline_so_a_terminal_shows_them_apart(client):
    # curl prints a body as it is: without a final newline the next output (or the prompt)
    # runs on from it.
    from http_app import SELECT
    created = client.post("/queries", query_string={"id": "q1"}, data=RSPQL, content_type="application/sparql-query",
                          headers=AUTH)
    posted = client.post("/streams", query_string={"stream": S_IRI}, data=STREAM, content_type="application/trig",
                         headers=AUTH)
    answers = [created, posted, client.get("/queries/q1"), client.get("/queries")]
    for accept in ("application/sparql-results+json", "application/sparql-results+xml", "text/csv"):
        answers.append(client.get("/sparql", query_string={"query": SELECT}, headers={"Accept": accept}))
    for answer in answers:
        assert answer.status_code in (200, 201, 202), answer.get_data(as_text=True)
        assert answer.get_data().endswith(b"\n"), (answer.request.path, answer.get_data()[-40:])


def test_a_query_without_a_window_is_refused_pointing_at_sparql(client):
    # Registered, it would never be evaluated: nothing closes, nothing arrives.
    for text in ("SELECT * WHERE { ?s ?p ?o }", RSPQL.split("SELECT")[0] + "ASK { ?s ?p ?o }",
                 "SELECT * WHERE { ?s ?p ?o }"):
        refused = client.post("/queries", data=text, content_type="application/sparql-query", headers=AUTH)
        assert refused.status_code == 400
        assert "no window, so it would never be evaluated" in refused.get_data(as_text=True)
        assert "/sparql" in refused.get_data(as_text=True)
    refused = client.post("/queries", json={"query": "SELECT * WHERE { ?s ?p ?o }", "options": {"report": "non-empty"}},
                          headers=AUTH)
    assert refused.status_code == 400
    assert client.get("/queries").get_json()["queries"] == []
    # With a period it is evaluated at fixed instants, over the background data.
    periodic = client.post("/queries", json={"id": "p", "query": "SELECT * WHERE { ?s ?p ?o }",
                                             "options": {"report": "periodic(PT5S)"}}, headers=AUTH)
    every = client.post("/queries", data="REGISTER RSTREAM <http://example.org/o> COMPUTED EVERY PT5S AS "
                                         "SELECT * WHERE { ?s ?p ?o }", content_type="application/sparql-query",
                        query_string={"id": "e"}, headers=AUTH)
    assert periodic.status_code == 201 and every.status_code == 201


def test_the_new_windows_are_described_at_registration_and_a_landmark_too_early_is_a_400(client, engine):
    landmark = ("PREFIX ex: <http://example.org/> SELECT (COUNT(*) AS ?n) FROM NAMED WINDOW ex:l ON ex:s "
                "[RANGE UNBOUNDED STEP PT1H] WHERE { WINDOW ex:l { GRAPH ?g { ?o ?p ?v } } }")
    created = client.post("/queries", query_string={"id": "landmark"}, data=landmark,
                          content_type="application/sparql-query", headers=AUTH)
    assert created.status_code == 201
    [window] = created.get_json()["windows"]
    assert window["kind"] == "landmark" and window["range"] == "UNBOUNDED" and "epoch" in window["explained"]
    assert client.get("/queries/landmark").get_json()["windows"] == [window]
    facts = ("PREFIX ex: <http://example.org/> SELECT ?u FROM NAMED WINDOW ex:f ON ex:s [FACTS { ?u ex:isIn ?r } "
             "SINCE { ?u ex:enter ?r } TILL { ?u ex:leave ?r }] WHERE { WINDOW ex:f { ?u ex:isIn ?r } }")
    described = client.post("/queries", query_string={"id": "facts"}, data=facts,
                            content_type="application/sparql-query", headers=AUTH).get_json()
    assert described["windows"][0]["kind"] == "facts" and "step" not in described["windows"][0]
    assert "whenever a fact opens or closes" in described["windows"][0]["explained"]
    # Elements of a stream no query reads are evicted after idle_retention; a landmark from
    # before what remains is refused, naming the oldest instant it can start from.
    engine.store.publish("http://example.org/t", engine.store.documents.stage(
        "http://example.org/t", STREAM.replace(b"example.org/s", b"example.org/t"), ox.RdfFormat.TRIG, "t").staged)
    engine.store.evict_before("http://example.org/t", T0 + 3 * S)
    refused = client.post("/queries", query_string={"id": "early"}, data=landmark.replace("ex:s ", "ex:t "),
                          content_type="application/sparql-query", headers=AUTH)
    assert refused.status_code == 400
    assert "oldest instant it can start from is 2026-03-01T08:00:03Z" in refused.get_data(as_text=True)


def test_an_unknown_rspu_function_or_a_wrong_arity_is_refused_at_registration(client):
    query = ("PREFIX rspu: <http://w3id.org/rsp/rspu#>\nSELECT * FROM NAMED WINDOW <http://w> ON <http://s> [RANGE PT1S]\n"
             "WHERE { WINDOW <http://w> { GRAPH ?g { ?s ?p ?o FILTER(%s > 0.5) } } }")
    for call, column in (("rspu:nothing(?o)", 56), ("rspu:add(?o)", 56)):
        refused = client.post("/queries", data=query % call, content_type="application/sparql-query", headers=AUTH)
        assert refused.status_code == 400, refused.get_json()
        assert (refused.get_json()["line"], refused.get_json()["column"]) == (3, column)
        assert "rspu:" in refused.get_json()["message"]
    assert client.get("/queries").get_json()["queries"] == []
    assert client.post("/queries", data=query % "rspu:add(?o, 1)", content_type="application/sparql-query",
                       headers=AUTH).status_code == 201


def test_one_client_holds_at_most_its_share_of_the_event_streams_and_an_idle_one_ends(engine):
    """Event streams are open to anyone and each holds a worker thread: one client address holds
    at most [http] max_event_streams_per_client of them (503 beyond, naming the setting), so a
    few clients cannot take every slot, and a stream that delivered nothing for [http]
    event_idle_seconds ends (`closed`, reason `idle`; a client reconnects)."""
    from rspstar.endpoint.http import HttpSettings, create_app
    client = create_app(engine, HttpSettings(token=None, max_event_streams=8, max_event_streams_per_client=2,
                                             event_keepalive=0.05, event_idle_seconds=0.3)).test_client()
    client.post("/queries", query_string={"id": "q1"}, data=RSPQL, content_type="application/sparql-query")
    first = client.get("/queries/q1/events", buffered=False)
    second = client.get("/queries/q1/events", buffered=False)
    assert first.status_code == second.status_code == 200
    third = client.get("/queries/q1/events", buffered=False)
    assert third.status_code == 503 and "max_event_streams_per_client" in third.get_json()["message"]
    assert third.headers["Retry-After"]
    other = client.get("/queries/q1/events", buffered=False, environ_base={"REMOTE_ADDR": "192.0.2.7"})
    assert other.status_code == 200
    other.close()
    events = b"".join(first.response).decode()      # ends by itself: nothing came for 0.3 s
    assert events.rstrip().endswith('event: closed\ndata: {"query": "q1", "reason": "idle"}')
    first.close()
    # Its slot is given back.
    again = client.get("/queries/q1/events", buffered=False)
    assert again.status_code == 200
    again.close()
    second.close()


def test_put_registers_under_its_id_leaves_the_same_query_running_and_replaces_another(client, engine):
    put = client.put("/queries/q1", data=RSPQL, content_type="application/sparql-query", headers=AUTH)
    assert put.status_code == 201 and put.headers["Location"] == "/queries/q1"
    # Relative IRIs resolve against /queries, as a POST's do.
    assert put.get_json()["options"]["base"] == "http://localhost/queries"
    engine.clock.set(T0 + 2 * S)
    engine.tick()
    again = client.put("/queries/q1", data=RSPQL, content_type="application/sparql-query", headers=AUTH)
    assert again.status_code == 200 and again.get_json()["status"]["evaluations"] == 1     # left as it ran
    other = RSPQL.replace("?o ?v", "?o")
    replaced = client.put("/queries/q1", data=other, content_type="application/sparql-query", headers=AUTH)
    assert replaced.status_code == 200 and replaced.get_json()["query"] == other
    assert replaced.get_json()["status"]["evaluations"] == 0
    # A bad text leaves the query that runs as it is.
    bad = client.put("/queries/q1", data="SELECT * WHERE { ?s ?p }", content_type="application/sparql-query",
                     headers=AUTH)
    assert bad.status_code == 400 and bad.get_json()["line"] == 1
    assert client.get("/queries/q1").get_json()["query"] == other
    assert [q["id"] for q in client.get("/queries").get_json()["queries"]] == ["q1"]


def test_put_takes_json_whose_id_is_the_urls_and_needs_the_token(client):
    mismatch = client.put("/queries/q1", json={"query": RSPQL, "id": "q2"}, headers=AUTH)
    assert mismatch.status_code == 400 and "the URL" in mismatch.get_json()["message"]
    assert client.put("/queries/q1", json={"query": RSPQL, "id": "q1"}, headers=AUTH).status_code == 201
    assert client.put("/queries/q1", data=RSPQL, content_type="application/sparql-query").status_code == 401
    assert client.put("/queries/no%20such", data=RSPQL, content_type="application/sparql-query",
                      headers=AUTH).status_code == 400


def test_a_sink_named_twice_or_an_option_given_as_a_number_is_a_400_through_post_and_put(client, engine):
    # Each record would be posted twice to the same receiver; a number is no option's value
    # (the OpenAPI document says strings, and JSON booleans for switches).
    twice = ["http://localhost:9/results", "http://localhost:9/results"]
    for send in (lambda body: client.post("/queries", json=body, headers=AUTH),
                 lambda body: client.put("/queries/q9", json=body, headers=AUTH)):
        answer = send({"query": RSPQL, "sinks": twice})
        assert answer.status_code == 400 and "named twice" in answer.get_json()["message"]
        answer = send({"query": RSPQL, "options": {"rspu_cache": 1}})
        assert answer.status_code == 400 and "boolean" in answer.get_json()["message"]
    assert engine.queries() == []
    switched = client.put("/queries/q9", json={"query": RSPQL, "options": {"rspu_cache": False}}, headers=AUTH)
    assert switched.status_code == 201 and switched.get_json()["options"]["rspu_cache"] == "false"


def test_a_json_body_with_a_key_the_route_does_not_take_is_a_400_naming_it(client, engine):
    for send, url in ((client.post, "/queries"), (client.put, "/queries/q9")):
        answer = send(url, json={"query": RSPQL, "option": {"report": "non-empty"}}, headers=AUTH)
        assert answer.status_code == 400 and '"option"' in answer.get_json()["message"]
    assert engine.queries() == []
