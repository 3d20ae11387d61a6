#!/usr/bin/python3
"""Seeds for the server's parser fuzz targets, written at run time (no binary
files in git):

  OUT_DIR/infer/   infer request bodies in fuzz_infer's layout: byte 0 picks
                   the model's inputs (bit i: input i of fuzz_infer.c's table;
                   0: all), bytes 1-2 the JSON header's length + 1 as
                   little-endian (0: no binary part), then the body. The
                   bodies are the ones tests/e2e/server.sh sends to the mlp,
                   the ResNet-50 body of server.sh and `packrat bench`
                   (overload.sh, reconfigure.sh) at 4x4 instead of 224x224,
                   and requests with every datatype, JSON and binary.
  OUT_DIR/config/  config.json files: the e2e tests' and a few more.

usage: tests/fuzz/server_seeds.py OUT_DIR
"""
import json
import os
import struct
import sys

# fuzz_infer.c's inputs, in order: name, output name, struct format, inner shape
IO = [("x", "y", "f", [4]), ("input", "output", "f", [3, 4, 4]), ("ids", "ids_out", "q", [5]),
      ("mask", "mask_out", "?", [5]), ("pixels", "pixels_out", "B", [2, 3]),
      ("half", "half_out", "e", [3]), ("scores", "scores_out", "d", [2])]
DATATYPE = {"f": "FP32", "q": "INT64", "?": "BOOL", "B": "UINT8", "e": "FP16", "d": "FP64"}
BIT = {name: 1 << i for i, (name, *_) in enumerate(IO)}


def seed(inputs, body, json_len=None):
    """inputs: names of the model's inputs (None: all); json_len: header length, None: all JSON."""
    mask = 0 if inputs is None else sum(BIT[n] for n in inputs)
    v = 0 if json_len is None else json_len + 1
    return bytes([mask]) + struct.pack("<H", v) + body


def json_seed(inputs, obj):
    return seed(inputs, json.dumps(obj).encode())


def binary_seed(inputs, header, blob):
    h = json.dumps(header).encode()
    return seed(inputs, h + blob, len(h))


def values(fmt, n, start=0):
    if fmt in "fde":
        return [round(((start + i) * 37 % 200) / 100 - 1, 2) for i in range(n)]
    if fmt == "?":
        return [(start + i) % 3 == 0 for i in range(n)]
    if fmt == "B":
        return [(start + i) * 41 % 256 for i in range(n)]
    return [(start + i) * 7919 - 20000 for i in range(n)]


def tensor(name, rows, binary, nested=False):
    """(input entry, its binary bytes) for input `name` with `rows` rows."""
    fmt, inner = next((f, s) for n, _, f, s in IO if n == name)
    shape = [rows] + inner
    n = 1
    for d in shape:
        n *= d
    vals = values(fmt, n)
    entry = {"name": name, "shape": shape, "datatype": DATATYPE[fmt]}
    if binary:
        blob = struct.pack("<%d%s" % (n, fmt), *vals)
        entry["parameters"] = {"binary_data_size": len(blob)}
        return entry, blob
    if nested:
        row = n // rows
        vals = [vals[r * row:(r + 1) * row] for r in range(rows)]
    entry["data"] = vals
    return entry, b""


def request(names, rows=1, binary=(), nested=False, **extra):
    """A seed with the given inputs (binary: those sent in binary)."""
    entries, blob = [], b""
    for name in names:
        e, b = tensor(name, rows, name in binary, nested)
        entries.append(e)
        blob += b
    header = {"inputs": entries, **extra}
    inputs = None if len(names) == len(IO) else names
    return binary_seed(inputs, header, blob) if blob else json_seed(inputs, header)


def server_sh():
    """The bodies tests/e2e/server.sh sends to the mlp (x: FP32 [-1, 4])."""
    x = ["x"]
    one = {"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}
    yield "good", json_seed(x, {"id": "req-1", "inputs": [one]})
    yield "batch3", json_seed(x, {"inputs": [{"name": "x", "shape": [3, 4], "datatype": "FP32",
                                              "data": [[1, 0, 0, 0], [0, 1, 0, 0], [0.5, -1, 2, 3]]}],
                                  "outputs": [{"name": "y"}]})
    yield "binary", binary_seed(x, {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32",
                                                "parameters": {"binary_data_size": 32}}],
                                    "outputs": [{"name": "y", "parameters": {"binary_data": True}}]},
                                struct.pack("<8f", 1, 2, 3, 4, -1, -2, 0.5, 8))
    yield "malformed", seed(x, b'{"inputs": [')
    yield "wrong_shape", json_seed(x, {"inputs": [{"name": "x", "shape": [1, 5], "datatype": "FP32",
                                                   "data": [1, 2, 3, 4, 5]}]})
    yield "wrong_datatype", json_seed(x, {"inputs": [{"name": "x", "shape": [1, 4],
                                                      "datatype": "INT64", "data": [1, 2, 3, 4]}]})
    yield "missing_input", json_seed(x, {"inputs": [dict(one, name="z")]})
    yield "too_few_values", json_seed(x, {"inputs": [dict(one, data=[1, 2, 3])]})
    yield "batch_over_max", json_seed(x, {"inputs": [{"name": "x", "shape": [9, 4], "datatype": "FP32",
                                                      "data": [[0, 0, 0, 0]] * 9}]})
    yield "bad_binary_size", seed(x, b'{"inp', 5)
    yield "unknown_output", json_seed(x, {"inputs": [one], "outputs": [{"name": "nope"}]})


def resnet():
    """server.sh's ResNet-50 body and packrat bench's (overload.sh,
    reconfigure.sh), binary and JSON, at 4x4."""
    yield "resnet_binary", request(["input"], binary=["input"],
                                   parameters={"binary_data_output": True})
    yield "resnet_json", request(["input"])
    yield "resnet_batch4", request(["input"], rows=4, binary=["input"],
                                   parameters={"binary_data_output": True})


def every_datatype():
    names = [n for n, *_ in IO]
    json_ok = [n for n in names if n != "half"]  # FP16 goes in binary
    yield "all_mixed", request(names, rows=2, binary=["half", "scores", "x"], id="mixed")
    yield "all_binary", request(names, rows=1, binary=names,
                                parameters={"binary_data_output": True})
    yield "all_nested", request(names, rows=3, binary=["half"], nested=True,
                                outputs=[{"name": "scores_out"},
                                         {"name": "mask_out", "parameters": {"binary_data": True}},
                                         {"name": "half_out", "parameters": {"binary_data": True}},
                                         {"name": "ids_out"}])
    for n in json_ok:
        yield "only_" + n, request([n], rows=2)
    yield "only_half", request(["half"], binary=["half"])
    # long outside text, for the cuts of ids and error messages
    yield "long_id", json_seed(["x"], {"id": "i" * 300, "inputs": [tensor("x", 1, False)[0]]})
    yield "long_name", json_seed(["x"], {"inputs": [dict(tensor("x", 1, False)[0], name="n" * 600)]})
    yield "dup_input", json_seed(["x"], {"inputs": [tensor("x", 1, False)[0]] * 2})
    yield "not_object", json_seed(["x"], [1, 2])
    body = b'{"inputs": []}'
    yield "header_past_body", seed(["x"], body, len(body) + 1)


def configs():
    # the e2e tests' config.json files
    yield "server_mlp", {"max_batch_size": 4, "max_queue_delay_us": 1000, "queue_capacity": 64}
    yield "server_resnet", {"max_batch_size": 8, "plan": "1x4,1x4"}
    yield "overload", {"max_batch_size": 1, "plan": "1x1,1x1", "queue_capacity": 8,
                       "max_queue_delay_us": 0}
    yield "reconfigure", {"max_batch_size": 4, "queue_capacity": 1024,
                          "request_timeout_ms": 300000, "estimator": "rate",
                          "max_queue_delay_us": 2000}
    yield "everything", {"max_batch_size": 16, "min_batch_size": 2, "autoscale": False,
                         "estimator": "paper", "plan": "auto", "request_timeout_ms": 5000,
                         "dims": {"sequence": 128, "height": 224}}
    yield "plan_body", {"plan": "2x4,1x8"}
    yield "min_over_max", {"max_batch_size": 2, "min_batch_size": 4}
    yield "unknown", {"max_batch": 4}
    yield "dims_bad", {"dims": {"s": 0}}
    yield "dims_dynamic", {"dims": {"seq": {"min": 1, "max": 512, "profile_at": 128},
                                    "width": [64, 128, 256], "height": 48},
                           "session_cache": {"max_sessions": 4, "max_mb": 256}}
    yield "dims_range_bad", {"dims": {"seq": {"min": 9, "max": 8}}}
    yield "long_key", {"k" * 1100: 1}


def routes():
    """Method byte, then the path, as fuzz_router reads them."""
    paths = ["/metrics", "/v2", "/v2/health/live", "/v2/health/ready", "/v2/repository/index",
             "/v2/repository/models/mlp/load", "/v2/repository/models/mlp/unload",
             "/v2/models/mlp", "/v2/models/mlp/versions/2", "/v2/models/mlp/ready",
             "/v2/models/mlp/versions/1/ready", "/v2/models/mlp/infer",
             "/v2/models/mlp/versions/1/infer", "/v2/models/mlp/stats", "/v2/models/mlp/plan",
             "//v2//models///mlp/infer/", "/v2/models/\xc3\xa9/infer", "/v2/a/b/c/d/e/f/g/h/i",
             "/", "/dashboard/app.js", "/dashboard/style.css", "/dashboard/state"]
    for i, p in enumerate(paths):
        for m in range(4):
            yield f"r{i}_{m}", bytes([m]) + p.encode()


def main():
    out = sys.argv[1]
    for sub in ("infer", "config", "router"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    for gen in (server_sh, resnet, every_datatype):
        for name, data in gen():
            with open(os.path.join(out, "infer", name), "wb") as f:
                f.write(data)
    for name, obj in configs():
        with open(os.path.join(out, "config", name + ".json"), "w") as f:
            json.dump(obj, f)
    for name, data in routes():
        with open(os.path.join(out, "router", name), "wb") as f:
            f.write(data)
    with open(os.path.join(out, "config", "duplicate.json"), "w") as f:
        f.write('{"plan": "auto", "plan": "1x1"}')


if __name__ == "__main__":
    main()
