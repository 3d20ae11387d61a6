#!/usr/bin/env bash
# The conformance_quant CTest: quantized and integer operators and the QDQ
# graphs packrat fuses, with random but valid parameters (quant_sweep.py,
# seeded; outputs by ONNX Runtime through ort_fill.js, or numpy's for the
# valid cases it refuses), through packrat, checked against
# passing_quant.txt: a case listed there that fails is a regression.
# usage: quant.sh RUNNER ONNX_PROTO NODE_MODULES OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
runner=$1 proto=$2 modules=$3 out=$4
mkdir -p "$out"
/usr/bin/python3 "$here/quant_sweep.py" "$out/sweep"
NODE_MODULES=$modules node "$here/ort_fill.js" "$out/sweep" "$proto"
exec "$here/run.sh" "$runner" "$out/sweep" "$proto" "$modules" "$out/result" \
  "$here/passing_quant.txt"
