"""First contact, as a newcomer has it: `pip install` of the repository into a fresh virtual
environment, then `rspstar serve` with no configuration from an empty directory. The
embedded defaults start, every example query has results within three minutes, and a stop
signal sent to the whole process group (as a service manager does) ends it cleanly."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
import requests

from conftest import REPO

RESULTS_WITHIN = 180   # seconds, from the server answering


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_wheel_installs_one_top_level_package_rspstar(tmp_path):
    # Built and installed (without its dependencies) in a clean environment: site-packages
    # gains `rspstar` and nothing else, with every part and data file inside it.
    # Built from a copy: setuptools builds in the source tree, which is left as it was.
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", ".venv", "build", "data", "scratch", "*.egg-info",
                                                                "__pycache__", ".pytest_cache", ".hypothesis"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                            "--wheel-dir", str(tmp_path / "wheels"), str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (tmp_path / "wheels").glob("rspstar-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    before = set(os.listdir(site))
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", site,
                                str(wheel)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    # (--target puts the console script in bin/ beside the packages.)
    added = {name for name in set(os.listdir(site)) - before if not name.endswith(".dist-info") and name != "bin"}
    assert added == {"rspstar"}
    [dist_info] = [name for name in os.listdir(site) if name.endswith(".dist-info")]
    record = open(os.path.join(site, dist_info, "RECORD")).read().splitlines()
    assert {line.split("/")[0] for line in record} - {dist_info, "bin", "..", ""} == {"rspstar"}
    package = os.path.join(site, "rspstar")
    for part in ("translator/parser.py", "store/stream_store.py", "endpoint/cli.py", "endpoint/http/app.py",
                 "config/default.toml", "config/queries/oxygen-warning.rq", "endpoint/static/dashboard.js"):
        assert os.path.isfile(os.path.join(package, part)), part
    assert not any(os.path.exists(os.path.join(package, folder)) for folder in ("tests", "bench", "tools"))


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
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(REPO)],
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
