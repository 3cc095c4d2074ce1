# sansrs developer commands. Everything builds from scratch into .venv.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
EXTRAS ?= test,dev,fuzz,ws,spark,plot,metrics,tracing
# Editable mode (setuptools): empty = the default import hook (new modules
# seen at once; static tools such as mypy and help() miss sansrs.adapters);
# strict = a tree of links static tools read (re-run after adding a module).
EDITABLE_MODE ?=
STAMP  := $(VENV)/.installed$(if $(EDITABLE_MODE),-$(EDITABLE_MODE))

.PHONY: help venv test test-py313 lint typecheck pytest demo demo-rsocket fuzz fuzz-ci bench \
	charts clean interop-js

help:
	@echo "make demo   - run the end-to-end Spark pipeline on embedded defaults"
	@echo "             (SANSRS_SPARK_MASTER=spark://host:7077 for a cluster)"
	@echo "make demo-rsocket - the RSocket-only demo (every interaction model)"
	@echo "make test   - bootstrap .venv, run ruff, mypy --strict and pytest"
	@echo "make browser - install and bundle the browser demo, examples/browser (CI does)"
	@echo "make interop-js - install rsocket-js for tests/interop (CI does)"
	@echo "make test-py313 - the test suite under CPython 3.13 in .venv313 (the newest"
	@echo "             supported; skipped with a notice when no 3.13 is installed)"
	@echo "make fuzz   - run every atheris fuzz target (FUZZ_SECONDS each, default 300)"
	@echo "make bench  - run the benchmarks in benchmarks/, write benchmarks/results/latest.json"
	@echo "             and redraw the charts in docs/images/ (make charts: the charts alone)"

# (setup.py and the C source: the optional masking extension is built at install)
$(STAMP): pyproject.toml setup.py adapters/transport/websocket/_speedups.c
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 required")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=23" "setuptools>=77" wheel
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]" \
		$(if $(EDITABLE_MODE),--config-settings editable_mode=$(EDITABLE_MODE))
	@rm -f $(VENV)/.installed*
	@touch $(STAMP)

venv: $(STAMP)

# rsocket-js for the interop tests (tests/interop), pinned by its
# package-lock.json; installed again only when that changes. Without node
# the interop tests skip.
JS_DIR   := tests/interop/rsocket_js
JS_STAMP := $(JS_DIR)/node_modules/.installed

$(JS_STAMP): $(JS_DIR)/package-lock.json
	cd $(JS_DIR) && npm ci --no-audit --no-fund
	@touch $(JS_STAMP)

interop-js:
	@if command -v node >/dev/null && command -v npm >/dev/null; then \
		$(MAKE) --no-print-directory $(JS_STAMP); \
	else echo "node/npm not found: the rsocket-js interop tests will skip"; fi

# The browser demo (examples/browser) and its test (tests/browser): esbuild,
# rsocket-js and playwright-core (which drives the system's Chromium; it
# downloads no browser), pinned by its package-lock.json and installed again
# only when that changes; then the page's bundle, built again when its
# sources change. Without node the browser tests skip.
BROWSER_DIR    := examples/browser
BROWSER_STAMP  := $(BROWSER_DIR)/node_modules/.installed
BROWSER_BUNDLE := $(BROWSER_DIR)/dist/demo.js

$(BROWSER_STAMP): $(BROWSER_DIR)/package-lock.json
	cd $(BROWSER_DIR) && npm ci --no-audit --no-fund
	@touch $(BROWSER_STAMP)

$(BROWSER_BUNDLE): $(BROWSER_STAMP) $(wildcard $(BROWSER_DIR)/src/*.js)
	cd $(BROWSER_DIR) && npm run --silent build

.PHONY: browser
browser:
	@if command -v node >/dev/null && command -v npm >/dev/null; then \
		$(MAKE) --no-print-directory $(BROWSER_BUNDLE); \
	else echo "node/npm not found: the browser tests will skip"; fi

lint: $(STAMP)
	$(PY) -m ruff check sansrs adapters tck tests fuzz benchmarks examples

typecheck: $(STAMP)
	$(PY) -m mypy

pytest: $(STAMP) interop-js browser
	$(PY) -m pytest $(PYTEST_ARGS)

test: lint typecheck pytest

# The supported CPythons are 3.11 (.venv, the default python3 here) to 3.13
# (pyproject classifiers, tox.ini); CI runs both ends. ruff and mypy check the
# code once (mypy for 3.11); 3.13 runs the test suite, with the WebSocket
# masking's pure-Python paths (3.11 runs the C extension where it was built:
# every WebSocket test both ways, tests/conftest.py). No CPython 3.13 on the
# machine: a notice, not a failure (3.11 stays mandatory).
test-py313:
	@py=$$(.ci/find-python 3.13) || { \
		echo "test-py313: SKIPPED, no CPython 3.13 found (python3.13 on PATH or under pyenv)"; \
		exit 0; }; \
	echo "test-py313: $$py"; \
	SANSRS_TEST_MASKING=python $(MAKE) --no-print-directory PYTHON=$$py VENV=.venv313 pytest

demo: $(STAMP)
	$(PY) examples/pipeline.py

demo-rsocket: $(STAMP)
	$(PY) examples/demo.py

fuzz: $(STAMP)
	$(PY) fuzz/run_all.py --seconds $${FUZZ_SECONDS:-300}

# A short, bounded run of every target (about 60 s in total), as CI does.
fuzz-ci: $(STAMP)
	$(PY) fuzz/run_all.py --total-seconds 60

# Every benchmark, its figures written to benchmarks/results/latest.json and
# drawn as SVG charts in docs/images/ (matplotlib: the "plot" extra).
bench: $(STAMP)
	$(PY) benchmarks/run_all.py --json benchmarks/results/latest.json
	$(MAKE) --no-print-directory charts

charts: $(STAMP)
	$(PY) -c 'import matplotlib' 2>/dev/null || $(PY) -m pip install --quiet -e ".[plot]"
	$(PY) benchmarks/charts.py benchmarks/results/latest.json docs/images

clean:
	rm -rf $(VENV) .venv313 build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis
