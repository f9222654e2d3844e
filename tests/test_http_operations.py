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
