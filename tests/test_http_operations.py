"""The operations blueprint: health and metrics."""


from rspstar.endpoint.http import HttpSettings, create_app


def test_a_source_that_is_down_makes_health_503_and_shows_in_metrics(engine):
    sources = {"sim": {"active": True, "quarantined": {}}, "landing": {"active": False, "quarantined": {}}}
    client = create_app(engine, HttpSettings(), ingestion_status=lambda: sources).test_client()
    health = client.get("/health")
    assert health.status_code == 503
    assert health.get_json()["status"] == "degraded" and health.get_json()["sources_down"] == ["landing"]
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'rspstar_source_up{source="landing"} 0.0' in metrics and 'rspstar_source_up{source="sim"} 1.0' in metrics
    sources["landing"]["active"] = True
    assert client.get("/health").status_code == 200


def test_elements_that_came_after_their_instant_was_evaluated_show_per_query_in_status_and_metrics(engine, client):
    # Issue 43 (spec section 5): counted per query, in GET /queries/{id} and in /metrics.
    import pyoxigraph as ox
    from http_app import AUTH, RSPQL, S, T0
    from rspstar.store.rdf_input import Element, instant_literal

    def element(name, second):
        graph = "http://example.org/" + name
        return Element(graph, T0 + second * S, instant_literal(T0 + second * S),
                       [ox.Quad(ox.NamedNode(graph + "-o"), ox.NamedNode("http://example.org/v"), ox.Literal("1"),
                                ox.NamedNode(graph))])

    assert client.post("/queries", json={"id": "q", "query": RSPQL}, headers=AUTH).status_code == 201
    engine.clock.set(T0 + 4 * S)
    engine.tick()                                   # max_delay 0: :02 and :04 evaluated
    engine.store.add_elements("http://example.org/s", [element("late1", 1), element("late3", 3), element("on-time", 5)])
    assert client.get("/queries/q").get_json()["status"]["late_elements"] == 2
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'rspstar_query_late_elements_total{query="q"} 2.0' in metrics
    assert "# TYPE rspstar_query_late_elements_total counter" in metrics
