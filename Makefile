# Two entry points (see README): `make demo` and `make test`.
# Both create or update .venv first; the stamp makes re-runs instant unless pyproject.toml changed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.embedlab-installed

.PHONY: demo test test-slow test-browser browser-deps bench venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# CPU build of torch (a local wheel on these machines); a bare `torch` would pull CUDA.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[torch,test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/embedlab train --corpus demo --runs-dir runs

# The default suite takes about 10 minutes on 2 cores. In CI (CI=true) the budget allows the slow
# tests (many random kill points) and the headless-browser test as well.
test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)
	@if [ -n "$$CI" ]; then $(MAKE) --no-print-directory test-slow test-browser; fi

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow $(PYTEST_ARGS)

# Debian's chromium + chromium-driver drive the TensorBoard dashboards headless.
browser-deps:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; }

test-browser: $(STAMP) browser-deps
	$(BIN)/python -m pytest -q -m browser $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/vs_gensim.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
