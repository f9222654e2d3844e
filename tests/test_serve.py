"""`rspstar serve`'s pieces that run without Spark: the embedded default configuration and
its example queries, and the console progress line."""
import pytest

from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.config import DEFAULT_CONFIG, ConfigError, load_config, register_configured
from rspstar.endpoint.engine.runner import Runner, EngineConfig
from rspstar.endpoint import serve as serve_module
from rspstar.endpoint.serve import progress_line, progress_reporter, write_token
from rspstar.store.stream_store import StreamStore
from rspstar.translator.temporal import parse_instant

T0 = parse_instant("2026-03-01T08:00:00Z")


def test_the_embedded_configuration_registers_every_example_query(tmp_path):
    config = load_config(DEFAULT_CONFIG, tmp_path / "engine")
    engine = Runner(StreamStore(), VirtualClock(T0), config.engine)
    assert register_configured(engine, config) == ["oxygen-warning", "tvs-warning", "homecare-low-emergency"]
    for name in config.settings.background.files:
        assert config.relative(name).is_file()
    assert config.engine.max_delay == 3_000_000


def test_the_progress_line_is_short_and_names_failed_queries():
    config = load_config(DEFAULT_CONFIG)
    engine = Runner(StreamStore(), VirtualClock(T0), EngineConfig())
    register_configured(engine, config)
    engine.get("tvs-warning").status.state = "failed"
    line = progress_line(engine)
    assert len(line) < 160, line
    assert line.endswith("oxygen-warning 0/0, tvs-warning 0/0 FAILED, homecare-low-emergency 0/0")


THRESHOLD_QUERY = ("PREFIX ex: <http://example.org/> SELECT ?o FROM NAMED WINDOW ex:w ON ex:s [RANGE PT10S STEP "
                   "PT10S] WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v FILTER(?v > %d) } } }")


def test_with_many_queries_the_progress_line_gives_totals_and_the_failed_ones():
    engine = Runner(StreamStore(), VirtualClock(T0), EngineConfig())
    for k in range(300):
        engine.register(THRESHOLD_QUERY % k, "q%d" % k)
    for k in (7, 8):
        engine.get("q%d" % k).status.state = "failed"
    line = progress_line(engine)
    assert len(line) < 160, line
    assert line.endswith("300 queries, 0/0 in all; FAILED: q7, q8")


def test_memory_is_given_back_at_the_progress_line_after_queries_were_removed():
    engine = Runner(StreamStore(), VirtualClock(T0), EngineConfig())
    trims = []
    report = progress_reporter(engine, lambda: trims.append(1))
    engine.register(THRESHOLD_QUERY % 0, "a")
    report()
    assert trims == []
    engine.remove("a")
    report()
    report()
    assert trims == [1]


def configured(tmp_path, text):
    path = tmp_path / "engine.toml"
    path.write_text(text)
    return load_config(path)


def test_a_write_token_is_made_once_at_the_first_start_unless_configured(tmp_path):
    config = load_config(DEFAULT_CONFIG)
    token = write_token(config, tmp_path)
    assert len(token) >= 32 and (tmp_path / "token").stat().st_mode & 0o077 == 0
    assert write_token(config, tmp_path) == token                    # the same after a restart
    assert write_token(configured(tmp_path, '[http]\ntoken = ""\n'), tmp_path) is None      # explicitly off
    assert write_token(configured(tmp_path, '[http]\ntoken = "chosen"\n'), tmp_path) == "chosen"


def test_the_recordings_budget_comes_from_the_configuration(tmp_path):
    config = load_config(DEFAULT_CONFIG)
    assert serve_module.recordings(config, tmp_path).max_bytes == 256 * 1024 * 1024
    assert serve_module.recordings(configured(tmp_path, "[recording]\nmax_bytes = 1024\n"), tmp_path).max_bytes == 1024
    assert serve_module.recordings(configured(tmp_path, "[recording]\nmax_bytes = 0\n"), tmp_path) is None
    for bad in ('"1GB"', "-1", "1.5", "true"):
        with pytest.raises(ConfigError, match=r"\[recording\]: max_bytes must be a whole number of bytes of at least 0"):
            configured(tmp_path, "[recording]\nmax_bytes = %s\n" % bad)


def test_the_quarantine_budget_comes_from_the_configuration(tmp_path):
    assert load_config(DEFAULT_CONFIG).settings.quarantine.max_bytes == 64 * 1024 * 1024
    with pytest.raises(ConfigError, match=r"\[quarantine\]: max_bytes must be a whole number of bytes"):
        configured(tmp_path, '[quarantine]\nmax_bytes = "lots"\n')


def test_only_configured_queries_deleted_by_a_user_are_remembered_across_restarts(tmp_path):
    config = load_config(DEFAULT_CONFIG, tmp_path / "engine")
    engine = Runner(StreamStore(), VirtualClock(T0), config.engine)
    register_configured(engine, config)
    text = engine.get("oxygen-warning").spec.text
    for k in range(50):                     # registered through the API and deleted: nothing to remember
        engine.register(text, "api-%d" % k)
        engine.remove("api-%d" % k)
    engine.remove("oxygen-warning")
    assert engine.removed_ids == {"oxygen-warning"}
    restarted = Runner(StreamStore(), VirtualClock(T0), config.engine)
    assert register_configured(restarted, config) == []          # restored, and the deleted one stays deleted
    assert sorted(q.id for q in restarted.queries()) == ["homecare-low-emergency", "tvs-warning"]
    # A deletion remembered for a query the configuration no longer has is forgotten.
    config.queries = [q for q in config.queries if q.id != "oxygen-warning"]
    register_configured(Runner(StreamStore(), VirtualClock(T0), config.engine), config)
    assert Runner(StreamStore(), VirtualClock(T0), config.engine).removed_ids == set()


def test_the_server_reports_its_port_as_a_number():
    import threading
    from flask import Flask
    from rspstar.endpoint.http.server import HttpServer
    server = HttpServer(Flask("x"), "127.0.0.1", 0, threads=2, connection_limit=10, idle_timeout=1,
                        request_timeout=1, max_body=1024)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert isinstance(server.port, int) and server.port > 0     # logged as %d at the start
    finally:
        server.shutdown()


def test_the_packaged_simulators_are_one_streaming_query_of_one_batch_every_two_seconds(tmp_path):
    # A micro-batch costs Spark's JVM about the same whatever its size: the two simulators share
    # a query (one trigger interval) and its batches come every 2 s (bench/out/NOTES.md#simulator-trigger).
    from rspstar.endpoint.serve import source_configs
    from rspstar.store.ingestion import _query_groups
    config = load_config(DEFAULT_CONFIG, tmp_path / "engine")
    groups = _query_groups(source_configs(config, tmp_path / "data"))
    assert sorted(groups) == ["homecare+tvs", "landing"]
    assert {source.trigger_seconds for source in groups["homecare+tvs"]} == {2}
    assert [source.trigger_seconds for source in groups["landing"]] == [1]


def test_each_kind_of_source_says_where_serve_places_it_and_which_takes_posts(tmp_path):
    # serve asks the kinds' table (store/ingestion.py SOURCE_KINDS) instead of naming kinds: a
    # files source lands under the data directory and takes POST /streams, an MQTT source lands
    # in DATA/mqtt/NAME, the others write nothing of their own.
    pytest.importorskip("pyspark")
    from rspstar.endpoint.serve import source_configs
    from rspstar.store.ingestion import SOURCE_KINDS
    (tmp_path / "q.toml").write_text('''
[[sources]]
name = "posted"
kind = "files"
stream = "http://example.org/s"
path = "landing"
[[sources]]
name = "sensors/kitchen"
kind = "mqtt"
topic = "sensors/#"
stream = "http://example.org/m"
[[sources]]
name = "tvs"
kind = "simulator"
''')
    data = tmp_path / "data"
    posted, mqtt, simulator = source_configs(load_config(tmp_path / "q.toml", data / "engine"), data)
    assert posted.path == str(data / "landing")
    assert mqtt.path.startswith(str(data / "mqtt")) and mqtt.path != str(data / "mqtt")
    assert simulator.path == "landing"        # the setting's default, unused by a simulator
    assert [name for name, kind in SOURCE_KINDS.items() if kind.receives_posts] == ["files"]
    assert source_configs(load_config(DEFAULT_CONFIG, tmp_path / "engine"), data)[-1].kind == "files"
