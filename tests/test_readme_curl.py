"""The README's "Try it" block, run as written (curl in a shell) against `rspstar serve` on the
packaged configuration, started as `make run` starts it (`--data data` from the working
directory, so that `$(cat data/token)` reads the token the engine made). Only the port differs:
the block's 8000 becomes a free one."""
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parents[1]
STARTED_WITHIN = 180        # seconds for Spark to start and ingestion to take writes
EVENT_WITHIN = 10           # the README: "Within ten seconds an event names the kitchen."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def readme_block() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Try it", 1)[1]
    [block] = re.findall(r"```sh\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    return block


def test_the_readme_block_is_the_one_this_test_runs():
    block = readme_block()
    assert "TOKEN=$(cat data/token)" in block and "curl -N http://127.0.0.1:8000/queries/warm/events &" in block
    assert block.count("127.0.0.1:8000") == 4


@pytest.mark.slow
def test_the_readmes_curl_block_runs_as_written_and_an_event_names_the_kitchen(tmp_path):
    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "rspstar.endpoint.cli", "serve", "--data", "data", "--port",
                               str(port)], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    base = "http://127.0.0.1:%d" % port
    try:
        deadline = time.monotonic() + STARTED_WITHIN
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                if requests.get(base + "/health", timeout=5).json()["status"] != "starting":
                    break
            except requests.ConnectionError:
                pass
            time.sleep(1)       # polling a server process that starts Spark
        # The block as written; the event stream it leaves running in the background is
        # followed for the time the README promises, then ended.
        script = readme_block().replace("127.0.0.1:8000", "127.0.0.1:%d" % port)
        script += "\nsleep %d\nkill %%1\n" % (EVENT_WITHIN + 2)
        done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        registered, *rest = done.stdout.split("\n", 1)
        assert '"id": "warm"' in registered
        events = [line for line in done.stdout.splitlines() if line.startswith("data:")]
        assert any("http://example.org/kitchen" in line for line in events), done.stdout[-3000:]
        assert re.search(r'"n"\s*:\s*\{[^}]*"value"\s*:\s*"[1-9]', done.stdout), done.stdout[-2000:]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        code = server.wait(timeout=120)
        log.close()
    assert code == 0, (tmp_path / "serve.log").read_text()[-3000:]
