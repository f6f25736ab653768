# commopt developer commands. `make demo` and `make test` work on a fresh clone: both create
# the local virtual environment (.venv) first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# CPU build of torch for these machines; pyproject.toml stays permissive (torch>=2.6).
TORCH_PIN := torch==2.13.0
# the linter CI runs: a new ruff release can add rules, so it is pinned like torch
RUFF_PIN := ruff==0.17.6
# The samples trace transformers' Llama code: another version traces another graph.
TRANSFORMERS_PIN := transformers==5.24.0
# Llama-3-8B, 32 layers, FSDP(dp=8) x TP+SP(tp=8) at 64 ranks, full activation checkpointing:
# 20,870 nodes, shape-only (sample_graphs/make_realistic.py).
DEMO_GRAPH := sample_graphs/realistic/llama3_8b_L32_ac.json
DEMO_OUT := demo_out

.PHONY: install demo test test-fast bench samples schemas lint clean browser-deps

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_PIN)
	$(BIN)/pip install -q numpy $(RUFF_PIN)
	$(BIN)/pip install -q -e '.[test,exact]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/commopt optimize $(DEMO_GRAPH) -o $(DEMO_OUT)
	@echo "outputs in $(DEMO_OUT)/: open report.html in a browser, or trace.json in https://ui.perfetto.dev"

# One test worker per core (pytest-xdist); a file's tests share a worker, so module-scoped
# fixtures (a gloo launch serving a whole file) still run once. `make test` lists the 15
# slowest tests, so a CI log shows where the time goes.
PYTEST := $(BIN)/python -m pytest -q -p no:cacheprovider -n auto --dist loadfile

test: install browser-deps
	$(PYTEST) --durations=15 tests

test-fast: install
	$(PYTEST) -m "not slow and not browser" tests

bench: install
	$(BIN)/python -m bench

# The llama_tp sample, the real-model corpus (sample_graphs/corpus) and the realistic graphs are built from transformers' Llama code
# (random weights or meta/fake tensors, no download).
samples: install
	$(BIN)/pip install -q $(TRANSFORMERS_PIN)
	$(BIN)/python sample_graphs/make_samples.py
	$(BIN)/python sample_graphs/make_corpus.py
	$(BIN)/python sample_graphs/make_realistic.py

schemas: install
	$(BIN)/python -m commopt.schemas.generate

lint: install
	$(BIN)/ruff check commopt cli schemas tests bench

clean:
	rm -rf $(VENV) $(DEMO_OUT) .pytest_cache .hypothesis

# Headless Chromium for the report's real-browser test (tests/report/test_browser.py).
# Installs the Debian packages only when missing; needs root (CI runs as root).
browser-deps:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
		echo "chromium and chromedriver present"; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null) \
		|| echo "warning: could not install chromium; the browser test will be skipped"; \
	else \
		echo "warning: chromium/chromedriver missing and not root: the browser test will be skipped"; \
	fi
