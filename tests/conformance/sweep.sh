#!/usr/bin/env bash
# The CTests of the seeded random sweeps (conformance_attrs: attr_sweep.py,
# operators with random but valid attributes and shapes; conformance_quant:
# quant_sweep.py, quantized and integer operators and the QDQ graphs packrat
# fuses): the generator writes the cases, ort_fill.js ONNX Runtime's outputs
# (or the generator's numpy answer where ONNX Runtime refuses a valid case),
# then packrat's runner checks them against PASSING: a case listed there that
# fails is a regression.
# usage: sweep.sh GENERATOR PASSING RUNNER ONNX_PROTO NODE_MODULES OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
generator=$1 passing=$2 runner=$3 proto=$4 modules=$5 out=$6
mkdir -p "$out"
/usr/bin/python3 -B "$here/$generator" "$out/sweep"  # -B: no __pycache__ in the sources
NODE_MODULES=$modules node "$here/ort_fill.js" "$out/sweep" "$proto"
exec "$here/run.sh" "$runner" "$out/sweep" "$proto" "$modules" "$out/result" "$here/$passing"
