"""The TOML configuration: its settings, registration of configured queries, and errors that
name the file and key."""
import pytest

from rspstar.endpoint.clock import VirtualClock
from rspstar.endpoint.config import ConfigError, load_config, register_configured
from rspstar.endpoint.engine import Engine
from rspstar.store.stream_store import StreamStore
from rspstar.translator.partition import PartitionKey
from rspstar.translator.temporal import parse_instant

T0 = parse_instant("2026-03-01T08:00:00Z")
QUERY = """PREFIX ex: <http://example.org/>
SELECT ?o FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S] WHERE { WINDOW ex:w { GRAPH ?g { ?o ?p ?v } } }
"""


def test_queries_registered_from_config(tmp_path):
    (tmp_path / "q.rq").write_text(QUERY)
    (tmp_path / "engine.toml").write_text('''
[engine]
max_delay = "PT0.5S"
history = 10
[sinks]
allowed = ["http://localhost:9000"]
[[queries]]
id = "from-config"
file = "q.rq"
sinks = ["http://localhost:9000/results"]
options = { report = "non-empty" }
''')
    config = load_config(tmp_path / "engine.toml", data_dir=tmp_path / "data")
    assert config.engine.max_delay == 500_000
    engine = Engine(StreamStore(), VirtualClock(T0), config.engine)
    assert register_configured(engine, config) == ["from-config"]
    q = engine.get("from-config")
    assert q.spec.options == {"report": "non-empty"} and q.evaluator.options.report == "non-empty"
    # After a restart the query comes back from the data directory, not twice from config.
    again = Engine(StreamStore(), VirtualClock(T0), config.engine)
    assert register_configured(again, config) == []
    assert [x.id for x in again.queries()] == ["from-config"]


def test_a_query_written_in_a_dialect_registers_from_config(tmp_path):
    (tmp_path / "cqels.rq").write_text("PREFIX ex: <http://example.org/>\n"
                                       "SELECT ?o WHERE { STREAM ex:s [RANGE 2s] { ?o ?p ?v } }")
    (tmp_path / "engine.toml").write_text('''
[[queries]]
id = "cqels"
file = "cqels.rq"
options = { dialect = "cqels", start = "2026-03-01T08:00:01Z" }
''')
    config = load_config(tmp_path / "engine.toml", data_dir=tmp_path / "data")
    engine = Engine(StreamStore(), VirtualClock(T0), config.engine)
    assert register_configured(engine, config) == ["cqels"]
    query = engine.get("cqels").query
    assert query.dialect == "cqels" and query.windows["http://example.org/s"].start == T0 + 1_000_000


@pytest.mark.parametrize("toml,query,fragment", [
    ('[engine]\nmax_delay = "soon"\n', None, "max_delay"),
    ('[engine]\nhistory_bytes = "4 MiB"\n', None, "history_bytes must be a whole number"),
    ('[engine]\nhistory = 0\n', None, "history must be a whole number of at least 1"),
    ('[engine]\nmax_elements = 1.5\n', None, "max_elements must be"),
    ('[[queries]]\nid = "x"\n', None, 'needs file'),
    ('[[queries]]\nfile = "missing.rq"\n', None, "cannot read"),
    ('[engine\n', None, "engine.toml"),
    ('[[queries]]\nfile = "bad.rq"\n', "SELECT * WHERE { ?s ?p }", "bad.rq:1:"),
    ('[[queries]]\nfile = "ok.rq"\nsinks = ["http://evil.test/"]\n', QUERY, "not in the allow-list"),
    ('[partition_keys]\n"http://example.org/s" = "hasFeatureOfInterest"\n', None,
     "[partition_keys]: http://example.org/s: partition key 'hasFeatureOfInterest'"),
    ('[[queries]]\nfile = "ok.rq"\noptions = { partition = "?o" }\n', QUERY,
     "ok.rq: partition rule 'window': stream <http://example.org/s>"),
])
def test_bad_configuration_names_file_and_key(tmp_path, toml, query, fragment):
    if query is not None:
        (tmp_path / ("bad.rq" if "bad" in toml else "ok.rq")).write_text(query)
    (tmp_path / "engine.toml").write_text(toml)
    with pytest.raises(ConfigError, match=fragment.replace("[", r"\[")):
        config = load_config(tmp_path / "engine.toml", data_dir=tmp_path / "data")
        register_configured(Engine(StreamStore(), VirtualClock(T0), config.engine), config)


def test_partition_keys_from_config_let_a_query_run_partitioned(tmp_path):
    (tmp_path / "q.rq").write_text(QUERY.replace("?o ?p ?v", "?o ex:p ?v"))
    (tmp_path / "engine.toml").write_text('''
[partition_keys]
"http://example.org/s" = "^<http://example.org/p>"
[[queries]]
id = "per-subject"
file = "q.rq"
options = { partition = "?o" }
''')
    config = load_config(tmp_path / "engine.toml")
    engine = Engine(StreamStore(), VirtualClock(T0), config.engine)
    assert register_configured(engine, config) == ["per-subject"]
    registered = engine.get("per-subject")
    assert registered.partitioned and engine.tick() == 0
    plan = engine.partition_plan("per-subject")
    assert plan.keys == {"http://example.org/s": PartitionKey("http://example.org/p", inverse=True)}
