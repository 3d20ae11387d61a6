#!/usr/bin/env bash
# Builds packrat twice (optimized, and with ASan+UBSan) and runs every test
# in both: unit tests, ONNX conformance, model fidelity, end-to-end. A third
# build (clang, libFuzzer) builds only the fuzz targets and runs each for
# 25 s (ctest -L fuzz).
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
echo "== build-fuzz (clang, -DPR_FUZZ=ON): fuzz targets only"
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DPR_FUZZ=ON \
  -DPACKRAT_MODELS="$PACKRAT_MODELS" >/dev/null
cmake --build build-fuzz --target fuzz -j "$jobs"
(cd build-fuzz && ctest -L fuzz --output-on-failure) || status=1
exit $status
