#!/usr/bin/python3
"""`packrat quantize` from the command line: a small float CNN (made here
with onnx) quantized from a folder, a file and NAME=PATH calibration data,
the result run by `packrat run`, and each refusal with its exit status and
message: usage errors (2), and bad or wrong-shaped files, an empty folder,
a missing one, a model with nothing to quantize, an unknown --exclude name,
an unnamed input of a two-input model (1). --accuracy: a model whose
first Conv cannot run in int8 (weights {1000, 1} on an input whose first
channel is zero: the 1 rounds to 0) gets that Conv, and only it, left
float; a model that quantizes cleanly gets none; the flags' bad values
(2, nothing written); --dynamic: a MatMul model written, the static
flags refused with it (2), a model without MatMul or below opset 11 (1).
--reduce-range: 7-bit weights, run on oneDNN's kernels under the AVX2 cap
(8-bit ones on the plain loops there), the same answers as uncapped.

usage: quantize_cli.py PACKRAT OUT_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

packrat, root = sys.argv[1:3]
shutil.rmtree(root, ignore_errors=True)
os.makedirs(root)
rng = np.random.default_rng(0)
failures = []


def path(name):
    return os.path.join(root, name)


def conv_model(name, two_inputs=False):
    """x [N,3,8,8] -> Conv -> Relu -> Conv -> Sigmoid -> y (plus x2 -> Add)."""
    w1 = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((2, 4, 1, 1)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"]),
             helper.make_node("Sigmoid", ["c2"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])]
    if two_inputs:
        nodes[-1] = helper.make_node("Add", ["c2", "x2"], ["y"])
        inputs.append(helper.make_tensor_value_info("x2", TensorProto.FLOAT, ["N", 2, 8, 8]))
    g = helper.make_graph(nodes, "g", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 8, 8])], [w1, w2])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path(name))
    return path(name)


def samples(folder, shape, n=5):
    os.makedirs(path(folder), exist_ok=True)
    for k in range(n):
        np.save(os.path.join(path(folder), f"s{k}.npy"), rng.standard_normal(shape).astype(np.float32))
    return path(folder)


def quantize(*args):
    return subprocess.run([packrat, "quantize"] + list(args), capture_output=True, text=True)


def expect(what, r, status, text):
    out = r.stdout + r.stderr
    if r.returncode != status or text not in out:
        failures.append(f"{what}: exit {r.returncode} (want {status}), output {out!r} (want {text!r})")
    else:
        print(f"ok: {what}")


model = conv_model("cnn.onnx")
calib = samples("calib", (1, 3, 8, 8))
q = path("cnn.int8.onnx")
r = quantize(model, "--out", q, "--calibration", calib, "--json")
expect("a folder of samples", r, 0, "2 Conv, 0 MatMul, 0 Gemm, 0 Add in int8")
report = json.loads(r.stdout.strip().splitlines()[-1])
if report["samples"] != 5 or report["activations"] != 3 or report["type"] != "uint8":
    failures.append(f"--json report {report}")
x = path("x.npy")
np.save(x, rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
outs = []
for m, d in ((model, "run32"), (q, "run8")):
    subprocess.run([packrat, "run", m, "--input", f"x={x}", "--output-dir", path(d)], check=True,
                   capture_output=True)
    outs.append(np.load(os.path.join(path(d), "output_0.npy")))
diff = float(np.abs(outs[0] - outs[1]).max())
if not 0 < diff < 0.05:
    failures.append(f"the quantized model answers {diff} from the float one (want (0, 0.05))")
qm = onnx.load(q)
ops = [n.op_type for n in qm.graph.node]
if ops.count("QuantizeLinear") != 3 or qm.opset_import[0].version != 13:
    failures.append(f"written model: {ops}, opset {qm.opset_import[0].version}")
onnx.checker.check_model(qm)  # a standard model, as ONNX's checker sees it

one = os.path.join(calib, "s0.npy")
expect("one file, NAME=PATH, int8 percentile", quantize(
    model, "--out", q, "--calibration", f"x={one}", "--activations", "int8", "--method",
    "percentile", "--percentile", "99.9"), 0, "int8 (percentile 99.9, 1 samples)")
r = quantize(model, "--out", q, "--calibration", calib, "--method", "entropy", "--json")
expect("--method entropy", r, 0, "(entropy, 5 samples)")
if r.returncode == 0 and json.loads(r.stdout.strip().splitlines()[-1])["method"] != "entropy":
    failures.append(f"--method entropy --json: {r.stdout}")
expect("--ops and --exclude", quantize(model, "--out", q, "--calibration", calib, "--ops", "Conv",
                                       "--exclude", "c2"), 0, "1 Conv, 0 MatMul")

# --accuracy: the nodes left float chosen on held-out samples
bad_model = path("bad.onnx")
wb = numpy_helper.from_array(np.array([1000, 1], np.float32).reshape(1, 2, 1, 1), "wb")
wg = numpy_helper.from_array(rng.standard_normal((2, 1, 3, 3)).astype(np.float32), "wg")
g = helper.make_graph([helper.make_node("Conv", ["x", "wb"], ["c"], name="bad"),
                       helper.make_node("Conv", ["c", "wg"], ["d"], name="good", pads=[1, 1, 1, 1]),
                       helper.make_node("Tanh", ["d"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 6, 6])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 6, 6])], [wb, wg])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), bad_model)
os.makedirs(path("calib_bad"))
for k in range(8):
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    x[:, 0] = 0
    np.save(os.path.join(path("calib_bad"), f"s{k}.npy"), x)
r = quantize(bad_model, "--out", q, "--calibration", path("calib_bad"), "--accuracy", "100",
             "--holdout", "3", "--tolerance", "0.1", "--json")
expect("--accuracy leaves the bad Conv float", r, 0, "left float: 1 (bad)")
if r.returncode == 0:
    acc = json.loads(r.stdout.strip().splitlines()[-1]).get("accuracy", {})
    if (acc.get("float_nodes") != ["bad"] or acc.get("held_out") != 3 or acc.get("agreement") != 100
            or not acc.get("agreement_all_int8", 100) < 100):
        failures.append(f"--accuracy --json: {acc}")
    ops = [n.op_type for n in onnx.load(q).graph.node]
    if ops.count("QuantizeLinear") != 2:  # c and d; x stays float with bad
        failures.append(f"--accuracy wrote {ops}")
r = quantize(model, "--out", q, "--calibration", calib, "--accuracy", "100", "--metric", "argmax",
             "--json")
expect("--accuracy on a clean model", r, 0, "after 1 trials; left float: 0")
expect("--accuracy, --metric ctc", quantize(model, "--out", q, "--calibration", calib,
                                            "--accuracy", "90", "--metric", "ctc"), 0, "(ctc;")

# usage errors: exit 2
expect("--help", quantize("--help"), 0, "--calibration [NAME=]PATH")
expect("no --out", quantize(model, "--calibration", calib), 2, "needs MODEL.onnx, --out")
expect("bad --method", quantize(model, "--out", q, "--calibration", calib, "--method", "kl"), 2,
       "--method is minmax, percentile or entropy")
expect("bad --percentile", quantize(model, "--out", q, "--calibration", calib, "--percentile", "10"),
       2, "[50, 100]")
expect("bad --activations", quantize(model, "--out", q, "--calibration", calib, "--activations",
                                     "int4"), 2, "uint8 or int8")
expect("bad --ops", quantize(model, "--out", q, "--calibration", calib, "--ops", "Conv,Relu"), 2,
       "--ops lists")
expect("unknown flag", quantize(model, "--out", q, "--calibration", calib, "--fast"), 2,
       "unknown option '--fast'")

fresh = path("never.onnx")
for args, text in ((["--accuracy", "0"], "0 < A <= 100"), (["--accuracy", "101"], "0 < A <= 100"),
                   (["--accuracy", "x"], "0 < A <= 100"),
                   (["--accuracy", "99", "--metric", "mse"], "range, argmax or ctc"),
                   (["--accuracy", "99", "--tolerance", "0"], "0 < T <= 1"),
                   (["--accuracy", "99", "--tolerance", "2"], "0 < T <= 1"),
                   (["--accuracy", "99", "--holdout", "0"], "--holdout must be an integer"),
                   (["--holdout", "2"], "go with --accuracy"),
                   (["--metric", "argmax"], "go with --accuracy"),
                   (["--accuracy", "99", "--metric", "argmax", "--tolerance", "0.1"],
                    "--tolerance goes with --metric range"),
                   (["--accuracy", "99", "--holdout", "5"], "leaves none for the ranges")):
    expect(" ".join(args), quantize(model, "--out", fresh, "--calibration", calib, *args), 2, text)
if os.path.exists(fresh):
    failures.append("a refused --accuracy wrote a model")
expect("--help names --accuracy", quantize("--help"), 0, "--accuracy A")
expect("--help names --dynamic", quantize("--help"), 0, "--dynamic")
for args in (["--calibration", calib], ["--accuracy", "99"], ["--method", "entropy"],
             ["--activations", "int8"], ["--ops", "MatMul"], ["--fold-batchnorm"]):
    expect("--dynamic " + " ".join(args), quantize(model, "--out", fresh, "--dynamic", *args), 2,
           "--dynamic takes only")
if os.path.exists(fresh):
    failures.append("a refused --dynamic wrote a model")
expect("--dynamic, no MatMul", quantize(model, "--out", fresh, "--dynamic"), 1, "nothing to quantize")
mm = path("mm10.onnx")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                      "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                      [numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)]), mm)
expect("--dynamic, opset 10", quantize(mm, "--out", fresh, "--dynamic"), 1, "needs opset 11")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), mm)
r = quantize(mm, "--out", q, "--dynamic", "--json")
expect("--dynamic", r, 0, "1 MatMul dynamic")
if r.returncode == 0 and not json.loads(r.stdout.strip().splitlines()[-1]).get("dynamic"):
    failures.append(f"--dynamic --json: {r.stdout}")

# bad data and models: exit 1
bad = path("bad")
os.makedirs(bad)
with open(os.path.join(bad, "s0.npy"), "wb") as f:
    f.write(b"\x93NUMPY garbage")
expect("a corrupt file", quantize(model, "--out", q, "--calibration", bad), 1, "s0.npy")
wrong = samples("wrong", (1, 3, 8))
expect("a wrong shape", quantize(model, "--out", q, "--calibration", wrong), 1,
       "the model takes FLOAT [?, 3, 8, 8]")
os.makedirs(path("empty"))
expect("an empty folder", quantize(model, "--out", q, "--calibration", path("empty")), 1,
       "holds no .npy or .pb file")
expect("a missing folder", quantize(model, "--out", q, "--calibration", path("nowhere")), 1,
       "no such file or folder")
expect("an unknown --exclude", quantize(model, "--out", q, "--calibration", calib, "--exclude",
                                        "nope"), 1, "no node named 'nope'")
neg = path("neg.onnx")
g = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), neg)
expect("nothing to quantize", quantize(neg, "--out", q, "--calibration", calib), 1,
       "nothing to quantize")
two = conv_model("two.onnx", two_inputs=True)
expect("an unnamed input of two", quantize(two, "--out", q, "--calibration", calib), 1,
       "name the input")
calib2 = samples("calib2", (1, 2, 8, 8), n=4)
expect("inputs with different counts", quantize(two, "--out", q, "--calibration", f"x={calib}",
                                                "--calibration", f"x2={calib2}"), 1,
       "has 4 calibration files")
expect("two inputs named", quantize(two, "--out", q, "--calibration", f"x={calib}",
                                    "--calibration", f"x2={samples('calib3', (1, 2, 8, 8))}"), 0,
       "2 Conv")

# --reduce-range: 7-bit weights, which oneDNN's int8 kernels run exactly
# without VNNI; held to AVX2 (ONEDNN_MAX_CPU_ISA) the convolutions run there
# (8-bit weights: packrat's plain loops) and answer as without the cap
q7 = path("cnn.int8_7bit.onnx")
r = quantize(model, "--out", q7, "--calibration", calib, "--reduce-range", "--json")
expect("--reduce-range", r, 0, "weights in 7 bits")
if r.returncode == 0:
    if json.loads(r.stdout.strip().splitlines()[-1]).get("reduce_range") is not True:
        failures.append(f"--reduce-range --json: {r.stdout}")
    ws = [numpy_helper.to_array(t) for t in onnx.load(q7).graph.initializer
          if t.data_type == TensorProto.INT8 and t.name.endswith("_quantized")]
    if len(ws) != 2 or max(int(np.abs(w.astype(np.int32)).max()) for w in ws) != 64:
        failures.append(f"--reduce-range weights: {[(w.shape, int(np.abs(w).max())) for w in ws]}")
    x = path("x.npy")
    q8 = path("cnn.int8_8bit.onnx")
    expect("8-bit weights", quantize(model, "--out", q8, "--calibration", calib), 0, "2 Conv")
    cap = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2")
    for m, want_onednn in ((q7, True), (q8, False)):
        r = subprocess.run([packrat, "run", m, "--input", f"x={x}", "--profile-kernels"], env=cap,
                           capture_output=True, text=True)
        impls = [ln.split()[-1] for ln in r.stdout.splitlines() if ln.strip().startswith("#") and
                 "QLinearConv" in ln]
        onednn = len(impls) == 2 and all(i != "packrat" for i in impls)
        plain = len(impls) > 0 and all(i == "packrat" for i in impls)
        if r.returncode != 0 or (onednn if want_onednn else plain) is False:
            failures.append(f"{m} under the AVX2 cap: convolutions on {impls} ({r.stderr})")
    runs = []
    for env, d in ((cap, "run7_avx2"), (None, "run7")):
        subprocess.run([packrat, "run", q7, "--input", f"x={x}", "--output-dir", path(d)], check=True,
                       capture_output=True, env=env)
        runs.append(np.load(os.path.join(path(d), "output_0.npy")))
    if not np.array_equal(runs[0], runs[1]):
        failures.append(f"7-bit model: AVX2 and full ISA differ by {np.abs(runs[0] - runs[1]).max()}")
    else:
        print("ok: 7-bit weights run on oneDNN under the AVX2 cap, the same answers")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
