# Two entry points (see README): `make demo` and `make test`.
# Both create or update .venv first; the stamp makes re-runs instant unless pyproject.toml changed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.embedlab-installed

.PHONY: demo test test-slow lint bench venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# CPU build of torch (a local wheel on these machines); a bare `torch` would pull CUDA.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/embedlab train --corpus demo --runs-dir runs

test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/vs_gensim.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
