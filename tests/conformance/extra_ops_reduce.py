"""Node tests that ONNX's backend set lacks for the reductions,
normalizations, resampling, pooling and the opset 18-21 forms of Split and
Pad (ops/reduce.c, normalization.c, norm_stats.c, resize.c, grid_sample.c,
roi_align.c, pool.c, movement.c): other element types (float16, double,
the integers, values a double cannot hold), empty reductions, the axes
input and noop_with_empty_axes (opset 18), GroupNormalization (18, 21),
BatchNormalization's training outputs, MaxPool's column-major Indices,
Resize's axes, keep_aspect_ratio_policy and half_pixel_symmetric, Split's
num_outputs, Pad's axes, wrap and negative pads. Expected outputs with
numpy, following ONNX's operator documentation. Called by extra_ops.py."""
import numpy as np

RNG = np.random.default_rng(11)

REDUCERS = {
    "ReduceSum": lambda x, a, k: np.sum(x, axis=a, keepdims=k),
    "ReduceMean": None,  # by type below
    "ReduceMax": lambda x, a, k: np.max(x, axis=a, keepdims=k),
    "ReduceMin": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "ReduceProd": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: np.sqrt(np.sum(np.square(x.astype(np.float64)), axis=a,
                                               keepdims=k)),
    "ReduceLogSum": lambda x, a, k: np.log(np.sum(x.astype(np.float64), axis=a, keepdims=k)),
    "ReduceLogSumExp": lambda x, a, k: np.log(np.sum(np.exp(x.astype(np.float64)), axis=a,
                                                     keepdims=k)),
    "ReduceSumSquare": lambda x, a, k: np.sum(np.square(x), axis=a, keepdims=k),
}


def reduce_ref(op, x, axes, keep):
    a = tuple(axes) if axes is not None else None
    if op == "ReduceMean":
        if np.issubdtype(x.dtype, np.integer):
            s = np.sum(x, axis=a, keepdims=keep, dtype=x.dtype)
            cnt = x.size // max(s.size, 1)
            return np.trunc(s.astype(np.float64) / cnt).astype(x.dtype)
        return np.mean(x.astype(np.float64), axis=a, keepdims=keep).astype(x.dtype)
    return np.asarray(REDUCERS[op](x, a, keep)).astype(x.dtype)


def gen_reduce(write, root):
    # every Reduce op on float16, double and int32 (opset 13: axes attribute,
    # ReduceSum's an input)
    for op in REDUCERS:
        for dt in (np.float16, np.float64, np.int32):
            if dt == np.int32 and op in ("ReduceLogSum", "ReduceLogSumExp"):
                continue
            if op == "ReduceLogSum":
                x = RNG.uniform(0.5, 2, (2, 3, 4)).astype(dt)
            elif dt == np.int32:
                x = RNG.integers(-4, 5, (2, 3, 4)).astype(dt)
            else:
                x = RNG.uniform(-2, 2, (2, 3, 4)).astype(dt)
            want = reduce_ref(op, x, [0, 2], True)
            name = "%s_%s" % (op.lower(), np.dtype(dt).name)
            if op == "ReduceSum":
                write(root, name, op, 13, [x, np.array([0, 2], np.int64)], [want])
            else:
                write(root, name, op, 13, [x], [want], {"axes": [0, 2]})
    # exact 64-bit integers: min/max of values a double cannot tell apart
    big = np.array([[2**62 + 1, 2**62 + 3, 2**62 + 2], [-2**62 - 2, -2**62 - 1, -2**62 - 3]],
                   np.int64)
    write(root, "reducemax_int64_big", "ReduceMax", 13, [big], [big.max(1, keepdims=True)],
          {"axes": [1]})
    ubig = np.array([[2**63 + 1, 2**63 + 5, 7]], np.uint64)
    write(root, "reducemin_uint64_big", "ReduceMin", 13, [ubig], [ubig.min(1, keepdims=False)],
          {"axes": [1], "keepdims": 0})
    # integer sums wrap
    i8 = np.array([[100, 100, 100], [-100, -100, -100]], np.int8)
    write(root, "reducesum_int8_wrap", "ReduceSum", 13, [i8, np.array([1], np.int64)],
          [np.sum(i8, axis=1, keepdims=True, dtype=np.int8)])
    # empty reductions: the identity of each kind
    e = np.zeros((2, 0, 3), np.float32)
    empties = {"ReduceSum": 0, "ReduceProd": 1, "ReduceMin": np.inf, "ReduceMax": -np.inf,
               "ReduceL1": 0, "ReduceL2": 0, "ReduceSumSquare": 0, "ReduceLogSum": -np.inf,
               "ReduceLogSumExp": -np.inf}
    for op, v in empties.items():
        want = np.full((2, 1, 3), v, np.float32)
        if op == "ReduceSum":
            write(root, "%s_empty" % op.lower(), op, 13, [e, np.array([1], np.int64)], [want])
        else:
            write(root, "%s_empty" % op.lower(), op, 13, [e], [want], {"axes": [1]})
    # opset 18: axes as an input, noop_with_empty_axes, default axes
    x = RNG.uniform(-2, 2, (3, 2, 2)).astype(np.float32)
    for op in ("ReduceMax", "ReduceMean", "ReduceL2", "ReduceSumSquare"):
        write(root, "%s_axes_input_18" % op.lower(), op, 18, [x, np.array([-1], np.int64)],
              [reduce_ref(op, x, [2], False)], {"keepdims": 0})
        write(root, "%s_default_axes_18" % op.lower(), op, 18, [x],
              [reduce_ref(op, x, None, True)])
    write(root, "reducesumsquare_noop_18", "ReduceSumSquare", 18,
          [x, np.array([], np.int64)], [np.square(x)], {"noop_with_empty_axes": 1})
    write(root, "reducemin_bool_20", "ReduceMin", 20,
          [np.array([[True, False], [True, True]]), np.array([1], np.int64)],
          [np.array([[False], [True]])])


def softmax_ref(x, axis, log, coerce):
    shape = x.shape
    if coerce:
        x = x.reshape(int(np.prod(shape[:axis])), -1)
        axis = 1
    x64 = x.astype(np.float64)
    m = x64 - x64.max(axis=axis, keepdims=True)
    lse = np.log(np.exp(m).sum(axis=axis, keepdims=True))
    y = m - lse if log else np.exp(m - lse)
    return y.reshape(shape)


def gen_softmax(write, root):
    x = RNG.uniform(-3, 3, (2, 3, 4)).astype(np.float32)
    write(root, "logsoftmax_coerce_11", "LogSoftmax", 11, [x],
          [softmax_ref(x, 1, True, True).astype(np.float32)], {"axis": 1})
    write(root, "softmax_coerce_1", "Softmax", 7, [x],
          [softmax_ref(x, 1, False, True).astype(np.float32)])
    for dt in (np.float16, np.float64):
        xd = x.astype(dt)
        write(root, "softmax_axis1_%s" % np.dtype(dt).name, "Softmax", 13, [xd],
              [softmax_ref(xd, 1, False, False).astype(dt)], {"axis": 1})
        write(root, "logsoftmax_%s" % np.dtype(dt).name, "LogSoftmax", 13, [xd],
              [softmax_ref(xd, -1, True, False).astype(dt)])


def group_norm_ref(x, scale, bias, groups, eps, per_channel):
    n, c = x.shape[:2]
    xg = x.reshape(n, groups, -1).astype(np.float64)
    m = xg.mean(axis=2, keepdims=True)
    v = xg.var(axis=2, keepdims=True)
    y = ((xg - m) / np.sqrt(v + eps)).reshape(x.shape)
    if not per_channel:
        scale = np.repeat(scale, c // groups)
        bias = np.repeat(bias, c // groups)
    bshape = (1, c) + (1,) * (x.ndim - 2)
    return (y * scale.reshape(bshape) + bias.reshape(bshape)).astype(x.dtype)


def gen_norm(write, root):
    x = RNG.uniform(-2, 2, (2, 4, 3, 2)).astype(np.float32)
    s2 = RNG.uniform(0.5, 1.5, 2).astype(np.float32)
    b2 = RNG.uniform(-1, 1, 2).astype(np.float32)
    write(root, "groupnorm_18", "GroupNormalization", 18, [x, s2, b2],
          [group_norm_ref(x, s2, b2, 2, 1e-5, False)], {"num_groups": 2})
    s4 = RNG.uniform(0.5, 1.5, 4).astype(np.float32)
    b4 = RNG.uniform(-1, 1, 4).astype(np.float32)
    write(root, "groupnorm_21", "GroupNormalization", 21, [x, s4, b4],
          [group_norm_ref(x, s4, b4, 2, 1e-3, True)], {"num_groups": 2, "epsilon": 1e-3})
    # InstanceNormalization = GroupNormalization with one channel per group
    for dt in (np.float32, np.float64, np.float16):
        xd, sd, bd = x.astype(dt), s4.astype(dt), b4.astype(dt)
        write(root, "instancenorm_%s" % np.dtype(dt).name, "InstanceNormalization", 7,
              [xd, sd, bd], [group_norm_ref(xd, sd, bd, 4, 1e-5, True)])
    # MeanVarianceNormalization over the last axis
    m = x.mean(axis=3, keepdims=True)
    sd = np.sqrt(((x - m) ** 2).mean(axis=3, keepdims=True))
    write(root, "mvn_axes3", "MeanVarianceNormalization", 13, [x],
          [((x - m) / (sd + 1e-9)).astype(np.float32)], {"axes": [3]})
    # BatchNormalization training mode (opset 15): batch statistics
    mean = RNG.uniform(-1, 1, 4).astype(np.float32)
    var = RNG.uniform(0.5, 1.5, 4).astype(np.float32)
    bm = x.mean(axis=(0, 2, 3))
    bv = x.var(axis=(0, 2, 3))
    y = ((x - bm.reshape(1, 4, 1, 1)) / np.sqrt(bv.reshape(1, 4, 1, 1) + 1e-5) *
         s4.reshape(1, 4, 1, 1) + b4.reshape(1, 4, 1, 1)).astype(np.float32)
    write(root, "batchnorm_training_15", "BatchNormalization", 15, [x, s4, b4, mean, var],
          [y, (mean * 0.8 + bm * 0.2).astype(np.float32),
           (var * 0.8 + bv * 0.2).astype(np.float32)], {"training_mode": 1, "momentum": 0.8})


def gen_resize_pool(write, root):
    x = np.arange(1, 13, dtype=np.float32).reshape(1, 1, 3, 4)
    # opset 18: scales for the listed axes only
    write(root, "resize_axes_nearest_18", "Resize", 18,
          [x, None, np.array([2.0], np.float32)], [np.repeat(x, 2, axis=3)],
          {"axes": [3], "mode": "nearest", "coordinate_transformation_mode": "asymmetric",
           "nearest_mode": "floor"})
    # not_larger: sizes (6, 12) -> scale min(2, 3) = 2 on both axes
    write(root, "resize_not_larger_18", "Resize", 18,
          [x, None, None, np.array([6, 12], np.int64)], [np.repeat(np.repeat(x, 2, 2), 2, 3)],
          {"axes": [2, 3], "keep_aspect_ratio_policy": "not_larger", "mode": "nearest",
           "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"})
    # half_pixel_symmetric: 5 -> floor(2.5) = 2 samples centred at 1 and 3
    r = (np.arange(5, dtype=np.float32) * 10).reshape(1, 5)
    write(root, "resize_half_pixel_symmetric_19", "Resize", 19,
          [r, None, np.array([1.0, 0.5], np.float32)], [np.array([[10, 30]], np.float32)],
          {"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"})
    # Upsample (opset 9): nearest with scales
    write(root, "upsample_nearest_9", "Upsample", 9,
          [x, np.array([1, 1, 2, 3], np.float32)], [np.repeat(np.repeat(x, 2, 2), 3, 3)])
    # MaxPool Indices, column-major (storage_order 1)
    p = np.array([[[[1, 9, 2, 3], [4, 5, 8, 6]]]], np.float32)
    write(root, "maxpool_indices_colmajor", "MaxPool", 12, [p],
          [np.array([[[[9, 8]]]], np.float32), np.array([[[[2, 5]]]], np.int64)],
          {"kernel_shape": [2, 2], "strides": [2, 2], "storage_order": 1})
    # MaxUnpool back to those (row-major) indices
    write(root, "maxunpool_int32", "MaxUnpool", 11,
          [np.array([[[[9, 8]]]], np.int32), np.array([[[[1, 6]]]], np.int64)],
          [np.array([[[[0, 9, 0, 0], [0, 0, 8, 0]]]], np.int32)],
          {"kernel_shape": [2, 2], "strides": [2, 2]})


def gen_movement(write, root):
    x = np.arange(7 * 2, dtype=np.int64).reshape(7, 2)
    write(root, "split_num_outputs_18", "Split", 18, [x], [x[0:3], x[3:6], x[6:7]],
          {"num_outputs": 3})
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    write(root, "pad_axes_18", "Pad", 18,
          [a, np.array([1, 2], np.int64), np.array(-1, np.float32), np.array([1], np.int64)],
          [np.pad(a, ((0, 0), (1, 2)), constant_values=-1)])
    write(root, "pad_wrap_19", "Pad", 19, [a, np.array([1, 2, 1, 2], np.int64)],
          [np.pad(a, ((1, 1), (2, 2)), mode="wrap")], {"mode": "wrap"})
    write(root, "pad_negative_13", "Pad", 13, [a, np.array([0, -1, 1, 0], np.int64)],
          [np.pad(a, ((0, 1), (0, 0)))[:, 1:]])


def generate(write, root):
    gen_reduce(write, root)
    gen_softmax(write, root)
    gen_norm(write, root)
    gen_resize_pool(write, root)
    gen_movement(write, root)
