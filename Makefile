# Two entry points: `make demo` and `make test`. Each creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip

.PHONY: demo test test-fast bench-locomo bench-latency lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# The core alone: numpy and scipy.
$(VENV)/.core: $(BIN)/python pyproject.toml
	$(PIP) install --quiet -e .
	touch $@

# Everything the tests need: dev tools, redis, and the benchmarks' requirements for tests/bench
# (torch 2.13.0 is pinned there so pip takes the local CPU build).
$(VENV)/.test: $(BIN)/python pyproject.toml benchmarks/requirements.txt
	$(PIP) install --quiet -e ".[dev,redis]" -r benchmarks/requirements.txt
	touch $@ $(VENV)/.core

demo: $(VENV)/.core
	$(BIN)/heaprank demo

test: $(VENV)/.test
	$(BIN)/python -m pytest tests -q -p no:cacheprovider

test-fast: $(VENV)/.test
	$(BIN)/python -m pytest tests -q -p no:cacheprovider -m "not slow"

# The benchmarks live outside the package: run them as a module from the repository root.
bench-locomo: $(VENV)/.test
	$(BIN)/python -m benchmarks locomo --candidates bm25 --feedback oracle

bench-latency: $(VENV)/.test
	$(BIN)/python -m benchmarks latency

lint: $(VENV)/.test
	$(BIN)/ruff check heaprank tests examples benchmarks
	$(BIN)/mypy heaprank

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
