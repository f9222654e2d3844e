"""First contact, as a newcomer has it: `pip install` of the repository into a fresh virtual
environment, then `rspstar serve` with no configuration from an empty directory. The
embedded defaults start, every example query has results within three minutes, and a stop
signal sent to the whole process group (as a service manager does) ends it cleanly. Without the
`spark` extra, the library alone: the Python API, a replay and a server without sources run,
and `rspstar serve` on the default configuration names the extra it needs."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from conftest import REPO

RESULTS_WITHIN = 180   # seconds, from the server answering


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Wheel:
    path: Path
    build_log: str          # pip's and setuptools' output (pip -v)


@dataclass
class Installed:
    site: Path              # a clean environment's site-packages, the wheel installed in it
    before: set             # what site-packages held before


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Wheel:
    """The wheel, built from a copy of the repository (setuptools builds in the source tree,
    which is left as it was)."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", ".venv", "build", "data", "scratch", "*.egg-info",
                                                                "__pycache__", ".pytest_cache", ".hypothesis"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps",
                            "--wheel-dir", str(tmp_path / "wheels"), str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    [path] = (tmp_path / "wheels").glob("rspstar-*.whl")
    return Wheel(path, built.stdout + built.stderr)


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Installed:
    """The wheel installed (without its dependencies) in a clean environment."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    before = set(os.listdir(site))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
                           str(wheel.path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return Installed(site, before)


def test_a_clean_build_says_nothing_about_undeclared_packages(wheel):
    # setuptools warns, in a banner of ~30 lines each, about every folder it installs that the
    # package list does not declare (the dashboard's files, the packaged queries, background).
    assert "setuptools" in wheel.build_log and "adding 'rspstar/endpoint/static/dashboard.js'" in wheel.build_log
    assert "would be ignored" not in wheel.build_log, wheel.build_log[wheel.build_log.find("would be ignored") - 2000:][:4000]
    assert "SetuptoolsDeprecationWarning" not in wheel.build_log


def test_the_wheel_installs_one_top_level_package_rspstar(installed):
    # site-packages gains `rspstar` and nothing else, with every part and data file inside it.
    site = installed.site
    # (--target puts the console script in bin/ beside the packages.)
    added = {name for name in set(os.listdir(site)) - installed.before if not name.endswith(".dist-info") and name != "bin"}
    assert added == {"rspstar"}
    [dist_info] = [name for name in os.listdir(site) if name.endswith(".dist-info")]
    record = open(os.path.join(site, dist_info, "RECORD")).read().splitlines()
    assert {line.split("/")[0] for line in record} - {dist_info, "bin", "..", ""} == {"rspstar"}
    package = os.path.join(site, "rspstar")
    for part in ("translator/parser.py", "store/stream_store.py", "endpoint/cli.py", "endpoint/http/app.py",
                 "config/default.toml", "config/queries/oxygen-warning.rq", "config/background/homecare-profiles.ttl",
                 "endpoint/static/dashboard.js", "endpoint/static/index.html"):
        assert os.path.isfile(os.path.join(package, part)), part
    assert not any(os.path.exists(os.path.join(package, folder)) for folder in ("tests", "bench", "tools"))


def test_the_readmes_python_block_runs_from_an_empty_directory_against_the_wheel(installed, tmp_path):
    # A notebook user has the installed package and nothing of the repository: the block runs
    # with the wheel's rspstar (its dependencies from this environment) in an empty directory.
    [block] = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    script = tmp_path / "readme_block.py"
    script.write_text("import rspstar, sys\nprint(rspstar.__file__, file=sys.stderr)\n" + block)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(installed.site)
    done = subprocess.run([sys.executable, str(script)], cwd=empty, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.splitlines()[0] == str(installed.site / "rspstar" / "__init__.py")
    assert "http://example.org/kitchen  31" in done.stdout
    assert "<Results: 4 evaluations, 2 rows, 2026-03-01T08:00:05Z to 2026-03-01T08:00:20Z>" in done.stdout


def test_the_editable_install_answers_to_rspstar_only(tmp_path):
    # The development install (make test's): from any directory, the parts are rspstar.*.
    probe = ("import importlib.util as u, rspstar.endpoint.cli as cli; "
             "print(cli.__file__, [u.find_spec(n) is None for n in ('translator', 'store', 'endpoint')])")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    path, missing = done.stdout.rsplit(" ", 3)[0], done.stdout.strip().split(" ", 1)[1]
    assert path == str(REPO / "endpoint" / "cli.py") and missing == "[True, True, True]"


@pytest.mark.slow
def test_pip_install_then_serve_from_an_empty_directory(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(REPO) + "[spark]"],
                               capture_output=True, text=True, timeout=1200)
    assert installed.returncode == 0, installed.stderr[-3000:]
    empty = tmp_path / "empty"
    empty.mkdir()
    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen([str(venv / "bin" / "rspstar"), "serve", "--port", str(port), "--data",
                               str(tmp_path / "data")], cwd=empty, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    base = "http://127.0.0.1:%d" % port
    try:
        deadline = None
        waiting = {"oxygen-warning", "tvs-warning", "homecare-low-emergency"}
        while waiting:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                queries = requests.get(base + "/queries", timeout=5).json()["queries"]
            except requests.ConnectionError:
                queries = None
            if queries is not None:
                deadline = deadline or time.monotonic() + RESULTS_WITHIN
                assert {q["id"] for q in queries} >= waiting | {"oxygen-warning"}
                waiting -= {q["id"] for q in queries if q["status"]["results_emitted"] > 0}
                assert time.monotonic() < deadline, "no results within %d s from %s" % (RESULTS_WITHIN, waiting)
            time.sleep(2)
        assert requests.get(base + "/sparql", timeout=5).status_code == 200
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        code = server.wait(timeout=120)
        log.close()
    output = (tmp_path / "serve.log").read_text()
    assert code == 0 and "stopped cleanly" in output, output[-3000:]
    assert "Traceback" not in output.split("stopping (signal")[0]


LIBRARY_USE = r"""
import sys
from datetime import datetime, timedelta, timezone
import rspstar
assert "pyspark" not in sys.modules
start = datetime(2026, 3, 1, 8, 0, tzinfo=timezone.utc)
engine = rspstar.Engine(start=start)
warm = engine.register("PREFIX ex: <http://example.org/> SELECT ?room ?t "
                       "FROM NAMED WINDOW ex:w ON ex:temperature [RANGE PT10S STEP PT5S] "
                       "WHERE { WINDOW ex:w { GRAPH ?g { ?room ex:temperature ?t FILTER(?t > 30) } } }")
engine.push("http://example.org/temperature", "<http://example.org/kitchen> <http://example.org/temperature> 31 .",
            time=start + timedelta(seconds=2))
engine.advance(start + timedelta(seconds=10))
print(warm.dataframe().to_string())
print(sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j", "pyarrow")))
"""


@pytest.mark.slow
def test_pip_install_without_the_spark_extra_gives_the_library_and_serve_names_the_extra(tmp_path, write):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python, rspstar = str(venv / "bin" / "python"), str(venv / "bin" / "rspstar")
    installed = subprocess.run([python, "-m", "pip", "install", "--quiet", str(REPO)], capture_output=True, text=True,
                               timeout=1200)
    assert installed.returncode == 0, installed.stderr[-3000:]
    listed = subprocess.run([python, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True).stdout
    assert "pyspark" not in listed.lower() and "pyarrow" not in listed.lower(), listed
    empty = tmp_path / "empty"
    empty.mkdir()
    # The Python API.
    used = subprocess.run([python, "-c", LIBRARY_USE], cwd=empty, capture_output=True, text=True, timeout=300)
    assert used.returncode == 0, used.stderr[-3000:]
    assert "http://example.org/kitchen  31" in used.stdout and used.stdout.rstrip().endswith("[]")
    # A replay.
    query = write("q.rq", "PREFIX ex: <http://example.org/> SELECT ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S] "
                          "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }")
    stream = write("s.trig", '@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> .\n'
                             'ex:e1 prov:generatedAtTime "2026-03-01T08:00:01Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .'
                             '\nex:e1 { ex:o ex:v 7 . }\n')
    replayed = subprocess.run([rspstar, "replay", str(query), "--stream", "http://example.org/s=%s" % stream, "--from",
                               "2026-03-01T08:00:00Z", "--to", "2026-03-01T08:00:02Z"], cwd=empty, capture_output=True,
                              text=True, timeout=300)
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    assert json.loads(replayed.stdout)["bindings"] == [{"v": '"7"^^<http://www.w3.org/2001/XMLSchema#integer>'}]
    # serve: the default configuration has sources, which need the extra.
    refused = subprocess.run([rspstar, "serve", "--port", str(free_port()), "--data", str(tmp_path / "data")],
                             cwd=empty, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "pip install 'rspstar[spark]'" in refused.stderr, refused.stderr[-3000:]
    assert "Traceback" not in refused.stderr
    # ... and a configuration without sources is served without Spark.
    config = write("engine.toml", '[http]\ntoken = ""\n')
    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen([rspstar, "serve", "--config", str(config), "--port", str(port), "--data",
                               str(tmp_path / "data2")], cwd=empty, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    base = "http://127.0.0.1:%d" % port
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                if requests.get(base + "/health", timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-3000:]
            time.sleep(0.5)
        registered = requests.post(base + "/queries?id=w", data=(REPO / "config" / "queries" / "oxygen-warning.rq")
                                   .read_text(), headers={"Content-Type": "application/sparql-query"}, timeout=10)
        assert registered.status_code == 201, registered.text
        assert requests.get(base + "/sparql", params={"query": "ASK {}"}, timeout=10).json()["boolean"] is True
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        code = server.wait(timeout=120)
        log.close()
    output = (tmp_path / "serve.log").read_text()
    assert code == 0 and "stopped cleanly" in output and "runs without Spark" in output, output[-3000:]
