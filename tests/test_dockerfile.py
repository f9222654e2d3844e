"""The Dockerfile, linted. What this can check without a Docker engine: the instructions, a
pinned base whose Debian release has the Java package it installs, no architecture-bound
JAVA_HOME, every copied path present, the package installed, a non-root user, and a command
that starts `rspstar serve` on the exposed port. What it cannot: that the image builds and
runs (no Docker daemon here); the README says how to build it."""
import json
import re
import shlex

from conftest import REPO

INSTRUCTIONS = {"FROM", "RUN", "ENV", "WORKDIR", "COPY", "USER", "VOLUME", "EXPOSE", "ENTRYPOINT", "CMD", "ARG", "LABEL"}
# Debian releases the python images are built on, and the Java runtime each one ships.
JAVA_OF_RELEASE = {"bookworm": "openjdk-17-jre-headless", "trixie": "openjdk-21-jre-headless"}


def instructions():
    text = (REPO / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    result = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        result.append((number, keyword, rest.strip()))
    return result


def test_dockerfile_lints_clean():
    found = instructions()
    problems = [(n, k) for n, k, _ in found if k not in INSTRUCTIONS or k != k.upper()]
    assert not problems, "unknown or lower-case instructions: %s" % problems
    assert found[0][1] == "FROM"
    base = re.match(r"python:3\.1[1-9]-slim-(\w+)$", found[0][2])
    assert base and base.group(1) in JAVA_OF_RELEASE, "the base must name its Debian release: %s" % found[0][2]
    runs = " ".join(rest for _, k, rest in found if k == "RUN")
    assert JAVA_OF_RELEASE[base.group(1)] in runs and "rm -rf /var/lib/apt/lists/*" in runs
    assert "--no-install-recommends" in runs and "apt-get update" in runs
    assert "pip install --no-cache-dir ." in runs
    envs = " ".join(rest for _, k, rest in found if k == "ENV")
    assert "amd64" not in envs and "arm64" not in envs
    for _, keyword, rest in found:
        if keyword == "COPY":
            *sources, _ = shlex.split(rest)
            for source in sources:
                assert (REPO / source).exists(), "COPY of a missing path: %s" % source
    users = [rest for _, k, rest in found if k == "USER"]
    assert users and users[-1] != "root"
    exposed = [rest for _, k, rest in found if k == "EXPOSE"]
    command = json.loads([rest for _, k, rest in found if k == "CMD"][-1])
    entry = json.loads([rest for _, k, rest in found if k == "ENTRYPOINT"][-1])
    assert entry == ["rspstar"] and command[0] == "serve"
    assert command[command.index("--port") + 1] in exposed
    assert command[command.index("--host") + 1] == "0.0.0.0"
    assert "--config" not in command or (REPO / command[command.index("--config") + 1]).is_file()
