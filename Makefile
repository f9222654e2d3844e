# The two commands of README.md. Each first installs what the system lacks (tools/system-setup:
# Python venv, Java 17+ for Spark, and for the tests Debian's chromium), then a virtual
# environment with the package, so they are all a newcomer needs on a fresh machine.
VENV ?= .venv
PORT ?= 8000
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test run bench bench-check clean system-run system-test

system-run:
	tools/system-setup run

system-test:
	tools/system-setup test

# setuptools tells every editable install of a package laid out as this one (the repository's
# root mapped to `rspstar`) that folders of the working directory named like it may shadow it,
# in an 11-line banner pip shows even with --quiet; no setting of pyproject.toml avoids it (the
# other editable modes put translator/, store/ and endpoint/ on sys.path as top-level names).
# The filter ignores that one notice, by its first words, and nothing else.
$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	PYTHONWARNINGS='ignore:Editable installation' $(PY) -m pip install --quiet -e '.[spark,test]'
	touch $(STAMP)

test: system-test $(STAMP)
	$(PY) -m pytest

run: system-run $(STAMP)
	$(VENV)/bin/rspstar serve --data data --port $(PORT)

bench: system-run $(STAMP)
	$(PY) bench/run_all.py

# The benchmarks small, their rows and counts asserted, nothing timed (about a minute; part of
# make test too): no benchmark rots between runs.
bench-check: system-test $(STAMP)
	$(PY) -m pytest tests/test_bench_check.py

clean:
	rm -rf $(VENV)
