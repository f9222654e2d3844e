"""The benchmarks keep running between their runs (`make bench-check`): every bench script
imports, and the tables of the ones users compare the engine by run small in their check mode,
as commands, their rows and counts asserted and nothing timed (`--check`: nothing is written to
bench/out)."""
import subprocess
import sys

import pytest

from conftest import REPO

BENCH = REPO / "bench"


def test_every_benchmark_imports():
    # In a process of its own: the scripts put bench/ on the path and import one another.
    scripts = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "common")
    assert len(scripts) >= 18
    program = ("import sys; sys.path.insert(0, %r)\n"
               "for name in %r:\n"
               "    assert callable(__import__(name).main), name\n" % (str(BENCH), scripts))
    done = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def check(script: str, timeout: int) -> str:
    done = subprocess.run([sys.executable, str(BENCH / script), "--check"], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return done.stdout


def test_the_replay_tables_run_as_commands_with_query_files_in_their_check_mode():
    # Bulk, sliding (annotated and plain readings), several thresholds and a thousand query
    # files, each small: the commands' rows equal the in-process runs', twenty files cost one
    # file's store evaluations.
    out = check("replay_throughput.py", 300)
    for title in ("Replay against a bare bulk_load", "Sliding windows against raw per-window evaluation: annotated",
                  "Sliding windows against raw per-window evaluation: plain readings",
                  "Several queries in one `rspstar replay` command", "A thousand query files in one `rspstar replay`"):
        assert "### " + title in out, title


@pytest.mark.slow
def test_the_live_table_registers_over_http_on_rspstar_serve_in_its_check_mode():
    # The real `rspstar serve` (Spark, simulators), twenty queries POSTed to /queries, each
    # evaluated with rows, then deleted.
    out = check("many_queries_live.py", 400)
    assert "| with 20 more queries of one shape |" in out and "| after deleting them |" in out
