#!/usr/bin/env bash
# The aarch64 wheel run, on an x86_64 machine, under emulation (issue 69): scripts/build-wheels.sh
# cross-compiles it with zig, and nothing else here ever executes it. This installs it into an
# aarch64 CPython (Debian bookworm's python3.11 for arm64, run by qemu-user) and runs
# scripts/wheel_smoke.py: the native part's checksums against known values, `s3bulk --version`,
# and a cp/ls/sync/check round trip against this machine's (x86_64) MinIO on loopback, every
# byte compared. Slow (each command starts an emulated interpreter: seconds each, minutes under
# load), so it is not part of CI.
#
#   scripts/test-wheel-aarch64.sh [WHEEL]   (default: dist/*manylinux*_aarch64.whl; built with
#                                            scripts/build-wheels.sh aarch64 when there is none,
#                                            ~40 minutes on 2 cores)
#
# Needs: qemu-user-static (`apt-get install qemu-user-static`; no binfmt_misc registration: the
# interpreter is started through qemu by a wrapper), apt-get and Debian's archive keyring (the
# arm64 packages are fetched with a private apt state: the host's dpkg architectures are left
# alone), uv, and .tools/bin/minio (scripts/build-tools.sh minio). The aarch64 root (~60 MB) is
# kept in $S3BULK_AARCH64_ROOT (default .tools/aarch64) for the next run.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TOOLS="${S3BULK_TOOLS_DIR:-$ROOT/.tools}"
SYSROOT_DIR="${S3BULK_AARCH64_ROOT:-$TOOLS/aarch64}"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

QEMU="$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)"
[[ -n "$QEMU" ]] || { echo "error: qemu-aarch64 is needed to run an aarch64 wheel here: apt-get install qemu-user-static" >&2; exit 1; }
command -v apt-get >/dev/null && [[ -f "$KEYRING" ]] ||
  { echo "error: apt-get and $KEYRING are needed to fetch Debian's arm64 python3.11: apt-get install debian-archive-keyring" >&2; exit 1; }
[[ -x "$TOOLS/bin/minio" ]] || { echo "error: no $TOOLS/bin/minio: scripts/build-tools.sh minio" >&2; exit 1; }

WHEEL="${1:-}"
if [[ -z "$WHEEL" ]]; then
  WHEEL="$(ls "$ROOT"/dist/*manylinux*_aarch64.whl 2>/dev/null | tail -1 || true)"
  if [[ -z "$WHEEL" ]]; then
    echo "no aarch64 wheel in dist/: building it (scripts/build-wheels.sh aarch64, ~40 minutes on 2 cores)..." >&2
    "$ROOT/scripts/build-wheels.sh" aarch64
    WHEEL="$(ls "$ROOT"/dist/*manylinux*_aarch64.whl | tail -1)"
  fi
fi
WHEEL="$(cd "$(dirname "$WHEEL")" && pwd)/$(basename "$WHEEL")"
[[ "$WHEEL" == *_aarch64.whl ]] || { echo "error: $WHEEL is not an aarch64 wheel" >&2; exit 2; }

# Debian bookworm's arm64 python3.11 and the libraries it loads, unpacked into a root that qemu
# reads the interpreter's /usr and /lib from (-L)
SYSROOT="$SYSROOT_DIR/root"
PACKAGES="python3.11 python3.11-minimal libpython3.11-minimal libpython3.11-stdlib media-types
  libc6 libgcc-s1 libstdc++6 gcc-12-base zlib1g libbz2-1.0 liblzma5 libexpat1 libffi8 libssl3
  ca-certificates libcrypt1 libdb5.3 libgdbm6 libgdbm-compat4 libncursesw6 libtinfo6 libnsl2
  libtirpc3 libtirpc-common libreadline8 readline-common libsqlite3-0 libuuid1 libgssapi-krb5-2
  libk5crypto3 libkrb5-3 libkrb5support0 libkeyutils1 libcom-err2"
if [[ "$(cat "$SYSROOT_DIR/.packages" 2>/dev/null)" != "$PACKAGES" ]]; then
  echo "fetching Debian bookworm's arm64 python3.11 into $SYSROOT (first time only)..." >&2
  rm -rf "$SYSROOT_DIR"
  mkdir -p "$SYSROOT_DIR"/apt/{lists/partial,archives/partial,sources.d} "$SYSROOT_DIR/debs" "$SYSROOT"
  cat >"$SYSROOT_DIR/apt/sources.list" <<EOF
deb [arch=arm64 signed-by=$KEYRING] http://deb.debian.org/debian bookworm main
deb [arch=arm64 signed-by=$KEYRING] http://deb.debian.org/debian bookworm-updates main
deb [arch=arm64 signed-by=$KEYRING] http://deb.debian.org/debian-security bookworm-security main
EOF
  apt=(apt-get -q -o "Dir::State::Lists=$SYSROOT_DIR/apt/lists" -o Dir::State::status=/dev/null
    -o "Dir::Cache::archives=$SYSROOT_DIR/apt/archives" -o "Dir::Etc::sourcelist=$SYSROOT_DIR/apt/sources.list"
    -o "Dir::Etc::sourceparts=$SYSROOT_DIR/apt/sources.d" -o APT::Architecture=arm64 -o APT::Architectures::=arm64
    -o APT::Sandbox::User=root)
  "${apt[@]}" update >/dev/null
  # shellcheck disable=SC2086
  (cd "$SYSROOT_DIR/debs" && "${apt[@]}" download $PACKAGES >/dev/null)
  for deb in "$SYSROOT_DIR"/debs/*.deb; do dpkg-deb -x "$deb" "$SYSROOT"; done
  rm -rf "$SYSROOT_DIR/apt" "$SYSROOT_DIR/debs"
  echo "$PACKAGES" >"$SYSROOT_DIR/.packages"
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# The interpreter as a script that runs it under qemu, passing its own path as argv[0]: a venv's
# python (a link to it) then finds its pyvenv.cfg, a console script's shebang works, and so does
# a subprocess started with sys.executable, with no binfmt_misc registration on this machine
mkdir -p "$WORK/bin"
PY="$WORK/bin/python3.11"
cat >"$PY" <<EOF
#!/bin/sh
exec "$QEMU" -L "$SYSROOT" -0 "\$0" "$SYSROOT/usr/bin/python3.11" "\$@"
EOF
chmod +x "$PY"
"$PY" -c 'import platform, sys; assert platform.machine() == "aarch64", platform.machine(); print("emulated", platform.machine(), "Python", sys.version.split()[0])'
"$PY" -m venv --without-pip "$WORK/venv"
# uv asks the emulated interpreter what it is (aarch64, glibc 2.36) and picks the wheels for it
python3 -m uv pip install --quiet --python "$WORK/venv/bin/python" "$WHEEL"
echo "installed $(basename "$WHEEL") into an aarch64 venv"
export S3BULK_MINIO_BIN="$TOOLS/bin/minio"
cd "$WORK"
"$WORK/venv/bin/python" "$ROOT/scripts/wheel_smoke.py"
