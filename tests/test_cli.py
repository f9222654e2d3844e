"""`rspstar replay` and `rspstar check` on good and bad input."""
import json
import os
import subprocess
import sys

import pytest

from rspstar.endpoint import cli
from rspstar.endpoint.cli import build_parser, main
from rspstar.endpoint.config import DEFAULT_CONFIG

QUERY = """PREFIX ex: <http://example.org/>
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }
"""
STREAM = """@prefix ex: <http://example.org/> .
@prefix prov: <http://www.w3.org/ns/prov#> .
ex:e0 prov:generatedAtTime "2026-03-01T08:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
ex:e0 { ex:o0 ex:v 1 . }
ex:e1 prov:generatedAtTime "2026-03-01T08:00:03Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
ex:e1 { ex:o1 ex:v 2 . }
"""
RANGE = ["--from", "2026-03-01T08:00:00Z", "--to", "2026-03-01T08:00:04Z"]


def test_replay_writes_one_line_per_instant(write, tmp_path):
    q, s = write("q.rq", QUERY), write("s.trig", STREAM)
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s, *RANGE, "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [l["time"] for l in lines] == ["2026-03-01T08:00:02Z", "2026-03-01T08:00:04Z"]
    assert lines[0]["bindings"] == [{"o": "<http://example.org/o0>",
                                     "v": '"1"^^<http://www.w3.org/2001/XMLSchema#integer>'}]
    assert lines[1]["windows"] == {"http://example.org/w": ["2026-03-01T08:00:02Z", "2026-03-01T08:00:04Z"]}


def test_replay_gives_the_collector_back_as_it_found_it(write, tmp_path, monkeypatch):
    """A replay run in-process (a test, a notebook) tunes and freezes Python's collector while it
    runs, and leaves it as it was: thresholds and frozen objects, whether it succeeds or not."""
    import gc
    q, s = write("q.rq", QUERY), write("s.trig", STREAM)
    # From a collector with nothing frozen, whatever ran in this process before (an engine
    # started in-process freezes what it holds: store.heap): a replay then freezes its own.
    left_frozen = gc.get_freeze_count()
    gc.unfreeze()
    try:
        before, frozen = gc.get_threshold(), gc.get_freeze_count()
        during = []
        replay = cli._replay

        def watched(*arguments):
            during.append((gc.get_threshold()[0], gc.get_freeze_count()))
            return replay(*arguments)
        monkeypatch.setattr(cli, "_replay", watched)
        for out, stream in ((tmp_path / "a.jsonl", s), (tmp_path / "b.jsonl", tmp_path / "missing.trig")):
            status = main(["replay", str(q), "--stream", "http://example.org/s=%s" % stream, *RANGE, "--out", str(out)])
            assert gc.get_threshold() == before and gc.get_freeze_count() == frozen == 0
        assert status == 2          # the second: no such stream file
        assert [threshold for threshold, _ in during] == [cli.REPLAY_YOUNG_COLLECTION] * 2
        assert all(count > 0 for _, count in during)
    finally:
        if left_frozen:
            gc.freeze()


def test_query_syntax_error_prints_file_line_column_and_exits_2(write, capsys):
    q = write("bad.rq", QUERY.replace("[RANGE PT2S]", "[RANGE PT2S STEP PT0S]"))
    s = write("s.trig", STREAM)
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s, *RANGE]) == 2
    assert capsys.readouterr().err.strip() == "%s:3:49: STEP must be positive, got PT0S" % q


def test_malformed_stream_names_file_and_line_and_keeps_existing_out(write, tmp_path, capsys):
    q = write("q.rq", QUERY)
    s = write("s.trig", STREAM + "ex:e2 { ex:o2 ex:v }\n")
    out = tmp_path / "out.jsonl"
    out.write_text("previous results\n")
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s, *RANGE, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "%s:7:" % s in err
    assert out.read_text() == "previous results\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_unknown_option_and_bad_instant_are_usage_errors(write, capsys):
    q, s = write("q.rq", QUERY), write("s.trig", STREAM)
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s, *RANGE, "--option", "colour=red"]) == 2
    assert "unknown option 'colour'" in capsys.readouterr().err
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s,
                 "--from", "yesterday", "--to", "2026-03-01T08:00:04Z"]) == 2
    assert "--from" in capsys.readouterr().err


def test_a_stream_the_query_never_reads_and_a_backward_range_are_refused(write, capsys):
    q, s = write("q.rq", QUERY), write("s.trig", STREAM)
    assert main(["replay", str(q), "--stream", "http://example.org/typo=%s" % s, *RANGE]) == 2
    assert "no query reads stream <http://example.org/typo> (they read <http://example.org/s>)" \
        in capsys.readouterr().err
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s,
                 "--from", "2026-03-01T08:00:04Z", "--to", "2026-03-01T08:00:00Z"]) == 2
    assert "starts after it ends" in capsys.readouterr().err


def test_a_reader_that_stops_early_gets_no_traceback(write):
    q, s = write("q.rq", QUERY), write("s.trig", STREAM)
    command = "%s -m endpoint.cli replay %s --stream http://example.org/s=%s --from 2026-03-01T08:00:00Z " \
              "--to 2026-03-01T09:00:00Z | head -1" % (sys.executable, q, s)
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and json.loads(done.stdout)["time"] == "2026-03-01T08:00:02Z"


def test_non_empty_report_policy_skips_empty_evaluations(write, tmp_path):
    q, s = write("q.rq", QUERY), write("s.trig", STREAM)
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s, "--from", "2026-03-01T08:00:00Z",
                 "--to", "2026-03-01T08:00:10Z", "--option", "report=non-empty", "--out", str(out)]) == 0
    assert [json.loads(l)["time"] for l in out.read_text().splitlines()] == [
        "2026-03-01T08:00:02Z", "2026-03-01T08:00:04Z"]


def test_element_without_timestamp_is_refused_in_replay(write, capsys):
    q = write("q.rq", QUERY)
    s = write("s.trig", STREAM + "ex:e9 { ex:o9 ex:v 9 . }\n")
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s, *RANGE]) == 2
    assert "has no timestamp triple" in capsys.readouterr().err


def test_console_script_check(write):
    q = write("q.rq", QUERY)
    done = subprocess.run([sys.executable, "-m", "rspstar.endpoint.cli", "check", str(q)], capture_output=True, text=True)
    assert done.returncode == 0
    checked = json.loads(done.stdout)
    assert checked["windows"][0]["range"] == "PT2S"
    # The query as it is compiled once: SPARQL-star with a slot for each window's elements.
    assert any("VALUES ?g { $elements(<http://example.org/w>) }" in line for line in checked["sparql"])
    assert checked["incremental"] == "http://example.org/w"


def test_check_names_the_constants_a_query_shares_its_evaluation_over(write, capsys):
    q = write("q.rq", QUERY.replace("?o ex:v ?v }", '?o ex:v ?v FILTER(?v > 2.5 && ?v != "x") }'))
    assert main(["check", str(q)]) == 0
    assert json.loads(capsys.readouterr().out)["constants"] == ["2.5 at 4:57", '"x" at 4:70']
    assert main(["check", str(q), "--option", "share_constants=false"]) == 0
    assert "constants" not in json.loads(capsys.readouterr().out)


def test_check_says_a_join_of_windows_is_evaluated_window_by_window(capsys):
    assert main(["check", str(DEFAULT_CONFIG.parent / "queries" / "tvs-warning.rq")]) == 0
    assert json.loads(capsys.readouterr().out)["incremental"] == (
        "a join of windows <http://rspstar.example/w1>, <http://rspstar.example/w2>, each incremental")


def test_two_streams_reusing_a_graph_name_are_refused(write, capsys):
    q = write("q.rq", QUERY.replace("[RANGE PT2S]", "[RANGE PT2S] FROM NAMED WINDOW ex:v ON ex:t [RANGE PT2S]"))
    s, t = write("s.trig", STREAM), write("t.trig", STREAM)
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s,
                 "--stream", "http://example.org/t=%s" % t, *RANGE]) == 2
    assert "graph <http://example.org/e0> is already a stream element" in capsys.readouterr().err


def test_blank_graph_names_take_the_careful_path_and_render_as_blank_nodes(write, tmp_path):
    q = write("q.rq", QUERY.replace("SELECT ?o ?v", "SELECT ?g ?o ?v"))
    s = write("s.trig", STREAM.replace("ex:e0", "_:e0"))
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s, *RANGE, "--out", str(out)]) == 0
    first = json.loads(out.read_text().splitlines()[0])
    assert first["bindings"][0]["g"].startswith("_:")


def test_elements_sharing_a_timestamp_are_all_replayed(write, tmp_path):
    # The simulator stamps a whole micro-batch with one instant: a recording holds many
    # elements per timestamp, which the replay must publish together.
    same = STREAM.replace("08:00:03Z", "08:00:00Z")
    q, s = write("q.rq", QUERY), write("s.trig", same)
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s, *RANGE, "--out", str(out)]) == 0
    first = json.loads(out.read_text().splitlines()[0])
    assert sorted(b["o"] for b in first["bindings"]) == ["<http://example.org/o0>", "<http://example.org/o1>"]


def test_several_queries_replay_in_one_pass_each_into_its_own_file(write, tmp_path):
    # Each query's file equals what it gives replayed alone.
    q = write("q.rq", QUERY)
    wide = write("wide.rq", QUERY.replace("[RANGE PT2S]", "[RANGE PT4S STEP PT1S]"))
    s = write("s.trig", STREAM)
    stream = ["--stream", "http://example.org/s=%s" % s]
    assert main(["replay", str(q), str(wide), *stream, *RANGE, "--out-dir", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["q.jsonl", "wide.jsonl"]
    for query in (q, wide):
        alone = tmp_path / ("%s.alone.jsonl" % query.stem)
        assert main(["replay", str(query), *stream, *RANGE, "--out", str(alone)]) == 0
        assert (tmp_path / "out" / ("%s.jsonl" % query.stem)).read_text() == alone.read_text() != ""
    times = [json.loads(line)["time"] for line in (tmp_path / "out" / "wide.jsonl").read_text().splitlines()]
    assert times == ["2026-03-01T08:00:0%dZ" % k for k in (1, 2, 3, 4)]


def test_several_queries_need_an_out_dir_and_distinct_file_stems(write, tmp_path, capsys):
    q, s = write("q.rq", QUERY), write("s.trig", STREAM)
    (tmp_path / "other").mkdir()
    again = write("other/q.rq", QUERY)
    stream = ["--stream", "http://example.org/s=%s" % s]
    assert main(["replay", str(q), str(again), *stream, *RANGE, "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "several queries need --out-dir" in capsys.readouterr().err
    assert main(["replay", str(q), str(again), *stream, *RANGE, "--out-dir", str(tmp_path / "out")]) == 2
    assert "two query files are named q.*" in capsys.readouterr().err
    bad = write("bad.rq", "SELECT * WHERE { ?s ?p }")
    assert main(["replay", str(q), str(bad), *stream, *RANGE, "--out-dir", str(tmp_path / "out")]) == 2
    assert str(bad) + ":1:" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def _long_stream(elements: int) -> str:
    return STREAM.split("ex:e0 ")[0] + "".join(
        'ex:e%d prov:generatedAtTime "2026-03-01T08:00:%02d.%03dZ"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
        "ex:e%d {\n  ex:o%d ex:v %d .\n}\n" % (k, k // 20, 50 * (k % 20), k, k, k) for k in range(elements))


def test_a_stream_file_written_in_parts_replays_as_it_does_whole(write, tmp_path, monkeypatch):
    import rspstar.store.documents as stream_store
    q = write("q.rq", QUERY.replace("[RANGE PT2S]", "[RANGE PT2S STEP PT1S]"))
    s = write("s.trig", _long_stream(80))
    cut, real = [], stream_store.iter_document_parts

    def recording(*args):
        cut.append(list(real(*args)))
        return iter(cut[-1])
    monkeypatch.setattr(stream_store, "iter_document_parts", recording)
    outputs = {}
    for part_bytes in (1 << 30, 256):
        monkeypatch.setattr(stream_store, "PART_BYTES", part_bytes)
        out = tmp_path / ("out-%d.jsonl" % part_bytes)
        assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s, *RANGE, "--out", str(out)]) == 0
        outputs[part_bytes] = out.read_text()
    assert len(cut[0]) == 1 and len(cut[1]) > 5
    assert outputs[256] == outputs[1 << 30]
    assert outputs[256].count('"o"') == 20 + 40 + 40 + 40      # every element in its windows


def test_errors_in_a_stream_file_written_in_parts_name_their_place_in_the_whole_file(write, capsys, monkeypatch):
    import rspstar.store.documents as stream_store
    monkeypatch.setattr(stream_store, "PART_BYTES", 256)
    q = write("q.rq", QUERY)
    lines = _long_stream(80).splitlines(keepends=True)
    lines[300] = "  ex:o75 ex:v .\n"
    s = write("s.trig", "".join(lines))
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s, *RANGE]) == 2
    assert "%s:301:" % s in capsys.readouterr().err
    q = write("q.rq", QUERY.replace("[RANGE PT2S]", "[RANGE PT2S] FROM NAMED WINDOW ex:v ON ex:t [RANGE PT2S]"))
    s, t = write("s.trig", _long_stream(80)), write("t.trig", _long_stream(80))
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s,
                 "--stream", "http://example.org/t=%s" % t, *RANGE]) == 2
    assert "graph <http://example.org/e0> is already a stream element" in capsys.readouterr().err


def test_serve_runs_under_jemalloc_where_the_system_has_it(tmp_path, monkeypatch):
    from rspstar.endpoint import allocator
    library = tmp_path / "libjemalloc.so.2"
    library.write_bytes(b"")
    monkeypatch.setattr(allocator, "JEMALLOC_PATTERNS", (str(library),))
    environment = allocator.allocator_environment({"PATH": "/bin", "LD_PRELOAD": "/x.so"}, "libc.so.6")
    assert environment == {"PATH": "/bin", "LD_PRELOAD": "%s /x.so" % library}
    # Already under it, turned off, or not installed: the process goes on as it is.
    assert allocator.allocator_environment({}, "/usr/lib/libjemalloc.so.2") is None
    assert allocator.allocator_environment({"RSPSTAR_ALLOCATOR": "system"}, "libc.so.6") is None
    monkeypatch.setattr(allocator, "JEMALLOC_PATTERNS", (str(tmp_path / "absent.so"),))
    assert allocator.allocator_environment({}, "libc.so.6") is None


def test_a_program_run_of_serve_runs_again_under_jemalloc_and_replay_a_call_or_check_do_not(write, tmp_path,
                                                                                            monkeypatch):
    import rspstar.endpoint.cli as cli
    q, s = write("q.rq", QUERY), write("s.trig", STREAM)
    arguments = ["replay", str(q), "--stream", "http://example.org/s=%s" % s, *RANGE, "--out", str(tmp_path / "o")]
    executed = []
    monkeypatch.setattr(cli, "use_jemalloc", lambda: executed.append(True))
    assert main(arguments) == 0
    monkeypatch.setattr(sys, "argv", ["rspstar", *arguments])
    assert main() == 0
    monkeypatch.setattr(sys, "argv", ["rspstar", "check", str(q)])
    assert main() == 0
    assert executed == []           # a call runs as it is; a replay is faster under glibc; check is quick
    class Started(Exception):
        pass

    def again():        # where the program would start again: stop the server before it starts
        executed.append(True)
        raise Started
    monkeypatch.setattr(cli, "use_jemalloc", again)
    monkeypatch.setattr(sys, "argv", ["rspstar", "serve"])
    with pytest.raises(Started):
        main()
    assert executed == [True]


def test_the_rspstar_command_runs_again_under_jemalloc_before_importing_the_engine(write, tmp_path):
    # The console script's launcher decides from the command's name alone, so the second start
    # does not import the command line and the engine a second time; it then runs the command
    # as given, and does not ask again.
    q, s = write("q.rq", QUERY), write("s.trig", STREAM)
    out = tmp_path / "o"
    code = ("import sys; import rspstar.endpoint.allocator as allocator; "
            "allocator.use_jemalloc = lambda: print('again', sorted(m for m in sys.modules "
            "if m.startswith('rspstar.endpoint.') or m.startswith('rspstar.translator')), file=sys.stderr); "
            "from rspstar.endpoint import launch; sys.exit(launch.main())")
    for command, again in ((["serve", "--help"], True),
                           (["replay", str(q), "--stream", "http://example.org/s=%s" % s, *RANGE, "--out", str(out)], False),
                           (["check", str(q)], False)):
        done = subprocess.run([sys.executable, "-c", code, *command], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        asked = [line for line in done.stderr.splitlines() if line.startswith("again")]
        assert asked == (["again ['rspstar.endpoint.allocator', 'rspstar.endpoint.launch']"] if again else []), done.stderr
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s, *RANGE, "--out", str(tmp_path / "p")]) == 0
    assert out.read_text() == (tmp_path / "p").read_text() != ""


def test_the_rspstar_command_ends_a_replay_at_once_with_its_records_all_written(write, tmp_path):
    # The launcher ends a replay's process without tearing it down: the records written to
    # standard output (a pipe) and to a file must all be there, and the exit code the command's.
    q, s = write("q.rq", QUERY), write("s.trig", STREAM)
    late = write("late.rq", FAILS_AT_4)
    expected = tmp_path / "expected"
    assert main(["replay", str(q), "--stream", "http://example.org/s=%s" % s, *RANGE, "--out", str(expected)]) == 0
    code = "import sys; from rspstar.endpoint import launch; sys.exit(launch.main())"
    # Standard output to a pipe is block-buffered unless the environment says otherwise.
    buffered = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    done = subprocess.run([sys.executable, "-c", code, "replay", str(q), "--stream", "http://example.org/s=%s" % s, *RANGE],
                          capture_output=True, text=True, timeout=120, env=buffered)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected.read_text() != ""
    failing = subprocess.run([sys.executable, "-c", code, "replay", str(late), "--stream", "http://example.org/s=%s" % s,
                              "--from", "2026-03-01T08:00:00Z", "--to", "2026-03-01T08:00:05Z"],
                             capture_output=True, text=True, timeout=120, env=buffered)
    assert failing.returncode == 3
    assert len(failing.stdout.splitlines()) == 3 and "query late failed at 2026-03-01T08:00:04Z" in failing.stderr


# Joins the window's elements with value 2 to a SERVICE that cannot be reached: the first
# evaluations (no such element) answer, the one at 08:00:04 (e1) fails.
FAILS_AT_4 = """PREFIX ex: <http://example.org/>
SELECT ?o ?x
FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v 2 } } SERVICE <http://127.0.0.1:9/sparql> { ?x ?y ?z } }
"""


def test_a_query_failing_during_the_replay_exits_3_naming_it_and_keeps_what_it_wrote(write, tmp_path, capsys):
    q, s = write("late.rq", FAILS_AT_4), write("s.trig", STREAM)
    out = tmp_path / "out.jsonl"
    stream = ["--stream", "http://example.org/s=%s" % s]
    assert main(["replay", str(q), *stream, "--from", "2026-03-01T08:00:00Z", "--to", "2026-03-01T08:00:05Z",
                 "--out", str(out)]) == 3
    assert [json.loads(line)["time"] for line in out.read_text().splitlines()] == [
        "2026-03-01T08:00:01Z", "2026-03-01T08:00:02Z", "2026-03-01T08:00:03Z"]
    err = capsys.readouterr().err
    assert "rspstar replay: query late failed at 2026-03-01T08:00:04Z: " in err and "port 9" in err
    # Beside a query that runs on: its results are all written, and the replay still exits 3.
    good = write("good.rq", QUERY)
    assert main(["replay", str(q), str(good), *stream, *RANGE, "--out-dir", str(tmp_path / "both")]) == 3
    assert len((tmp_path / "both" / "good.jsonl").read_text().splitlines()) == 2
    assert "failed at 2026-03-01T08:00:04Z" in capsys.readouterr().err


def test_replay_help_says_what_each_exit_status_means():
    help_text = build_parser()._subparsers._group_actions[0].choices["replay"].format_help()
    assert "exit status" in help_text and "3" in help_text and "a query failed" in help_text


def test_version_names_the_engine_and_its_store(capsys):
    import pyoxigraph
    import rspstar
    for run in (lambda: main(["--version"]),
                lambda: subprocess.run([sys.executable, "-m", "rspstar.endpoint.cli", "--version"], check=True,
                                       capture_output=True, text=True).stdout):
        try:
            printed = run()
        except SystemExit as e:
            assert e.code == 0
            printed = capsys.readouterr().out
        assert printed.startswith("rspstar %s (pyoxigraph %s, Python " % (rspstar.__version__, pyoxigraph.__version__))


def test_check_warns_of_a_query_without_a_window_and_replay_refuses_it(write, capsys):
    q = write("all.rq", "SELECT * WHERE { ?s ?p ?o }")
    assert main(["check", str(q)]) == 0
    [warning] = json.loads(capsys.readouterr().out)["warnings"]
    assert "no window, so it would never be evaluated" in warning and "/sparql" in warning
    assert main(["replay", str(q), *RANGE]) == 2
    assert "no window" in capsys.readouterr().err


def test_the_command_line_and_the_python_api_start_without_the_servers_libraries():
    # A replay or a notebook posts nothing and serves nothing: HTTP clients, MQTT, Flask, Spark
    # and pandas are imported by what uses them, not at start-up.
    import subprocess
    import sys
    code = ("import sys, rspstar, rspstar.endpoint.cli, rspstar.endpoint.engine.replay\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'requests', 'paho', 'flask', 'pyspark', 'pandas', "
            "'plotly', 'waitress', 'apscheduler'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_query_files_iris_resolved_folder_by_folder_are_each_files_own(tmp_path, monkeypatch):
    """The replay resolves each folder of its query files once; every file still gets the IRI
    resolving it alone gives, through symbolic links to files and to folders, `..` and
    relative paths."""
    from pathlib import Path

    from rspstar.endpoint.cli import _file_iri, _file_iris
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.rq").write_text("ASK {}")
    (real / "b.rq").write_text("ASK {}")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "target.rq").write_text("ASK {}")
    (real / "link.rq").symlink_to(tmp_path / "elsewhere" / "target.rq")
    (tmp_path / "folder-link").symlink_to(real)
    monkeypatch.chdir(real)
    paths = [real / "a.rq", real / "link.rq", tmp_path / "folder-link" / "b.rq",
             tmp_path / "folder-link" / "link.rq", Path("a.rq"), Path("../real/b.rq"), real / ".." / "real" / "a.rq"]
    iris = _file_iris(paths)
    assert iris == [_file_iri(p) for p in paths]
    assert iris[1] == (tmp_path / "elsewhere" / "target.rq").resolve().as_uri()
    assert iris[2] == (real / "b.rq").resolve().as_uri()


def test_a_replay_of_more_query_files_than_the_process_may_open_writes_every_output(write, tmp_path):
    """Its outputs are kept open up to half the process's file descriptors; past that the one
    written least recently is closed and reopened to append. With 64 descriptors allowed, 100
    query files (one output each) replay, every output as it is with no bound."""
    import resource
    s = write("s.trig", STREAM)
    queries = []
    for k in range(100):
        queries.append(str(write("q%03d.rq" % k, QUERY.replace("SELECT ?o ?v", "SELECT ?o ?v (%d AS ?k)" % k))))
    stream = "http://example.org/s=%s" % s

    def limited():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    command = [sys.executable, "-m", "rspstar.endpoint.cli", "replay", *queries, "--stream", stream, *RANGE]
    done = subprocess.run(command + ["--out-dir", str(tmp_path / "bounded")], preexec_fn=limited,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert main(["replay", *queries, "--stream", stream, *RANGE, "--out-dir", str(tmp_path / "free")]) == 0
    bounded = sorted((tmp_path / "bounded").iterdir())
    assert [p.name for p in bounded] == ["q%03d.jsonl" % k for k in range(100)]
    for path in bounded:
        assert path.read_text() == (tmp_path / "free" / path.name).read_text()
        assert len(path.read_text().splitlines()) == 2


def test_outputs_rotate_through_a_bound_on_open_files_in_order(tmp_path):
    from rspstar.endpoint.cli import _write_all_atomically
    records = [("q%d" % (k % 5), {"n": k}) for k in range(40)]
    _write_all_atomically(tmp_path / "out", ["q%d" % k for k in range(5)], iter(records), open_at_once=2)
    for k in range(5):
        lines = [json.loads(line)["n"] for line in (tmp_path / "out" / ("q%d.jsonl" % k)).read_text().splitlines()]
        assert lines == list(range(k, 40, 5))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["q%d.jsonl" % k for k in range(5)]


def test_a_folder_that_refuses_the_results_is_named_and_nothing_is_left(write, tmp_path, capsys):
    q, s = write("q.rq", QUERY), write("s.trig", STREAM)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    stream = "http://example.org/s=%s" % s
    assert main(["replay", str(q), "--stream", stream, *RANGE, "--out-dir", str(blocker / "out")]) == 2
    assert "cannot write the results in %s: " % (blocker / "out") in capsys.readouterr().err
    assert main(["replay", str(q), "--stream", stream, *RANGE, "--out", str(blocker / "out.jsonl")]) == 2
    assert "cannot write the results in %s: a file of that name is there, not a folder" % blocker in \
        capsys.readouterr().err
    assert blocker.read_text() == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "q.rq", "s.trig"]


def test_an_error_of_the_replay_itself_is_not_told_as_the_folders_and_leaves_nothing(tmp_path):
    """The records come from the running engine: an OSError raised there is its own, passed on as
    it came, for --out and --out-dir alike; only what writing the files raised names the folder."""
    from rspstar.endpoint.cli import _write_all_atomically, _write_atomically

    def failing(first):
        yield first
        raise OSError("the engine's own")
    with pytest.raises(OSError, match="the engine's own"):
        _write_atomically(tmp_path / "one" / "out.jsonl", failing("{}\n"))
    with pytest.raises(OSError, match="the engine's own"):
        _write_all_atomically(tmp_path / "many", ["q"], failing(("q", {})))
    assert list((tmp_path / "one").iterdir()) == [] and list((tmp_path / "many").iterdir()) == []


def test_query_files_named_as_their_authors_like_replay_each_into_its_own_file(write, tmp_path, capsys):
    """A query file's name is its author's (spaces, accents, a leading '_', longer than a
    registered query's id may be): the replay runs it and names its results after it, as it
    would a file named q.rq, and a query failing says its file's name."""
    s = write("s.trig", STREAM)
    stream = ["--stream", "http://example.org/s=%s" % s]
    expected = tmp_path / "expected.jsonl"
    assert main(["replay", str(write("q.rq", QUERY)), *stream, *RANGE, "--out", str(expected)]) == 0
    stems = ["oxygen per room", "température", "_draft", "tunnel-" + "x" * 70]
    queries = [str(write(stem + ".rq", QUERY)) for stem in stems]
    alone = tmp_path / "alone.jsonl"
    assert main(["replay", queries[0], *stream, *RANGE, "--out", str(alone)]) == 0, capsys.readouterr().err
    assert alone.read_text() == expected.read_text() != ""
    assert main(["replay", *queries, *stream, *RANGE, "--out-dir", str(tmp_path / "out")]) == 0, \
        capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(stem + ".jsonl" for stem in stems)
    for stem in stems:
        assert (tmp_path / "out" / (stem + ".jsonl")).read_text() == expected.read_text()
    late = write("late tunnel.rq", FAILS_AT_4)
    assert main(["replay", str(late), *stream, *RANGE, "--out", str(alone)]) == 3
    assert "rspstar replay: query late tunnel failed at 2026-03-01T08:00:04Z" in capsys.readouterr().err


def test_replay_leaves_a_callers_frozen_objects_frozen(write, tmp_path):
    """A process that froze its own objects (a server before it forks) and replays in-process
    keeps them frozen, whether the replay succeeds or not: giving the collector back what the
    replay froze must not give back the caller's."""
    import gc
    q, s = write("q.rq", QUERY), write("s.trig", STREAM)
    mine = [["the caller's"]]

    def is_frozen():        # the collector's generations hold every tracked object but the frozen
        return not any(o is mine for o in gc.get_objects())
    gc.freeze()
    try:
        assert is_frozen()
        for out, stream in ((tmp_path / "a.jsonl", s), (tmp_path / "b.jsonl", tmp_path / "missing.trig")):
            main(["replay", str(q), "--stream", "http://example.org/s=%s" % stream, *RANGE, "--out", str(out)])
            assert is_frozen()
        assert (tmp_path / "a.jsonl").read_text() != ""
    finally:
        gc.unfreeze()


def test_results_are_created_as_any_new_file_is_readable_as_the_umask_allows(write, tmp_path):
    """--out and --out-dir's files are written beside their names and renamed into place; they
    end with the mode a file the user creates gets (the umask's), not the temporary file's
    owner-only one: a team's dashboard or a colleague reads them as they read any result."""
    import stat
    q, wide, s = write("q.rq", QUERY), write("wide.rq", QUERY.replace("PT2S", "PT4S")), write("s.trig", STREAM)
    stream = ["--stream", "http://example.org/s=%s" % s]
    given = os.umask(0o022)
    try:
        assert main(["replay", str(q), *stream, *RANGE, "--out", str(tmp_path / "out.jsonl")]) == 0
        assert main(["replay", str(q), str(wide), *stream, *RANGE, "--out-dir", str(tmp_path / "out")]) == 0
    finally:
        os.umask(given)
    for path in (tmp_path / "out.jsonl", tmp_path / "out" / "q.jsonl", tmp_path / "out" / "wide.jsonl"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_results_named_as_long_as_the_folder_allows_are_written(write, tmp_path):
    """A name the folder takes (up to 255 bytes here) is taken for the results, though the file
    they are written in first carries a random part beside it."""
    s = write("s.trig", STREAM)
    stream = ["--stream", "http://example.org/s=%s" % s]
    long_stem = "oxygen-" + "o" * 238                       # its results: 251 bytes
    q = write(long_stem + ".rq", QUERY)
    out = tmp_path / ("é" * 122 + ".jsonl")                  # 250 bytes
    assert main(["replay", str(q), *stream, *RANGE, "--out", str(out)]) == 0
    assert main(["replay", str(q), str(write("q.rq", QUERY)), *stream, *RANGE, "--out-dir", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / (long_stem + ".jsonl")).read_text() == out.read_text() != ""
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted([long_stem + ".jsonl", "q.jsonl"])


def test_results_whose_name_a_folder_holds_are_refused_before_the_replay_runs(write, tmp_path, capsys, monkeypatch):
    """A folder where a query's results would go is named before any window is evaluated (not
    after an hour's replay), exit 2, and no other query's results are put in place."""
    from rspstar.endpoint.engine.replay import Replay
    a, b, s = write("a.rq", QUERY), write("b.rq", QUERY), write("s.trig", STREAM)
    stream = ["--stream", "http://example.org/s=%s" % s]
    out = tmp_path / "out"
    (out / "b.jsonl").mkdir(parents=True)
    ran, real = [], Replay.run

    def watched(self):
        for record in real(self):
            ran.append(record)
            yield record
    monkeypatch.setattr(Replay, "run", watched)
    assert main(["replay", str(a), str(b), *stream, *RANGE, "--out-dir", str(out)]) == 2
    assert "cannot write the results in %s: b.jsonl is a folder" % out in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["b.jsonl"] and list((out / "b.jsonl").iterdir()) == []
    assert main(["replay", str(a), *stream, *RANGE, "--out", str(out / "b.jsonl")]) == 2
    assert "cannot write the results in %s: b.jsonl is a folder" % out in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["b.jsonl"] and list((out / "b.jsonl").iterdir()) == []
    assert ran == []


def test_an_empty_out_or_out_dir_is_refused_not_taken_as_absent(write, tmp_path, capsys):
    """`--out "$RESULTS"` with the variable unset gives an empty name: refused (exit 2), not
    read as no --out at all (the results on standard output, --out and --out-dir both given)."""
    q, wide, s = write("q.rq", QUERY), write("wide.rq", QUERY), write("s.trig", STREAM)
    stream = ["--stream", "http://example.org/s=%s" % s]
    for given in (["--out", ""], ["--out-dir", ""], ["--out", str(tmp_path / "o.jsonl"), "--out-dir", ""],
                  ["--out", "", "--out-dir", str(tmp_path / "out")]):
        for queries in ([q], [q, wide]):
            assert main(["replay", *map(str, queries), *stream, *RANGE, *given]) == 2, given
            captured = capsys.readouterr()
            assert captured.out == "" and "rspstar replay: --out" in captured.err, captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.rq", "s.trig", "wide.rq"]


def test_results_whose_name_is_a_link_go_where_it_points(write, tmp_path):
    """Results named by a symbolic link (latest.jsonl -> the file a dashboard reads) are written
    to the file it points at, as a shell's `>` would, the link kept: not the link replaced by
    a file and what it points at left as it was."""
    q, wide, s = write("q.rq", QUERY), write("wide.rq", QUERY), write("s.trig", STREAM)
    stream = ["--stream", "http://example.org/s=%s" % s]
    expected = tmp_path / "expected.jsonl"
    assert main(["replay", str(q), *stream, *RANGE, "--out", str(expected)]) == 0
    (tmp_path / "served").mkdir()
    (tmp_path / "out").mkdir()
    for name in ("latest.jsonl", "q.jsonl"):
        (tmp_path / "served" / name).write_text("previous results\n")
    (tmp_path / "latest.jsonl").symlink_to(tmp_path / "served" / "latest.jsonl")
    (tmp_path / "out" / "q.jsonl").symlink_to(tmp_path / "served" / "q.jsonl")
    assert main(["replay", str(q), *stream, *RANGE, "--out", str(tmp_path / "latest.jsonl")]) == 0
    assert main(["replay", str(q), str(wide), *stream, *RANGE, "--out-dir", str(tmp_path / "out")]) == 0
    for link, target in ((tmp_path / "latest.jsonl", "latest.jsonl"), (tmp_path / "out" / "q.jsonl", "q.jsonl")):
        assert link.is_symlink() and link.resolve() == (tmp_path / "served" / target).resolve()
        assert (tmp_path / "served" / target).read_text() == expected.read_text()
    assert (tmp_path / "out" / "wide.jsonl").read_text() == expected.read_text()
    assert sorted(p.name for p in (tmp_path / "served").iterdir()) == ["latest.jsonl", "q.jsonl"]


def test_a_replay_interrupted_says_so_exits_130_and_leaves_no_file(write, tmp_path, capsys, monkeypatch):
    """Ctrl-C during a replay (KeyboardInterrupt where the engine happens to be) ends it with a
    line saying so, not the engine's traceback, and exit 130 as an interrupted command's;
    previous results are kept and nothing written beside them is left."""
    from rspstar.endpoint.engine.replay import Replay
    q, wide, s = write("q.rq", QUERY), write("wide.rq", QUERY), write("s.trig", STREAM)
    stream = ["--stream", "http://example.org/s=%s" % s]
    real = Replay.run

    def interrupted(self):
        for record in real(self):
            yield record
            raise KeyboardInterrupt
    monkeypatch.setattr(Replay, "run", interrupted)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "q.jsonl").write_text("previous results\n")
    for given in (["--out", str(tmp_path / "out" / "q.jsonl")], ["--out-dir", str(tmp_path / "out")]):
        assert main(["replay", str(q), *([str(wide)] if "--out-dir" in given else []), *stream, *RANGE,
                     *given]) == 130
        err = capsys.readouterr().err
        assert err == "rspstar replay: interrupted: no results written\n", err
        assert [p.name for p in (tmp_path / "out").iterdir()] == ["q.jsonl"]
        assert (tmp_path / "out" / "q.jsonl").read_text() == "previous results\n"
