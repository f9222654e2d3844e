"""First contact, as a newcomer has it: `pip install` of the repository into a fresh virtual
environment, then `rspstar serve` with no configuration from an empty directory. The
embedded defaults start, every example query has results within three minutes, and a stop
signal sent to the whole process group (as a service manager does) ends it cleanly."""
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import requests

from conftest import REPO

pytestmark = pytest.mark.slow
RESULTS_WITHIN = 180   # seconds, from the server answering


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
