#!/usr/bin/env bash
# Installs the Debian packages that building packrat and its main job
# (scripts/run-main.sh: build, export the default model, serve) need.
# With --test, also those that only the tests and benchmarks need
# (scripts/test.sh calls it so). Idempotent: installed packages are skipped.
# --print lists the packages it would consider and exits. No package
# installed here starts or enables a service (the policy-rc.d below stops
# any that a package would start).
set -euo pipefail
MAIN=(
  build-essential cmake pkg-config
  libdnnl-dev libomp-dev
  protobuf-c-compiler libprotobuf-c-dev libonnx-dev libgrpc-dev
  libhwloc-dev nettle-dev libcurl4-openssl-dev libmicrohttpd-dev libjansson-dev libyajl-dev
  libpcre2-dev libutf8proc-dev
  python3-torch python3-torchvision python3-numpy python3-onnx libopenblas0-openmp
)
# tests and benchmarks only: clang (libFuzzer), cmocka, ONNX test data,
# promtool (inside Debian's prometheus package), curl; the deploy tests'
# nginx and HAProxy (run unprivileged from a temp folder; their system
# services stay off, see below), mmdebstrap, strace, systemd-analyze;
# headless Chromium for the dashboard test (its fonts, DejaVu, come with
# the main list already); the gRPC test's client, Python grpcio, and
# grpc_python_plugin with protoc for its stubs (python3-protobuf comes with
# the main list's python3-onnx). PIL and the DejaVu fonts of the OCR tests'
# rendered text (tests/quant/ocr_accuracy.py, examples/ocr) come with the
# main list too (python3-torchvision needs python3-pil), so they are not
# listed here: install_deps checks that no test package comes with the main
# job
TEST=(
  clang libclang-rt-14-dev libcmocka-dev libonnx-testdata prometheus curl
  nginx haproxy mmdebstrap strace systemd chromium
  python3-grpcio protobuf-compiler-grpc
)
# Node.js and npm (ONNX Runtime and real models from npm at test time): the
# machine's own when it has them (a newer Node.js with its npm, which Debian's
# npm package would conflict with), else Debian's
NODE=(nodejs npm)
pkgs=("${MAIN[@]}")
case "${1:-}" in
  --test)
    pkgs+=("${TEST[@]}")
    command -v node >/dev/null && command -v npm >/dev/null || pkgs+=("${NODE[@]}")
    ;;
  --print) printf '%s\n' "${MAIN[@]}"; exit 0 ;;
  --print-test) printf '%s\n' "${TEST[@]}" "${NODE[@]}"; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--test | --print | --print-test]" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  # no service starts at install (prometheus would start one on port 9090)
  rc=/usr/sbin/policy-rc.d
  had_rc=0
  [ -e "$rc" ] && had_rc=1
  if [ $had_rc = 0 ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$rc" >/dev/null
    $SUDO chmod +x "$rc"
    trap '$SUDO rm -f "$rc"' EXIT
  fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # a package's unit stays disabled: packrat's tests run promtool, nginx and
  # haproxy themselves, never the daemons
  if command -v systemctl >/dev/null; then
    for unit in prometheus nginx haproxy; do
      if systemctl list-unit-files "$unit.service" >/dev/null 2>&1; then
        $SUDO systemctl disable "$unit.service" >/dev/null 2>&1 || true
      fi
    done
  fi
fi
