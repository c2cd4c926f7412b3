# Set-up and checks. `make test` and `make demo` create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONPATH := $(CURDIR)

.PHONY: install test test-fast lint clean

# Reinstalls only when a requirements file changes.
$(STAMP): requirements.txt requirements-test.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-test.txt
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(VENV)/bin/ruff check zoo tpu tests
	$(PY) -m pytest

# Everything but the tests marked slow.
test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check zoo tpu tests

clean:
	rm -rf $(VENV) .pytest_cache
