# Two entry points: `make demo` and `make test`. Each creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip

.PHONY: demo test typecheck-consumer test-fast kernels-strict kernels-stubs kernels-debug \
	bench-locomo bench-latency bench-langchain lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# The core alone: numpy and scipy (and its optional C kernels, one module per stage that has
# them, candidates and features, built by pip when a compiler is at hand; the targets below
# rebuild them when their source changes).
STAGES := candidates features
KERNELS := setup.py heaprank/_accel/_kernels.h $(foreach s,$(STAGES),heaprank/_accel/_$(s).c)
$(VENV)/.core: $(BIN)/python pyproject.toml $(KERNELS)
	$(PIP) install --quiet -e .
	touch $@

# Everything the tests need: dev tools, redis, postgres (psycopg), and the benchmarks' requirements for tests/bench
# (torch 2.13.0 is pinned there so pip takes the local CPU build).
$(VENV)/.test: $(BIN)/python pyproject.toml benchmarks/requirements.txt $(KERNELS)
	$(PIP) install --quiet -e ".[dev,redis,postgres,plot,mcp]" -r benchmarks/requirements.txt
	touch $@ $(VENV)/.core

# The LangChain and LlamaIndex packages (editable, beside the editable core they require), their
# test deps, and what their tests and examples need (FAISS, rank-bm25 for BM25Retriever,
# langchain-huggingface, llama-index-embeddings-huggingface; MiniLM and torch come with
# benchmarks/requirements.txt above).
INTEGRATIONS := integrations/langchain/pyproject.toml integrations/llama-index/pyproject.toml
$(VENV)/.integrations: $(VENV)/.test $(INTEGRATIONS)
	$(PIP) install --quiet -e . -e "integrations/langchain[test]" -e "integrations/llama-index[test]" \
		langchain-community langchain-huggingface faiss-cpu rank-bm25 llama-index-embeddings-huggingface
	touch $@

demo: $(VENV)/.core
	$(BIN)/heaprank demo

# The C kernels, checked: every module builds with warnings as errors (into a temporary folder:
# the editable install's modules stay as they are; each module is optional, so a failed one
# shows as a missing file), each stub matches its built module, and the unit and property tests
# pass under the debug allocator (a read of freed memory crashes there) with the kernels on.
kernels-strict: $(VENV)/.test
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	CFLAGS="-Wall -Wextra -Wno-unused-parameter -Werror" $(BIN)/python setup.py -q build_ext \
		--build-temp "$$tmp/temp" --build-lib "$$tmp/lib" && \
	for s in $(STAGES); do ls "$$tmp"/lib/heaprank/_accel/_$$s.*.so >/dev/null \
		|| { echo "heaprank._accel._$$s did not build with -Werror"; exit 1; }; done

kernels-stubs: $(VENV)/.test
	$(BIN)/python -m mypy.stubtest $(foreach s,$(STAGES),heaprank._accel._$(s))

kernels-debug: $(VENV)/.test
	PYTHONMALLOC=debug $(BIN)/python -m pytest tests/unit tests/property -q -p no:cacheprovider \
		-p no:asyncio

# The core suite runs without pytest-asyncio (the integrations' test deps install it; its unset-loop
# warning would be an error under the core's filterwarnings = error). Its unit and property tests
# run a second time on the pure-Python passes alone (the C kernels' twins, and what an install
# without a compiler runs). Each package runs its own suite from its folder, with its own config.
test: $(VENV)/.test $(VENV)/.integrations kernels-strict kernels-stubs
	$(BIN)/python -m pytest tests -q -p no:cacheprovider -p no:asyncio
	HEAPRANK_PURE_PYTHON=1 $(BIN)/python -m pytest tests/unit tests/property -q -p no:cacheprovider \
		-p no:asyncio
	$(MAKE) --no-print-directory kernels-debug
	cd integrations/langchain && ../../$(BIN)/python -m pytest tests -q
	cd integrations/llama-index && ../../$(BIN)/python -m pytest tests -q
	$(MAKE) typecheck-consumer

# An application's view of the three packages as installed: mypy --strict on a small file that
# imports each (from a folder of its own, so the source tree is not on mypy's path).
typecheck-consumer: $(VENV)/.integrations
	cd integrations/typing && ../../$(BIN)/mypy --strict --config-file mypy.ini consumer.py

test-fast: $(VENV)/.test $(VENV)/.integrations
	$(BIN)/python -m pytest tests -q -p no:cacheprovider -p no:asyncio -m "not slow"
	HEAPRANK_PURE_PYTHON=1 $(BIN)/python -m pytest tests/unit tests/property -q -p no:cacheprovider \
		-p no:asyncio -m "not slow"
	cd integrations/langchain && ../../$(BIN)/python -m pytest tests -q -m "not slow"
	cd integrations/llama-index && ../../$(BIN)/python -m pytest tests -q -m "not slow"

# The benchmarks live outside the package: run them as a module from the repository root.
bench-locomo: $(VENV)/.test
	$(BIN)/python -m benchmarks locomo --candidates bm25 --feedback oracle

bench-latency: $(VENV)/.test
	$(BIN)/python -m benchmarks latency

# LoCoMo end to end through langchain-heaprank (store, retriever, feedback callback), beside the
# core benchmark's dense path; fails if the two gains differ by more than 0.01 MRR.
bench-langchain: $(VENV)/.integrations
	HF_HUB_OFFLINE=1 $(BIN)/python -m benchmarks locomo-langchain \
		--out benchmarks/results/locomo_langchain.json

lint: $(VENV)/.test $(VENV)/.integrations
	$(BIN)/ruff check heaprank tests examples benchmarks integrations
	$(BIN)/mypy heaprank
	cd integrations/langchain && ../../$(BIN)/mypy langchain_heaprank
	cd integrations/llama-index && ../../$(BIN)/mypy -p llama_index.postprocessor.heaprank

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info integrations/*/*.egg-info \
		heaprank/_accel/*.so
