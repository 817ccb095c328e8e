# `make demo` sets everything up and opens the app on the demo study; `make test` runs the tests.
# Each makes its own virtual environment in .venv on first use.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test clean xla-env

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test,tensors]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/workbench demo

test: $(STAMP)
	$(VENV)/bin/python -m pytest

# The torch_xla CPU target environment (torch 2.9.0 + torch-xla 2.9.0) that re-runs, the demo and
# the torch_xla tests use; made once outside the clone (about 2-3 minutes, 6 GB cold), as .ci/run does.
XLA_VENV ?= $(or $(WORKBENCH_XLA_VENV),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/workbench/xla-venv)
xla-env:
	@if $(XLA_VENV)/bin/python -c "import torch_xla" >/dev/null 2>&1; then echo "$(XLA_VENV) is ready"; else \
	  rm -rf $(XLA_VENV) && mkdir -p $(dir $(XLA_VENV)) && $(PYTHON) -m venv $(XLA_VENV) && \
	  $(XLA_VENV)/bin/python -m pip install --quiet --upgrade pip && \
	  $(XLA_VENV)/bin/python -m pip install --quiet --no-deps -r assets/demo/requirements-xla-cpu.txt && \
	  echo "made $(XLA_VENV)"; fi
	@echo "use it with: export WORKBENCH_XLA_PYTHON=$(XLA_VENV)/bin/python WORKBENCH_TARGET_VENV=$(XLA_VENV)"

clean:
	rm -rf $(VENV)
