#!/usr/bin/env bash
# The conformance CTest: every ONNX backend node test through packrat and
# through ONNX Runtime, both counts printed, and a regression check against
# tests/conformance/passing.txt (compare.py), or the list PASSING names.
# usage: run.sh RUNNER NODE_TEST_DIR ONNX_PROTO NODE_MODULES OUT_DIR [PASSING]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
runner=$1 node_dir=$2 proto=$3 modules=$4 out=$5 passing=${6:-$here/passing.txt}
mkdir -p "$out"
status=0
"$runner" "$node_dir" --json "$out/packrat.json" >"$out/packrat.log" || status=1
grep -E "^FAIL |passed, " "$out/packrat.log"
NODE_MODULES=$modules node "$here/ort_node.js" "$node_dir" "$proto" "$out/ort.json" || exit 1
/usr/bin/python3 "$here/compare.py" "$node_dir" "$out/ort.json" "$out/packrat.json" \
  "$passing" --misses "$out/misses.tsv" || status=1
exit $status
