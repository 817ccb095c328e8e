# `make demo` sets everything up and opens the app on the demo study; `make test` runs the tests,
# the torch_xla ones included (`make test-quick`: without them and the browser tests); `make lint` runs the static checks CI runs.
# Each makes its own virtual environment in .venv on first use.
PYTHON ?= python3
VENV := .venv

.PHONY: demo test test-quick lint install-check clean xla-env

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip

# The app alone for the demo; the tests add their tools and torch (checkpoint comparison). Either
# builds the log scan's C loops (setup.py) in place again when their sources change.
$(VENV)/.app: pyproject.toml setup.py $(wildcard workbench/verify/*.c) | $(VENV)/bin/python
	$(VENV)/bin/python -m pip install --quiet -e .
	touch $@

$(VENV)/.test: pyproject.toml setup.py $(wildcard workbench/verify/*.c) | $(VENV)/bin/python
	$(VENV)/bin/python -m pip install --quiet -e '.[test,tensors]'
	touch $@

demo: $(VENV)/.app
	$(VENV)/bin/workbench demo

# The torch_xla CPU target environment (torch 2.9.0 + torch-xla 2.9.0) that re-runs, the demo and
# the torch_xla tests use; made once outside the clone (about 2-3 minutes, 6 GB cold), reused after.
XLA_VENV ?= $(or $(WORKBENCH_XLA_VENV),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/workbench/xla-venv)
export WORKBENCH_XLA_PYTHON ?= $(XLA_VENV)/bin/python
export WORKBENCH_TARGET_VENV ?= $(XLA_VENV)
xla-env:
	@if $(XLA_VENV)/bin/python -c "import torch_xla" >/dev/null 2>&1; then echo "$(XLA_VENV) is ready"; else \
	  rm -rf $(XLA_VENV) && mkdir -p $(dir $(XLA_VENV)) && $(PYTHON) -m venv $(XLA_VENV) && \
	  $(XLA_VENV)/bin/python -m pip install --quiet --upgrade pip && \
	  $(XLA_VENV)/bin/python -m pip install --quiet --no-deps -r assets/demo/requirements-xla-cpu.txt && \
	  echo "made $(XLA_VENV)"; fi
	@echo "use it with: export WORKBENCH_XLA_PYTHON=$(XLA_VENV)/bin/python WORKBENCH_TARGET_VENV=$(XLA_VENV)"

# Every test a fresh machine can run: the torch_xla environment first (make exports its two
# variables to pytest), so the variant-matrix, re-run and probe tests run rather than skip.
# pytest's -ra summary names each skipped test and what to install for it (sshd, Chromium).
test: $(VENV)/.test xla-env
	$(VENV)/bin/python -m pytest

# The same without the torch_xla environment and its runs, and without the browser tests: for a
# change that does not touch re-runs, the probe or the HTML report. CI still runs everything.
test-quick: $(VENV)/.test
	WORKBENCH_TESTS=quick $(VENV)/bin/python -m pytest

# Style, the floors' import contracts (pyproject.toml), no import circle between files (deferred,
# TYPE_CHECKING and import_module imports counted) and types on the two lowest floors.
lint: $(VENV)/.test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/python .ci/import_cycles.py
	$(VENV)/bin/mypy domain storage

# A wheel installed in a fresh environment outside the clone builds the demo and starts the app.
install-check: $(VENV)/bin/python
	PYTHON=$(VENV)/bin/python .ci/install-check

clean:
	rm -rf $(VENV)
