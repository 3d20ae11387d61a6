#!/usr/bin/env bash
# Builds packrat twice (optimized, and with ASan+UBSan) and runs every test
# in both: unit tests, ONNX conformance, model fidelity, end-to-end.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
jobs=$(nproc)
export PACKRAT_MODELS=${PACKRAT_MODELS:-$PWD/models}
status=0
for cfg in "build:-DCMAKE_BUILD_TYPE=RelWithDebInfo" "build-asan:-DCMAKE_BUILD_TYPE=Debug -DPR_SANITIZE=ON"; do
  dir=${cfg%%:*}
  flags=${cfg#*:}
  echo "== $dir ($flags)"
  cmake -S . -B "$dir" $flags -DPACKRAT_MODELS="$PACKRAT_MODELS" >/dev/null
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest --output-on-failure --timeout 1800) || status=1
done
exit $status
