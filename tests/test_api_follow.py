"""The Python API for a program that reacts to results: following a query's records as they
come (an iterator, a callback, from an instant on), stream names checked as in every door,
and every error importable from `rspstar`."""
import ast
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

import rspstar
from conftest import REPO

WARM = """PREFIX ex: <http://example.org/>
SELECT ?room ?t
FROM NAMED WINDOW ex:w ON ex:temperature [RANGE PT10S STEP PT5S]
WHERE { WINDOW ex:w { GRAPH ?g { ?room ex:temperature ?t FILTER(?t > 30) } } }"""
START = datetime(2026, 3, 1, 8, 0, tzinfo=timezone.utc)
STREAM = "http://example.org/temperature"
HOT = "<http://example.org/hall> <http://example.org/temperature> 33 ."


def at(seconds: int) -> datetime:
    return START + timedelta(seconds=seconds)


def test_a_callback_gets_each_record_once_in_order_and_can_stop():
    engine = rspstar.Engine(start=START)
    query = engine.register(WARM, id="warm")
    got = []
    stop = query.on_result(got.append)
    engine.push(STREAM, HOT, time=at(2))
    engine.advance(at(10))
    assert [r["time"] for r in got] == ["2026-03-01T08:00:05Z", "2026-03-01T08:00:10Z"]
    assert got[0]["bindings"] == [{"room": "<http://example.org/hall>", "t": '"33"^^<http://www.w3.org/2001/XMLSchema#integer>'}]
    late = []
    query.on_result(late.append, since="2026-03-01T08:00:05Z")      # the past after it, at once
    assert [r["time"] for r in late] == ["2026-03-01T08:00:10Z"]
    stop()
    engine.advance(at(15))
    assert len(got) == 2 and [r["time"] for r in late][-1] == "2026-03-01T08:00:15Z"


def test_an_exception_in_a_callback_comes_out_of_advance_and_the_engine_goes_on():
    engine = rspstar.Engine(start=START)
    query = engine.register(WARM, id="warm")
    seen = []

    def fails_once(record):
        seen.append(record["time"])
        if len(seen) == 1:
            raise KeyError(record["time"])
    query.on_result(fails_once)
    with pytest.raises(KeyError, match="08:00:05Z"):
        engine.advance(at(5))
    assert engine.advance(at(10)) == 1
    assert seen == ["2026-03-01T08:00:05Z", "2026-03-01T08:00:10Z"]         # none given twice
    assert len(query) == 2 and query.describe()["status"]["state"] == "running"


def test_follow_gives_the_records_after_since_then_the_new_ones_from_another_thread():
    engine = rspstar.Engine(start=START)
    query = engine.register(WARM, id="warm")
    engine.advance(at(10))
    assert [r["time"][11:] for r in query.follow()] == ["08:00:05Z", "08:00:10Z"]
    assert [r["time"][11:] for r in query.follow(since=at(5))] == ["08:00:10Z"]
    assert list(query.follow(since="2026-03-01T08:00:10Z")) == []

    def later():
        time.sleep(0.2)
        engine.advance(at(20))
    threading.Thread(target=later).start()
    live = query.follow(since=at(10), timeout=5)
    started = time.monotonic()
    assert [next(live)["time"][11:], next(live)["time"][11:]] == ["08:00:15Z", "08:00:20Z"]
    assert time.monotonic() - started < 4
    quiet = query.follow(since=at(20), timeout=0.2)
    assert list(quiet) == []                 # nothing came within 0.2 s
    assert len(query) == 4 and [r["time"][11:] for r in query][-1] == "08:00:20Z"


def test_a_follow_waiting_for_ever_ends_when_its_query_is_removed():
    engine = rspstar.Engine(start=START)
    query = engine.register(WARM, id="warm")
    threading.Timer(0.2, engine.remove, ("warm",)).start()
    assert list(query.follow(timeout=None)) == []


@pytest.mark.parametrize("stream", ["temp", "ex:temp ", "<http://example.org/temperature>", "", "http://ex.org/a b"])
def test_a_stream_that_is_no_absolute_iri_is_refused_in_push_and_replay(stream):
    engine = rspstar.Engine(start=START)
    with pytest.raises(rspstar.StreamNameError, match="stream") as refused:
        engine.push(stream, HOT, time=at(2))
    assert isinstance(refused.value, rspstar.UsageError) and isinstance(refused.value, rspstar.TranslatorError)
    with pytest.raises(rspstar.UsageError):
        rspstar.replay(WARM, {stream: "<http://a> <http://b> 1 ."}, start=START, end=at(5))
    assert engine.store.streams() == {}


def test_a_misspelt_option_is_a_usage_error_as_documented():
    engine = rspstar.Engine(start=START)
    with pytest.raises(rspstar.UsageError, match="unknown option 'reprot'"):
        engine.register(WARM, reprot="close")
    with pytest.raises(rspstar.OptionError):
        engine.register(WARM, overrun="drop")
    assert issubclass(rspstar.OptionError, rspstar.TranslatorError)
    from rspstar.endpoint.engine.errors import UsageError
    assert issubclass(UsageError, rspstar.UsageError) and issubclass(UsageError, rspstar.EndpointError)


# Raised and caught inside the engine, never reaching a caller: not exported.
INTERNAL = {"FeedClosed", "WorkerLost", "RefreshError", "OptimisticLoadFailed", "QueryRefused", "QueryCrashed",
            "DeliveryError", "MqttSettingsError", "IngestionError",
            # a worker's answers, read by the callers that raise the errors above in their place
            "WorkerOverMemory", "AnswerTooLarge", "BackgroundChanged",
            # an HTTP exchange's, read by the reload and the sink delivery (RefreshError, DeliveryError)
            "ExchangeExpired", "ExchangeTooLarge"}


def test_every_error_class_of_the_engine_is_exported_from_rspstar():
    # (the HTTP door's own errors are statuses, endpoint/http/errors.py)
    defined = set()
    for folder in ("translator", "store", "endpoint", "config"):
        for path in (REPO / folder).rglob("*.py"):
            if "http" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and any(
                        getattr(b, "id", getattr(b, "attr", "")).endswith(("Error", "Exception")) or
                        getattr(b, "id", "") in defined for b in node.bases):
                    defined.add(node.name)
    assert defined - INTERNAL - set(rspstar.__all__) == set()
    for name in rspstar.__all__:
        assert getattr(rspstar, name).__name__ in (name, "replay")
    assert set(dir(rspstar)) >= set(rspstar.__all__)


def test_a_stream_that_is_no_absolute_iri_is_refused_by_the_cli_and_the_configuration(tmp_path, capsys):
    from rspstar.config import schema
    from rspstar.endpoint import cli
    (tmp_path / "q.rq").write_text(WARM)
    (tmp_path / "s.trig").write_text("")
    assert cli.main(["replay", str(tmp_path / "q.rq"), "--stream", "temp=%s" % (tmp_path / "s.trig"),
                     "--from", "2026-03-01T08:00:00Z", "--to", "2026-03-01T08:00:10Z"]) == 2
    assert "--stream 'temp' is not an absolute IRI" in capsys.readouterr().err
    for source in ('stream = "landing"', 'topic = { "sensors/#" = "sensors" }'):
        kind = "files" if "stream" in source else "mqtt"
        (tmp_path / "engine.toml").write_text('[[sources]]\nname = "s"\nkind = "%s"\n%s\n' % (kind, source))
        with pytest.raises(schema.ConfigError, match="is not an absolute IRI"):
            schema.load(tmp_path / "engine.toml")
