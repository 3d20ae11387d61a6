#!/usr/bin/python3
"""Seeds of fuzz_grpc_infer: byte 0 picks the model's inputs (see the
target), the rest is a ModelInferRequest made with stubs generated here
from src/server/proto (protoc's Python output): raw and typed tensors,
requested outputs, and a few broken ones.
usage: grpc_seeds.py OUT_DIR"""
import importlib
import os
import struct
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
proto = os.path.join(here, "..", "..", "src", "server", "proto")
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
stubs = tempfile.mkdtemp()
subprocess.run(["protoc", f"-I{proto}", f"--python_out={stubs}", "grpc_service.proto"], check=True)
sys.path.insert(0, stubs)
pb = importlib.import_module("grpc_service_pb2")


def req(inputs, raw=True, outputs=(), id=""):
    r = pb.ModelInferRequest(model_name="fuzz", id=id)
    for name, dt, shape, values, fmt, field in inputs:
        t = r.inputs.add(name=name, datatype=dt, shape=shape)
        if raw:
            r.raw_input_contents.append(struct.pack(f"<{len(values)}{fmt}", *values))
        else:
            getattr(t.contents, field).extend(values)
    for o in outputs:
        r.outputs.add(name=o)
    return r.SerializeToString()


x = ("x", "FP32", [1, 4], [1.0, 2.0, 3.0, 4.0], "f", "fp32_contents")
ids = ("ids", "INT64", [1, 5], [1, 2, 3, -4, 5], "q", "int64_contents")
mask = ("mask", "BOOL", [2, 5], [1, 0] * 5, "B", "bool_contents")
pixels = ("pixels", "UINT8", [1, 2, 3], [0, 1, 2, 253, 254, 255], "B", "uint_contents")
half = ("half", "FP16", [1, 3], [0x3c00, 0x7c00, 0x7e00], "H", None)
small = ("small", "INT8", [1, 2], [-128, 127], "b", "int_contents")
scores = ("scores", "FP64", [1, 2], [0.5, -1e300], "d", "fp64_contents")
seeds = {
    "x_raw": (1, req([x])), "x_typed": (1, req([x], raw=False, id="abc")),
    "ids_typed": (2, req([ids], raw=False, outputs=["ids_out"])),
    "mask_raw": (4, req([mask])), "pixels_typed": (8, req([pixels], raw=False)),
    "half_raw": (16, req([half])), "small_typed": (32, req([small], raw=False)),
    "scores_raw": (64, req([scores], outputs=["scores_out"])),
    "all_raw": (0, req([x, ids, mask[:2] + ([1, 5],) + mask[3:], pixels, half, small, scores])),
    "two_raw": (3, req([x, ids], outputs=["ids_out", "y"])),
    "bad_shape": (1, req([("x", "FP32", [1, 5], [0.0] * 5, "f", "fp32_contents")])),
}
for name, (pick, msg) in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([pick]) + msg)
