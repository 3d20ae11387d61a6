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
