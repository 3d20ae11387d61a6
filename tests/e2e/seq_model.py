"""The "seq" test model of the dynamic-shape tests (shapes.py, buckets.py):
x[batch, seq, 16] -> MatMul(W) -> Add(B) -> Softmax(last axis) -> y, with W
and B drawn from a seed, and its numpy reference."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class SeqModel:
    def __init__(self, seed):
        rng = np.random.default_rng(seed)
        self.W = rng.standard_normal((16, 16)).astype(np.float32) * 0.5
        self.B = rng.standard_normal(16).astype(np.float32) * 0.1

    def save(self, path):
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "B"], ["z"]),
             helper.make_node("Softmax", ["z"], ["y"], axis=-1)], "seq",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 16])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 16])],
            [numpy_helper.from_array(self.W, "W"), numpy_helper.from_array(self.B, "B")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        onnx.save(model, path)

    def reference(self, x):
        z = x @ self.W + self.B
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
