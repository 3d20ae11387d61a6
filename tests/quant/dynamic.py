#!/usr/bin/python3
"""`packrat quantize --dynamic` against ONNX Runtime and fp32 (issue 18:
dynamic quantization for MatMul-heavy transformers).

The written model (DynamicQuantizeLinear + MatMulInteger + Cast + Mul per
MatMul with constant weights, the form ONNX Runtime's quantize_dynamic
writes) is run by packrat and by ONNX Runtime on the same file and input,
and by packrat against the float model:

- a small model made here (x [2, 5, 16] -> MatMul + bias -> Relu -> MatMul,
  and a second MatMul reading x): two DynamicQuantizeLinear (x is quantized
  once for its two MatMuls), three MatMulInteger, onnx.checker passes;
  packrat and ONNX Runtime within 1e-4 of the output's range (the integer
  products are exact; only float rounding of the scales may differ), fp32
  within 5% of it (16 and 8 terms per sum: little averaging; measured 2.6%);
- BERT-base (MODELS_DIR/bert, PyTorch's export; two of its test inputs,
  sequence 128): packrat and ONNX Runtime within 2% of the fp32 output's
  range (issue 18's bound for whole models), packrat and fp32 within 2%
  too, and every token's hidden state at cosine >= 0.999 to fp32's
  (measured: 0.5%, 0.5%, 0.99993).

packrat runs each MatMulInteger on oneDNN's int8 matmul where that is exact
(VNNI), else on its exact int32 loop; both must give these answers.

usage: dynamic.py PACKRAT ORT_RUN_JS NODE_MODULES OUT_DIR [MODELS_DIR]
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

packrat, ort_run, node_modules, root = sys.argv[1:5]
models_dir = sys.argv[5] if len(sys.argv) > 5 else None
shutil.rmtree(root, ignore_errors=True)
os.makedirs(root)
rng = np.random.default_rng(0)
failures = []


def run_ort(model, x_name, x, d):
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "in.npy"), x)
    subprocess.run(["node", ort_run, model, d, f"{x_name}={os.path.join(d, 'in.npy')}"],
                   check=True, env=dict(os.environ, NODE_MODULES=node_modules))
    e = json.load(open(os.path.join(d, "ort.json")))[0]
    return np.fromfile(os.path.join(d, "ort_0.bin"), np.float32).reshape(e["dims"])


def run_packrat(model, x_name, x, d):
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "in.npy"), x)
    subprocess.run([packrat, "run", model, "--threads", "2", "--input",
                    f"{x_name}={os.path.join(d, 'in.npy')}", "--output-dir", d],
                   check=True, capture_output=True)
    return np.load(os.path.join(d, "output_0.npy"))


def quantize(model, out):
    r = subprocess.run([packrat, "quantize", model, "--out", out, "--dynamic", "--json"],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"packrat quantize --dynamic failed ({r.returncode}): {r.stderr}")
    print(r.stdout.strip().splitlines()[0])
    return json.loads(r.stdout.strip().splitlines()[-1])


def check(what, got, want, bound, ref_range):
    err = float(np.abs(got - want).max()) / ref_range
    print(f"{what}: max |difference| {100 * err:.4f}% of the fp32 range (bound {100 * bound:g}%)")
    if not err <= bound:
        failures.append(f"{what}: {err} of the range > {bound}")


def small_model():
    path = os.path.join(root, "mlp.onnx")
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.5, n)
             for n, s in (("w1", (16, 8)), ("b1", (8,)), ("w2", (8, 4)), ("w3", (16, 4)))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]),
             helper.make_node("Add", ["m1", "b1"], ["a1"]),
             helper.make_node("Relu", ["a1"], ["r1"]),
             helper.make_node("MatMul", ["r1", "w2"], ["m2"]),
             helper.make_node("MatMul", ["x", "w3"], ["m3"]),
             helper.make_node("Add", ["m2", "m3"], ["s"]),
             helper.make_node("Tanh", ["s"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 4])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    q = os.path.join(root, "mlp.dyn.onnx")
    report = quantize(path, q)
    qm = onnx.load(q)
    onnx.checker.check_model(qm)
    ops = [n.op_type for n in qm.graph.node]
    if (ops.count("DynamicQuantizeLinear") != 2 or ops.count("MatMulInteger") != 3
            or "MatMul" in ops or report["matmul"] != 3 or report["activations"] != 2):
        failures.append(f"small model written as {ops}, report {report}")
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    y32 = run_packrat(path, "x", x, os.path.join(root, "mlp32"))
    y8 = run_packrat(q, "x", x, os.path.join(root, "mlp8"))
    yo = run_ort(q, "x", x, os.path.join(root, "mlp_ort"))
    span = float(y32.max() - y32.min())
    check("small model, packrat vs ONNX Runtime", y8, yo, 1e-4, span)
    check("small model, packrat int8 vs fp32", y8, y32, 0.05, span)
    if not np.abs(y8 - y32).max() > 0:
        failures.append("the dynamic model answers exactly as fp32: nothing was quantized")


def token_cosine(a, b):
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return float((np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


def bert():
    fp32 = os.path.join(models_dir, "bert", "model.onnx")
    if not os.path.exists(fp32):
        print(f"skipped BERT: no {fp32}")
        return
    q = os.path.join(root, "bert.dyn.onnx")
    report = quantize(fp32, q)
    if report["matmul"] < 48:  # 4 weight MatMuls in each of 12 layers
        failures.append(f"BERT: {report['matmul']} MatMuls quantized, want 48")
    for k in (0, 1):
        t = onnx.TensorProto()
        with open(os.path.join(models_dir, "bert", f"test_data_set_{k}", "input_0.pb"), "rb") as f:
            t.ParseFromString(f.read())
        x = numpy_helper.to_array(t)
        y32 = run_packrat(fp32, "input", x, os.path.join(root, f"bert32_{k}"))
        y8 = run_packrat(q, "input", x, os.path.join(root, f"bert8_{k}"))
        yo = run_ort(q, "input", x, os.path.join(root, f"bert_ort_{k}"))
        span = float(y32.max() - y32.min())
        check(f"BERT input {k}, packrat vs ONNX Runtime", y8, yo, 0.02, span)
        check(f"BERT input {k}, packrat int8 vs fp32", y8, y32, 0.02, span)
        cos = token_cosine(y8, y32)
        print(f"BERT input {k}: least token cosine to fp32 {cos:.6f} (bound 0.999); ONNX Runtime's "
              f"{token_cosine(yo, y32):.6f}")
        if not cos >= 0.999:
            failures.append(f"BERT input {k}: token cosine {cos}")


small_model()
if models_dir:
    bert()
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
