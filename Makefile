# s3bulk: every target sets itself up (uv, the Python environment with native/ built by cargo,
# the pinned MinIO build).
SHELL := /bin/bash
UV := python3 -m uv
PY := .venv/bin/python
DEMO_PY := .venv-demo/bin/python
# native/ is built by cargo (rustup puts it here) when the environment is synced
export PATH := $(HOME)/.cargo/bin:$(PATH)
NATIVE := src/s3bulk_native/__init__.pyi native/Cargo.toml native/Cargo.lock $(shell find native/src native/vendor -name '*.rs')

.PHONY: setup tools demo test test-unit test-servers bench reliability lint docs wheels clean

.venv/.synced: pyproject.toml uv.lock $(NATIVE)
	python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen --all-extras --compile-bytecode
	touch $@

# The demo's environment: s3bulk's core as a user installs it (no extras, no dev group; ~80 MB
# against the development environment's ~1.8 GB), apart from .venv so `make test` keeps its own.
# native/ built with cargo's `demo` profile (native/Cargo.toml: the release one without LTO over a
# single codegen unit, a single-core step at the end of a fresh build that shows in nothing the demo does).
.venv-demo/.synced: pyproject.toml uv.lock $(NATIVE)
	python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	UV_PROJECT_ENVIRONMENT=.venv-demo $(UV) sync --frozen --no-dev --config-setting maturin.build-args=--profile=demo
	touch $@

# Bytecode as `pip install` leaves it: without it (PYTHONDONTWRITEBYTECODE is set on some
# machines) every start compiles ~200 modules again, 0.3 s per command.
setup: .venv/.synced
	$(PY) -m compileall -q src >/dev/null

# Each target builds the servers it runs against, no more (each at most once per machine): the
# demo MinIO alone, the tests MinIO and toxiproxy, the matrix versitygw and Garage too.
tools:
	scripts/build-tools.sh minio toxiproxy

# MinIO's Go build and the core environment's (uv's downloads, cargo's build of native/) side by
# side: on a fresh 2-core machine each waits on the network part of its time.
demo:
	scripts/build-tools.sh minio & minio=$$!; \
	$(MAKE) --no-print-directory .venv-demo/.synced; synced=$$?; \
	wait $$minio && exit $$synced
	$(DEMO_PY) scripts/demo.py

# The unit tier (tests/unit: no server, one process, ~1 min of CPU); `make test` runs it alongside
# tests/integration (against real servers), whose workers leave part of a core idle while they
# wait: the two together should end sooner than one after the other (not yet measured on a quiet machine). The unit tier's
# output comes after the integration tier's (all of it if it failed).
test-unit: setup
	$(PY) -m pytest -q -p no:cacheprovider tests/unit

# The integration tier runs over TEST_WORKERS pytest-xdist workers, each with its own servers;
# tests sharing a module's fixture stay together (conftest.py). `make test TEST_WORKERS=0` runs
# it in one process.
TEST_WORKERS ?= 3
test: setup tools
	@unit_log=$$(mktemp); \
	$(PY) -m pytest -q -p no:cacheprovider tests/unit >$$unit_log 2>&1 & unit=$$!; \
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup --durations=15 \
		-m "not campaign and not servers" tests/integration; integration=$$?; \
	wait $$unit; unit_code=$$?; \
	echo "--- tests/unit (run alongside):"; \
	if [ $$unit_code -eq 0 ]; then tail -n 1 $$unit_log; else cat $$unit_log; fi; \
	rm -f $$unit_log; \
	[ $$unit_code -eq 0 ] || exit $$unit_code; exit $$integration

# The compatibility matrix: the end-to-end checks of tests/integration/test_servers.py against each S3 server
# (docs/compatibility.md is its table); and s3fs's own test suite against s3bulk:// on moto
# (tests/integration/test_s3fs_release.py: ~220 tests, minutes, so here rather than in `make test`).
test-servers: setup
	scripts/build-tools.sh minio versitygw garage
	$(PY) -m pytest -q -p no:cacheprovider -m servers tests/integration/test_servers.py tests/integration/test_s3fs_release.py

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

# The site (mkdocs.yml): docs/ and the API reference read from the docstrings, in an environment of
# its own (pyproject's `docs` group: mkdocs reads src/ without importing it, so no native build);
# --strict: a broken link or a name the reference cannot find fails the build.
.venv-docs/.synced: pyproject.toml uv.lock
	python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	UV_PROJECT_ENVIRONMENT=.venv-docs $(UV) sync --frozen --only-group docs
	touch $@

docs: .venv-docs/.synced
	NO_MKDOCS_2_WARNING=1 .venv-docs/bin/mkdocs build --strict

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

# The release build for Linux: manylinux2014 wheels (glibc 2.17 or later) for x86_64 and aarch64
# into dist/, cross-compiled by maturin with zig and checked by `auditwheel show`. macOS and
# Windows: .github/workflows/wheels.yml.
wheels:
	scripts/build-wheels.sh

clean:
	rm -rf .venv .venv-demo .venv-docs site .tools bench/out dist native/target
