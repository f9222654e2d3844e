# The two commands of README.md. Both set up a virtual environment first (fresh machine:
# Python 3.11+ with venv, Java 17 for Spark, and the package registry), so they are all a
# newcomer needs. The tests also need Debian's chromium (.ci/run installs it).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test run bench clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,spark]'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest

run: $(STAMP)
	$(VENV)/bin/rspstar serve --config config/default.toml --data data --port 8000

bench: $(STAMP)
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV)
