#!/usr/bin/python3
"""Every operator in every element type: node tests whose expected outputs
ONNX Runtime computes.

For each operator packrat implements (one case per operator and element
type, a second opset where the operator's inputs changed), writes a folder
in ONNX's node-test layout under OUT_DIR (model.onnx and
test_data_set_0/input_N.pb) without outputs: ort_fill.js runs each model
through ONNX Runtime, writes its outputs as output_N.pb, and removes the
cases ONNX Runtime refuses (a type it does not implement for the operator).
What is left is what ONNX Runtime accepts; the conformance runner then
checks packrat on each (CTest conformance_types), and tools/op_table.py
builds the operator table of docs/engine.md from the committed list of passing
cases (passing_types.txt).

Inputs are small and seeded: floats in [-3, 3] (positive where the
operator's domain needs it), signed integers in [-5, 5], unsigned in
[0, 9], random bools. Parameters that decide a shape (axes, pads, repeats,
shapes, k, indices) are initializers, as exporters write them.

usage: types_sweep.py OUT_DIR
"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

TYPES = {
    "float": np.float32, "double": np.float64, "float16": np.float16,
    "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "bool": np.bool_,
}
REAL = ("float", "double", "float16")
NUMERIC = tuple(t for t in TYPES if t != "bool")
ALL = tuple(TYPES)
SHAPE = (2, 3, 4)

rng = np.random.default_rng(11)
QRNG = np.random.default_rng(13)


def data(t, shape=SHAPE, positive=False, unit=False):
    dt = np.dtype(TYPES[t])
    if t == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dt.kind == "f":
        lo = 0.1 if positive else -3.0
        hi = 0.95 if unit else 3.0
        return rng.uniform(-0.95 if unit and not positive else lo, hi, shape).astype(dt)
    if dt.kind == "u" or positive:
        return rng.integers(1 if positive else 0, 10, shape).astype(dt)
    return rng.integers(-5, 6, shape).astype(dt)


def i64(*v):
    return np.array(v, dtype=np.int64)


class Case:
    """One node: inputs (arrays, in graph order), constant inputs
    (initializers, named), attributes, opset."""

    def __init__(self, op, ins, consts=None, attrs=None, opset=17, n_out=1, order=None):
        self.op, self.ins, self.consts = op, ins, consts or {}
        self.attrs, self.opset, self.n_out = attrs or {}, opset, n_out
        # node input names in node order; default: inputs then constants
        self.order = order or ["in%d" % i for i in range(len(ins))] + list(self.consts)


def write(root, name, case):
    d = os.path.join(root, "test_types_" + name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    names = ["in%d" % i for i in range(len(case.ins))]
    outs = ["out%d" % i for i in range(case.n_out)]
    node = helper.make_node(case.op, case.order, outs, **case.attrs)
    g_in = [helper.make_tensor_value_info(n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], a.shape)
            for n, a in zip(names, case.ins)]
    inits = [numpy_helper.from_array(v, k) for k, v in case.consts.items()]
    g_out = [helper.make_empty_tensor_value_info(n) for n in outs]
    graph = helper.make_graph([node], name, g_in, g_out, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = 8
    try:  # output types where ONNX 1.12 knows the operator (opset <= 17)
        inferred = onnx.shape_inference.infer_shapes(model)
        known = {v.name: v for v in inferred.graph.value_info}
        known.update({v.name: v for v in inferred.graph.output})
        for k, n in enumerate(outs):
            if n in known and known[n].type.tensor_type.elem_type:
                model.graph.output[k].CopyFrom(known[n])
    except Exception:  # noqa: BLE001 - newer operators: ONNX Runtime types them
        pass
    onnx.save(model, os.path.join(d, "model.onnx"))
    for k, (n, a) in enumerate(zip(names, case.ins)):
        with open(os.path.join(d, "test_data_set_0", "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())


UNARY = {  # op: (types to try, data options, attributes, opset)
    "Relu": (NUMERIC, {}, {}, 14), "LeakyRelu": (REAL, {}, {}, 16),
    "Sigmoid": (REAL, {}, {}, 13), "Tanh": (REAL, {}, {}, 13),
    "HardSigmoid": (REAL, {}, {}, 6), "HardSwish": (REAL, {}, {}, 14),
    "Sqrt": (REAL, {"positive": True}, {}, 13), "Erf": (NUMERIC, {}, {}, 13),
    "Exp": (REAL, {}, {}, 13), "Log": (REAL, {"positive": True}, {}, 13),
    "Neg": (NUMERIC, {}, {}, 13), "Abs": (NUMERIC, {}, {}, 13),
    "Reciprocal": (REAL, {"positive": True}, {}, 13), "Sin": (REAL, {}, {}, 7),
    "Cos": (REAL, {}, {}, 7), "Tan": (REAL, {"unit": True}, {}, 7),
    "Asin": (REAL, {"unit": True}, {}, 7), "Acos": (REAL, {"unit": True}, {}, 7),
    "Atan": (REAL, {}, {}, 7), "Sinh": (REAL, {}, {}, 9), "Cosh": (REAL, {}, {}, 9),
    "Asinh": (REAL, {}, {}, 9), "Acosh": (REAL, {"positive": True}, {}, 9),
    "Atanh": (REAL, {"unit": True}, {}, 9), "Floor": (REAL, {}, {}, 13),
    "Ceil": (REAL, {}, {}, 13), "Round": (REAL, {}, {}, 11), "Sign": (NUMERIC, {}, {}, 13),
    "Elu": (REAL, {}, {}, 6), "Selu": (REAL, {}, {}, 6), "Celu": (REAL, {}, {}, 12),
    "ThresholdedRelu": (REAL, {}, {}, 10), "Shrink": (NUMERIC, {}, {}, 9),
    "Softplus": (REAL, {}, {}, 1), "Softsign": (REAL, {}, {}, 1), "Mish": (REAL, {}, {}, 18),
    "Gelu": (REAL, {}, {}, 20), "Identity": (ALL, {}, {}, 16), "Not": (("bool",), {}, {}, 1),
    "IsInf": (REAL, {}, {}, 10), "IsNaN": (REAL, {}, {}, 13), "Softmax": (REAL, {}, {}, 13),
    "LogSoftmax": (REAL, {}, {}, 13), "Hardmax": (REAL, {}, {}, 13),
    "Flatten": (ALL, {}, {}, 13), "Transpose": (ALL, {}, {"perm": [2, 0, 1]}, 13),
    "Dropout": (REAL, {}, {}, 13), "Size": (ALL, {}, {}, 13), "Shape": (ALL, {}, {}, 15),
    "ArgMax": (NUMERIC, {}, {"axis": 1}, 13), "ArgMin": (NUMERIC, {}, {"axis": 1}, 13),
    "Clip": (NUMERIC, {}, {}, 13), "DepthToSpace": (ALL, {"shape": (1, 4, 2, 3)},
                                                   {"blocksize": 2}, 13),
    "SpaceToDepth": (ALL, {"shape": (1, 2, 4, 6)}, {"blocksize": 2}, 13),
    "GlobalAveragePool": (REAL, {"shape": (1, 3, 4, 5)}, {}, 1),
    "GlobalMaxPool": (REAL, {"shape": (1, 3, 4, 5)}, {}, 1),
    "MaxPool": (("float", "double", "float16", "int8", "uint8"), {"shape": (1, 3, 5, 5)},
                {"kernel_shape": [2, 2]}, 12),
    "AveragePool": (REAL, {"shape": (1, 3, 5, 5)}, {"kernel_shape": [2, 2]}, 11),
    "LRN": (REAL, {"shape": (1, 5, 3, 3)}, {"size": 3}, 13),
    "MeanVarianceNormalization": (REAL, {"shape": (2, 3, 4, 4)}, {}, 13),
    "EyeLike": (ALL, {"shape": (3, 4)}, {}, 9),
    "Det": (REAL, {"shape": (2, 3, 3)}, {}, 11),
}
REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
BINARY = {  # op: (types, data options of the second input, opset)
    "Add": (NUMERIC, {}, 14), "Sub": (NUMERIC, {}, 14), "Mul": (NUMERIC, {}, 14),
    "Div": (NUMERIC, {"positive": True}, 14), "Pow": (NUMERIC, {"positive": True}, 15),
    "Mod": (NUMERIC, {"positive": True}, 13), "PRelu": (NUMERIC, {}, 16),
    "BitShift": (("uint8", "uint16", "uint32", "uint64"), {}, 11),
    "Equal": (ALL, {}, 13), "Less": (NUMERIC, {}, 13), "Greater": (NUMERIC, {}, 13),
    "LessOrEqual": (NUMERIC, {}, 16), "GreaterOrEqual": (NUMERIC, {}, 16),
    "And": (("bool",), {}, 7), "Or": (("bool",), {}, 7), "Xor": (("bool",), {}, 7),
    "Min": (NUMERIC, {}, 13), "Max": (NUMERIC, {}, 13), "Sum": (NUMERIC, {}, 13),
    "Mean": (NUMERIC, {}, 13), "MatMul": (NUMERIC, {"shape": (2, 4, 5)}, 13),
    "CastLike": (ALL, {}, 15),
}


def unary_cases(t):
    for op, (types, opts, attrs, opset) in UNARY.items():
        if t not in types:
            continue
        opts = dict(opts)
        shape = opts.pop("shape", SHAPE)
        yield op, Case(op, [data(t, shape, **opts)], attrs=attrs, opset=opset)


def reduce_cases(t):
    for op in REDUCE:
        positive = op in ("ReduceLogSum",)
        x = data(t, positive=positive)
        yield op + "_13", Case(op, [x], attrs={"axes": [1]} if op != "ReduceSum" else {},
                               consts={"axes": i64(1)} if op == "ReduceSum" else None,
                               opset=13)
        yield op + "_18", Case(op, [x], consts={"axes": i64(1)}, opset=18)


def binary_cases(t):
    for op, (types, opts, opset) in BINARY.items():
        if t not in types:
            continue
        opts = dict(opts)
        shape = opts.pop("shape", SHAPE)
        a = data(t, positive=op in ("Pow",))
        b = data(t, shape, **opts)
        if op == "PRelu":
            b = data(t, (4,))
        if op == "BitShift":
            b = (data(t) % 4).astype(a.dtype)
            yield op, Case(op, [a, b], attrs={"direction": "LEFT"}, opset=opset)
            continue
        if op == "Mod" and np.dtype(a.dtype).kind == "f":
            yield op, Case(op, [a, b], attrs={"fmod": 1}, opset=opset)
            continue
        if op == "CastLike":
            b = data("float", (1,))
            yield op + "_to_float", Case(op, [a, b], opset=opset)
            continue
        yield op, Case(op, [a, b], opset=opset)


def movement_cases(t):
    x = data(t)
    yield "Reshape", Case("Reshape", [x], consts={"shape": i64(4, -1)}, opset=14)
    yield "Squeeze", Case("Squeeze", [data(t, (2, 1, 4))], consts={"axes": i64(1)}, opset=13)
    yield "Unsqueeze", Case("Unsqueeze", [x], consts={"axes": i64(0)}, opset=13)
    yield "Expand", Case("Expand", [data(t, (3, 1))], consts={"shape": i64(2, 3, 4)}, opset=13)
    yield "Tile", Case("Tile", [x], consts={"repeats": i64(1, 2, 1)}, opset=13)
    yield "Slice", Case("Slice", [x], consts={"starts": i64(1), "ends": i64(3), "axes": i64(2)},
                        opset=13)
    yield "Pad", Case("Pad", [x], consts={"pads": i64(0, 1, 0, 0, 1, 2)}, opset=13)
    yield "Concat", Case("Concat", [x, data(t)], attrs={"axis": 1}, opset=13)
    yield "Split", Case("Split", [x], consts={"split": i64(1, 2)}, attrs={"axis": 1}, n_out=2,
                        opset=13)
    yield "Gather", Case("Gather", [x], consts={"indices": i64(2, 0, -1)}, attrs={"axis": 1},
                         opset=13)
    idx = rng.integers(0, 3, (2, 3, 4)).astype(np.int64)
    yield "GatherElements", Case("GatherElements", [x], consts={"indices": idx},
                                 attrs={"axis": 1}, opset=13)
    yield "GatherND", Case("GatherND", [x], consts={"indices": i64(1, 2).reshape(1, 2)},
                           opset=13)
    yield "ScatterElements", Case("ScatterElements", [x, data(t, (2, 1, 4))],
                                  consts={"indices": i64(2, 0, 1, 2, 1, 1, 0, 0).reshape(2, 1, 4)},
                                  attrs={"axis": 1}, opset=16,
                                  order=["in0", "indices", "in1"])
    yield "ScatterND", Case("ScatterND", [x, data(t, (1, 4))],
                            consts={"indices": i64(1, 2).reshape(1, 2)}, opset=16,
                            order=["in0", "indices", "in1"])
    yield "Trilu", Case("Trilu", [x], opset=14)
    yield "ReverseSequence", Case("ReverseSequence", [x], consts={"lens": i64(2, 3, 1)},
                                  attrs={"batch_axis": 1, "time_axis": 0}, opset=10)
    yield "Compress", Case("Compress", [x], consts={"condition": np.array([1, 0, 1], np.bool_)},
                           attrs={"axis": 1}, opset=11)
    yield "Where", Case("Where", [x, data(t)], consts={"cond": data("bool")}, opset=16,
                        order=["cond", "in0", "in1"])
    yield "TopK", Case("TopK", [x], consts={"k": i64(2)}, n_out=2, opset=11)
    yield "CumSum", Case("CumSum", [x], consts={"axis": np.array(1, np.int64)}, opset=14)
    yield "Unique", Case("Unique", [x], attrs={"sorted": 1}, n_out=4, opset=11)
    yield "NonZero", Case("NonZero", [x], opset=13)
    for to_name, to_t in TYPES.items():
        to = onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(to_t)]
        yield "Cast_to_" + to_name, Case("Cast", [x], attrs={"to": to}, opset=13)
    yield "OneHot", Case("OneHot", [data(t, (3,), positive=True)],
                         consts={"depth": np.array([10], np.int64),
                                 "values": np.array([0, 1], np.float32)}, opset=11)
    yield "ConstantOfShape", Case("ConstantOfShape", [], consts={"shape": i64(2, 3)},
                                  attrs={"value": numpy_helper.from_array(data(t, (1,)))},
                                  opset=9)
    yield "Range", Case("Range", [], consts={"start": np.array(1, TYPES[t]),
                                             "limit": np.array(7, TYPES[t]),
                                             "delta": np.array(2, TYPES[t])}, opset=11)


def dense_cases(t):
    if t not in REAL:
        return
    x = data(t, (1, 3, 5, 5))
    w = data(t, (4, 3, 3, 3))
    yield "Conv", Case("Conv", [x], consts={"w": w, "b": data(t, (4,))}, opset=11)
    yield "ConvTranspose", Case("ConvTranspose", [x], consts={"w": data(t, (3, 2, 3, 3))},
                                opset=11)
    yield "Gemm", Case("Gemm", [data(t, (3, 4))], consts={"b": data(t, (4, 5)),
                                                          "c": data(t, (5,))}, opset=13)
    yield "BatchNormalization", Case(
        "BatchNormalization", [x], consts={"s": data(t, (3,)), "b": data(t, (3,)),
                                           "m": data(t, (3,)), "v": data(t, (3,), positive=True)},
        opset=15)
    yield "InstanceNormalization", Case(
        "InstanceNormalization", [x], consts={"s": data(t, (3,)), "b": data(t, (3,))}, opset=6)
    yield "LayerNormalization", Case(
        "LayerNormalization", [x], consts={"s": data(t, (5,)), "b": data(t, (5,))}, opset=17)
    yield "GroupNormalization", Case(
        "GroupNormalization", [data(t, (1, 4, 3, 3))],
        consts={"s": data(t, (4,)), "b": data(t, (4,))}, attrs={"num_groups": 2}, opset=21)
    yield "Resize", Case("Resize", [x], consts={"roi": np.array([], np.float32),
                                               "scales": np.array([1, 1, 2, 2], np.float32)},
                         opset=13)
    # ceil mode's last window past the end pads: the divisor counts only
    # the padded input (oneDNN counted the whole window)
    x6 = data(t, (1, 2, 6, 6))
    yield "AveragePool_include_ceil", Case(
        "AveragePool", [x6], attrs={"kernel_shape": [3, 3], "strides": [2, 2],
                                    "count_include_pad": 1, "ceil_mode": 1}, opset=19)
    yield "AveragePool_include_ceil_pads", Case(
        "AveragePool", [x6], attrs={"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                    "count_include_pad": 1, "ceil_mode": 1}, opset=19)
    yield "Einsum", Case("Einsum", [data(t, (2, 3)), data(t, (3, 4))],
                         attrs={"equation": "ij,jk->ik"}, opset=12)


def quant_cases(t):
    """The quantized operators: 8-bit activations and weights (constant, so
    the int8 kernels run), per tensor and per channel."""
    f32, r = np.float32, QRNG  # a generator of their own: the other cases keep their data
    if t == "float":
        x = r.uniform(-3, 3, SHAPE).astype(f32)
        for zt in (np.uint8, np.int8):
            nm = np.dtype(zt).name
            yield "QuantizeLinear_to_" + nm, Case(
                "QuantizeLinear", [x], consts={"s": f32(0.05), "z": zt(3)}, opset=13)
            yield "QuantizeLinear_axis_to_" + nm, Case(
                "QuantizeLinear", [x], consts={"s": np.array([0.05, 0.02, 0.1], f32),
                                               "z": np.array([1, 0, 5], zt)},
                attrs={"axis": 1}, opset=13)
        yield "DynamicQuantizeLinear", Case("DynamicQuantizeLinear", [x], n_out=3, opset=11)
        return
    if t not in ("uint8", "int8", "int32"):
        return
    zt = TYPES[t]
    yield "DequantizeLinear", Case("DequantizeLinear", [r.integers(-5, 10, SHAPE).astype(zt)],
                                   consts={"s": f32(0.05), "z": zt(0 if t == "int32" else 2)},
                                   opset=13)
    if t == "int32":
        return
    w = r.integers(-60, 60, (4, 3, 3, 3)).astype(np.int8)
    x = (r.integers(0, 200, (1, 3, 5, 5)) - (100 if t == "int8" else 0)).astype(zt)
    yield "QLinearConv", Case(
        "QLinearConv", [x], consts={"xs": f32(0.02), "xz": zt(7), "w": w,
                                    "ws": np.array([0.01, 0.02, 0.005, 0.01], f32),
                                    "wz": np.zeros(4, np.int8), "ys": f32(0.1), "yz": zt(-3 if t == "int8" else 9),
                                    "b": np.array([50, -20, 0, 7], np.int32)},
        attrs={"pads": [1, 1, 1, 1]}, opset=10)
    yield "ConvInteger", Case("ConvInteger", [x], consts={"w": w, "xz": zt(7)}, opset=10)
    a = (r.integers(0, 200, (2, 3, 4)) - (100 if t == "int8" else 0)).astype(zt)
    b = r.integers(-60, 60, (4, 5)).astype(np.int8)
    yield "QLinearMatMul", Case(
        "QLinearMatMul", [a], consts={"as": f32(0.02), "az": zt(4), "b": b,
                                      "bs": f32(0.01), "bz": np.int8(0), "ys": f32(0.05),
                                      "yz": zt(6)}, opset=10)
    yield "MatMulInteger", Case("MatMulInteger", [a], consts={"b": b, "az": zt(4)}, opset=10)


def main():
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    n = 0
    for t in TYPES:
        for gen in (unary_cases, reduce_cases, binary_cases, movement_cases, dense_cases,
                    quant_cases):
            for name, case in gen(t):
                write(out, "%s_%s" % (name, t), case)
                n += 1
    print("%d cases written to %s" % (n, out))


if __name__ == "__main__":
    main()
