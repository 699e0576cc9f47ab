#!/usr/bin/env bash
# The install a user makes (issue 48): the wheel built from this tree, installed with plain pip
# (no uv sources, no editable install, no dev dependencies) into a brand-new virtual environment,
# used from a directory outside the repository; then the same with every extra.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
python3 -m uv build --quiet --out-dir "$WORK/dist" "$ROOT"
WHEEL="$(ls "$WORK"/dist/*.whl)"
ls -l "$WORK"/dist
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet "$WHEEL"
export S3BULK_MINIO_BIN="$ROOT/.tools/bin/minio"
cd "$WORK"
"$WORK/venv/bin/python" "$ROOT/scripts/install_smoke.py" core
"$WORK/venv/bin/pip" install --quiet "$WHEEL[all]"
"$WORK/venv/bin/python" "$ROOT/scripts/install_smoke.py" all
