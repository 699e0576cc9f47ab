# s3bulk: every target sets itself up (uv, the Python environment, the pinned MinIO build).
SHELL := /bin/bash
UV := $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
PY := .venv/bin/python

.PHONY: setup tools demo test bench lint clean

$(UV):
	python3 -m pip install --quiet --user uv || python3 -m pip install --quiet uv

.venv/.synced: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen
	touch $@

setup: .venv/.synced tools

tools:
	scripts/build-tools.sh

demo: setup
	$(PY) scripts/demo.py

test: setup
	$(PY) -m pytest -q -p no:cacheprovider

bench: setup
	$(PY) bench/bench_transfers.py --runs 3

lint: .venv/.synced
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

clean:
	rm -rf .venv .tools bench/out
