#!/usr/bin/env bash
# Installs every Debian package that packrat's build, tests and benchmarks need.
# Idempotent: apt-get skips what is already installed.
set -euo pipefail
PKGS=(
  build-essential cmake pkg-config clang libclang-rt-14-dev
  libdnnl-dev libomp-dev
  protobuf-c-compiler libprotobuf-c-dev libonnx-dev libonnx-testdata
  libhwloc-dev nettle-dev libcurl4-openssl-dev prometheus libcmocka-dev libmicrohttpd-dev libjansson-dev libyajl-dev
  python3-torch python3-torchvision python3-numpy python3-onnx libopenblas0-openmp
  curl nodejs npm
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
