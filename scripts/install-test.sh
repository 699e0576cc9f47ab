#!/usr/bin/env bash
# The install a user makes (issue 48): the wheel a release ships, built from this tree (this
# machine's architecture, tagged manylinux2014 and checked by `auditwheel show`:
# scripts/build-wheels.sh, issue 69), installed with plain pip (no uv sources, no editable install,
# no dev dependencies) into a brand-new virtual environment, used from a directory outside the
# repository; then the same with every extra.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$ROOT/scripts/build-wheels.sh" --out "$WORK/dist" "$(uname -m)"
WHEEL="$(ls "$WORK"/dist/*.whl)"
ls -l "$WORK"/dist
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet "$WHEEL"
export S3BULK_MINIO_BIN="$ROOT/.tools/bin/minio"
cd "$WORK"
"$WORK/venv/bin/python" "$ROOT/scripts/install_smoke.py" core
"$WORK/venv/bin/pip" install --quiet "$WHEEL[all]"
"$WORK/venv/bin/python" "$ROOT/scripts/install_smoke.py" all

# Beside s3fs and boto3 (issue 65): `pip install s3fs boto3` into a new environment holding
# s3bulk resolves in a minute at most and leaves every requirement met, and s3bulk works on the
# botocore s3fs's aiobotocore pins, down to the oldest aiobotocore s3fs takes. With a current
# pip: Python 3.11's bundled pip 23.2 backtracks through every aiobotocore and boto3 release
# (aiobotocore pins the botocore before the newest boto3's), ~3 minutes with or without s3bulk.
python3 -m venv "$WORK/beside"
BESIDE="$WORK/beside/bin"
"$BESIDE/pip" install --quiet --upgrade pip
"$BESIDE/pip" install --quiet "$WHEEL"
START=$(date +%s)
timeout 600 "$BESIDE/pip" install --quiet s3fs boto3
TOOK=$(( $(date +%s) - START ))
echo "pip install s3fs boto3 beside s3bulk: resolved and installed in ${TOOK}s"
if [ "$TOOK" -gt 60 ]; then
    echo "error: pip install s3fs boto3 took ${TOOK}s beside s3bulk (more than 60 s)" >&2
    exit 1
fi
"$BESIDE/pip" check
"$BESIDE/python" "$ROOT/scripts/install_smoke.py" beside
OLDEST="$("$BESIDE/python" -c '
import re
from importlib.metadata import requires
pin = next(r for r in requires("s3fs") if r.startswith("aiobotocore"))
print(re.search(r">=\s*([\w.]+)", pin).group(1))
')"
# its boto3 extra brings the boto3 of that botocore: the environment stays whole
"$BESIDE/pip" install --quiet "aiobotocore[boto3]==$OLDEST"
"$BESIDE/pip" check
"$BESIDE/python" "$ROOT/scripts/install_smoke.py" beside
