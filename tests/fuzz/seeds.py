#!/usr/bin/python3
"""Seed models for the loader fuzz target that reach the transformer fusions
(linear MatMul with bias/GELU/residual, attention with mask, decomposed
LayerNorm) and the QDQ folding into int8 kernels (DequantizeLinear ->
Conv/Gemm -> QuantizeLinear, with constant int8 weights, an int32 bias and
per-channel scales; a QLinearConv and QLinearMatMul with constant weights),
which mutations of the ONNX node tests rarely form.

usage: tests/fuzz/seeds.py OUT_DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def block(S=5, H=2, D=4):
    C = H * D
    rng = np.random.default_rng(0)
    inits = [
        const("wqkv", rng.standard_normal((C, 3 * C)).astype(np.float32)),
        const("bqkv", rng.standard_normal(3 * C).astype(np.float32)),
        const("split", np.array([C, C, C], np.int64)),
        const("shp", np.array([0, -1, H, D], np.int64)),
        const("shp2", np.array([0, -1, C], np.int64)),
        const("scale", np.array(np.sqrt(D), np.float32)),
        const("mask", np.triu(np.full((1, 1, S, S), -1e4, np.float32), 1)),
        const("w1", rng.standard_normal((C, 4 * C)).astype(np.float32)),
        const("b1", rng.standard_normal(4 * C).astype(np.float32)),
        const("sqrt2", np.array(1.4142135, np.float32)),
        const("one", np.array(1.0, np.float32)),
        const("half", np.array(0.5, np.float32)),
        const("two", np.array(2.0, np.float32)),
        const("eps", np.array(1e-5, np.float32)),
    ]
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "wqkv"], ["m"]), n("Add", ["bqkv", "m"], ["qkv"]),
        n("Split", ["qkv", "split"], ["q0", "k0", "v0"], axis=-1),
        n("Reshape", ["q0", "shp"], ["q1"]), n("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        n("Reshape", ["k0", "shp"], ["k1"]), n("Transpose", ["k1"], ["k"], perm=[0, 2, 3, 1]),
        n("Reshape", ["v0", "shp"], ["v1"]), n("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        n("MatMul", ["q", "k"], ["s0"]), n("Div", ["s0", "scale"], ["s1"]),
        n("Add", ["s1", "mask"], ["s2"]), n("Softmax", ["s2"], ["p"], axis=-1),
        n("MatMul", ["p", "v"], ["o0"]), n("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
        n("Reshape", ["o1", "shp2"], ["att"]), n("Add", ["x", "att"], ["r"]),
        n("ReduceMean", ["r"], ["mu"], axes=[-1]), n("Sub", ["r", "mu"], ["d"]),
        n("Pow", ["d", "two"], ["d2"]), n("ReduceMean", ["d2"], ["var"], axes=[-1]),
        n("Add", ["var", "eps"], ["ve"]), n("Sqrt", ["ve"], ["sd"]), n("Div", ["d", "sd"], ["ln"]),
        n("MatMul", ["ln", "w1"], ["f0"]), n("Add", ["f0", "b1"], ["f1"]),
        n("Div", ["f1", "sqrt2"], ["g0"]), n("Erf", ["g0"], ["g1"]), n("Add", ["g1", "one"], ["g2"]),
        n("Mul", ["f1", "g2"], ["g3"]), n("Mul", ["g3", "half"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", S, C])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def qdq():
    """x -> Q/DQ -> Conv(DQ(W), DQ(B)) -> Relu -> Q -> Reshape -> DQ -> Gemm
    (DQ(W2), transB) -> Q/DQ, and the QOperator twins of both products."""
    rng = np.random.default_rng(1)
    f32 = np.float32
    inits = [
        const("xs", f32(0.02)), const("xz", np.uint8(128)), const("ys", f32(0.05)),
        const("yz", np.uint8(0)),
        const("w", rng.integers(-100, 100, (4, 4, 3, 3)).astype(np.int8)),
        const("ws", np.array([0.01, 0.02, 0.005, 0.01], f32)), const("wz", np.zeros(4, np.int8)),
        const("b", rng.integers(-500, 500, 4).astype(np.int32)),
        const("bs", np.array([2e-4, 4e-4, 1e-4, 2e-4], f32)),
        const("w2", rng.integers(-100, 100, (8, 64)).astype(np.int8)), const("w2s", f32(0.01)),
        const("shape", np.array([1, 64], np.int64)),
        const("w3", rng.integers(-100, 100, (64, 8)).astype(np.int8)), const("z8", np.int8(0)),
    ]
    n = helper.make_node
    nodes = [
        n("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        n("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        n("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
        n("DequantizeLinear", ["b", "bs"], ["bd"], axis=0),
        n("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1]), n("Relu", ["c"], ["r"]),
        n("QuantizeLinear", ["r", "ys", "yz"], ["rq"]),
        n("Reshape", ["rq", "shape"], ["rf"]),
        n("DequantizeLinear", ["rf", "ys", "yz"], ["f"]),
        n("DequantizeLinear", ["w2", "w2s"], ["w2d"]),
        n("Gemm", ["f", "w2d"], ["g"], transB=1),
        n("QuantizeLinear", ["g", "ys", "yz"], ["gq"]),
        n("DequantizeLinear", ["gq", "ys", "yz"], ["y"]),
        n("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["qc"],
          pads=[1, 1, 1, 1]),
        n("Reshape", ["qc", "shape"], ["qf"]),
        n("QLinearMatMul", ["qf", "ys", "yz", "w3", "w2s", "z8", "ys", "yz"], ["qm"]),
        n("DequantizeLinear", ["qm", "ys", "yz"], ["y2"]),
    ]
    graph = helper.make_graph(
        nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("y2", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "transformer_block.onnx"), "wb") as f:
        f.write(block().SerializeToString())
    with open(os.path.join(out, "qdq.onnx"), "wb") as f:
        f.write(qdq().SerializeToString())


if __name__ == "__main__":
    main()
