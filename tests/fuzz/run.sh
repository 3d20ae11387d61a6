#!/usr/bin/env bash
# Builds the loader fuzz target with clang and fuzzes it for SECONDS (default
# 600), seeded with the ONNX node-test models and a transformer block
# (tests/fuzz/seeds.py) that reaches the MatMul, attention and LayerNorm fusions.
# An input that fails is written to build-fuzz/crash-*.
# usage: tests/fuzz/run.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-600}
cmake -S . -B build-fuzz -DPR_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-fuzz --target fuzz_loader -j "$(nproc)"
corpus=build-fuzz/corpus
mkdir -p "$corpus"
for d in /usr/share/libonnx-testdata/data/node/*/; do
  f=$d/model.onnx
  [ -f "$f" ] && [ "$(stat -c %s "$f")" -lt 4096 ] && cp "$f" "$corpus/$(basename "$d").onnx"
done
/usr/bin/python3 tests/fuzz/seeds.py "$corpus"
exec build-fuzz/tests/fuzz/fuzz_loader -max_total_time="$secs" -rss_limit_mb=4096 -timeout=10 \
  -artifact_prefix=build-fuzz/ "$corpus"
