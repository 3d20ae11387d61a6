#!/usr/bin/python3
"""Node tests that ONNX's backend set lacks for the indexing and selection
operators (ops/select.c, gather_scatter.c, rearrange.c, construct.c,
value_shaped.c): other element types (float16, the unsigned and 64-bit
integers at values a double cannot hold, bool), older and newer opsets, the
ScatterElements/ScatterND max and min reductions (opset 18: left out while
the engine stops at 17), batch_dims, omitted
optional inputs, and indices out of range at run time (the run fails with
an error naming the node, as ONNX Runtime's does: such a test holds an
`expect_error` file with the text the error must contain, and its outputs
are placeholders of the right type and shape).

Writes one folder per test in ONNX's node-test layout (model.onnx,
test_data_set_0/input_N.pb, output_N.pb) under OUT_DIR; expected outputs are
computed here with numpy, following ONNX's operator documentation.

usage: extra_ops.py OUT_DIR
"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

import extra_ops_reduce

RNG = np.random.default_rng(7)


def to_onnx_type(dtype):
    return onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dtype)]


def write(root, name, op, opset, inputs, outputs, attrs=None, in_names=None, expect_error=None):
    """inputs: list of arrays (None: an omitted optional input);
    outputs: list of expected arrays; expect_error: text the run's error
    must contain (the outputs are then placeholders)."""
    d = os.path.join(root, "test_extra_" + name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    if expect_error:
        with open(os.path.join(d, "expect_error"), "w") as f:
            f.write(expect_error + "\n")
    names = in_names or ["in%d" % i for i in range(len(inputs))]
    node_in = [n if a is not None else "" for n, a in zip(names, inputs)]
    out_names = ["out%d" % i for i in range(len(outputs))]
    node = helper.make_node(op, node_in, out_names, name="n_" + name, **(attrs or {}))
    g_in = [
        helper.make_tensor_value_info(n, to_onnx_type(a.dtype), a.shape)
        for n, a in zip(names, inputs) if a is not None
    ]
    g_out = [
        helper.make_tensor_value_info(n, to_onnx_type(a.dtype), a.shape)
        for n, a in zip(out_names, outputs)
    ]
    graph = helper.make_graph([node], name, g_in, g_out)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, os.path.join(d, "model.onnx"))
    k = 0
    for n, a in zip(names, inputs):
        if a is None:
            continue
        with open(os.path.join(d, "test_data_set_0", "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
        k += 1
    for i, (n, a) in enumerate(zip(out_names, outputs)):
        with open(os.path.join(d, "test_data_set_0", "output_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())


def ints(dtype, shape, lo=-50, hi=50):
    return RNG.integers(lo, hi, size=shape).astype(dtype)


# values near 2^62 / 2^63 that collapse when compared as doubles
BIG_I64 = np.array([[2**62 + 1, 2**62 + 3, 2**62 + 2], [-2**62 - 2, -2**62 - 1, -2**62 - 3]],
                   dtype=np.int64)
BIG_U64 = np.array([[2**63 + 1, 2**63 + 5, 2**63 + 2], [7, 2**64 - 1, 2**64 - 2]], dtype=np.uint64)


def argext(x, axis, keepdims, last, fn):
    if last:
        x = np.flip(x, axis)
        r = x.shape[axis] - 1 - fn(x, axis=axis)
    else:
        r = fn(x, axis=axis)
    r = r.astype(np.int64)
    return np.expand_dims(r, axis) if keepdims else r


def gen_select(root):
    cases = {
        "f16": RNG.standard_normal((3, 4, 5)).astype(np.float16),
        "f64": RNG.standard_normal((3, 4, 5)),
        "i8": ints(np.int8, (3, 4, 5), -3, 3),
        "u16": ints(np.uint16, (3, 4, 5), 0, 4),
        "u32": ints(np.uint32, (3, 4, 5), 0, 4),
        "i32": ints(np.int32, (3, 4, 5), -3, 3),
    }
    for t, x in cases.items():
        for opset, last in ((7, False), (12, True), (13, False)):
            for name, fn in (("argmax", np.argmax), ("argmin", np.argmin)):
                attrs = {"axis": 1, "keepdims": 0}
                if opset >= 12:
                    attrs["select_last_index"] = int(last)
                write(root, "%s_%s_opset%d" % (name, t, opset), "ArgMax" if fn is np.argmax
                      else "ArgMin", opset, [x], [argext(x, 1, False, last, fn)], attrs)
    for t, x in (("i64", BIG_I64), ("u64", BIG_U64)):
        write(root, "argmax_big_" + t, "ArgMax", 13, [x], [argext(x, 1, True, False, np.argmax)],
              {"axis": 1})
        write(root, "argmin_big_" + t, "ArgMin", 13, [x], [argext(x, 1, True, False, np.argmin)],
              {"axis": -1})
        # TopK over the same values: a double compare would tie them
        order = np.argsort(-x.astype(object), axis=1, kind="stable")[:, :2].astype(np.int64)
        write(root, "topk_big_" + t, "TopK", 11, [x, np.array([2], np.int64)],
              [np.take_along_axis(x, order, 1), order], {"axis": 1})

    # TopK: opset 1 (attribute k), 10 (input K), 11 smallest, middle axis, ties
    def topk(x, k, axis, largest):
        key = -x if largest else x
        idx = np.argsort(key, axis=axis, kind="stable").take(range(k), axis=axis)
        return np.take_along_axis(x, idx, axis), idx.astype(np.int64)

    x = ints(np.int64, (3, 6, 4), -3, 3)
    write(root, "topk_opset7_attr_k", "TopK", 7, [x.astype(np.float32)],
          list(map(lambda a: a, topk(x.astype(np.float32), 3, -1 + 3, True))), {"k": 3, "axis": 2})
    write(root, "topk_opset10_axis1_ties", "TopK", 10, [x, np.array([4], np.int64)],
          list(topk(x, 4, 1, True)), {"axis": 1})
    for t in (np.float16, np.uint8, np.float64, np.int16):
        xt = ints(t, (2, 7, 3), 0, 5) if np.issubdtype(t, np.integer) else \
            RNG.standard_normal((2, 7, 3)).astype(t)
        write(root, "topk_smallest_" + np.dtype(t).name, "TopK", 11, [xt, np.array([7], np.int64)],
              list(topk(xt, 7, 1, False)), {"axis": 1, "largest": 0})
    write(root, "topk_k0", "TopK", 11, [x, np.array([0], np.int64)], list(topk(x, 0, 1, True)),
          {"axis": 1})

    # Hardmax: opset 11 coerces to 2-D at axis, 13 is per axis
    for t in (np.float32, np.float16, np.float64, np.int32):
        x = ints(t, (2, 3, 4), -2, 2)
        flat = x.reshape(2, 12)
        y = np.zeros_like(flat)
        y[np.arange(2), np.argmax(flat, axis=1)] = 1
        write(root, "hardmax_opset11_" + np.dtype(t).name, "Hardmax", 11, [x], [y.reshape(x.shape)],
              {"axis": 1})
        y = np.zeros_like(x)
        np.put_along_axis(y, np.argmax(x, axis=1)[:, None, :], 1, axis=1)
        write(root, "hardmax_opset13_" + np.dtype(t).name, "Hardmax", 13, [x], [y], {"axis": 1})


def gen_gather_scatter(root):
    data = ints(np.int64, (4, 5, 3), -9, 9)
    idx = RNG.integers(-4, 4, size=(2, 3, 3)).astype(np.int32)
    want = np.take_along_axis(data[:, :3, :], np.where(idx < 0, idx + 4, idx), axis=0)
    write(root, "gather_elements_int32_idx_smaller", "GatherElements", 11, [data, idx], [want],
          {"axis": 0})
    b = RNG.integers(0, 2, size=(3, 4)).astype(bool)
    bi = RNG.integers(-4, 4, size=(3, 2)).astype(np.int64)
    write(root, "gather_elements_bool", "GatherElements", 13, [b, bi],
          [np.take_along_axis(b, np.where(bi < 0, bi + 4, bi), 1)], {"axis": -1})
    # run-time index out of range: the run fails naming the node (as ONNX Runtime's)
    bad = np.array([[0, 7], [-9, 1]], np.int64)
    f = RNG.standard_normal((2, 3)).astype(np.float32)
    write(root, "gather_elements_out_of_range", "GatherElements", 13, [f, bad],
          [np.zeros((2, 2), np.float32)], {"axis": 1},
          expect_error="node 'n_gather_elements_out_of_range' (GatherElements): "
          "index 7 out of range [-3, 2]")
    table = RNG.standard_normal((5, 2)).astype(np.float32)
    ids = np.array([[1, 4], [70000, 0]], np.int64)
    write(root, "gather_out_of_range", "Gather", 13, [table, ids],
          [np.zeros((2, 2, 2), np.float32)],
          expect_error="node 'n_gather_out_of_range' (Gather): index 70000 out of range [-5, 4]")
    write(root, "gather_out_of_range_negative", "Gather", 11,
          [table, np.array([[1, -6], [0, 2]], np.int32)], [np.zeros((2, 2, 2), np.float32)],
          expect_error="node 'n_gather_out_of_range_negative' (Gather): index -6 out of range [-5, 4]")
    nd = np.array([[1, 0], [2, 0]], np.int64)
    write(root, "gathernd_out_of_range", "GatherND", 13, [f, nd], [np.zeros(2, np.float32)],
          expect_error="node 'n_gathernd_out_of_range' (GatherND): index 2 out of range [-2, 1]")

    # GatherND with batch_dims 0, 1, 2 and tuples that pick single elements
    def gather_nd(data, indices, b):
        bshape = indices.shape[:b]
        n = int(np.prod(bshape)) if b else 1
        d2 = data.reshape((n,) + data.shape[b:])
        i2 = indices.reshape((n,) + indices.shape[b:])
        out = []
        for k in range(n):
            for tup in i2[k].reshape(-1, indices.shape[-1]):
                out.append(d2[k][tuple(tup)])
        return np.array(out, data.dtype).reshape(indices.shape[:-1] + data.shape[b + indices.shape[-1]:])

    d = RNG.standard_normal((2, 3, 4, 5)).astype(np.float16)
    i0 = np.stack([RNG.integers(-2, 2, 6), RNG.integers(-3, 3, 6)], -1).reshape(3, 2, 2)
    write(root, "gathernd_opset11_f16", "GatherND", 11, [d, i0], [gather_nd(d, i0, 0)])
    i1 = np.stack([RNG.integers(0, 3, 8), RNG.integers(-4, 4, 8), RNG.integers(0, 5, 8)],
                  -1).reshape(2, 4, 3).astype(np.int32)
    write(root, "gathernd_batch1_full_tuple", "GatherND", 12, [d, i1], [gather_nd(d, i1, 1)],
          {"batch_dims": 1})
    i2 = RNG.integers(0, 4, size=(2, 3, 1, 1)).astype(np.int64)
    write(root, "gathernd_batch2", "GatherND", 13, [d, i2], [gather_nd(d, i2, 2)],
          {"batch_dims": 2})

    # ScatterElements with every reduction, duplicates included
    def scatter_elements(data, idx, upd, axis, red):
        out = data.copy()
        idx = np.where(idx < 0, idx + data.shape[axis], idx)
        for pos in np.ndindex(idx.shape):
            tgt = list(pos)
            tgt[axis] = idx[pos]
            tgt = tuple(tgt)
            u = upd[pos]
            if red == "none":
                out[tgt] = u
            elif red == "add":
                out[tgt] = out[tgt] | u if out.dtype == bool else out[tgt] + u
            elif red == "mul":
                out[tgt] = out[tgt] & u if out.dtype == bool else out[tgt] * u
            elif red == "max":
                out[tgt] = max(out[tgt], u)
            else:
                out[tgt] = min(out[tgt], u)
        return out

    for t in (np.int32, np.float16, np.uint8, np.int64, np.float64):
        data = ints(t, (3, 4), 0, 5)
        idx = RNG.integers(-3, 3, size=(4, 2)).astype(np.int64)
        upd = ints(t, (4, 2), 0, 5)
        for red, opset in (("mul", 16), ("max", 18), ("min", 18), ("add", 16)):
            with np.errstate(over="ignore"):
                want = scatter_elements(data, idx, upd, 0, red)
            write(root, "scatter_elements_%s_%s" % (red, np.dtype(t).name), "ScatterElements",
                  opset, [data, idx, upd], [want], {"axis": 0, "reduction": red})
    bd = RNG.integers(0, 2, size=(3, 3)).astype(bool)
    bu = RNG.integers(0, 2, size=(3, 2)).astype(bool)
    bx = RNG.integers(0, 3, size=(3, 2)).astype(np.int64)
    write(root, "scatter_elements_bool_add", "ScatterElements", 16, [bd, bx, bu],
          [scatter_elements(bd, bx, bu, 1, "add")], {"axis": 1, "reduction": "add"})
    data = RNG.standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[1, 0, 2, 3]], np.int32)
    upd = RNG.standard_normal((1, 4)).astype(np.float32)
    write(root, "scatter_opset9_int32_idx", "Scatter", 9, [data, idx, upd],
          [scatter_elements(data, idx, upd, 1, "none")], {"axis": 1})
    # run-time out-of-range index: the run fails naming the node
    oob = np.array([[1, 9, -1, -8]], np.int64)
    write(root, "scatter_elements_out_of_range", "ScatterElements", 13, [data, oob, upd],
          [np.zeros_like(data)], {"axis": 1},
          expect_error="node 'n_scatter_elements_out_of_range' (ScatterElements): "
          "index 9 out of range [-4, 3]")
    write(root, "scatter_out_of_range", "Scatter", 9, [data, oob.astype(np.int32) - 10, upd],
          [np.zeros_like(data)], {"axis": 1},
          expect_error="node 'n_scatter_out_of_range' (Scatter): index -9 out of range [-4, 3]")
    snd_idx = np.array([[2], [-4]], np.int64)
    write(root, "scatternd_out_of_range", "ScatterND", 13,
          [data, snd_idx, RNG.standard_normal((2, 4)).astype(np.float32)],
          [np.zeros_like(data)],
          expect_error="node 'n_scatternd_out_of_range' (ScatterND): index -4 out of range [-3, 2]")

    # ScatterND with max/min (opset 18) and slices
    def scatter_nd(data, idx, upd, red):
        out = data.copy()
        m = idx.shape[-1]
        flat_i = idx.reshape(-1, m)
        flat_u = upd.reshape((-1,) + data.shape[m:])
        for tup, u in zip(flat_i, flat_u):
            t = tuple(tup)
            if red == "none":
                out[t] = u
            elif red == "max":
                out[t] = np.maximum(out[t], u)
            elif red == "min":
                out[t] = np.minimum(out[t], u)
            elif red == "add":
                out[t] = out[t] + u
            else:
                out[t] = out[t] * u
        return out

    data = ints(np.int64, (4, 3, 2), -9, 9)
    idx = np.array([[1], [3], [1]], np.int64)
    upd = ints(np.int64, (3, 3, 2), -9, 9)
    for red in ("max", "min", "add", "mul"):
        write(root, "scatternd_slices_" + red, "ScatterND", 18, [data, idx, upd],
              [scatter_nd(data, idx, upd, red)], {"reduction": red})
    idx2 = np.array([[0, 1, 1], [3, 2, 0]], np.int32)
    upd2 = ints(np.int64, (2,), -9, 9)
    write(root, "scatternd_opset11_elements", "ScatterND", 11, [data, idx2, upd2],
          [scatter_nd(data, idx2, upd2, "none")])


def gen_rearrange(root):
    x = ints(np.int8, (2, 3, 2), -9, 9)
    write(root, "tile_int8", "Tile", 7, [x, np.array([2, 1, 3], np.int64)], [np.tile(x, (2, 1, 3))])
    b = RNG.integers(0, 2, size=(2, 3)).astype(bool)
    write(root, "tile_bool_zero", "Tile", 13, [b, np.array([0, 2], np.int64)], [np.tile(b, (0, 2))])

    def d2s(x, b, mode):
        n, c, h, w = x.shape
        if mode == "DCR":
            t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
        else:
            t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
        return t.reshape(n, c // (b * b), h * b, w * b)

    x = ints(np.uint8, (2, 8, 2, 3), 0, 200)
    write(root, "depthtospace_opset7", "DepthToSpace", 7, [x], [d2s(x, 2, "DCR")], {"blocksize": 2})
    write(root, "depthtospace_crd_u8", "DepthToSpace", 13, [x], [d2s(x, 2, "CRD")],
          {"blocksize": 2, "mode": "CRD"})
    y = ints(np.int64, (1, 2, 6, 9), -99, 99)
    n, c, h, w = y.shape
    s2d = y.reshape(n, c, h // 3, 3, w // 3, 3).transpose(0, 3, 5, 1, 2, 4).reshape(
        n, c * 9, h // 3, w // 3)
    write(root, "spacetodepth_opset7_i64", "SpaceToDepth", 7, [y], [s2d], {"blocksize": 3})

    x = ints(np.int32, (3, 4, 2, 2), -9, 9)  # batch_axis 0, time_axis 1
    lens = np.array([4, 0, 2], np.int64)
    want = x.copy()
    for bi, ln in enumerate(lens):
        want[bi, :ln] = x[bi, :ln][::-1]
    write(root, "reversesequence_batch0_rank4", "ReverseSequence", 10, [x, lens], [want],
          {"batch_axis": 0, "time_axis": 1})


def gen_construct(root):
    idx = np.array([[1.7, -1.2, 3.9], [0.0, 5.0, -4.5]], np.float32)
    depth = np.array(4, np.int32)
    vals = np.array([-1, 9], np.int64)
    ti = np.trunc(idx).astype(np.int64)
    ti = np.where(ti < 0, ti + 4, ti)
    hot = (np.arange(4)[None, :, None] == ti[:, None, :])
    write(root, "onehot_float_indices_axis1", "OneHot", 11, [idx, depth, vals],
          [np.where(hot, vals[1], vals[0]).astype(np.int64)], {"axis": 1})
    i8 = np.array([0, 2, -3, 7], np.int8)
    d = np.array([3.0], np.float64)
    v = np.array([False, True])
    ii = np.where(i8 < 0, i8 + 3, i8)
    write(root, "onehot_opset9_bool_values", "OneHot", 9, [i8, d, v],
          [(ii[:, None] == np.arange(3)[None, :])], {"axis": -1})
    x = np.zeros((3, 5), np.int32)
    for k, t in ((-1, onnx.TensorProto.BOOL), (2, onnx.TensorProto.FLOAT16),
                 (-4, onnx.TensorProto.INT64), (7, onnx.TensorProto.DOUBLE)):
        npt = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t]
        write(root, "eyelike_k%d_%s" % (k, np.dtype(npt).name), "EyeLike", 9, [x],
              [np.eye(3, 5, k=k, dtype=npt)], {"k": k, "dtype": t})


def gen_value_shaped(root):
    x = ints(np.int32, (3, 4), -9, 9)
    cond = np.array([True, False, True], bool)
    write(root, "compress_flat_short_condition", "Compress", 11, [x, cond],
          [np.compress(cond, x.reshape(-1))])
    cond2 = np.array([False, True, True, False], bool)
    write(root, "compress_axis_last_opset9", "Compress", 9, [x, cond2],
          [np.compress(cond2, x, axis=1)], {"axis": 1})
    write(root, "compress_axis_neg", "Compress", 11, [x, cond2[:3]],
          [np.compress(cond2[:3], x, axis=0)], {"axis": -2})

    def unique(x, axis, sorted_):
        y, idx, inv, cnt = np.unique(x, return_index=True, return_inverse=True,
                                     return_counts=True, axis=axis)
        if not sorted_:
            order = np.argsort(idx, kind="stable")
            pos = np.empty_like(order)
            pos[order] = np.arange(len(order))
            y = np.take(y, order, axis=axis if axis is not None else 0)
            idx, cnt, inv = idx[order], cnt[order], pos[inv.reshape(-1)]
        return [y, idx.astype(np.int64), inv.reshape(-1).astype(np.int64), cnt.astype(np.int64)]

    u = np.array([[3, 1, 3], [2**62 + 1, 5, 1], [3, 1, 3], [2**62, 5, 1]], np.int64)
    write(root, "unique_i64_axis0_unsorted", "Unique", 11, [u], unique(u, 0, False),
          {"axis": 0, "sorted": 0})
    write(root, "unique_i64_flat_sorted", "Unique", 11, [u], unique(u, None, True))
    h = np.array([2.5, -1, 2.5, 0, -1, 7], np.float16)
    write(root, "unique_f16_unsorted", "Unique", 11, [h], unique(h, None, False), {"sorted": 0})

    # NonMaxSuppression: center boxes, no score threshold; and no max (no output)
    boxes = np.array([[[0.5, 0.5, 1.0, 1.0], [0.5, 0.6, 1.0, 1.0], [0.5, 0.4, 1.0, 1.0],
                       [0.5, 10.5, 1.0, 1.0], [0.5, 10.6, 1.0, 1.0], [0.5, 100.5, 1.0, 1.0]]],
                     np.float32)
    scores = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]]],
                      np.float32)
    want = np.array([[0, 0, 3], [0, 0, 0], [0, 0, 5], [0, 1, 5], [0, 1, 4], [0, 1, 2]], np.int64)
    write(root, "nms_center_no_score_threshold", "NonMaxSuppression", 11,
          [boxes, scores, np.array([3], np.int64), np.array([0.5], np.float32), None], [want],
          {"center_point_box": 1})
    write(root, "nms_no_max", "NonMaxSuppression", 10, [boxes, scores],
          [np.zeros((0, 3), np.int64)])


def gen_elementwise(root):
    """Unary math and activations, Mod, BitShift, PRelu, the variadic ops,
    IsInf/IsNaN, CastLike, Size, Det and Einsum in the types and opsets the
    node tests leave out (ops/elementwise.c, arithmetic.c, logic.c, cast.c,
    linalg.c, einsum.c)."""
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    unit = RNG.uniform(-0.9, 0.9, (3, 4)).astype(np.float32)
    big = RNG.uniform(1.1, 4.0, (3, 4)).astype(np.float32)

    def softplus(v):
        return np.logaddexp(0, v)

    unary = [
        ("sin", "Sin", 7, x, np.sin), ("cos", "Cos", 7, x, np.cos),
        ("atan", "Atan", 7, x, np.arctan), ("asin", "Asin", 7, unit, np.arcsin),
        ("acosh", "Acosh", 9, big, np.arccosh), ("atanh", "Atanh", 9, unit, np.arctanh),
        ("sinh", "Sinh", 9, x, np.sinh), ("floor", "Floor", 13, x * 3, np.floor),
        ("ceil", "Ceil", 13, x * 3, np.ceil), ("sqrt", "Sqrt", 13, big, np.sqrt),
        ("exp", "Exp", 13, x, np.exp), ("log", "Log", 13, big, np.log),
        ("tanh", "Tanh", 13, x, np.tanh), ("sigmoid", "Sigmoid", 13, x,
                                           lambda v: 1 / (1 + np.exp(-v))),
        ("reciprocal", "Reciprocal", 13, big, lambda v: 1 / v),
        ("softplus", "Softplus", 7, x * 4, softplus),
        ("softsign", "Softsign", 7, x, lambda v: v / (1 + np.abs(v))),
        ("elu", "Elu", 7, x, lambda v: np.where(v >= 0, v, np.expm1(v))),
        ("mish", "Mish", 18, x * 4, lambda v: v * np.tanh(softplus(v))),
    ]
    for name, op, opset, v, fn in unary:
        for t in (np.float32, np.float64, np.float16):
            vt = v.astype(t)
            want = fn(vt.astype(np.float64)).astype(t)
            write(root, "%s_%s" % (name, np.dtype(t).name), op, opset, [vt], [want])
    # Gelu (opset 20: left out while the engine stops at 17)
    from math import erf, sqrt, pi
    gel = np.array([0.5 * v * (1 + erf(v / sqrt(2))) for v in x.flat], np.float32).reshape(x.shape)
    write(root, "gelu_none", "Gelu", 20, [x], [gel])
    gt = 0.5 * x * (1 + np.tanh(np.sqrt(2 / pi) * (x + 0.044715 * x**3)))
    write(root, "gelu_tanh", "Gelu", 20, [x], [gt.astype(np.float32)], {"approximate": "tanh"})
    r = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.4, -0.6], np.float32)
    for t in (np.float32, np.float64, np.float16):
        write(root, "round_half_even_" + np.dtype(t).name, "Round", 11, [r.astype(t)],
              [np.round(r).astype(t)])
    write(root, "selu_opset7", "Selu", 7, [x], [np.where(
        x > 0, 3.0 * x, 3.0 * (2.0 * np.exp(x) - 2.0)).astype(np.float32)],
        {"alpha": 2.0, "gamma": 3.0})
    write(root, "hardsigmoid_f64", "HardSigmoid", 7, [x.astype(np.float64)],
          [np.clip(0.2 * x.astype(np.float64) + 0.5, 0, 1)])
    write(root, "leakyrelu_f16", "LeakyRelu", 7, [x.astype(np.float16)],
          [np.where(x >= 0, x, 0.1 * x).astype(np.float16)], {"alpha": 0.1})
    write(root, "celu_f64", "Celu", 12, [x.astype(np.float64)],
          [np.where(x > 0, x, 2.0 * np.expm1(x / 2.0)).astype(np.float64)], {"alpha": 2.0})
    write(root, "thresholdedrelu_opset10", "ThresholdedRelu", 10, [x],
          [np.where(x > 0.5, x, 0).astype(np.float32)], {"alpha": 0.5})
    # integer Abs, Neg, Sign, Relu, Shrink
    for t in (np.int8, np.int16, np.int32, np.int64):
        v = ints(t, (3, 5), -9, 9)
        v.flat[0] = np.iinfo(t).min
        write(root, "abs_" + np.dtype(t).name, "Abs", 13, [v], [np.abs(v)])
        write(root, "neg_" + np.dtype(t).name, "Neg", 13, [v], [np.negative(v)])
        write(root, "sign_" + np.dtype(t).name, "Sign", 13, [v], [np.sign(v)])
        write(root, "relu_" + np.dtype(t).name, "Relu", 14, [v], [np.maximum(v, 0).astype(t)])
    for t in (np.uint8, np.uint16, np.uint32, np.uint64):
        v = ints(t, (3, 5), 0, 9)
        write(root, "abs_" + np.dtype(t).name, "Abs", 13, [v], [v])
        write(root, "sign_" + np.dtype(t).name, "Sign", 13, [v], [np.sign(v)])
    v = ints(np.int32, (4, 5), -9, 9)
    want = np.where(v < -2, v + 1, np.where(v > 2, v - 1, 0)).astype(np.int32)
    write(root, "shrink_int32", "Shrink", 9, [v], [want], {"lambd": 2.0, "bias": 1.0})
    xs = x.astype(np.float16)
    xs64 = xs.astype(np.float64)
    write(root, "shrink_f16", "Shrink", 9, [xs], [np.where(xs64 < -0.5, xs64 + 0.5, np.where(
        xs64 > 0.5, xs64 - 0.5, 0)).astype(np.float16)], {"lambd": 0.5, "bias": 0.5})
    write(root, "sign_f64", "Sign", 13, [x.astype(np.float64)], [np.sign(x).astype(np.float64)])
    c = np.array([1, 200, 7, 0, 5], np.uint64)
    write(root, "clip_uint64", "Clip", 13, [c, np.array(3, np.uint64), np.array(100, np.uint64)],
          [np.clip(c, 3, 100)])
    write(root, "clip_f64", "Clip", 13, [x.astype(np.float64), np.array(-0.5), np.array(0.5)],
          [np.clip(x.astype(np.float64), -0.5, 0.5)])

    # IsInf / IsNaN
    s = np.array([np.inf, -np.inf, np.nan, 0, -1.5, 3], np.float32)
    for t in (np.float32, np.float64):
        write(root, "isinf_neg_only_" + np.dtype(t).name, "IsInf", 10, [s.astype(t)],
              [np.isneginf(s)], {"detect_positive": 0})
    for t in (np.float16, np.float64):
        write(root, "isnan_" + np.dtype(t).name, "IsNaN", 13, [s.astype(t)], [np.isnan(s)])

    # Mod: Python's sign rule (fmod=0) and C's (fmod=1), broadcast
    for t in (np.int8, np.int16, np.int32, np.int64):
        a = ints(t, (3, 4), -20, 20)
        b = ints(t, (4,), 1, 7) * np.array([1, -1, 1, -1], t)
        write(root, "mod_floor_" + np.dtype(t).name, "Mod", 13, [a, b], [np.mod(a, b)])
        write(root, "mod_fmod_" + np.dtype(t).name, "Mod", 13, [a, b], [np.fmod(a, b)],
              {"fmod": 1})
    for t in (np.float16, np.float64):
        a, b = (x[0] * 5).astype(t), (x[1] * 2 + 0.1).astype(t)
        write(root, "mod_fmod_" + np.dtype(t).name, "Mod", 10, [a, b],
              [np.fmod(a.astype(np.float64), b.astype(np.float64)).astype(t)], {"fmod": 1})
    # BitShift: shifts of the width and more give 0
    for t, bits in ((np.uint8, 8), (np.uint16, 16), (np.uint32, 32), (np.uint64, 64)):
        a = ints(t, (2, 5), 0, 100)
        b = np.array([0, 1, 3, bits - 1, bits], t)
        sh = np.minimum(b, bits - 1)
        left = np.where(b >= bits, 0, a << sh).astype(t)
        right = np.where(b >= bits, 0, a >> sh).astype(t)
        write(root, "bitshift_left_" + np.dtype(t).name, "BitShift", 11, [a, b], [left],
              {"direction": "LEFT"})
        write(root, "bitshift_right_" + np.dtype(t).name, "BitShift", 11, [a, b], [right],
              {"direction": "RIGHT"})
    # PRelu: per-channel slope, other types
    img = RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)
    slope = RNG.uniform(0, 1, (3, 1, 1)).astype(np.float32)
    for t in (np.float32, np.float64, np.float16):
        it, st = img.astype(t), slope.astype(t)
        write(root, "prelu_channel_" + np.dtype(t).name, "PRelu", 16, [it, st],
              [np.where(it < 0, it * st, it).astype(t)])
    v = ints(np.int64, (3, 4), -9, 9)
    sl = ints(np.int64, (4,), 1, 4)
    write(root, "prelu_int64", "PRelu", 16, [v, sl], [np.where(v < 0, v * sl, v)])

    # Sum, Mean, Min, Max over three broadcast inputs
    for t in (np.float16, np.float64, np.int16, np.uint16, np.uint64, np.int8):
        a, b, cc = ints(t, (2, 3, 4), 0, 9), ints(t, (3, 1), 0, 9), ints(t, (4,), 0, 9)
        write(root, "max3_" + np.dtype(t).name, "Max", 13, [a, b, cc],
              [np.maximum(np.maximum(a, b), cc)])
        write(root, "min3_" + np.dtype(t).name, "Min", 13, [a, b, cc],
              [np.minimum(np.minimum(a, b), cc)])
        write(root, "sum3_" + np.dtype(t).name, "Sum", 13, [a, b, cc], [(a + b + cc).astype(t)])
    for t in (np.float16, np.float64):
        a, b = x.astype(t), x[0].astype(t)
        write(root, "mean2_" + np.dtype(t).name, "Mean", 13, [a, b],
              [((a.astype(np.float64) + b) / 2).astype(t)])
    # Pow with a float16 base
    hb = RNG.uniform(0.5, 2, (3, 4)).astype(np.float16)
    write(root, "pow_f16", "Pow", 15, [hb, np.array(3, np.int64)],
          [np.power(hb.astype(np.float64), 3).astype(np.float16)])

    # CastLike to float16 and int types, Size
    write(root, "castlike_f32_to_i8", "CastLike", 15, [np.array([1.7, -3.2, 100], np.float32),
                                                        np.zeros(1, np.int8)],
          [np.array([1, -3, 100], np.int8)])
    write(root, "castlike_i32_to_f16", "CastLike", 15, [np.array([1, -3, 1000], np.int32),
                                                         np.zeros(2, np.float16)],
          [np.array([1, -3, 1000], np.float16)])
    write(root, "size_rank3", "Size", 13, [x], [np.array(60, np.int64)])

    # Det: batched double and float
    m = RNG.standard_normal((2, 3, 4, 4))
    write(root, "det_batched_f64", "Det", 11, [m], [np.linalg.det(m)])
    write(root, "det_singular_f32", "Det", 11, [np.ones((3, 3), np.float32)],
          [np.array(0, np.float32)])

    # Einsum: diagonal, trace, ellipsis broadcast, implicit output, ints, 3 operands
    a = RNG.standard_normal((2, 3, 3)).astype(np.float32)
    b = RNG.standard_normal((3, 4)).astype(np.float32)
    e = RNG.standard_normal((1, 3, 5)).astype(np.float32)
    cases = [
        ("trace", "ii", [a[0]]), ("diag_keep", "bii->bi", [a]), ("implicit_matmul", "ij,jk", [a[0], b]),
        ("ellipsis_bcast", "...ij,...jk->...ik", [a, e]), ("outer", "i,j->ij", [b[0], b[1]]),
        ("three", "ij,jk,kl->il", [a[0], b, b.T.copy()]), ("sum_all", "ijk->", [a]),
        ("implicit_upper", "Ba,aC", [a[0], b]),
    ]
    for name, eq, ins in cases:
        write(root, "einsum_" + name, "Einsum", 12, ins,
              [np.asarray(np.einsum(eq, *ins), np.float32)], {"equation": eq})
    ia, ib = ints(np.int32, (2, 3), -5, 5), ints(np.int32, (3, 2), -5, 5)
    write(root, "einsum_int32", "Einsum", 12, [ia, ib], [np.einsum("ij,jk->ik", ia, ib)],
          {"equation": "ij,jk->ik"})
    # TfIdfVectorizer: int64 tokens, 1-D input, TFIDF and IDF with weights
    tok = np.array([1, 2, 3, 2, 3, 9, 1, 2], np.int64)
    attrs = {"min_gram_length": 1, "max_gram_length": 2, "max_skip_count": 1,
             "ngram_counts": [0, 2], "ngram_indexes": [2, 0, 1], "pool_int64s": [1, 2, 2, 3],
             "weights": [0.5, 2.0, 4.0]}
    # 1: 2 times, 2: 3 times, (2,3): twice at skip 0 and once (2,_,3)... at skip 1
    counts = np.array([3.0, 0, 2], np.float32)  # columns of 2, (2,3), 1
    counts[1] = sum(1 for s in (1, 2) for i in range(len(tok) - s)
                    if tok[i] == 2 and tok[i + s] == 3)
    weight = np.array([2.0, 4.0, 0.5], np.float32)
    write(root, "tfidf_int64_tfidf", "TfIdfVectorizer", 9, [tok], [counts * weight],
          dict(attrs, mode="TFIDF"))
    write(root, "tfidf_int64_idf", "TfIdfVectorizer", 9, [tok],
          [np.where(counts > 0, weight, 0).astype(np.float32)], dict(attrs, mode="IDF"))
    da, db = a.astype(np.float64), e.astype(np.float64)
    write(root, "einsum_f64_batch", "Einsum", 12, [da, db[0]],
          [np.einsum("bij,jk->bik", da, db[0])], {"equation": "bij,jk->bik"})


def main():
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    gen_select(out)
    gen_gather_scatter(out)
    gen_rearrange(out)
    gen_construct(out)
    gen_value_shaped(out)
    gen_elementwise(out)
    extra_ops_reduce.generate(write, out)
    print("%d tests in %s" % (len(os.listdir(out)), out))


if __name__ == "__main__":
    main()
