# Two commands a new user needs (README): `make demo` (main job) and `make test-all` (every test tier but the toolchain builds: what CI runs).
# `make examples` judges the built-in example solutions in the sandbox.
# Both create .venv and install the pinned requirements on first use, and again when requirements.txt changes.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup demo examples test test-all test-toolchain test-gpu lint wheels clean

$(STAMP): requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $(STAMP)

setup: $(STAMP)

# The shipped trained toy policy through the agent loop on held-out toy tasks (sandbox=auto: CPU mode without a GPU).
demo: setup
	$(PY) -m experiments.agent policy=toy tasks=toy_heldout $(ARGS)

examples: setup
	$(PY) -m experiments.evaluate $(ARGS)

lint: setup
	$(PY) -m ruff check .

# The tiers (tests/_tiers.py): `make test` is the fast tier (no sandbox workers, subprocesses, multi-device JAX
# processes, soak or benchmark runs; under 5 minutes on 2 idle cores); `make test-all` is every tier but the
# toolchain builds (what CI runs, under an hour on 2 cores); `make test-toolchain` runs the full PyTorch
# extension builds (minutes each: serial compiler work, so more cores help little).
# pytest exits 5 when it collects nothing; that is not a failure of the suite.
FAST_TIER := not (integration or e2e or slow or toolchain or gpu)

test: lint
	$(PY) -m pytest -q -m "$(FAST_TIER)" $(ARGS); rc=$$?; [ $$rc -eq 5 ] && rc=0; exit $$rc

test-all: lint
	$(PY) -m pytest -q -m "not toolchain" --durations=15 $(ARGS); rc=$$?; [ $$rc -eq 5 ] && rc=0; exit $$rc

test-toolchain: setup
	$(PY) -m pytest -q -m toolchain $(ARGS); rc=$$?; [ $$rc -eq 5 ] && rc=0; exit $$rc

# On a CUDA machine (see README "GPU machines"): only the tests that need a GPU.
test-gpu:
	$(PYTHON) -m pytest -q -m gpu $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache outputs multirun
