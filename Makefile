# One command surface. `make demo` and `make test` set everything up on a machine that has
# only Python 3.11+ and pip: the virtualenv lives in .venv/ at the repo root.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
UV := $(VENV)/bin/uv
STAMP := $(VENV)/.synced
export UV_PYTHON_DOWNLOADS := never
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
DATASET ?= ../shared/datasets/scifact

.PHONY: setup demo test test-fast lint bench eval synth bundle clean

setup: $(STAMP)

$(STAMP): pyproject.toml uv.lock
	@test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	@test -x $(UV) || $(VENV)/bin/python -m pip install --quiet --disable-pip-version-check "uv>=0.4"
	$(UV) sync --frozen --inexact --all-groups --python $(VENV)/bin/python
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/evidence demo

test: $(STAMP)
	$(VENV)/bin/python -m pytest -n 2 --dist loadgroup

test-fast: $(STAMP)
	$(VENV)/bin/python -m pytest -n 2 -m "not slow and not infra"

lint: $(STAMP)
	$(VENV)/bin/ruff check shared functions infra tests bench
	$(VENV)/bin/ruff format --check shared functions infra tests bench
	$(VENV)/bin/mypy shared/evidence functions infra

bench: $(STAMP)
	$(VENV)/bin/python bench/run.py --dataset $(DATASET)
	unset PYTHONDONTWRITEBYTECODE; $(VENV)/bin/python bench/cold_start.py --runs 5
	$(VENV)/bin/python bench/ranking_overhead.py --runs 1000

eval: $(STAMP)
	for m in bm25 dense hybrid; do $(VENV)/bin/evidence eval --dataset $(DATASET) --mode $$m --json; done

synth: $(STAMP)
	$(VENV)/bin/python -m infra.app

bundle: $(STAMP)
	$(VENV)/bin/python infra/bundle.py

clean:
	rm -rf .evidence build cdk.out .pytest_cache .mypy_cache .ruff_cache
