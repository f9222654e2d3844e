"""The TOML configuration: its settings, registration of configured queries, and errors that
name the file and key."""
import re

import pytest

from rspstar.endpoint.engine.clock import VirtualClock
from rspstar.endpoint.config import ConfigError, load_config, register_configured
from rspstar.endpoint.engine.runner import Runner
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
    engine = Runner(StreamStore(), VirtualClock(T0), config.engine)
    assert register_configured(engine, config) == ["from-config"]
    q = engine.get("from-config")
    assert q.spec.options == {"report": "non-empty", "base": (tmp_path / "q.rq").as_uri()}
    assert q.evaluator.options.report == "non-empty"
    # After a restart the query comes back from the data directory, not twice from config.
    again = Runner(StreamStore(), VirtualClock(T0), config.engine)
    assert register_configured(again, config) == []
    assert [x.id for x in again.queries()] == ["from-config"]


def test_a_query_written_in_the_configuration_registers_its_relative_iris_against_the_file(tmp_path):
    (tmp_path / "engine.toml").write_text('''
[[queries]]
id = "inline"
query = """
PREFIX ex: <http://example.org/>
SELECT ?o FROM NAMED WINDOW ex:w ON <s> [RANGE PT2S] WHERE { WINDOW ex:w { GRAPH ?g { ?o ?p ?v } } }
"""
''')
    config = load_config(tmp_path / "engine.toml", data_dir=tmp_path / "data")
    engine = Runner(StreamStore(), VirtualClock(T0), config.engine)
    assert register_configured(engine, config) == ["inline"]
    query = engine.get("inline")
    assert query.spec.options["base"] == (tmp_path / "engine.toml").as_uri()
    assert [w["stream"] for w in query.describe()["windows"]] == [(tmp_path / "s").as_uri()]


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
    engine = Runner(StreamStore(), VirtualClock(T0), config.engine)
    assert register_configured(engine, config) == ["cqels"]
    query = engine.get("cqels").query
    assert query.dialect == "cqels" and query.windows["http://example.org/s"].start == T0 + 1_000_000


@pytest.mark.parametrize("toml,query,fragment", [
    ('[engine]\nmax_delay = "soon"\n', None, "max_delay"),
    ('[engine]\nhistory_bytes = "4 MiB"\n', None, "history_bytes must be a whole number"),
    ('[engine]\nmax_dealy = "PT1S"\n', None, "[engine]: unknown key 'max_dealy' (known: "),
    ('[engin]\nmax_delay = "PT1S"\n', None, "unknown table [engin]"),
    ('[[sources]]\nname = "s"\nkind = "files"\nscenario = "tvs"\n', None, "scenario is for simulator sources, not files"),
    ('[[sources]]\nname = "s"\nkind = "carrier pigeon"\n', None, "kind must be one of simulator, files"),
    ('[[sources]]\nname = "s"\nkind = "files"\n[[sources]]\nname = "s"\nkind = "simulator"\n', None,
     "two [[sources]] are named 's'"),
    ('[http]\nquery_timeout = 0\n', None, "query_timeout must be a number above 0"),
    ('[engine]\nhistory = 0\n', None, "history must be a whole number of at least 1"),
    ('[engine]\nmax_elements = 1.5\n', None, "max_elements must be"),
    ('[[queries]]\nid = "x"\n', None, 'needs file or query'),
    ('[[queries]]\nfile = "ok.rq"\nquery = "SELECT * WHERE {}"\n', QUERY, 'takes file or query, not both'),
    ('[[queries]]\nquery = \"\"\"\nPREFIX ex: <http://example.org/>\nSELECT * WHERE { ?s ?p }\"\"\"\n', None,
     'engine.toml [[queries]] #1 (query):2:'),
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
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        config = load_config(tmp_path / "engine.toml", data_dir=tmp_path / "data")
        register_configured(Runner(StreamStore(), VirtualClock(T0), config.engine), config)


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
    engine = Runner(StreamStore(), VirtualClock(T0), config.engine)
    assert register_configured(engine, config) == ["per-subject"]
    registered = engine.get("per-subject")
    assert registered.partitioned and engine.tick() == 0
    plan = engine.partition_plan("per-subject")
    assert plan.keys == {"http://example.org/s": PartitionKey("http://example.org/p", inverse=True)}


def test_every_setting_is_declared_once_and_documented_from_the_schema():
    from conftest import REPO
    from rspstar.config import schema
    names = [setting.name for setting in schema.SETTINGS]
    assert len(names) == len(set(names))
    assert (REPO / "docs" / "configuration.md").read_text() == schema.markdown() + "\n", \
        "docs/configuration.md is generated: python -c 'from rspstar.config.schema import markdown; print(markdown())'"


def test_the_engine_and_the_app_take_their_defaults_from_the_schema():
    from rspstar.config.schema import default
    from rspstar.endpoint.engine.runner import EngineConfig
    from rspstar.endpoint.http import HttpSettings
    from rspstar.store.recordings import Recordings
    from pathlib import Path
    engine = EngineConfig()
    assert (engine.max_delay, engine.history, engine.max_range) == \
        (default("engine.max_delay"), default("engine.history"), 86_400_000_000)
    assert HttpSettings().max_body == default("http.max_body") == 16 * 1024 * 1024
    assert Recordings(Path("/nonexistent")).max_bytes == default("recording.max_bytes")


def test_the_library_and_the_server_differ_only_where_the_schema_says_so(tmp_path):
    # One declaration per setting: the runner's defaults are the schema's LIBRARY profile (no
    # admission or time limit in the user's own process), `rspstar serve`'s the schema's own.
    from dataclasses import asdict
    from rspstar.config import schema
    from rspstar.endpoint.engine.runner import EngineConfig
    library, served = asdict(EngineConfig()), asdict(load_config(_empty(tmp_path)).engine)
    differ = {key for key in asdict(schema.SECTIONS["engine"]()) if library[key] != served[key]}
    assert differ == {s.key for s in schema.settings_of("engine") if s.default_in(schema.LIBRARY) != s.default} \
        == {"max_queries", "max_load", "evaluation_timeout"}
    assert {library[key] for key in differ} == {None}
    assert (served["max_queries"], served["max_load"], served["evaluation_timeout"]) == (2000, 0.8, 10_000_000)
    assert "in the Python API and `rspstar replay`: none" in schema.markdown()


def _empty(tmp_path):
    path = tmp_path / "empty.toml"
    path.write_text("")
    return path


def test_rspstar_config_prints_every_effective_setting_and_where_it_came_from(tmp_path, capsys):
    from rspstar.endpoint.cli import main
    (tmp_path / "q.rq").write_text(QUERY)
    (tmp_path / "engine.toml").write_text('[engine]\nmax_delay = "PT0.5S"\n[[sources]]\nname = "in"\nkind = "files"\n'
                                          'stream = "http://example.org/s"\n[[queries]]\nfile = "q.rq"\n')
    assert main(["config", "--config", str(tmp_path / "engine.toml"), "--port", "9001"]) == 0
    lines = capsys.readouterr().out.splitlines()
    def line(name):
        return " ".join(next(l for l in lines if l.startswith(name + " ")).split())
    assert line("engine.max_delay") == 'engine.max_delay = "PT0.5S" # %s' % (tmp_path / "engine.toml")
    assert line("engine.history") == "engine.history = 1000 # default"
    assert line("http.port") == "http.port = 9001 # command line"
    assert line("sources[0].path") == 'sources[0].path = "landing" # default'
    assert not any(l.startswith("sources[0].scenario") for l in lines)      # a simulator's key
    assert main(["config", "--config", str(tmp_path / "missing.toml")]) == 2
