"""A real Spark standalone cluster for the tests: a master and workers started from the installed
pyspark (`spark-class ... Master` / `... Worker`) on loopback, stopped with the test."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pyspark

from mqtt_broker import free_port
from rspstar.store.ingestion import find_java_home


class Cluster:
    def __init__(self, directory: Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.directory = directory
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port, self.ui = free_port(), free_port()
        self.processes: list[subprocess.Popen] = []
        home = Path(pyspark.__file__).parent
        self.spark_class = str(home / "bin" / "spark-class")
        self.environment = {**os.environ, "SPARK_HOME": str(home), "JAVA_HOME": str(find_java_home()),
                            "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(directory / "logs")}

    @property
    def master(self) -> str:
        return "spark://127.0.0.1:%d" % self.port

    def _start(self, name: str, *arguments: str) -> None:
        log = (self.directory / (name + ".log")).open("wb")
        self.processes.append(subprocess.Popen([self.spark_class, *arguments], env=self.environment, stdout=log,
                                               stderr=subprocess.STDOUT, start_new_session=True))

    def start(self, timeout: float = 120) -> "Cluster":
        self.directory.mkdir(parents=True, exist_ok=True)
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
                    "--webui-port", str(self.ui))
        for k in range(self.workers):
            work = self.directory / ("work%d" % k)
            work.mkdir(exist_ok=True)
            self._start("worker%d" % k, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores",
                        str(self.cores), "--memory", self.memory, "--webui-port", str(free_port()), "--work-dir",
                        str(work), self.master)
        deadline = time.monotonic() + timeout
        while self.alive_workers() < self.workers:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.processes):
                logs = "\n".join(p.read_text()[-1500:] for p in sorted(self.directory.glob("*.log")))
                self.stop()
                raise AssertionError("the Spark cluster did not start:\n" + logs)
            time.sleep(0.5)
        return self

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/json/" % self.ui, timeout=2) as answer:
                state = json.load(answer)
        except (OSError, ValueError):
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        self.processes.clear()
        shutil.rmtree(self.directory / "logs", ignore_errors=True)
