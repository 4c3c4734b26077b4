# The few verbs people use. Every verb sets up .venv first (idempotent).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test lint bench clean

$(STAMP): pyproject.toml setup.py worker/engine/page/_walk.pyx worker/engine/page/abi.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[stream,broker,report,parquet,dev]'
	@# The editable install leaves the package's bytecode to the first import, which writes
	@# none where PYTHONDONTWRITEBYTECODE is set: every process would compile it again.
	$(BIN)/python -m compileall -q $(CURDIR)/worker
	touch $(STAMP)

setup: $(STAMP)

## demo: build a sample crawl, clean it offline, then stream it through a worker on the bundled broker
demo: $(STAMP)
	bash scripts/demo.sh

## test: unit, component, integration (real Tansu broker, started by the tests) and the quality gate
test: $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider tests

lint: $(STAMP)
	$(BIN)/ruff check worker tests scripts
	$(BIN)/mypy

## bench: detector speed against the bare lexbor parse + text walk, on the development corpora when present
bench: $(STAMP)
	bash scripts/bench.sh

clean:
	rm -rf $(VENV) demo build *.egg-info
