#!/usr/bin/env bash
# The release build for Linux (issue 69): s3bulk's wheels for x86_64 and aarch64 tagged
# manylinux2014 (glibc 2.17 or later: every Linux a package index serves), where a plain
# `uv build` here makes a `linux_x86_64` wheel that no index takes and that says nothing of the
# glibc it needs. maturin links with zig, which targets glibc 2.17 from this machine's newer one
# and cross-compiles aarch64 without a container or a sysroot; `auditwheel show` then checks
# each wheel names a manylinux tag. macOS and Windows: .github/workflows/wheels.yml.
#
#   scripts/build-wheels.sh [--out DIR] [ARCH ...]   ARCH: x86_64, aarch64 (default both; DIR: dist/)
#
# The build tools (maturin, zig from its PyPI package, auditwheel) live in their own environment
# at pinned versions, in .tools/wheels (made once per machine).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/dist"
if [[ "${1:-}" == "--out" ]]; then
  OUT="$(mkdir -p "$2" && cd "$2" && pwd)"
  shift 2
fi
ARCHES=("$@")
[[ ${#ARCHES[@]} -gt 0 ]] || ARCHES=(x86_64 aarch64)
export PATH="$PATH:$HOME/.cargo/bin"
command -v cargo >/dev/null || { echo "Rust's cargo is needed to build the wheels: install it (https://rustup.rs)" >&2; exit 1; }

TOOLS="${S3BULK_TOOLS_DIR:-$ROOT/.tools}/wheels"
PINS="maturin==1.16.0 ziglang==0.17.1 auditwheel==6.8.2"
if [[ "$(cat "$TOOLS/.pins" 2>/dev/null)" != "$PINS" ]]; then
  echo "installing $PINS into $TOOLS (first time only)..." >&2
  python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
  python3 -m uv venv --quiet --clear "$TOOLS"
  # shellcheck disable=SC2086
  python3 -m uv pip install --quiet --python "$TOOLS/bin/python" $PINS
  echo "$PINS" > "$TOOLS/.pins"
fi
# maturin runs zig as `python3 -m ziglang`: the tools' interpreter comes first
export PATH="$TOOLS/bin:$PATH"

cd "$ROOT"
for arch in "${ARCHES[@]}"; do
  case "$arch" in x86_64 | aarch64) ;; *) echo "unknown ARCH '$arch': x86_64 or aarch64" >&2; exit 2 ;; esac
  target="$arch-unknown-linux-gnu"
  # the host's own target comes with Rust; another one is rustup's to add (once)
  if [[ "$arch" != "$(uname -m)" ]] && ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
    rustup target add "$target"
  fi
  built="$(mktemp -d)"
  maturin build --release --zig --compatibility manylinux2014 --target "$target" --out "$built"
  wheel="$(ls "$built"/*.whl)"
  shown="$(auditwheel show "$wheel")"
  echo "$shown"
  # the tag maturin gave the name, and the one auditwheel reads from the symbols the library needs
  if [[ "$wheel" != *manylinux_2_17_"$arch"*.whl ]] || ! grep -q "manylinux_2_17_$arch" <<<"$shown"; then
    echo "error: $(basename "$wheel") is not a manylinux2014 (glibc 2.17) $arch wheel" >&2
    exit 1
  fi
  mv -f "$wheel" "$OUT/"
  rm -rf "$built"
  echo "built $OUT/$(basename "$wheel")"
done
