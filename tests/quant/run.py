#!/usr/bin/python3
"""Quantized models, packrat against ONNX Runtime (issue 18, "done when" 3).

Float models are quantized here into ONNX Runtime's QDQ format by a small
quantizer (quantize()): weights of Conv, MatMul and Gemm as int8
(symmetric, per tensor or per output channel) behind DequantizeLinear, an
int32 bias behind DequantizeLinear, and every activation that such an op or
an Add reads or writes behind a QuantizeLinear/DequantizeLinear pair whose
scale and zero point come from the activation's range (min-max calibration
on the case's own input, through ONNX Runtime), u8 or s8 as the case asks.
A Relu right after a Conv or Gemm is quantized after the Relu (ONNX
Runtime's quantizer does the same).

Single layers (Conv, MatMul, Gemm, Add; per tensor and per channel; u8 and
s8 activations) must agree with ONNX Runtime within one quantization step of
the output; whole models (a small CNN, a CNN with PaddleOCR's element-wise
layers between two convolutions, and ResNet-50 when MODELS_DIR holds it)
within 2% of each output's range. Both run the same model file on the
same input. Also QOperator models (QLinearConv, QLinearMatMul with constant
weights).

usage: run.py PACKRAT ORT_RUN_JS NODE_MODULES OUT_DIR [MODELS_DIR]
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
QUANTIZED = ("Conv", "MatMul", "Gemm", "Add")


def run_ort(model_path, feeds, d):
    os.makedirs(d, exist_ok=True)
    args = []
    for name, v in feeds.items():
        p = os.path.join(d, name.replace("/", "_") + ".npy")
        np.save(p, v)
        args.append(f"{name}={p}")
    subprocess.run(["node", ort_run, model_path, d] + args, check=True,
                   env=dict(os.environ, NODE_MODULES=node_modules))
    index = json.load(open(os.path.join(d, "ort.json")))
    types = {"float32": np.float32, "uint8": np.uint8, "int8": np.int8, "int32": np.int32,
             "int64": np.int64}
    return {e["name"]: np.fromfile(os.path.join(d, f"ort_{k}.bin"), types[e["type"]])
            .reshape(e["dims"]) for k, e in enumerate(index)}


def run_packrat(model_path, feeds, d):
    os.makedirs(d, exist_ok=True)
    args = [packrat, "run", model_path, "--output-dir", d, "--threads", "2"]
    for name, v in feeds.items():
        p = os.path.join(d, "in_" + name.replace("/", "_") + ".npy")
        np.save(p, v)
        args += ["--input", f"{name}={p}"]
    subprocess.run(args, check=True, capture_output=True)
    m = onnx.load(model_path, load_external_data=False)
    return {o.name: np.load(os.path.join(d, f"output_{k}.npy"))
            for k, o in enumerate(m.graph.output)}


def act_params(lo, hi, dtype):
    """Scale and zero point covering [lo, hi] (widened to hold 0)."""
    qmin, qmax = (0, 255) if dtype == np.uint8 else (-128, 127)
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = (hi - lo) / (qmax - qmin) if hi > lo else 1.0
    zp = int(np.clip(np.rint(qmin - lo / scale), qmin, qmax))
    return np.float32(scale), dtype(zp)


def weight_q(w, per_channel, axis):
    """Symmetric int8 weights: (w_q, scale) per tensor or per slice of axis."""
    if per_channel:
        red = tuple(k for k in range(w.ndim) if k != axis)
        scale = np.abs(w).max(axis=red) / 127.0
        scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
        shp = [1] * w.ndim
        shp[axis] = -1
        q = np.clip(np.rint(w / scale.reshape(shp)), -127, 127).astype(np.int8)
    else:
        scale = np.float32(max(np.abs(w).max() / 127.0, 1e-8))
        q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    return q, scale


class Quantizer:
    def __init__(self, model, ranges, act_type, per_channel):
        self.m, self.ranges, self.t, self.pc = model, ranges, act_type, per_channel
        self.g = model.graph
        self.inits = {i.name: i for i in self.g.initializer}
        self.new_nodes, self.new_inits, self.qdq_done = [], [], {}
        self.scales = {}

    def init(self, name, arr):
        self.new_inits.append(numpy_helper.from_array(arr, name))
        return name

    def qdq(self, t):
        """The DequantizeLinear'd name of activation t (made once)."""
        if t in self.qdq_done:
            return self.qdq_done[t]
        lo, hi = self.ranges[t]
        s, z = act_params(lo, hi, self.t)
        self.scales[t] = s
        sn, zn = self.init(t + "_s", np.array(s, np.float32)), self.init(t + "_z", np.array(z))
        self.new_nodes.append(helper.make_node("QuantizeLinear", [t, sn, zn], [t + "_q"]))
        self.new_nodes.append(helper.make_node("DequantizeLinear", [t + "_q", sn, zn], [t + "_dq"]))
        self.qdq_done[t] = t + "_dq"
        return t + "_dq"

    def weight(self, name, axis):
        w = numpy_helper.to_array(self.inits[name]).astype(np.float32)
        q, s = weight_q(w, self.pc, axis)
        qn, sn = self.init(name + "_wq", q), self.init(name + "_ws", np.asarray(s, np.float32))
        zn = self.init(name + "_wz", np.zeros(np.shape(s), np.int8))
        attrs = {"axis": axis} if self.pc else {}
        self.new_nodes.append(helper.make_node("DequantizeLinear", [qn, sn, zn], [name + "_wdq"],
                                               **attrs))
        return name + "_wdq", s

    def bias(self, name, sx, sw):
        b = numpy_helper.to_array(self.inits[name]).astype(np.float32).reshape(-1)
        s = (sx * np.broadcast_to(sw, b.shape)).astype(np.float32)
        q = np.rint(b / s).astype(np.int32)
        qn, sn = self.init(name + "_bq", q), self.init(name + "_bs", s if self.pc else s[:1].reshape(()))
        attrs = {"axis": 0} if self.pc else {}
        self.new_nodes.append(helper.make_node("DequantizeLinear", [qn, sn], [name + "_bdq"], **attrs))
        return name + "_bdq"


def consumers(g, t):
    return [n for n in g.node if t in n.input]


def quantize(model, ranges, act_type, per_channel):
    """QDQ form of a float model (see the module's comment)."""
    Q = Quantizer(model, ranges, act_type, per_channel)
    g = model.graph
    rename = {}  # activation -> its DequantizeLinear'd name, per consumer node
    out_after = set()
    for ni, n in enumerate(g.node):
        if n.op_type not in QUANTIZED or (n.op_type == "Add" and any(i in Q.inits for i in n.input)):
            continue  # an Add of a constant: a bias, left in float
        acts = [i for i in n.input if i and i not in Q.inits]
        for i in acts:
            rename[(ni, i)] = Q.qdq(i)
        y = n.output[0]
        cons = consumers(g, y)
        if n.op_type in ("Conv", "Gemm") and len(cons) == 1 and cons[0].op_type == "Relu":
            y = cons[0].output[0]
        elif (n.op_type == "MatMul" and len(cons) == 1 and cons[0].op_type == "Add" and
              any(i in Q.inits for i in cons[0].input)):
            y = cons[0].output[0]  # MatMul + bias: quantized after the bias
        out_after.add(y)
        sx = Q.scales.get(acts[0]) if acts else None
        if n.op_type == "Conv" or (n.op_type in ("MatMul", "Gemm") and n.input[1] in Q.inits):
            trans = n.op_type == "Gemm" and any(a.name == "transB" and a.i for a in n.attribute)
            axis = 0 if n.op_type == "Conv" or trans else 1
            wn, sw = Q.weight(n.input[1], axis)
            rename[(ni, n.input[1])] = wn
            if n.op_type in ("Conv", "Gemm") and len(n.input) > 2 and n.input[2] in Q.inits:
                rename[(ni, n.input[2])] = Q.bias(n.input[2], sx, sw)
    for y in out_after:
        Q.qdq(y)
    for ni, n in enumerate(g.node):
        for k, i in enumerate(n.input):
            if (ni, i) in rename:
                n.input[k] = rename[(ni, i)]
            elif i in out_after:
                n.input[k] = Q.qdq_done[i]
    for o in g.output:
        if o.name in out_after:
            o.name = Q.qdq_done[o.name]
    # Q/DQ of a value right after its producer: keep the node list topological
    nodes, pending = [], list(Q.new_nodes)
    produced = {i.name for i in g.input} | set(Q.inits) | {i.name for i in Q.new_inits}
    def flush():
        moved = True
        while moved:
            moved = False
            for q in list(pending):
                if all(i in produced or not i for i in q.input):
                    nodes.append(q)
                    produced.update(q.output)
                    pending.remove(q)
                    moved = True
    flush()
    for n in g.node:
        nodes.append(n)
        produced.update(n.output)
        flush()
    assert not pending, [p.output for p in pending]
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(Q.new_inits)
    return model


def ranges_of(model, feeds, d):
    """min and max of every float activation, through ONNX Runtime."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in have:
                m.graph.output.append(helper.make_tensor_value_info(o, TensorProto.FLOAT, None))
    p = os.path.join(d, "calib.onnx")
    onnx.save(m, p)
    vals = run_ort(p, feeds, os.path.join(d, "calib"))
    r = {k: (v.min(), v.max()) for k, v in vals.items() if v.dtype == np.float32}
    for k, v in feeds.items():
        r[k] = (v.min(), v.max())
    return r


def check(name, model, feeds, tol_of, act_type=np.uint8, per_channel=False):
    d = os.path.join(root, name)
    os.makedirs(d)
    qm = quantize(model, ranges_of(model, feeds, d), act_type, per_channel)
    p = os.path.join(d, "model.onnx")
    onnx.save(qm, p)
    want = run_ort(p, feeds, os.path.join(d, "ort"))
    got = run_packrat(p, feeds, os.path.join(d, "packrat"))
    ok = True
    for o in qm.graph.output:
        w, g_ = want[o.name], got[o.name]
        if w.shape != g_.shape:
            print(f"FAIL {name} {o.name}: shape {g_.shape}, expected {w.shape}")
            ok = False
            continue
        tol = tol_of(qm, o.name, w)
        diff = float(np.abs(w.astype(np.float64) - g_).max())
        exact = float(np.mean(w == g_))
        print(f"{'PASS' if diff <= tol else 'FAIL'} {name} {o.name}: max diff {diff:.4g} "
              f"(tolerance {tol:.4g}), {100 * exact:.1f}% equal")
        ok &= diff <= tol
    return ok


def one_step(qm, out, want):
    """One quantization step of output `out` (its QuantizeLinear's scale)."""
    inits = {i.name: numpy_helper.to_array(i) for i in qm.graph.initializer}
    for n in qm.graph.node:
        if n.op_type == "DequantizeLinear" and out in n.output:
            return float(inits[n.input[1]]) * (1 + 1e-5) + 1e-6
    raise AssertionError("no DequantizeLinear before " + out)


def two_percent(qm, out, want):
    return 0.02 * float(want.max() - want.min())


def model_of(nodes, inputs, outputs, inits, opset=13):
    g = helper.make_graph(nodes, "q", inputs, outputs, [numpy_helper.from_array(v, k)
                                                           for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def fin(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def conv_case(C, M, k, stride, pads, group=1, relu=False, H=9):
    inits = {"W": (rng.standard_normal((M, C // group, k, k)) * 0.3).astype(np.float32),
             "B": (rng.standard_normal(M) * 0.2).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c" if relu else "y"], strides=[stride] * 2,
                              pads=[pads] * 4, group=group)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    return model_of(nodes, [fin("x", [2, C, H, H])], [fin("y", None)], inits), \
        {"x": rng.standard_normal((2, C, H, H)).astype(np.float32)}


def matmul_case(K, N, bias):
    inits = {"W": (rng.standard_normal((K, N)) * 0.3).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m" if bias else "y"])]
    if bias:
        inits["B"] = (rng.standard_normal(N) * 0.5).astype(np.float32)
        nodes.append(helper.make_node("Add", ["m", "B"], ["y"]))
    return model_of(nodes, [fin("x", [2, 5, K])], [fin("y", None)], inits), \
        {"x": rng.standard_normal((2, 5, K)).astype(np.float32)}


def gemm_case(K, N, trans):
    w = (rng.standard_normal((N, K) if trans else (K, N)) * 0.3).astype(np.float32)
    inits = {"W": w, "B": (rng.standard_normal(N) * 0.5).astype(np.float32)}
    nodes = [helper.make_node("Gemm", ["x", "W", "B"], ["y"], transB=int(trans))]
    return model_of(nodes, [fin("x", [4, K])], [fin("y", None)], inits), \
        {"x": rng.standard_normal((4, K)).astype(np.float32)}


def add_case():
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    feeds = {"a": rng.standard_normal((2, 8, 5, 5)).astype(np.float32),
             "b": (rng.standard_normal((2, 8, 5, 5)) * 2 + 0.5).astype(np.float32)}
    return model_of(nodes, [fin("a", [2, 8, 5, 5]), fin("b", [2, 8, 5, 5])], [fin("y", None)], {}), feeds


def small_cnn():
    r = lambda *s: (rng.standard_normal(s) * (2.0 / np.prod(s[1:])) ** 0.5).astype(np.float32)
    inits = {"W1": r(16, 3, 3, 3), "B1": r(16) * 0.1, "W2": r(16, 16, 3, 3), "B2": r(16) * 0.1,
             "W3": r(32, 16, 3, 3), "B3": r(32) * 0.1, "W4": r(32, 1, 3, 3), "B4": r(32) * 0.1,
             "W5": r(10, 32), "B5": r(10) * 0.1, "shape": np.array([2, 32], np.int64)}
    n = helper.make_node
    nodes = [n("Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4), n("Relu", ["c1"], ["r1"]),
             n("Conv", ["r1", "W2", "B2"], ["c2"], pads=[1] * 4), n("Relu", ["c2"], ["r2"]),
             n("Add", ["r1", "r2"], ["a2"]),
             n("Conv", ["a2", "W3", "B3"], ["c3"], pads=[1] * 4, strides=[2, 2]),
             n("Relu", ["c3"], ["r3"]),
             n("Conv", ["r3", "W4", "B4"], ["c4"], pads=[1] * 4, group=32),
             n("Relu", ["c4"], ["r4"]), n("GlobalAveragePool", ["r4"], ["p"]),
             n("Reshape", ["p", "shape"], ["f"]), n("Gemm", ["f", "W5", "B5"], ["y"], transB=1)]
    return model_of(nodes, [fin("x", [2, 3, 16, 16])], [fin("y", None)], inits), \
        {"x": rng.standard_normal((2, 3, 16, 16)).astype(np.float32)}


def chain_cnn():
    """Conv -> scale, bias, HardSwish written out, scale, bias (PaddleOCR's
    layers between convolutions: packrat computes them as one table of the
    256 quantized values) -> Conv."""
    r = lambda *s: (rng.standard_normal(s) * (2.0 / np.prod(s[1:])) ** 0.5).astype(np.float32)
    k = lambda v: np.array(v, np.float32)
    inits = {"W1": r(16, 3, 3, 3), "B1": r(16) * 0.1, "W2": r(8, 16, 1, 1), "B2": r(8) * 0.1,
             "s1": k(1.2), "b1": k(-0.3), "three": k(3), "zero": k(0), "six": k(6), "s2": k(0.8),
             "b2": k(0.1)}
    n = helper.make_node
    nodes = [n("Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4), n("Mul", ["s1", "c1"], ["m1"]),
             n("Add", ["m1", "b1"], ["a1"]), n("Add", ["a1", "three"], ["h1"]),
             n("Clip", ["h1", "zero", "six"], ["h2"]), n("Mul", ["a1", "h2"], ["h3"]),
             n("Div", ["h3", "six"], ["h4"]), n("Mul", ["s2", "h4"], ["m2"]),
             n("Add", ["m2", "b2"], ["a2"]), n("Conv", ["a2", "W2", "B2"], ["y"])]
    return model_of(nodes, [fin("x", [2, 3, 12, 12])], [fin("y", None)], inits), \
        {"x": rng.standard_normal((2, 3, 12, 12)).astype(np.float32)}


def main():
    ok = True
    for t, tn in ((np.uint8, "u8"), (np.int8, "s8")):
        for pc in (False, True):
            sfx = f"{tn}_{'channel' if pc else 'tensor'}"
            for nm, (m, f) in {"conv": conv_case(8, 16, 3, 1, 1),
                               "conv_relu_stride": conv_case(6, 12, 3, 2, 1, relu=True),
                               "conv_depthwise": conv_case(8, 8, 3, 1, 1, group=8),
                               "conv_1x1": conv_case(16, 8, 1, 1, 0),
                               "matmul": matmul_case(24, 16, False),
                               "matmul_bias": matmul_case(24, 16, True),
                               "gemm": gemm_case(20, 12, False),
                               "gemm_transb": gemm_case(20, 12, True)}.items():
                ok &= check(f"{nm}_{sfx}", m, f, one_step, t, pc)
        m, f = add_case()
        ok &= check(f"add_{tn}", m, f, one_step, t)
        m, f = small_cnn()
        ok &= check(f"small_cnn_{tn}", m, f, two_percent, t, True)
        m, f = chain_cnn()
        ok &= check(f"chain_cnn_{tn}", m, f, two_percent, t, True)
    rn = os.path.join(models_dir or "", "resnet50")
    if models_dir and os.path.exists(os.path.join(rn, "model.onnx")):
        m = onnx.load(os.path.join(rn, "model.onnx"))
        x = numpy_helper.to_array(onnx.load_tensor(os.path.join(rn, "test_data_set_0", "input_0.pb")))
        ok &= check("resnet50_u8", m, {m.graph.input[0].name: x}, two_percent, np.uint8, True)
    print("all passed" if ok else "FAILED")
    sys.exit(0 if ok else 1)


main()
