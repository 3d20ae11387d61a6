#!/usr/bin/python3
"""Operator attributes and shapes drawn at random: node tests whose expected
outputs ONNX Runtime computes.

For each float32 operator family (and the integer cases of Mod and Pow), a
fixed number of cases, each drawn from the operator's own generator seeded
from SEED and the family's name (adding a family leaves the others' cases
as they were). A case is a random but valid combination of the attributes
and input forms that exporters write, at the opsets where the operator
changed: pads (asymmetric), strides, dilations, groups, auto_pad, ceil_mode,
coordinate modes, axes as attribute or input, negative axes and indices,
optional inputs left out, broadcasting. Each is written in ONNX's node-test
layout under OUT_DIR (model.onnx and test_data_set_0/input_N.pb) without
outputs: ort_fill.js runs it through ONNX Runtime and writes its outputs,
removing the cases ONNX Runtime refuses; the conformance runner then checks
packrat against them (CTest conformance_attrs, sweep.sh), and a case in
passing_attrs.txt that fails is a regression.

Inputs are multiples of 1/4 in [-2, 2] (positive where the operator's
domain needs it): sums and products of them are exact in float32 whatever
the order of summation, so a result is either exact or has only the
rounding of a final division, exp or sqrt, and the runner's tolerance (rtol
1e-3, atol 1e-7) does not fail a right answer near zero (the normalizations
move their bias off the outputs that would cancel to near zero). Parameters
(axes, pads, weights) are initializers as exporters write them; some are
graph inputs instead, fed at run time.

Where ONNX Runtime departs from ONNX (or the two read an unclear spec two
ways), the draws keep out of its way, each noted where it is: dilated SAME
windows, ConvTranspose SAME past what the input reaches, Resize lengths
that are not whole for the modes that read them, a Resize output of the
input's shape, negative Resize axes with a keep_aspect_ratio_policy, an
empty Squeeze axes list. The cases that found packrat's bugs are pinned
(pinned()), whatever the draws. --seed draws another sweep, --scale more
cases of each family: the way to look for more (the CTest keeps SEED).

usage: attr_sweep.py OUT_DIR [--only FAMILY,...] [--seed N] [--scale K]
"""
import argparse
import os
import shutil
import zlib

import numpy as np
import onnx
from onnx import helper, numpy_helper

SEED = 20240611
F32 = np.float32
I64_MAX = np.iinfo(np.int64).max
I64_MIN = np.iinfo(np.int64).min


class Const:
    """An initializer input (fed at run time instead where feed is True)."""

    def __init__(self, value, feed=False):
        self.value, self.feed = np.asarray(value), feed


class Case:
    """One node: inputs in node order (an array is a graph input, a Const an
    initializer, None an optional input left out), attributes (None: left
    out), opset, number of outputs."""

    def __init__(self, op, inputs, attrs=None, opset=17, n_out=1):
        self.op, self.inputs, self.opset, self.n_out = op, inputs, opset, n_out
        self.attrs = {k: v for k, v in (attrs or {}).items() if v is not None}


def write(root, name, case):
    d = os.path.join(root, "test_attr_" + name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    node_in, g_in, feeds, inits = [], [], [], []
    for k, v in enumerate(case.inputs):
        if v is None:
            node_in.append("")
            continue
        n = "in%d" % k
        node_in.append(n)
        if isinstance(v, Const) and not v.feed:
            inits.append(numpy_helper.from_array(v.value, n))
            continue
        a = v.value if isinstance(v, Const) else v
        g_in.append(helper.make_tensor_value_info(
            n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], a.shape))
        feeds.append((n, a))
    outs = ["out%d" % k for k in range(case.n_out)]
    node = helper.make_node(case.op, node_in, outs, **case.attrs)
    g_out = [helper.make_empty_tensor_value_info(n) for n in outs]
    graph = helper.make_graph([node], name, g_in, g_out, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = 8  # ort_fill.js types the outputs from ONNX Runtime's
    onnx.save(model, os.path.join(d, "model.onnx"))
    for k, (n, a) in enumerate(feeds):
        with open(os.path.join(d, "test_data_set_0", "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())


# ---- data ----------------------------------------------------------------

def dy(r, shape, lo=-2.0, hi=2.0, step=0.25):
    """Multiples of step in [lo, hi] (exact sums and products)."""
    n = int(round((hi - lo) / step))
    return np.asarray(lo + step * r.integers(0, n + 1, size=tuple(int(s) for s in shape)), F32)


def distinct(r, shape):
    """Distinct multiples of 1/8 (no ties: an argmax or an index is unique)."""
    n = int(np.prod(shape))
    return ((r.permutation(n) - n // 2) / 8.0).astype(F32).reshape(shape)


def i64(*v):
    return np.array(v, dtype=np.int64)


def pick(r, seq):
    return seq[int(r.integers(0, len(seq)))]


def chance(r, p):
    return bool(r.random() < p)


def param(r, value, p_feed=0.15):
    """A parameter input: an initializer, or now and then a graph input."""
    return Const(value, feed=chance(r, p_feed))


def ints(a):
    return [int(v) for v in a]


def sizes(r, rank, lo=1, hi=4):
    return tuple(int(v) for v in r.integers(lo, hi + 1, rank))


def dim(r, lo=1, hi=4, big=20, p_big=0.25):
    """A dimension: small mostly, now and then past a kernel's vector width
    or channel block (8, 16), where the tails are."""
    return int(r.integers(hi + 1, big + 1) if chance(r, p_big) else r.integers(lo, hi + 1))


# ---- convolution and pooling ----------------------------------------------

AUTO_PADS = ("NOTSET",) * 5 + ("SAME_UPPER", "SAME_LOWER", "VALID")


def window(r, nd, k_lo, k_hi, max_stride, p_dil, pad_below_kernel):
    """Kernel, strides, dilations, auto_pad and pads of a sliding window, and
    input sizes that give every output dimension at least one element."""
    k = r.integers(k_lo, k_hi + 1, nd)
    s = r.integers(1, max_stride + 1, nd) if chance(r, 0.6) else np.ones(nd, int)
    d = r.integers(1, 3, nd) if chance(r, p_dil) else np.ones(nd, int)
    auto = pick(r, AUTO_PADS)
    if auto.startswith("SAME"):
        # ONNX Runtime refuses dilated SAME convolutions and sizes dilated
        # SAME pools from the undilated kernel (a pool of 2 dilated by 2
        # over 5 at stride 2: 2 outputs, not ONNX's ceil(5 / 2) = 3); its
        # SAME pools refuse a stride past the kernel (a negative pad)
        d = np.ones(nd, int)
        s = np.minimum(s, k)
    eff = (k - 1) * d + 1
    pads = np.zeros(2 * nd, int)
    if auto == "NOTSET" and chance(r, 0.7):
        top = np.minimum(k - 1, 2) if pad_below_kernel else np.full(nd, 2)
        pads = np.concatenate([r.integers(0, top + 1), r.integers(0, top + 1)])
    size = np.maximum(1, eff - (pads[:nd] + pads[nd:]) if auto in ("NOTSET", "VALID")
                      else 1) + r.integers(0, 5, nd)
    if auto == "VALID":
        size = np.maximum(size, eff)
    attrs = {
        "kernel_shape": ints(k),
        "strides": ints(s) if (s != 1).any() or chance(r, 0.3) else None,
        "dilations": ints(d) if (d != 1).any() else None,
        "auto_pad": auto if auto != "NOTSET" or chance(r, 0.1) else None,
        "pads": ints(pads) if pads.any() or (auto == "NOTSET" and chance(r, 0.2)) else None,
    }
    return attrs, tuple(int(v) for v in size)


def conv(r):
    nd = pick(r, (1, 2, 2, 2, 3))
    kind = pick(r, ("plain", "plain", "depthwise", "groups"))
    if kind == "depthwise":
        c = dim(r, 2, 4)
        group, m = c, c * int(r.integers(1, 3))
    elif kind == "groups":
        group = pick(r, (2, 3, 4))
        c, m = group * dim(r, 1, 2, 6), group * dim(r, 1, 2, 6)
    else:
        group, c, m = 1, dim(r, 1, 3), dim(r, 1, 4)
    attrs, size = window(r, nd, 1, 5 if nd < 3 and chance(r, 0.2) else 3, 4, 0.3, False)
    k = attrs["kernel_shape"]
    if chance(r, 0.3):
        attrs["kernel_shape"] = None  # from the weights' shape
    attrs["group"] = group if group > 1 or chance(r, 0.2) else None
    x = dy(r, (int(r.integers(1, 3)), c) + size)
    w = param(r, dy(r, [m, c // group] + k), 0.1)
    b = param(r, dy(r, (m,)), 0.1) if chance(r, 0.5) else None
    return Case("Conv", [x, w] + ([b] if b else []), attrs, opset=pick(r, (7, 11, 13)))


def conv_transpose(r):
    nd = pick(r, (1, 2, 2, 2, 3))
    group = pick(r, (1, 1, 1, 2, 3))
    c = group * int(r.integers(1, 3))
    m_per = int(r.integers(1, 3))
    k = r.integers(1, 4, nd)
    s = r.integers(1, 4, nd) if chance(r, 0.7) else np.ones(nd, int)
    d = r.integers(1, 3, nd) if chance(r, 0.25) else np.ones(nd, int)
    size = r.integers(1, 5, nd)
    eff = (k - 1) * d + 1
    attrs = {"kernel_shape": ints(k) if chance(r, 0.7) else None,
             "strides": ints(s) if (s != 1).any() else None,
             "dilations": ints(d) if (d != 1).any() else None,
             "group": group if group > 1 else None}
    outpad = np.array([int(r.integers(0, v)) for v in s]) if chance(r, 0.4) else np.zeros(nd, int)
    if outpad.any():
        attrs["output_padding"] = ints(outpad)
    full = s * (size - 1) + outpad + eff
    form = pick(r, ("pads", "pads", "output_shape", "SAME_UPPER", "SAME_LOWER", "VALID"))
    if form.startswith("SAME") and (full < s * size).any():
        # ONNX's SAME output is in x stride, past what the input reaches
        # here; ONNX Runtime stops at what it reaches
        form = "pads"
    if form == "pads":
        # the output must keep at least one element
        pads = np.concatenate([r.integers(0, 3, nd), r.integers(0, 3, nd)])
        for i in range(nd):
            while pads[i] + pads[nd + i] >= full[i]:
                pads[i + (nd if pads[nd + i] else 0)] -= 1
        attrs["pads"] = ints(pads) if pads.any() or chance(r, 0.3) else None
    elif form == "output_shape":
        attrs["output_shape"] = ints(np.maximum(1, full - r.integers(0, 3, nd)))
    else:
        attrs["auto_pad"] = form
    x = dy(r, (int(r.integers(1, 3)), c) + tuple(int(v) for v in size))
    w = param(r, dy(r, [c, m_per] + ints(k)), 0.1)
    b = param(r, dy(r, (m_per * group,)), 0.1) if chance(r, 0.5) else None
    return Case("ConvTranspose", [x, w] + ([b] if b else []), attrs, opset=pick(r, (7, 11, 13)))


def padding_only(attrs, size):
    """Whether a window of a pool with explicit pads reads padding only (a
    dilated one can step over the input): ONNX leaves its value undefined."""
    nd = len(size)
    k = attrs["kernel_shape"]
    d, s = attrs["dilations"] or [1] * nd, attrs["strides"] or [1] * nd
    p = attrs["pads"] or [0] * (2 * nd)
    for i in range(nd):
        span = size[i] + p[i] + p[nd + i] - (k[i] - 1) * d[i] - 1
        out = (-(-span // s[i]) if attrs.get("ceil_mode") else span // s[i]) + 1
        if attrs.get("ceil_mode") and (out - 1) * s[i] >= size[i] + p[i]:
            out -= 1
        for o in range(out):
            if not any(0 <= o * s[i] - p[i] + j * d[i] < size[i] for j in range(k[i])):
                return True
    return False


def max_pool(r):
    opset = pick(r, (8, 10, 11, 12))
    nd = pick(r, (1, 2, 2, 3))
    while True:
        attrs, size = window(r, nd, 1, 3, 3, 0.3 if opset >= 10 else 0, True)
        if opset >= 10 and chance(r, 0.4):
            attrs["ceil_mode"] = 1
        if attrs.get("auto_pad") not in (None, "NOTSET") or not padding_only(attrs, size):
            break
    indices = chance(r, 0.4)
    if indices and chance(r, 0.5):
        attrs["storage_order"] = 1
    shape = (int(r.integers(1, 3)), int(r.integers(1, 4))) + size
    x = distinct(r, shape) if indices else dy(r, shape)
    return Case("MaxPool", [x], attrs, opset=opset, n_out=2 if indices else 1)


def average_pool(r):
    opset = pick(r, (7, 10, 11, 19))
    nd = pick(r, (1, 2, 2, 3))
    attrs, size = window(r, nd, 1, 3, 3, 0.3 if opset >= 19 else 0, True)
    if opset >= 10 and chance(r, 0.4):
        attrs["ceil_mode"] = 1
    if chance(r, 0.5):
        attrs["count_include_pad"] = 1
    x = dy(r, (int(r.integers(1, 3)), int(r.integers(1, 4))) + size)
    return Case("AveragePool", [x], attrs, opset=opset)


def lp_pool(r):
    opset = pick(r, (11, 18))
    attrs, size = window(r, 2, 1, 3, 2, 0.3 if opset >= 18 else 0, True)
    attrs["p"] = pick(r, (1, 2, 3))
    if opset >= 18 and chance(r, 0.4):
        attrs["ceil_mode"] = 1
    return Case("LpPool", [dy(r, (1, 2) + size)], attrs, opset=opset)


def global_pool(r):
    op = pick(r, ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"))
    x = dy(r, sizes(r, pick(r, (3, 4, 5))))
    return Case(op, [x], {"p": pick(r, (1, 2, 3))} if op == "GlobalLpPool" else {},
                opset=pick(r, (2, 13)) if op == "GlobalLpPool" else 1)


# ---- resizing ----------------------------------------------------------------

RESIZE_CTM = {
    11: ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
         "tf_half_pixel_for_nn", "tf_crop_and_resize"),
    13: ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"),
    18: ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"),
    19: ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize",
         "half_pixel_symmetric"),
}
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
SCALES = {0.5: 2, 0.6: 5, 0.75: 4, 1.0: 1, 1.25: 4, 1.5: 2, 2.0: 1, 2.5: 2, 3.0: 1}  # denominators
# coordinate modes that read the resized length: ONNX's tests (and packrat)
# take it unrounded, in x scale, where ONNX Runtime takes the output's
# integer length; the cases keep in x scale whole there
LENGTH_MODES = ("align_corners", "pytorch_half_pixel", "tf_crop_and_resize")


def resize(r):
    """A Resize case, drawn again until it is one that ONNX Runtime computes
    as ONNX defines it: it copies the input when the output has the input's
    shape, whatever the scales or roi say."""
    while True:
        case, same_shape = resize_draw(r)
        if not same_shape:
            return case


def resize_draw(r):
    opset = pick(r, (10, 11, 13, 18, 19))
    rank = pick(r, (4, 4, 4, 3, 5)) if opset >= 11 else 4
    mode = pick(r, ("nearest", "linear", "cubic") if opset >= 11 else ("nearest", "linear"))
    if mode == "cubic":
        rank = 4  # ONNX Runtime's cubic: 2-D or 4-D only
    lead = 2 if rank >= 4 else 1
    ctm = pick(r, RESIZE_CTM[opset]) if opset >= 11 else "asymmetric"
    use_sizes = opset >= 11 and chance(r, 0.4)
    policy = None
    if use_sizes and opset >= 18 and ctm not in LENGTH_MODES and chance(r, 0.3):
        policy = pick(r, ("not_larger", "not_smaller"))
    axes = list(range(rank))
    axes_attr = None
    if opset >= 18 and (policy or chance(r, 0.3)):
        axes = list(range(lead, rank))
        # ONNX Runtime does not resize at all given negative axes and a policy
        axes_attr = [a - rank for a in axes] if not policy and chance(r, 0.5) else axes
    # nearest at a float scale that is not exact (0.6f, or 1/3 from sizes
    # 1 of 3) meets a rounding boundary a hair to one side: ONNX Runtime's
    # float arithmetic falls either way there, so nearest takes scales that
    # are exact, and sizes over input lengths that are powers of two
    choices = sorted(v for v in SCALES if mode != "nearest" or v != 0.6)
    scale = {a: 1.0 if a < lead else pick(r, choices) for a in axes}
    shape = sizes(r, lead, 1, 2)
    for a in range(lead, rank):
        unit = SCALES[scale.get(a, 1.0)] if ctm in LENGTH_MODES and not use_sizes else 1
        if mode == "nearest" and use_sizes:
            shape += (pick(r, (2, 4)),)
            continue
        shape += (unit * int(r.integers(max(1, 2 // unit), max(2, 5 // unit) + 1)),)
    x = dy(r, shape, 1.0, 2.0, 1.0 / 16)  # positive: interpolation does not cancel
    out = list(shape)
    for a in axes:
        out[a] = int(np.floor(shape[a] * np.float32(scale[a])))
    attrs = {"mode": mode}
    if opset == 10:
        sc = np.array([scale[a] for a in axes], F32)
        return Case("Resize", [x, param(r, sc)], attrs, opset=10), out == list(shape)
    attrs["coordinate_transformation_mode"] = ctm if ctm != "half_pixel" or chance(r, 0.5) else None
    if mode == "nearest":
        attrs["nearest_mode"] = pick(r, NEAREST_MODES)
    if mode == "cubic":
        attrs["cubic_coeff_a"] = pick(r, (-0.75, -0.5, None))
        attrs["exclude_outside"] = pick(r, (0, 1, None))
    attrs["axes"] = axes_attr
    if opset >= 18 and mode != "nearest" and chance(r, 0.3):
        attrs["antialias"] = 1
    if use_sizes:
        sz = [shape[a] if a < lead else int(r.integers(1, 2 * shape[a] + 2)) for a in axes]
        attrs["keep_aspect_ratio_policy"] = policy
        scales, sizes_in = None, param(r, np.array(sz, np.int64))
        if policy:
            ratio = [n / shape[a] for n, a in zip(sz, axes)]
            common = min(ratio) if policy == "not_larger" else max(ratio)
            sz = [int(np.floor(common * shape[a] + 0.5)) for a in axes]
        for n, a in zip(sz, axes):
            out[a] = n
    else:
        scales, sizes_in = param(r, np.array([scale[a] for a in axes], F32)), None
    roi = None
    if ctm == "tf_crop_and_resize":
        lo = dy(r, (len(axes),), 0.0, 0.5, 0.125)
        hi = dy(r, (len(axes),), 0.5, 1.0, 0.125)
        for i, a in enumerate(axes):
            if out[a] == shape[a]:  # ONNX Runtime leaves such an axis uncropped
                lo[i], hi[i] = 0, 1
        roi = param(r, np.concatenate([lo, hi]).astype(F32))
        attrs["extrapolation_value"] = pick(r, (None, 0.5, -1.0))
    if opset == 11:  # roi and scales are required there; empty when unused
        roi = roi or Const(np.zeros(0, F32))
        scales = scales or Const(np.zeros(0, F32))
    inputs = [x, roi, scales] + ([sizes_in] if sizes_in else [])
    return Case("Resize", inputs, attrs, opset=opset), out == list(shape)


def upsample(r):
    opset = pick(r, (7, 9))
    mode = pick(r, ("nearest", "linear"))
    x = dy(r, sizes(r, 2, 1, 2) + sizes(r, 2, 2, 4), 1.0, 2.0, 1.0 / 16)
    sc = [1.0, 1.0, pick(r, (1.0, 1.5, 2.0, 3.0)), pick(r, (2.0, 2.5, 3.0))]
    if opset == 7:
        return Case("Upsample", [x], {"mode": mode, "scales": sc}, opset=7)
    return Case("Upsample", [x, param(r, np.array(sc, F32))], {"mode": mode}, opset=9)


# ---- linear algebra ----------------------------------------------------------

ALPHAS = (None, 1.0, 0.5, 2.0, -1.0, 0.25, 1.5)


def gemm(r):
    opset = pick(r, (7, 9, 11, 13))
    m, k, n = dim(r, 1, 5, 24), dim(r, 1, 5, 24), dim(r, 1, 5, 24)
    ta, tb = chance(r, 0.4), chance(r, 0.5)
    a = dy(r, (k, m) if ta else (m, k))
    b = dy(r, (n, k) if tb else (k, n))
    c_shapes = [(m, n), (1, n), (n,), (m, 1), (1,), (), (1, 1)] + ([None] if opset >= 11 else [])
    cs = pick(r, c_shapes)
    c = None if cs is None else param(r, dy(r, cs), 0.3)
    attrs = {"transA": int(ta) if ta or chance(r, 0.2) else None,
             "transB": int(tb) if tb or chance(r, 0.2) else None,
             "alpha": pick(r, ALPHAS), "beta": pick(r, ALPHAS)}
    inputs = [a, param(r, b, 0.5)] + ([c] if c is not None else [])
    return Case("Gemm", inputs, attrs, opset=opset)


def matmul(r):
    form = pick(r, ("1d1d", "1dNd", "Nd1d", "batch", "batch", "bcast", "bcast"))
    k = dim(r, 1, 4, 24)
    if form == "1d1d":
        sa, sb = (k,), (k,)
    elif form == "1dNd":
        sa, sb = (k,), sizes(r, int(r.integers(0, 3)), 1, 3) + (k, int(r.integers(1, 5)))
    elif form == "Nd1d":
        sa, sb = sizes(r, int(r.integers(0, 3)), 1, 3) + (int(r.integers(1, 5)), k), (k,)
    else:
        batch = sizes(r, int(r.integers(1, 4)), 1, 3)
        ba, bb = bcast_batches(r, batch) if form == "bcast" else (list(batch), list(batch))
        sa = tuple(ba) + (dim(r, 1, 4, 24), k)
        sb = tuple(bb) + (k, dim(r, 1, 4, 24))
    b = dy(r, sb)
    return Case("MatMul", [dy(r, sa), param(r, b, 0.5)], {}, opset=pick(r, (9, 13)))


EINSUMS = (
    ("ij,jk->ik", [(3, 4), (4, 2)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
    ("i,i->", [(5,), (5,)]), ("ij->ji", [(3, 4)]), ("ii->i", [(3, 3)]), ("ij->", [(3, 4)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("...ij,...jk->...ik", [(2, 3, 4), (1, 4, 2)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]), ("i,j->ij", [(3,), (4,)]), ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
    ("ij,jk", [(2, 3), (3, 4)]), ("bij->bji", [(2, 3, 4)]), ("ijk->ikj", [(2, 3, 4)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]), ("ij,j->i", [(3, 4), (4,)]),
    ("bhqk,bhkd->bqhd", [(1, 2, 3, 4), (1, 2, 4, 5)]), ("ii", [(4, 4)]), ("i...->...", [(3, 2, 2)]),
    ("...i,...i->...", [(2, 3, 4), (1, 3, 4)]), ("ijk,ikl->ijl", [(2, 2, 3), (2, 3, 2)]),
)


def einsum(r):
    eq, shapes = pick(r, EINSUMS)
    return Case("Einsum", [dy(r, s) for s in shapes], {"equation": eq}, opset=12)


# ---- reductions and normalization -------------------------------------------

REDUCES = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


def reduce(r):
    op = pick(r, REDUCES)
    input_from = 13 if op == "ReduceSum" else 18
    opset = pick(r, (11, 13, 18))
    rank = int(r.integers(1, 5))
    shape = tuple(dim(r, 1, 4, 20, 0.1) for _ in range(rank))
    if op == "ReduceLogSum":
        x = dy(r, shape, 0.25, 2.0)
    elif op == "ReduceProd":
        x = dy(r, shape, -1.5, 1.5, 0.5)
    else:
        x = dy(r, shape)
    axes = sorted(int(a) for a in r.choice(rank, int(r.integers(0, rank + 1)), replace=False))
    axes = [a - rank if chance(r, 0.4) else a for a in axes]
    attrs = {"keepdims": pick(r, (None, 0, 1))}
    if opset < input_from:
        attrs["axes"] = axes or None
        return Case(op, [x], attrs, opset=opset)
    if not axes:
        attrs["noop_with_empty_axes"] = pick(r, (None, 0, 1))
        a_in = pick(r, (None, Const(np.zeros(0, np.int64))))
    else:
        a_in = param(r, np.array(axes, np.int64), 0.3)
    return Case(op, [x] + ([a_in] if a_in is not None else []), attrs, opset=opset)


def softmax(r):
    op = pick(r, ("Softmax", "LogSoftmax", "Hardmax"))
    opset = pick(r, (1, 11, 13))
    rank = int(r.integers(1, 5))
    shape = tuple(dim(r, 1, 4, 20, 0.1) for _ in range(rank))
    axis = int(r.integers(0 if opset == 1 else -rank, rank))
    attrs = {"axis": axis if chance(r, 0.8) else None}
    if attrs["axis"] is None and rank < 2 and opset < 13:
        attrs["axis"] = 0  # the default 1 needs rank 2
    return Case(op, [dy(r, shape)], attrs, opset=opset)


def off_zero(y_of, bias, keep):
    """bias nudged (by 1/8 where needed) until no output y_of(bias) is within
    1/64 of zero. A normalized value is rounded (a sqrt, a division); where
    the bias cancels it to near zero, the order of the operations decides
    the last bits, and the runner's atol of 1e-7 fails a right answer.
    keep: the output axes that bias spans."""
    other = tuple(k for k in range(y_of(bias).ndim) if k not in keep)
    for _ in range(64):
        near = np.abs(y_of(bias)) < 1 / 64
        if not near.any():
            break
        bias = bias + 0.125 * near.any(axis=other).reshape(bias.shape)
    return bias.astype(F32)


def layer_norm(r):
    rank = int(r.integers(1, 5))
    shape = tuple(dim(r, 1, 4, 20, 0.15) for _ in range(rank))
    axis = int(r.integers(-rank, rank))
    norm = shape[axis:]
    x, scale = dy(r, shape), dy(r, norm)
    eps = pick(r, (None, 1e-3, 0.25))
    bias = None
    if chance(r, 0.6):
        over = tuple(range(rank - len(norm), rank))
        xd = x.astype(np.float64)
        mean = xd.mean(axis=over, keepdims=True)
        var = ((xd - mean) ** 2).mean(axis=over, keepdims=True)
        xhat = (xd - mean) / np.sqrt(var + (eps or 1e-5)) * scale
        bias = param(r, off_zero(lambda b: xhat + b, dy(r, norm), over))
    n_out = pick(r, (1, 1, 2, 3))
    attrs = {"axis": axis if axis != -1 or chance(r, 0.5) else None, "epsilon": eps}
    inputs = [x, param(r, scale)] + ([bias] if bias else [])
    return Case("LayerNormalization", inputs, attrs, opset=17, n_out=n_out)


def instance_norm(r):
    rank = pick(r, (3, 4, 4, 5))
    shape = (pick(r, (1, 2)), dim(r, 1, 3)) + tuple(dim(r, 1, 4, 12, 0.15)
                                                    for _ in range(rank - 2))
    c, sp = shape[1], tuple(range(2, rank))
    x, scale = dy(r, shape), dy(r, (c,))
    eps = pick(r, (None, 1e-3, 0.25))
    xd = x.astype(np.float64)
    mean = xd.mean(axis=sp, keepdims=True)
    var = ((xd - mean) ** 2).mean(axis=sp, keepdims=True)
    bshape = (c,) + (1,) * (rank - 2)
    xhat = (xd - mean) / np.sqrt(var + (eps or 1e-5)) * scale.reshape(bshape)
    bias = off_zero(lambda b: xhat + b.reshape(bshape), dy(r, (c,)), (1,))
    return Case("InstanceNormalization", [x, param(r, scale), param(r, bias)],
                {"epsilon": eps}, opset=6)


def batch_norm(r):
    opset = pick(r, (9, 14, 15))
    rank = int(r.integers(2, 6))
    shape = (dim(r, 1, 2, 3), dim(r, 1, 3, 20)) + sizes(r, rank - 2, 1, 3)
    c = shape[1]
    bshape = (c,) + (1,) * (rank - 2)
    x, scale, mean, var = dy(r, shape), dy(r, (c,)), dy(r, (c,)), dy(r, (c,), 0.25, 2.0)
    eps = pick(r, (None, 1e-3, 0.25))
    xhat = ((x - mean.reshape(bshape)) / np.sqrt(var.reshape(bshape) + (eps or 1e-5))
            * scale.reshape(bshape))
    bias = off_zero(lambda b: xhat + b.reshape(bshape), dy(r, (c,)), (1,))
    ins = [x, param(r, scale), param(r, bias), param(r, mean), param(r, var)]
    attrs = {"epsilon": eps, "momentum": pick(r, (None, 0.9))}
    if opset >= 14 and chance(r, 0.3):
        attrs["training_mode"] = 0
    return Case("BatchNormalization", ins, attrs, opset=opset)


def lrn(r):
    # ONNX Runtime takes only 4-D inputs and odd sizes
    shape = (int(r.integers(1, 3)), int(r.integers(1, 7))) + sizes(r, 2, 1, 3)
    attrs = {"size": pick(r, (1, 3, 5)), "alpha": pick(r, (None, 1e-3, 0.5)),
             "beta": pick(r, (None, 0.5, 1.0)), "bias": pick(r, (None, 2.0, 0.5))}
    return Case("LRN", [dy(r, shape)], attrs, opset=pick(r, (1, 13)))


# ---- data movement -------------------------------------------------------

def slice_(r):
    opset = pick(r, (1, 10, 11, 13))
    rank = int(r.integers(1, 5))
    shape = sizes(r, rank, 1, 6)
    n = int(r.integers(1, rank + 1))
    axes = [int(a) for a in r.choice(rank, n, replace=False)]
    if opset >= 11:
        axes = [a - rank if chance(r, 0.3) else a for a in axes]
    starts, ends, steps = [], [], []
    for a in axes:
        dim = shape[a]
        step = pick(r, (1, 1, 1, 2, -1, -1, -2, 3)) if opset >= 10 else 1
        lo, hi = -dim - 2, dim + 2
        st, en = int(r.integers(lo, hi + 1)), int(r.integers(lo, hi + 1))
        if chance(r, 0.15):
            en = I64_MAX if step > 0 else I64_MIN
        if chance(r, 0.1):
            st = I64_MIN if step > 0 else I64_MAX
        starts.append(st), ends.append(en), steps.append(step)
    x = dy(r, shape)
    if opset == 1:
        attrs = {"starts": starts, "ends": ends}
        if axes != list(range(n)) or chance(r, 0.5):
            attrs["axes"] = axes
        return Case("Slice", [x], attrs, opset=1)
    omit_axes = axes == list(range(n)) and chance(r, 0.5)
    omit_steps = all(s == 1 for s in steps) and chance(r, 0.5)
    ins = [x, param(r, np.array(starts, np.int64)), param(r, np.array(ends, np.int64))]
    if not omit_axes or not omit_steps:
        ins.append(None if omit_axes else param(r, np.array(axes, np.int64)))
    if not omit_steps:
        ins.append(param(r, np.array(steps, np.int64)))
    return Case("Slice", ins, {}, opset=opset)


def pad(r):
    opset = pick(r, (2, 11, 13, 18, 19))
    rank = int(r.integers(1, 5))
    shape = sizes(r, rank, 1, 4)
    modes = ("constant", "reflect", "edge") + (("wrap",) if opset >= 19 else ())
    mode = pick(r, modes)
    axes = list(range(rank))
    if opset >= 18 and chance(r, 0.4):
        axes = sorted(int(a) for a in r.choice(rank, int(r.integers(1, rank + 1)), replace=False))
    pads = []
    for half in range(2):
        for a in axes:
            dim = shape[a]
            top = min(2, dim - 1) if mode == "reflect" else 2
            if mode == "wrap":
                top = min(2, dim)
            pads.append(int(r.integers(-1 if mode == "constant" and dim > 1 else 0, top + 1)))
    for i, a in enumerate(axes):  # a negative pad leaves at least one element
        while shape[a] + pads[i] + pads[i + len(axes)] < 1:
            pads[i] += 1
    value = pick(r, (None, 0.5, -1.25))
    attrs = {"mode": mode if mode != "constant" or chance(r, 0.5) else None}
    x = dy(r, shape)
    if opset == 2:
        attrs.update(pads=pads, value=value)
        return Case("Pad", [x], attrs, opset=2)
    ins = [x, param(r, np.array(pads, np.int64))]
    if value is not None or axes != list(range(rank)):
        ins.append(param(r, np.array(value, F32)) if value is not None else None)
    if axes != list(range(rank)):
        ins.append(param(r, np.array([a - rank if chance(r, 0.4) else a for a in axes],
                                     np.int64)))
    return Case("Pad", ins, attrs, opset=opset)


def transpose(r):
    rank = int(r.integers(1, 6))
    perm = [int(p) for p in r.permutation(rank)]
    return Case("Transpose", [dy(r, sizes(r, rank, 1, 4))],
                {"perm": perm if chance(r, 0.8) else None}, opset=pick(r, (1, 13)))


def split(r):
    opset = pick(r, (2, 11, 13, 18))
    rank = int(r.integers(1, 4))
    shape = list(sizes(r, rank, 1, 4))
    axis = int(r.integers(-rank if opset >= 11 else 0, rank))
    form = pick(r, ("sizes", "num_outputs") if opset >= 18 else ("sizes", "equal"))
    attrs = {"axis": axis if axis != 0 or chance(r, 0.5) else None}
    if form == "equal":
        n = int(r.integers(1, 4))
        shape[axis] = n * int(r.integers(1, 3))
        return Case("Split", [dy(r, shape)], attrs, opset=opset, n_out=n)
    if form == "num_outputs":
        n = int(r.integers(1, 4))
        shape[axis] = int(r.integers(n, 3 * n + 1))
        # a dimension that leaves an empty last chunk is not allowed
        while -(-shape[axis] // n) * (n - 1) >= shape[axis]:
            shape[axis] += 1
        attrs["num_outputs"] = n
        return Case("Split", [dy(r, shape)], attrs, opset=opset, n_out=n)
    parts = [int(v) for v in r.integers(1, 4, int(r.integers(1, 4)))]
    shape[axis] = sum(parts)
    x = dy(r, shape)
    if opset < 13:
        attrs["split"] = parts
        return Case("Split", [x], attrs, opset=opset, n_out=len(parts))
    return Case("Split", [x, param(r, np.array(parts, np.int64))], attrs, opset=opset,
                n_out=len(parts))


def concat(r):
    opset = pick(r, (4, 11, 13))
    rank = int(r.integers(1, 5))
    shape = list(sizes(r, rank, 1, 3))
    axis = int(r.integers(-rank if opset >= 11 else 0, rank))
    xs = []
    for _ in range(int(r.integers(1, 5))):
        shape[axis] = int(r.integers(1, 4))
        xs.append(dy(r, shape) if chance(r, 0.8) else param(r, dy(r, shape), 0))
    return Case("Concat", xs, {"axis": axis}, opset=opset)


def gather(r):
    opset = pick(r, (11, 13))
    rank = int(r.integers(1, 4))
    shape = sizes(r, rank, 1, 4)
    axis = int(r.integers(-rank, rank))
    dim = shape[axis]
    idx = r.integers(-dim, dim, sizes(r, int(r.integers(0, 3)), 1, 3)).astype(
        pick(r, (np.int64, np.int64, np.int32)))
    return Case("Gather", [dy(r, shape), param(r, idx, 0.3)],
                {"axis": axis if axis or chance(r, 0.5) else None}, opset=opset)


def gather_elements(r):
    rank = int(r.integers(1, 4))
    shape = sizes(r, rank, 1, 4)
    axis = int(r.integers(-rank, rank))
    ishape = [int(r.integers(1, d + 1)) for d in shape]
    ishape[axis] = int(r.integers(1, 5))
    dim = shape[axis]
    idx = r.integers(-dim, dim, ishape).astype(pick(r, (np.int64, np.int32)))
    return Case("GatherElements", [dy(r, shape), param(r, idx, 0.3)],
                {"axis": axis if axis or chance(r, 0.5) else None}, opset=pick(r, (11, 13)))


def gather_nd(r):
    opset = pick(r, (11, 12, 13))
    rank = int(r.integers(1, 5))
    shape = sizes(r, rank, 1, 4)
    b = int(r.integers(0, rank)) if opset >= 12 and rank > 1 else 0
    b = min(b, 1)
    last = int(r.integers(1, rank - b + 1))
    idx_batch = shape[:b] + sizes(r, int(r.integers(0, 2)), 1, 3)
    idx = np.stack([r.integers(-shape[b + j], shape[b + j], idx_batch) for j in range(last)],
                   axis=-1).astype(np.int64)
    return Case("GatherND", [dy(r, shape), param(r, idx, 0.3)],
                {"batch_dims": b if b else None}, opset=opset)


def expand(r):
    rank = int(r.integers(1, 4))
    shape = sizes(r, rank, 1, 3)
    target = [1 if chance(r, 0.3) else (int(r.integers(2, 4)) if d == 1 else d) for d in shape]
    target = list(sizes(r, int(r.integers(0, 3)), 1, 3)) + target
    return Case("Expand", [dy(r, shape), param(r, np.array(target, np.int64), 0.3)],
                opset=pick(r, (8, 13)))


def tile(r):
    rank = int(r.integers(1, 4))
    reps = r.integers(1, 4, rank)
    return Case("Tile", [dy(r, sizes(r, rank, 1, 3)), param(r, reps.astype(np.int64), 0.3)],
                opset=pick(r, (6, 13)))


def depth_to_space(r):
    b = pick(r, (1, 2, 3))
    if chance(r, 0.5):
        opset = pick(r, (1, 11, 13))
        shape = (int(r.integers(1, 3)), b * b * int(r.integers(1, 3))) + sizes(r, 2, 1, 3)
        mode = pick(r, ("DCR", "CRD", None)) if opset >= 11 else None
        return Case("DepthToSpace", [dy(r, shape)], {"blocksize": b, "mode": mode}, opset=opset)
    shape = (int(r.integers(1, 3)), int(r.integers(1, 4)), b * int(r.integers(1, 3)),
             b * int(r.integers(1, 3)))
    return Case("SpaceToDepth", [dy(r, shape)], {"blocksize": b}, opset=pick(r, (1, 13)))


# ---- element-wise ------------------------------------------------------------

def bcast_batches(r, batch):
    """MatMul's two batch dimensions from batch: a 1 on one side at random,
    and one side's leading dimensions cut off."""
    ba, bb = list(batch), list(batch)
    for i in range(len(batch)):
        if chance(r, 0.4):
            (ba if chance(r, 0.5) else bb)[i] = 1
    cut = int(r.integers(0, len(batch) + 1))
    if chance(r, 0.5):
        ba = ba[cut:]
    else:
        bb = bb[cut:]
    return ba, bb


def bcast_shapes(r, n, hi=3):
    """n shapes that broadcast together (their dimensions at most hi)."""
    out = sizes(r, int(r.integers(1, 4)), 1, hi)
    shapes = []
    for _ in range(n):
        s = [1 if chance(r, 0.3) else d for d in out]
        shapes.append(tuple(s[int(r.integers(0, len(s) + 1)):]) if chance(r, 0.4) else tuple(s))
    return shapes


def clip(r):
    opset = pick(r, (6, 11, 12, 13))
    x = dy(r, sizes(r, int(r.integers(1, 4)), 1, 4))
    lo = pick(r, (None, -1.0, -0.5, 0.0))
    hi = pick(r, (None, 1.0, 0.75, 6.0))
    if opset == 6:
        return Case("Clip", [x], {"min": lo, "max": hi}, opset=6)
    ins = [x]
    if lo is not None or hi is not None:
        ins.append(param(r, np.array(lo, F32), 0.3) if lo is not None else None)
    if hi is not None:
        ins.append(param(r, np.array(hi, F32), 0.3))
    return Case("Clip", ins, opset=opset)


def where(r):
    sc, sa, sb = bcast_shapes(r, 3)
    cond = r.integers(0, 2, sc).astype(np.bool_)
    return Case("Where", [cond, dy(r, sa), dy(r, sb)], opset=pick(r, (9, 16)))


def cumsum(r):
    rank = int(r.integers(1, 4))
    axis = int(r.integers(-rank, rank))
    attrs = {"exclusive": pick(r, (None, 0, 1)), "reverse": pick(r, (None, 0, 1))}
    a = param(r, np.array(axis, pick(r, (np.int64, np.int32))), 0.3)
    return Case("CumSum", [dy(r, sizes(r, rank, 1, 4)), a], attrs, opset=pick(r, (11, 14)))


def trilu(r):
    shape = sizes(r, int(r.integers(0, 3)), 1, 2) + sizes(r, 2, 1, 5)
    k = pick(r, (None, 0, 1, -1, 2, -3, 6, -7))
    ins = [dy(r, shape)] + ([param(r, np.array(k, np.int64), 0.3)] if k is not None else [])
    return Case("Trilu", ins, {"upper": pick(r, (None, 0, 1))}, opset=14)


ACTIVATIONS = {  # op: (attribute choices, opsets)
    "Elu": ({"alpha": (None, 0.5, 2.0)}, (6,)),
    "Selu": ({"alpha": (None, 1.5), "gamma": (None, 0.5, 2.0)}, (6,)),
    "HardSigmoid": ({"alpha": (None, 0.5, 0.25), "beta": (None, 0.25, 0.75)}, (6,)),
    "LeakyRelu": ({"alpha": (None, 0.1, 2.0, -0.5)}, (6, 16)),
    "Celu": ({"alpha": (None, 0.5, 2.0)}, (12,)),
    "ThresholdedRelu": ({"alpha": (None, 0.5, -0.5)}, (10,)),
    "Gelu": ({"approximate": (None, "none", "tanh")}, (20,)),
    "Shrink": ({"bias": (None, 0.5), "lambd": (None, 0.25, 1.0)}, (9,)),
    "HardSwish": ({}, (14,)),
    "Softplus": ({}, (1,)),
}


def activation(r):
    op = pick(r, sorted(ACTIVATIONS))
    choices, opsets = ACTIVATIONS[op]
    attrs = {k: pick(r, v) for k, v in choices.items()}
    return Case(op, [dy(r, sizes(r, int(r.integers(1, 4)), 1, 4))], attrs, opset=pick(r, opsets))


def prelu(r):
    shape = sizes(r, int(r.integers(1, 5)), 1, 3)
    slope = [1 if chance(r, 0.5) else d for d in shape]
    slope = slope[int(r.integers(0, len(slope) + 1)):] or [1]
    return Case("PRelu", [dy(r, shape), param(r, dy(r, slope), 0.3)], opset=pick(r, (9, 16)))


def mod(r):
    sa, sb = bcast_shapes(r, 2)
    if chance(r, 0.5):
        b = dy(r, sb, 0.25, 2.0) * np.where(r.random(sb) < 0.5, -1, 1).astype(F32)
        return Case("Mod", [dy(r, sa, -4.0, 4.0), b], {"fmod": 1}, opset=pick(r, (10, 13)))
    t = pick(r, (np.int32, np.int64))
    b = r.integers(1, 5, sb) * np.where(r.random(sb) < 0.5, -1, 1)
    return Case("Mod", [r.integers(-9, 10, sa).astype(t), b.astype(t)],
                {"fmod": pick(r, (None, 0, 1))}, opset=pick(r, (10, 13)))


def pow_(r):
    opset = pick(r, (7, 12, 13, 15))
    sa, sb = bcast_shapes(r, 2)
    form = pick(r, ("positive", "integral", "int_exponent") if opset >= 12
                else ("positive", "integral"))
    if form == "positive":
        return Case("Pow", [dy(r, sa, 0.25, 2.0), dy(r, sb, -2.0, 2.0, 0.5)], opset=opset)
    e = r.integers(-2, 4, sb)
    base = dy(r, sa, -2.0, 2.0, 0.5)
    if form == "integral":
        base[base == 0] = 0.5  # 0 to a negative power: inf on one side, maybe not the other
        return Case("Pow", [base, e.astype(F32)], opset=opset)
    base[base == 0] = 0.5
    return Case("Pow", [base, e.astype(pick(r, (np.int32, np.int64)))], opset=opset)


# ---- shape and index operators --------------------------------------------------

def flatten(r):
    rank = int(r.integers(1, 5))
    axis = int(r.integers(-rank, rank + 1))
    return Case("Flatten", [dy(r, sizes(r, rank, 1, 3))], {"axis": axis}, opset=pick(r, (11, 13)))


def squeeze(r):
    opset = pick(r, (11, 13))
    op = pick(r, ("Squeeze", "Unsqueeze"))
    rank = int(r.integers(1, 4))
    if op == "Squeeze":
        shape = [1 if chance(r, 0.5) else int(r.integers(2, 4)) for _ in range(rank)]
        ones = [i for i, d in enumerate(shape) if d == 1]
        axes = [a - rank if chance(r, 0.4) else a for a in ones if chance(r, 0.7)]
        # axes left out: every dimension of size 1; an empty list is left
        # out too (ONNX's reference squeezes nothing, ONNX Runtime all)
        axes = axes or None
    else:
        shape = list(sizes(r, rank, 1, 3))
        out_rank = rank + int(r.integers(1, 3))
        axes = [int(a) for a in r.choice(out_rank, out_rank - rank, replace=False)]
        axes = [a - out_rank if chance(r, 0.4) else a for a in axes]
    x = dy(r, shape)
    if opset == 11:
        return Case(op, [x], {"axes": axes}, opset=11)
    ins = [x] + ([param(r, np.array(axes, np.int64), 0.3)] if axes is not None else [])
    return Case(op, ins, opset=13)


def arg_max(r):
    op = pick(r, ("ArgMax", "ArgMin"))
    opset = pick(r, (11, 12, 13))
    rank = int(r.integers(1, 4))
    axis = int(r.integers(-rank, rank))
    attrs = {"axis": axis, "keepdims": pick(r, (None, 0, 1))}
    if opset >= 12:
        attrs["select_last_index"] = pick(r, (None, 0, 1))
    x = dy(r, sizes(r, rank, 1, 5), -1.0, 1.0, 0.5)  # ties: first or last index
    return Case(op, [x], attrs, opset=opset)


def top_k(r):
    opset = pick(r, (10, 11))
    rank = int(r.integers(1, 4))
    shape = sizes(r, rank, 1, 5)
    axis = int(r.integers(-rank, rank))
    k = int(r.integers(1, shape[axis] + 1))
    attrs = {"axis": axis}
    if opset >= 11:
        attrs["largest"] = pick(r, (None, 0, 1))
        attrs["sorted"] = pick(r, (None, 1))
    return Case("TopK", [distinct(r, shape), param(r, i64(k), 0.3)], attrs, opset=opset, n_out=2)


# ---- the cases that found bugs, kept whatever the draws ----------------------------

def pinned():
    r = np.random.default_rng([SEED, 0])
    x2x4 = np.array([[[[1, 2, 3, 4], [5, 6, 7, 8]]]], F32)
    yield "slice_back_from_before_start", Case(  # ONNX clamps the start to 0: [x0]
        "Slice", [dy(r, (1,)), Const(i64(-3)), Const(i64(I64_MIN)), None, Const(i64(-2))],
        opset=13)
    yield "slice_back_one", Case(
        "Slice", [dy(r, (6, 1, 6)), Const(i64(-2)), Const(i64(-3)), Const(i64(1)),
                  Const(i64(-1))], opset=13)
    yield "resize10_nearest_down", Case(  # ONNX's opset-10 test: [[1, 3]]
        "Resize", [x2x4, Const(np.array([1, 1, 0.6, 0.6], F32))], {"mode": "nearest"}, opset=10)
    yield "resize10_nearest_down_up", Case(
        "Resize", [dy(r, (1, 2, 5, 2)), Const(np.array([1, 1, 0.6, 1.5], F32))],
        {"mode": "nearest"}, opset=10)
    # 5 x 0.6f is 3.0000001: the last of 3 outputs reads element 4, not 3.9999998
    yield "resize_align_corners_0p6", Case(
        "Resize", [dy(r, (1, 1, 5, 2), 1.0, 2.0, 1 / 16), None,
                   Const(np.array([1, 1, 0.6, 1], F32))],
        {"mode": "nearest", "nearest_mode": "floor",
         "coordinate_transformation_mode": "align_corners"}, opset=13)
    yield "resize_crop_0p6", Case(
        "Resize", [dy(r, (1, 5, 4), 1.0, 2.0, 1 / 16),
                   Const(np.array([0, 0.25, 0, 1, 1, 1], F32)),
                   Const(np.array([1, 0.6, 2], F32))],
        {"mode": "nearest", "nearest_mode": "floor", "extrapolation_value": 0.5,
         "coordinate_transformation_mode": "tf_crop_and_resize"}, opset=13)


# ---- the families --------------------------------------------------------------

FAMILIES = [  # name, generator, cases
    ("conv", conv, 40), ("conv_transpose", conv_transpose, 40), ("max_pool", max_pool, 30),
    ("average_pool", average_pool, 30), ("lp_pool", lp_pool, 4), ("global_pool", global_pool, 8),
    ("resize", resize, 60), ("upsample", upsample, 8), ("gemm", gemm, 20), ("matmul", matmul, 16),
    ("einsum", einsum, 16), ("reduce", reduce, 40), ("softmax", softmax, 20),
    ("layer_norm", layer_norm, 12), ("instance_norm", instance_norm, 6),
    ("batch_norm", batch_norm, 8), ("lrn", lrn, 8), ("slice", slice_, 30), ("pad", pad, 24),
    ("transpose", transpose, 8), ("split", split, 14), ("concat", concat, 8),
    ("gather", gather, 10), ("gather_elements", gather_elements, 8), ("gather_nd", gather_nd, 10),
    ("expand", expand, 8), ("tile", tile, 6), ("depth_to_space", depth_to_space, 10),
    ("clip", clip, 10), ("where", where, 6), ("cumsum", cumsum, 10), ("trilu", trilu, 10),
    ("activation", activation, 24), ("prelu", prelu, 6), ("mod", mod, 12), ("pow", pow_, 12),
    ("flatten", flatten, 6), ("squeeze", squeeze, 10), ("arg_max", arg_max, 10),
    ("top_k", top_k, 8),
]


def sweep_main(description, families, pinned_cases, write_case, seed):
    """A sweep's command line (attr_sweep.py, quant_sweep.py): writes its
    pinned cases, then each family's draws, seeded by the seed and the
    family's name, into OUT_DIR (emptied first)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("out_dir")
    ap.add_argument("--only", help="families to write, comma-separated")
    ap.add_argument("--seed", type=int, default=seed,
                    help="another sweep (to look for bugs; the CTest keeps SEED)")
    ap.add_argument("--scale", type=int, default=1, help="cases per family times this")
    a = ap.parse_args()
    out, only = a.out_dir, set(a.only.split(",")) if a.only else None
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    n = 0
    for name, case in pinned_cases() if not only or "pinned" in only else ():
        write_case(out, "pinned_" + name, case)
        n += 1
    for family, gen, count in families:
        if only and family not in only:
            continue
        r = np.random.default_rng([a.seed, zlib.crc32(family.encode())])
        for i in range(count * a.scale):
            case = gen(r)
            write_case(out, "%s_%03d_%s_o%d" % (family, i, case.op.lower(), case.opset), case)
            n += 1
    print("%d cases written to %s" % (n, out))


def main():
    sweep_main("operator attributes swept at random", FAMILIES, pinned, write, SEED)


if __name__ == "__main__":
    main()
