#!/usr/bin/python3
"""Small ONNX models for the server tests, written with the onnx package.

mlp: x[batch, 4] -> MatMul(W[4, 3]) -> Add(b) -> Relu -> y[batch, 3]
usage: make_models.py OUT_DIR  (writes OUT_DIR/mlp.onnx and OUT_DIR/mlp.json with W and b)
"""
import json
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(3)
W = rng.standard_normal((4, 3)).astype(np.float32)
b = rng.standard_normal(3).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["z"]),
     helper.make_node("Relu", ["z"], ["y"])],
    "mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
    [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(model)
onnx.save(model, f"{out}/mlp.onnx")
json.dump({"W": W.tolist(), "b": b.tolist()}, open(f"{out}/mlp.json", "w"))


def save(name, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, f"{out}/{name}.onnx")


V = helper.make_tensor_value_info
# nobatch: y is the shape of x, [2], with no batch axis
save("nobatch", [helper.make_node("Shape", ["x"], ["y"])],
     [V("x", TensorProto.FLOAT, ["batch", 4])], [V("y", TensorProto.INT64, [2])])
# types: every datatype the protocol carries, passed through
T = TensorProto
kinds = [("f64", T.DOUBLE), ("f16", T.FLOAT16), ("u64", T.UINT64), ("u32", T.UINT32),
         ("u16", T.UINT16), ("i8", T.INT8), ("b", T.BOOL), ("f32", T.FLOAT)]
save("types", [helper.make_node("Identity", [k], [k + "_out"]) for k, _ in kinds],
     [V(k, t, ["batch", 3]) for k, t in kinds], [V(k + "_out", t, ["batch", 3]) for k, t in kinds])
# intdiv: q = a / b, s = a + b on int64 and int32 client data
save("intdiv", [helper.make_node("Div", ["a", "b"], ["q"]), helper.make_node("Add", ["a", "b"], ["s"]),
                helper.make_node("Div", ["c", "d"], ["q32"])],
     [V("a", T.INT64, ["batch", 2]), V("b", T.INT64, ["batch", 2]), V("c", T.INT32, ["batch", 2]),
      V("d", T.INT32, ["batch", 2])],
     [V("q", T.INT64, ["batch", 2]), V("s", T.INT64, ["batch", 2]), V("q32", T.INT32, ["batch", 2])])
# chain: x[batch, 512] through 100 x (MatMul by one shared W, Relu): about
# 52 MFLOP a row, slow enough that an open-loop load makes a queue
Wc = (rng.standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32)
nodes, prev = [], "x"
for i in range(100):
    nodes += [helper.make_node("MatMul", [prev, "Wc"], [f"m{i}"]),
              helper.make_node("Relu", [f"m{i}"], [f"r{i}"])]
    prev = f"r{i}"
nodes.append(helper.make_node("Identity", [prev], ["y"]))
save("chain", nodes, [V("x", T.FLOAT, ["batch", 512])], [V("y", T.FLOAT, ["batch", 512])],
     [numpy_helper.from_array(Wc, "Wc")])
