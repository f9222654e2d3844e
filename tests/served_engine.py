"""`rspstar serve` in a process of its own for the tests that attack the whole engine (its Spark
JVM, its disk): started from a configuration, watched through its HTTP API, stopped with SIGINT."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from conftest import REPO
from mqtt_broker import free_port


class Served:
    def __init__(self, directory: Path, config: str, data: Path | None = None):
        self.directory = directory
        self.data = data or directory / "data"
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.config = directory / "engine.toml"
        self.config.write_text(config)
        self.log = directory / "serve.log"
        self.process: subprocess.Popen | None = None

    def start(self, wait: bool = True) -> "Served":
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rspstar.endpoint.cli", "serve", "--config", str(self.config), "--port",
             str(self.port), "--data", str(self.data)], cwd=REPO, stdout=self.log.open("a"), stderr=subprocess.STDOUT,
            start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        if wait:
            self.wait_for(self.taking_writes, 180, "the engine to take writes")
        return self

    def taking_writes(self) -> bool:
        try:
            return requests.get(self.base + "/health", timeout=5).json()["status"] != "starting"
        except (requests.RequestException, ValueError):
            return False

    def health(self) -> dict:
        return requests.get(self.base + "/health", timeout=5).json()

    def streams(self) -> dict:
        return requests.get(self.base + "/streams", timeout=10).json()

    def ingested(self, stream: str) -> int:
        found = [s for s in self.streams()["streams"] if s["stream"] == stream]
        return found[0]["ingested"] if found else 0

    def wait_for(self, condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.process.poll() is None, "the engine exited (%s): %s" % (self.process.returncode,
                                                                                self.tail())
            assert time.monotonic() < deadline, "timed out waiting for %s: %s" % (what, self.tail())
            time.sleep(0.5)

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def java(self) -> list[int]:
        """The pids of the engine's Spark JVMs (its children running java)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == self.process.pid and command.endswith(b"java"):
                found.append(int(entry.name))
        return found

    def stop(self) -> str:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return self.log.read_text(errors="replace")
