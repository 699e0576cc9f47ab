# s3bulk: every target sets itself up (uv, the Python environment with native/ built by cargo,
# the pinned MinIO build).
SHELL := /bin/bash
UV := python3 -m uv
PY := .venv/bin/python
# native/ is built by cargo (rustup puts it here) when the environment is synced
export PATH := $(HOME)/.cargo/bin:$(PATH)
NATIVE := src/s3bulk_native/__init__.pyi native/Cargo.toml native/Cargo.lock $(shell find native/src native/vendor -name '*.rs')

.PHONY: setup tools demo test test-unit test-servers bench reliability lint clean

.venv/.synced: pyproject.toml uv.lock $(NATIVE)
	python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen --all-extras --compile-bytecode
	touch $@

# Bytecode as `pip install` leaves it: without it (PYTHONDONTWRITEBYTECODE is set on some
# machines) every start compiles ~200 modules again, 0.3 s per command.
setup: .venv/.synced
	$(PY) -m compileall -q src >/dev/null

# Each target builds the servers it runs against, no more (each at most once per machine): the
# demo MinIO alone, the tests MinIO and toxiproxy, the matrix versitygw and Garage too.
tools:
	scripts/build-tools.sh minio toxiproxy

demo: setup
	scripts/build-tools.sh minio
	$(PY) scripts/demo.py

# The unit tier first (tests/unit: no server, seconds), then tests/integration against real servers.
test-unit: setup
	$(PY) -m pytest -q -p no:cacheprovider tests/unit

# The integration tier mostly waits (on servers, on jobs' processes), so it runs over TEST_WORKERS
# pytest-xdist workers, each with its own servers; tests sharing a module's fixture stay together
# (conftest.py). `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= 3
test: test-unit tools
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup --durations=15 \
		-m "not campaign and not servers" tests/integration

# The compatibility matrix: the end-to-end checks of tests/integration/test_servers.py against each S3 server
# (docs/compatibility.md is its table).
test-servers: setup
	scripts/build-tools.sh minio versitygw garage
	$(PY) -m pytest -q -p no:cacheprovider -m servers tests/integration/test_servers.py

bench: setup tools
	scripts/build-tools.sh versitygw garage rclone awscli
	$(PY) bench/engine_cost.py  # fails when the engine's CPU per item grows
	$(PY) bench/bench_transfers.py --runs 3
	$(PY) bench/bench_sync.py --runs 3
	bench/bench_engines.sh
	$(PY) bench/bench_vectors.py --runs 3 --rows 10000
	$(PY) bench/bench_vectors_sink.py --runs 3
	$(PY) bench/bench_streams.py --runs 3
	$(PY) bench/bench_open.py --runs 3
	$(PY) bench/bench_manifest.py --runs 3
	$(PY) bench/bench_gather.py --runs 3
	$(PY) bench/bench_ray.py --runs 3
	$(PY) bench/bench_map.py --runs 3
	$(PY) bench/bench_map.py --runs 3 --memory-at 10000,100000
	$(PY) bench/bench_list_servers.py --runs 3 --servers minio,versitygw,garage --rtt 0,20,50

reliability: setup tools
	$(PY) scripts/reliability.py --rounds 3 --trials 10

# The Rust part kept like the Python: formatted, clippy-clean, its unit tests run (linked
# against the interpreter, as cargo test needs; maturin builds the extension module itself).
lint: .venv/.synced
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/lint-imports
	.venv/bin/mypy
	cd native && cargo fmt --check
	cd native && cargo clippy --release --all-targets -- -D warnings
	cd native && PYO3_PYTHON=$(abspath $(PY)) cargo test --release

clean:
	rm -rf .venv .tools bench/out native/target
