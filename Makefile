# The two commands of README.md. Both set up a virtual environment first (fresh machine:
# Python 3.11+ with venv, and the package registry), so they are all a newcomer needs.
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
	$(VENV)/bin/rspstar replay config/queries/oxygen-warning.rq \
		--stream http://example.org/stream/oxygen=config/streams/oxygen.trig \
		--from 2026-03-01T08:00:00Z --to 2026-03-01T08:01:00Z

bench: $(STAMP)
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV)
