#!/usr/bin/env bash
# The conformance_attrs CTest: operators with random but valid attributes
# and shapes (attr_sweep.py, seeded; outputs by ONNX Runtime through
# ort_fill.js) through packrat, checked against passing_attrs.txt: a case
# listed there that fails is a regression.
# usage: attrs.sh RUNNER ONNX_PROTO NODE_MODULES OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
runner=$1 proto=$2 modules=$3 out=$4
mkdir -p "$out"
/usr/bin/python3 "$here/attr_sweep.py" "$out/sweep"
NODE_MODULES=$modules node "$here/ort_fill.js" "$out/sweep" "$proto"
exec "$here/run.sh" "$runner" "$out/sweep" "$proto" "$modules" "$out/result" \
  "$here/passing_attrs.txt"
