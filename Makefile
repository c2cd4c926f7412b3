# Set-up and checks. `make test` and `make demo` create .venv on first use: the demo installs the zoo
# and its runtime stack, the tests add every extra and the test tools.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONPATH := $(CURDIR)
# Test processes (pytest-xdist): one per core (at most 4: each holds up to a few GB). The full
# suite's tests also wait on processes they start (training clusters, notebooks, exports), and one
# process more than cores fills that time (on 2 cores: 825 s of pytest with 3 processes, 873 s with
# 2), but pays for it in CPU time: another process's imports, and processes contending for the cores
# (a half of the suite on 3 processes switched contexts 806,000 times involuntarily).
CORES := $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n < 4 ? n : 4 )))
PYTEST_WORKERS ?= $(CORES)
PYTEST_FAST_WORKERS ?= $(CORES)
DEMO_DIR ?= runs/demo
EXTRAS := requirements-keras3.txt requirements-torch.txt requirements-beam.txt requirements-test.txt

.PHONY: install install-runtime demo test test-fast lint clean

# The zoo itself (`pip install -e .`: zoo, tpu and export with the runtime stack of requirements.txt
# and the zoo-* commands), all the demo needs. Reinstalls only when its files change.
$(RUNTIME_STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $(RUNTIME_STAMP)

# The test stack on top: every extra (Keras 3 and keras-hub, PyTorch and transformers, Beam) and the
# test tools, resolved together with the runtime stack (keras-hub pins kagglesdk, which the
# runtime's newest kaggle would not take: pip picks the kaggle that fits both), then checked.
$(STAMP): $(RUNTIME_STAMP) $(EXTRAS)
	$(PY) -m pip install --quiet -r requirements.txt $(addprefix -r ,$(EXTRAS))
	$(PY) -m pip check
	touch $(STAMP)

install-runtime: $(RUNTIME_STAMP)

install: $(STAMP)

# The main job on the synthetic demo data, on CPU in a few minutes: learn a vocabulary, train a
# small Funnel-Transformer classifier, evaluate it, export a SavedModel, then load that SavedModel
# in a fresh process and classify raw sentences.
demo: $(RUNTIME_STAMP)
	rm -rf $(DEMO_DIR)
	$(PY) -m tpu.train --config tpu/configs/demo.json --model-dir $(DEMO_DIR)
	@echo "== predictions of the exported SavedModel ($(DEMO_DIR)/export), loaded in a new process:"
	$(PY) -m export.predict --saved-model $(DEMO_DIR)/export \
	  "the acting was superb and the story felt truly wonderful" \
	  "the plot was dull and the ending seemed really awful" \
	  "the soundtrack was not bad" \
	  "at first the film felt boring but the finale was brilliant and the cast was charming"

# The suite in two sessions of about equal length, each with new test processes: what one
# process accumulates over a session (TensorFlow's and XLA's caches of compiled functions,
# allocator high-water marks) stays within the memory budget that tests/memory_guard.py checks
# (one session of everything grew a worker to 4.9 GB). Tests that share a session fixture are
# in the same half (the prose vocabulary: tests/zoo/text and tests/tpu/tasks); the second session
# runs every test outside TESTS_FIRST.
TESTS_FIRST := tests/zoo tests/export tests/tpu/tasks

test: $(STAMP)
	$(VENV)/bin/ruff check zoo tpu export benchmarks tests
	$(VENV)/bin/mypy
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal $(TESTS_FIRST)
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal tests $(addprefix --ignore ,$(TESTS_FIRST))

# Everything but the tests marked slow.
test-fast: $(STAMP)
	$(PY) -m pytest -n $(PYTEST_FAST_WORKERS) --dist worksteal -m "not slow"

# ruff, then mypy on the typed public API (the modules `[tool.mypy]` of pyproject.toml lists; about 12
# CPU-seconds from scratch, a few with its cache, .mypy_cache).
lint: $(STAMP)
	$(VENV)/bin/ruff check zoo tpu export benchmarks tests
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
