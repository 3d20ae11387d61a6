#!/usr/bin/env bash
# The conformance_types CTest: every operator in every element type that
# ONNX Runtime takes (types_sweep.py, outputs by ort_fill.js) through
# packrat, checked against passing_types.txt; then docs/engine.md's operator
# table checked against what the passing tests show (tools/op_table.py).
# usage: types.sh RUNNER NODE_TEST_DIR ONNX_PROTO NODE_MODULES OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
runner=$1 node_dir=$2 proto=$3 modules=$4 out=$5
mkdir -p "$out"
/usr/bin/python3 "$here/types_sweep.py" "$out/sweep"
NODE_MODULES=$modules node "$here/ort_fill.js" "$out/sweep" "$proto"
status=0
"$here/run.sh" "$runner" "$out/sweep" "$proto" "$modules" "$out/result" \
  "$here/passing_types.txt" || status=1
/usr/bin/python3 "$here/extra_ops.py" "$out/extra" >/dev/null
"$runner" --ops >"$out/ops.txt"
/usr/bin/python3 "$root/tools/op_table.py" "$out/ops.txt" \
  --tests "$node_dir" "$here/passing.txt" --tests "$out/sweep" "$here/passing_types.txt" \
  --all-pass "$out/extra" --check "$root/docs/engine.md" || status=1
exit $status
