# `make demo` sets everything up and opens the app on the demo study; `make test` runs the tests.
# Each makes its own virtual environment in .venv on first use.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/workbench demo

test: $(STAMP)
	$(VENV)/bin/python -m pytest

clean:
	rm -rf $(VENV)
