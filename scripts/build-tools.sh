#!/usr/bin/env bash
# Builds the real servers the tests and the demo run against, from their Go modules at pinned
# versions, into .tools/bin (ignored by git). A binary already there is kept, so only the first
# run on a machine pays the ~3 minute MinIO build.
#
#   scripts/build-tools.sh [TOOL ...]   minio, toxiproxy, versitygw, garage, rclone, awscli
#
# Each target builds what it uses and no more (Makefile): the demo MinIO alone; make test MinIO
# and toxiproxy; make test-servers the matrix (versitygw, and Garage: ~25 minutes of Rust the
# first time); make bench the peers too. No names: MinIO and toxiproxy.
set -euo pipefail
WANTED=" ${*:-minio toxiproxy} "
wanted() { [[ "$WANTED" == *" $1 "* ]]; }
export PATH="$PATH:/usr/local/go/bin:$HOME/.cargo/bin"
command -v go >/dev/null || { echo "Go is needed to build MinIO: install it (https://go.dev/dl)" >&2; exit 1; }

MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
TOOLS_DIR="${S3BULK_TOOLS_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.tools}"
BIN_DIR="$TOOLS_DIR/bin"
mkdir -p "$BIN_DIR"

build() {  # build NAME MODULE/PACKAGE@VERSION (the binary is renamed NAME if go names it otherwise)
  local name=$1 module=$2
  local stamp="$BIN_DIR/.$name.version"
  if [[ -x "$BIN_DIR/$name" && -f "$stamp" && "$(cat "$stamp")" == "$module" ]]; then
    return 0
  fi
  echo "building $name from $module (first time only)..." >&2
  local package=${module%@*}
  local built=${package##*/}
  # -dwarf=false: no debug information compiled that -ldflags=-w would drop at the link anyway
  GOBIN="$BIN_DIR" CGO_ENABLED=0 go install -trimpath -gcflags=all=-dwarf=false -ldflags="-s -w" "$module"
  [[ "$built" == "$name" ]] || mv -f "$BIN_DIR/$built" "$BIN_DIR/$name"
  echo "$module" > "$stamp"
}

wanted minio && build minio "github.com/minio/minio@$MINIO_VERSION"
# toxiproxy puts real latency, resets and bandwidth caps between s3bulk and MinIO (`bench --rtt`,
# the fault tests): this kernel has no sch_netem, so tc netem is not available everywhere.
wanted toxiproxy && build toxiproxy-server "github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0"
# The compatibility matrix's second S3 implementation (tests/integration/test_servers.py, make test-servers):
# Versity's gateway over a POSIX directory, ~1 minute to build.
wanted versitygw && build versitygw "github.com/versity/versitygw/cmd/versitygw@v1.8.0"

# The matrix's third server, and the one whose StartAfter is a seek (an ordered metadata
# database): Garage from its crate, ~25 minutes of Rust on two cores the first time only.
GARAGE_VERSION="2.5.0"
if wanted garage && [[ ! -x "$BIN_DIR/garage" || "$(cat "$BIN_DIR/.garage.version" 2>/dev/null)" != "garage@$GARAGE_VERSION" ]]; then
  command -v cargo >/dev/null || { echo "Rust's cargo is needed to build Garage: install it (https://rustup.rs)" >&2; exit 1; }
  echo "building garage $GARAGE_VERSION from its crate (first time only)..." >&2
  cargo install --quiet --locked --root "$TOOLS_DIR/garage" "garage@$GARAGE_VERSION"
  cp "$TOOLS_DIR/garage/bin/garage" "$BIN_DIR/garage"
  echo "garage@$GARAGE_VERSION" > "$BIN_DIR/.garage.version"
fi

# Peers for `make bench` only (not needed by the tests): rclone from its Go module, and the AWS
# CLI in its own virtual environment (its botocore pin must not touch s3bulk's).
wanted rclone && build rclone "github.com/rclone/rclone@v1.71.2"
if wanted awscli; then
  if [[ ! -x "$TOOLS_DIR/awscli/bin/aws" ]]; then
    echo "installing the AWS CLI into $TOOLS_DIR/awscli (first time only)..." >&2
    python3 -m uv venv --quiet "$TOOLS_DIR/awscli"
    python3 -m uv pip install --quiet --python "$TOOLS_DIR/awscli/bin/python" "awscli==1.42.*"
  fi
fi

