#!/usr/bin/python3
"""gRPC end to end, with Python grpcio as the client and stubs generated here
from the repository's .proto files (protoc and grpc_python_plugin, or
grpc_tools when installed): every RPC of inference.GRPCInferenceService and
grpc.health.v1.Health/Check against the real server (--grpc-port 0, the
port read from the ready line); raw and typed tensors of every datatype;
REST and gRPC answers to the same input bit for bit the same; errors with
their status codes (unknown model, bad shape, bad datatype, missing input,
raw bytes of the wrong length, a malformed message, an oversize message,
an unknown method, no token, a wrong token, an inference token on load and
unload), the server still serving after each; 64 calls at once; the gRPC
counters in /metrics; SIGTERM while calls wait in the queue (each is
answered, and idle channels do not hold the exit). Then TLS and mutual
TLS with certificates made by openssl: a secure channel is served, a
plain one to the TLS port fails cleanly, a client without a certificate
(or with another CA's) is refused by the handshake.

usage: grpc_api.py PACKRAT
"""
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time

import grpc
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402

packrat = sys.argv[1]
d = c.tmp
f = lambda n: os.path.join(d, n)  # noqa: E731


pb, pb_grpc, hpb, hpb_grpc = c.grpc_stubs(f("stubs"))

read_tok, admin_tok = "r-" + secrets.token_hex(16), "a-" + secrets.token_hex(16)
for name, tok in (("read", read_tok), ("admin", admin_tok)):
    with open(f(name), "w") as fh:
        fh.write(f"{tok}\n")
repo = c.make_repo(f("models"), config={"max_batch_size": 4, "plan": "1x4"})
os.makedirs(f("models/types/1"))
shutil.copy(f("made/types.onnx"), f("models/types/1/model.onnx"))
with open(f("models/types/config.json"), "w") as fh:
    json.dump({"max_batch_size": 2, "plan": "1x2"}, fh)


def typed_model():
    """models/typed: Identity of every datatype that has typed contents."""
    import onnx
    from onnx import TensorProto as T, helper
    kinds = [("f64", T.DOUBLE), ("u64", T.UINT64), ("u32", T.UINT32), ("u16", T.UINT16),
             ("u8", T.UINT8), ("i64", T.INT64), ("i32", T.INT32), ("i16", T.INT16),
             ("i8", T.INT8), ("b", T.BOOL), ("f32", T.FLOAT)]
    V = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("Identity", [k], [k + "_out"]) for k, _ in kinds],
                          "typed", [V(k, t, ["batch", 3]) for k, t in kinds],
                          [V(k + "_out", t, ["batch", 3]) for k, t in kinds])
    os.makedirs(f("models/typed/1"))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
              f("models/typed/1/model.onnx"))
    with open(f("models/typed/config.json"), "w") as fh:
        json.dump({"max_batch_size": 2, "plan": "1x2"}, fh)


typed_model()
# slow: the mlp, whose instance waits up to 1 s for a batch of 4 (calls stay queued)
os.makedirs(f("models/slow/1"))
shutil.copy(f("models/mlp/1/model.onnx"), f("models/slow/1/model.onnx"))
with open(f("models/slow/config.json"), "w") as fh:
    json.dump({"max_batch_size": 4, "plan": "1x4", "max_queue_delay_us": 1000000}, fh)


def start(extra, name):
    """Starts the server with gRPC on a free port; (process, http port, grpc port, log)."""
    log = f(f"serve-{name}.log")
    http_port = c.free_port()
    p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(http_port),
                 "--grpc-port", "0", "--max-body-mb", "1", *extra], log)
    for _ in range(1200):
        m = re.search(rb"ready: .*gRPC[^:]*: [^ ]*:(\d+)", open(log, "rb").read())
        if m or p.poll() is not None:
            break
        time.sleep(0.1)
    if not c.check(f"{name}: ready line names the gRPC port", m is not None,
                   open(log, "rb").read()[-800:]):
        c.finish()
    return p, http_port, int(m.group(1)), log


p, http_port, grpc_port, log = start(["--auth-token-file", f("read"), "--admin-token-file",
                                      f("admin")], "plain")
url = f"http://127.0.0.1:{http_port}"
channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
stub = pb_grpc.GRPCInferenceServiceStub(channel)
health = hpb_grpc.HealthStub(channel)
READ = [("authorization", f"Bearer {read_tok}")]
ADMIN = [("authorization", f"Bearer {admin_tok}")]


def call(method, req, md=READ, timeout=30):
    """(status code, response or None, details)."""
    try:
        return grpc.StatusCode.OK, getattr(stub, method)(req, metadata=md, timeout=timeout), ""
    except grpc.RpcError as e:
        return e.code(), None, e.details()


def rest(path, body=None, binary=False):
    headers = {"Authorization": f"Bearer {read_tok}", "Content-Type": "application/json"}
    return c.http(url + path, body, headers=headers, timeout=30)


# ---- health and metadata ----
r = health.Check(hpb.HealthCheckRequest(), timeout=10)
c.check("Health/Check: SERVING (no token needed)", r.status == hpb.HealthCheckResponse.SERVING)
r = health.Check(hpb.HealthCheckRequest(service="inference.GRPCInferenceService"), timeout=10)
c.check("Health/Check of the inference service: SERVING",
        r.status == hpb.HealthCheckResponse.SERVING)
c.check("ServerLive without a token", call("ServerLive", pb.ServerLiveRequest(), md=())[1].live)
c.check("ServerReady", call("ServerReady", pb.ServerReadyRequest(), md=())[1].ready)
c.check("ModelReady mlp", call("ModelReady", pb.ModelReadyRequest(name="mlp"), md=())[1].ready)
c.check("ModelReady of an unknown model: NOT_FOUND",
        call("ModelReady", pb.ModelReadyRequest(name="nope"), md=())[0] == grpc.StatusCode.NOT_FOUND)
code, r, _ = call("ServerMetadata", pb.ServerMetadataRequest())
c.check("ServerMetadata: packrat and its extensions",
        code == grpc.StatusCode.OK and r.name == "packrat" and "model_repository" in r.extensions,
        code)
code, r, _ = call("ModelMetadata", pb.ModelMetadataRequest(name="mlp"))
rest_meta = json.loads(rest("/v2/models/mlp")[1])
c.check("ModelMetadata mlp: the same as REST's",
        code == grpc.StatusCode.OK and r.name == rest_meta["name"]
        and list(r.versions) == rest_meta["versions"] and r.platform == rest_meta["platform"]
        and [(t.name, t.datatype, list(t.shape)) for t in r.inputs]
        == [(t["name"], t["datatype"], t["shape"]) for t in rest_meta["inputs"]]
        and [(t.name, t.datatype, list(t.shape)) for t in r.outputs]
        == [(t["name"], t["datatype"], t["shape"]) for t in rest_meta["outputs"]], (code, r))
code, r, _ = call("ModelConfig", pb.ModelConfigRequest(name="mlp"))
c.check("ModelConfig mlp: max batch 4, x FP32 [4], y FP32 [3]",
        code == grpc.StatusCode.OK and r.config.max_batch_size == 4
        and [(i.name, i.data_type, list(i.dims)) for i in r.config.input] == [("x", pb.TYPE_FP32, [4])]
        and [(o.name, o.data_type, list(o.dims)) for o in r.config.output]
        == [("y", pb.TYPE_FP32, [3])], (code, r))

# ---- inference: raw and typed, the same as REST ----
x = np.array([[1.5, -2, 3.25, 4], [5, 6, -7, 8e-3], [0.1, 0.2, 0.3, 0.4]], dtype=np.float32)


def infer_req(model, tensors, raw=True, outputs=()):
    req = pb.ModelInferRequest(model_name=model, id="req-1")
    for name, dt, a in tensors:
        t = req.inputs.add(name=name, datatype=dt, shape=list(a.shape))
        if raw:
            req.raw_input_contents.append(a.tobytes())
        else:
            field = {"FP32": "fp32_contents", "FP64": "fp64_contents", "INT64": "int64_contents",
                     "UINT64": "uint64_contents", "BOOL": "bool_contents", "INT8": "int_contents",
                     "INT16": "int_contents", "INT32": "int_contents", "UINT8": "uint_contents",
                     "UINT16": "uint_contents", "UINT32": "uint_contents"}[dt]
            getattr(t.contents, field).extend(a.flatten().tolist())
    for o in outputs:
        req.outputs.add(name=o)
    return req


NP = {"FP32": np.float32, "FP64": np.float64, "FP16": np.float16, "INT64": np.int64,
      "UINT64": np.uint64, "UINT32": np.uint32, "UINT16": np.uint16, "INT8": np.int8,
      "BOOL": np.bool_, "INT32": np.int32, "UINT8": np.uint8, "INT16": np.int16}


def grpc_outputs(r):
    """{name: array} of a ModelInferResponse, raw or typed."""
    out = {}
    for i, t in enumerate(r.outputs):
        dt = NP[t.datatype]
        if r.raw_output_contents:
            a = np.frombuffer(r.raw_output_contents[i], dtype=dt)
        else:
            cs = t.contents
            vals = {"FP32": cs.fp32_contents, "FP64": cs.fp64_contents,
                    "INT64": cs.int64_contents, "UINT64": cs.uint64_contents,
                    "BOOL": cs.bool_contents, "INT8": cs.int_contents, "INT16": cs.int_contents,
                    "INT32": cs.int_contents, "UINT8": cs.uint_contents,
                    "UINT16": cs.uint_contents, "UINT32": cs.uint_contents}[t.datatype]
            a = np.array(list(vals), dtype=dt)
        out[t.name] = a.reshape(list(t.shape))
    return out


def rest_outputs(model, tensors):
    """{name: array} of the REST answer in the binary extension (exact bytes)."""
    inputs = [{"name": n, "datatype": dt, "shape": list(a.shape),
               "parameters": {"binary_data_size": a.nbytes}} for n, dt, a in tensors]
    head = json.dumps({"inputs": inputs, "parameters": {"binary_data_output": True}}).encode()
    body = head + b"".join(a.tobytes() for _, _, a in tensors)
    req_headers = {"Authorization": f"Bearer {read_tok}",
                   "Inference-Header-Content-Length": str(len(head)),
                   "Content-Type": "application/octet-stream"}
    st, data, h = c.http(url + f"/v2/models/{model}/infer", body, headers=req_headers, timeout=30)
    jl = int({k.lower(): v for k, v in h.items()}.get("inference-header-content-length", 0))
    meta, off, out = json.loads(data[:jl]), jl, {}
    for t in meta["outputs"]:
        n = t["parameters"]["binary_data_size"]
        out[t["name"]] = np.frombuffer(data[off:off + n], dtype=NP[t["datatype"]]).reshape(t["shape"])
        off += n
    return st, out


def same(a, b):
    return set(a) == set(b) and all(a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
                                    and a[k].tobytes() == b[k].tobytes() for k in a)


st, rest_y = rest_outputs("mlp", [("x", "FP32", x)])
code, r, det = call("ModelInfer", infer_req("mlp", [("x", "FP32", x)]))
c.check("ModelInfer raw: raw answer, id echoed, bit for bit REST's",
        code == grpc.StatusCode.OK and st == 200 and len(r.raw_output_contents) == 1
        and r.id == "req-1" and r.model_name == "mlp" and same(grpc_outputs(r), rest_y),
        (code, det))
code, r, det = call("ModelInfer", infer_req("mlp", [("x", "FP32", x)], raw=False))
c.check("ModelInfer typed: typed answer, bit for bit REST's",
        code == grpc.StatusCode.OK and not r.raw_output_contents
        and same(grpc_outputs(r), rest_y), (code, det))
st, data, _ = rest("/v2/models/mlp/infer", json.dumps(
    {"inputs": [{"name": "x", "datatype": "FP32", "shape": [3, 4], "data": x.flatten().tolist()}]}
).encode())
rest_json = np.array(json.loads(data)["outputs"][0]["data"], dtype=np.float32).reshape(3, 3)
c.check("REST JSON answer equals gRPC's too", st == 200 and rest_json.tobytes()
        == grpc_outputs(r)["y"].tobytes())

rng = np.random.default_rng(7)
types = [("f64", "FP64", rng.standard_normal((2, 3))), ("f16", "FP16", rng.standard_normal((2, 3))),
         ("u64", "UINT64", rng.integers(0, 2**63, (2, 3))), ("u32", "UINT32",
                                                             rng.integers(0, 2**32, (2, 3))),
         ("u16", "UINT16", rng.integers(0, 2**16, (2, 3))), ("i8", "INT8",
                                                             rng.integers(-128, 128, (2, 3))),
         ("b", "BOOL", rng.integers(0, 2, (2, 3))), ("f32", "FP32", rng.standard_normal((2, 3)))]
types = [(n, dt, a.astype(NP[dt])) for n, dt, a in types]
want = {n + "_out": a for n, _, a in types}
st, rest_t = rest_outputs("types", types)
code, r, det = call("ModelInfer", infer_req("types", types))
c.check("every datatype raw: outputs equal inputs and REST's, bit for bit",
        code == grpc.StatusCode.OK and same(grpc_outputs(r), want) and same(rest_t, want),
        (code, det))
typed = [("f64", "FP64", rng.standard_normal((2, 3))),
         ("u64", "UINT64", rng.integers(0, 2**63, (2, 3))),
         ("u32", "UINT32", rng.integers(0, 2**32, (2, 3))),
         ("u16", "UINT16", rng.integers(0, 2**16, (2, 3))),
         ("u8", "UINT8", rng.integers(0, 2**8, (2, 3))),
         ("i64", "INT64", rng.integers(-2**63, 2**63 - 1, (2, 3))),
         ("i32", "INT32", rng.integers(-2**31, 2**31, (2, 3))),
         ("i16", "INT16", rng.integers(-2**15, 2**15, (2, 3))),
         ("i8", "INT8", rng.integers(-128, 128, (2, 3))), ("b", "BOOL", rng.integers(0, 2, (2, 3))),
         ("f32", "FP32", rng.standard_normal((2, 3)))]
typed = [(n, dt, a.astype(NP[dt])) for n, dt, a in typed]
want = {n + "_out": a for n, _, a in typed}
st, rest_t = rest_outputs("typed", typed)
code, r, det = call("ModelInfer", infer_req("typed", typed, raw=False))
c.check("every typed datatype: typed answer equal to the inputs and to REST's, bit for bit",
        code == grpc.StatusCode.OK and not r.raw_output_contents and same(grpc_outputs(r), want)
        and same(rest_t, want), (code, det))
code, r, det = call("ModelInfer", infer_req("typed", typed))
c.check("the same raw: raw answer, bit for bit", code == grpc.StatusCode.OK
        and len(r.raw_output_contents) == len(typed) and same(grpc_outputs(r), want), (code, det))
req = infer_req("types", [t for t in types if t[1] != "FP16"], raw=False)
req.inputs.add(name="f16", datatype="FP16", shape=[2, 3]).contents.fp32_contents.extend([0] * 6)
code, _, det = call("ModelInfer", req)
c.check("typed FP16: INVALID_ARGUMENT (raw only)", code == grpc.StatusCode.INVALID_ARGUMENT, code)
req = infer_req("typed", typed, raw=False)
req.inputs[0].ClearField("contents")
code, _, det = call("ModelInfer", req)
c.check("contents missing for one input: INVALID_ARGUMENT", code == grpc.StatusCode.INVALID_ARGUMENT,
        code)
req = infer_req("typed", typed, raw=False)
req.inputs[8].contents.int_contents[0] = 300
code, _, det = call("ModelInfer", req)
c.check("an INT8 value out of range: INVALID_ARGUMENT", code == grpc.StatusCode.INVALID_ARGUMENT
        and "range" in det, (code, det))
req = infer_req("typed", typed, raw=False)
req.inputs[0].contents.fp32_contents.extend([1.0] * 6)
code, _, det = call("ModelInfer", req)
c.check("contents of two types: INVALID_ARGUMENT", code == grpc.StatusCode.INVALID_ARGUMENT,
        (code, det))
req = infer_req("typed", typed, raw=False)
req.raw_input_contents.append(b"x")
code, _, det = call("ModelInfer", req)
c.check("typed and raw mixed: INVALID_ARGUMENT", code == grpc.StatusCode.INVALID_ARGUMENT,
        (code, det))

req = infer_req("mlp", [("x", "FP32", x)])
req.parameters["priority"].uint64_param = 1
req.parameters["timeout"].int64_param = 5000000
code, r, det = call("ModelInfer", req)
c.check("the priority and timeout parameters are taken",
        code == grpc.StatusCode.OK and same(grpc_outputs(r), rest_y), (code, det))
for key, setter in (("priority", lambda p: setattr(p, "int64_param", 99)),
                    ("priority", lambda p: setattr(p, "string_param", "high")),
                    ("timeout", lambda p: setattr(p, "int64_param", -1))):
    req = infer_req("mlp", [("x", "FP32", x)])
    setter(req.parameters[key])
    code, _, det = call("ModelInfer", req)
    c.check(f"a bad '{key}' parameter: INVALID_ARGUMENT ({det})",
            code == grpc.StatusCode.INVALID_ARGUMENT, code)

for where, setter in (("the model name", lambda r: setattr(r, "model_name", "mlp\x00x")),
                      ("an input's name", lambda r: setattr(r.inputs[0], "name", "x\x00y")),
                      ("a datatype", lambda r: setattr(r.inputs[0], "datatype", "FP32\x00junk"))):
    req = infer_req("mlp", [("x", "FP32", x)])
    setter(req)
    code, _, det = call("ModelInfer", req)
    c.check(f"a NUL inside {where}: INVALID_ARGUMENT, not served as the name before it ({det})",
            code == grpc.StatusCode.INVALID_ARGUMENT and "without NUL" in det, (code, det))

# ---- errors: the right status, and the server still serves ----
good = infer_req("mlp", [("x", "FP32", x)])


def still_serving():
    code, r, _ = call("ModelInfer", good)
    return code == grpc.StatusCode.OK and same(grpc_outputs(r), rest_y)


bad_shape = infer_req("mlp", [("x", "FP32", np.zeros((1, 5), np.float32))])
bad_type = infer_req("mlp", [("x", "FP64", x.astype(np.float64))])
short = infer_req("mlp", [("x", "FP32", x)])
short.raw_input_contents[0] = short.raw_input_contents[0][:-1]
missing = infer_req("types", types[:2])
big_batch = infer_req("mlp", [("x", "FP32", np.zeros((5, 4), np.float32))])
oversize = infer_req("mlp", [("x", "FP32", np.zeros((4, 4), np.float32))])
oversize.raw_input_contents.append(b"\0" * (2 << 20))
out_unknown = infer_req("mlp", [("x", "FP32", x)], outputs=["nope"])
cases = [
    ("unknown model", pb.ModelInferRequest(model_name="nope"), READ, grpc.StatusCode.NOT_FOUND),
    ("bad shape", bad_shape, READ, grpc.StatusCode.INVALID_ARGUMENT),
    ("bad datatype", bad_type, READ, grpc.StatusCode.INVALID_ARGUMENT),
    ("raw bytes of the wrong length", short, READ, grpc.StatusCode.INVALID_ARGUMENT),
    ("missing input", missing, READ, grpc.StatusCode.INVALID_ARGUMENT),
    ("batch over the max", big_batch, READ, grpc.StatusCode.INVALID_ARGUMENT),
    ("unknown output", out_unknown, READ, grpc.StatusCode.INVALID_ARGUMENT),
    ("oversize message (2 MiB, limit 1)", oversize, READ, grpc.StatusCode.RESOURCE_EXHAUSTED),
    ("no token", good, (), grpc.StatusCode.UNAUTHENTICATED),
    ("a wrong token", good, [("authorization", "Bearer not-a-known-token-at-all")],
     grpc.StatusCode.UNAUTHENTICATED),
]
for name, req, md, want_code in cases:
    code, _, det = call("ModelInfer", req, md=md)
    c.check(f"{name}: {want_code.name}, then still serving", code == want_code and still_serving(),
            (code, det))
raw_call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
try:
    raw_call(b"\xff\xff\xff\xff", metadata=READ, timeout=10)
    code = grpc.StatusCode.OK
except grpc.RpcError as e:
    code = e.code()
c.check("a malformed message: INVALID_ARGUMENT, then still serving",
        code == grpc.StatusCode.INVALID_ARGUMENT and still_serving(), code)
try:
    channel.unary_unary("/inference.GRPCInferenceService/ModelStreamTrace")(b"", timeout=10)
    code = grpc.StatusCode.OK
except grpc.RpcError as e:
    code = e.code()
c.check("an unserved method: UNIMPLEMENTED", code == grpc.StatusCode.UNIMPLEMENTED, code)

# ---- statistics, the repository, tokens on admin RPCs ----
code, r, _ = call("ModelStatistics", pb.ModelStatisticsRequest(name="mlp"))
rest_stats = json.loads(rest("/v2/models/mlp/stats")[1])["model_stats"][0]
s = r.model_stats[0] if r else None
c.check("ModelStatistics mlp: the counts REST shows",
        code == grpc.StatusCode.OK and s.name == "mlp"
        and s.inference_stats.success.count == rest_stats["inference_stats"]["success"]["count"]
        and s.execution_count == rest_stats["execution_count"] and s.inference_count > 0
        and len(s.batch_stats) == len(rest_stats["batch_stats"]), (code, r, rest_stats))
code, r, _ = call("ModelStatistics", pb.ModelStatisticsRequest())
c.check("ModelStatistics of every model", code == grpc.StatusCode.OK
        and sorted(m.name for m in r.model_stats) == ["mlp", "slow", "typed", "types"], (code, r))
code, r, _ = call("RepositoryIndex", pb.RepositoryIndexRequest())
c.check("RepositoryIndex: every model READY", code == grpc.StatusCode.OK and sorted(
    (m.name, m.version, m.state) for m in r.models) == [("mlp", "1", "READY"), ("slow", "1", "READY"), ("typed", "1", "READY"),
        ("types", "1", "READY")],
    (code, r))
for method, req in (("RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name="types")),
                    ("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="types"))):
    code, _, _ = call(method, req)
    c.check(f"{method} with the inference token: PERMISSION_DENIED",
            code == grpc.StatusCode.PERMISSION_DENIED, code)
    code, _, _ = call(method, req, md=())
    c.check(f"{method} without a token: UNAUTHENTICATED", code == grpc.StatusCode.UNAUTHENTICATED,
            code)
c.check("nothing changed: types still ready",
        call("ModelReady", pb.ModelReadyRequest(name="types"), md=())[1].ready)
code, _, _ = call("RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name="types"),
                  md=ADMIN)
rcode, r, _ = call("ModelReady", pb.ModelReadyRequest(name="types"), md=())
c.check("RepositoryModelUnload with the admin token: OK, the model not ready (REST: 503)",
        code == grpc.StatusCode.OK and rcode == grpc.StatusCode.OK and not r.ready
        and rest("/v2/models/types/ready")[0] == 503, (code, rcode, r))
try:
    stub.ModelInfer(infer_req("types", types), metadata=READ, timeout=30)
    code, trailer = grpc.StatusCode.OK, {}
except grpc.RpcError as e:
    code, trailer = e.code(), dict(e.trailing_metadata() or ())
# retrying cannot help until someone loads it: FAILED_PRECONDITION (REST:
# 503 without Retry-After), not UNAVAILABLE with a pushback (a loading model's)
c.check("infer on the unloaded model: FAILED_PRECONDITION",
        code == grpc.StatusCode.FAILED_PRECONDITION, code)
c.check("without a retry pushback (REST: no Retry-After)",
        "grpc-retry-pushback-ms" not in trailer, trailer)
code, _, _ = call("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="types"),
                  md=ADMIN, timeout=300)
c.check("RepositoryModelLoad with the admin token: OK, ready again",
        code == grpc.StatusCode.OK and
        call("ModelReady", pb.ModelReadyRequest(name="types"), md=())[1].ready, code)
code, _, _ = call("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="nope"),
                  md=ADMIN)
c.check("RepositoryModelLoad of an unknown model: NOT_FOUND", code == grpc.StatusCode.NOT_FOUND,
        code)

# ---- many calls at once, served by a few threads ----
futures = [stub.ModelInfer.future(good, metadata=READ, timeout=60) for _ in range(64)]
ok = 0
for fu in futures:
    try:
        ok += same(grpc_outputs(fu.result()), rest_y)
    except grpc.RpcError as e:
        print("call failed:", e.code(), e.details())
c.check("64 calls at once: all answered right", ok == 64, ok)
st, text, _ = rest("/metrics")
m = re.search(rb"^packrat_grpc_requests_total (\d+)", text, re.M)
e = re.search(rb"^packrat_grpc_errors_total (\d+)", text, re.M)
c.check("/metrics counts the gRPC calls and errors", st == 200 and m and int(m.group(1)) > 64
        and e and int(e.group(1)) >= len(cases), text[-400:] if m is None else m.group(0))

# ---- packrat bench over gRPC and REST, with the read token ----
for proto in (["--protocol", "grpc", "--grpc-address", f"127.0.0.1:{grpc_port}"], []):
    b = subprocess.run([packrat, "bench", "--url", url, "--model", "mlp", "--concurrency", "2",
                        "--duration", "1", "--token-file", f("read"), "--json", *proto],
                       capture_output=True, text=True, timeout=60)
    res = json.loads(b.stdout.strip().splitlines()[-1]) if b.returncode == 0 else {}
    want = "grpc" if proto else "rest"
    c.check(f"packrat bench --protocol {want} with the token: answers, no errors",
            res.get("protocol") == want and res.get("requests", 0) > 10 and res.get("errors") == 0,
            (b.returncode, b.stderr[-300:], res))
b = subprocess.run([packrat, "bench", "--url", url, "--model", "mlp", "--duration", "1", "--json",
                    "--protocol", "grpc", "--grpc-address", f"127.0.0.1:{grpc_port}"],
                   capture_output=True, text=True, timeout=60)
c.check("packrat bench without the token: exit 1, the 401 named",
        b.returncode == 1 and "401" in b.stderr, b.stderr[-300:])
b = subprocess.run([packrat, "bench", "--url", url, "--model", "mlp", "--protocol", "grpc"],
                   capture_output=True, text=True, timeout=60)
c.check("packrat bench --protocol grpc without --grpc-address: exit 2 with the reason",
        b.returncode == 2 and "--grpc-address" in b.stderr, b.stderr)

r2 = subprocess.run([packrat, "serve", "--model-repository", repo, "--http-port", "0",
                     "--grpc-port", str(grpc_port)], capture_output=True, text=True, timeout=120)
c.check("a second server on the same gRPC port: exit 1 with a message (the port is not shared)",
        r2.returncode == 1 and "cannot listen for gRPC" in r2.stderr and still_serving(),
        r2.stderr[-300:])

# ---- SIGTERM while calls wait in the queue: each is answered, then exit 0 ----
slow = infer_req("slow", [("x", "FP32", x[:1])])
queued = [stub.ModelInfer.future(slow, metadata=READ, timeout=30) for _ in range(3)]
time.sleep(0.3)  # the three wait for a fourth (up to 1 s)
t0 = time.time()
p.terminate()
codes = []
for fu in queued:
    try:
        fu.result()
        codes.append(grpc.StatusCode.OK)
    except grpc.RpcError as e:
        codes.append(e.code())
c.check("SIGTERM: the calls waiting in the queue are answered", codes == [grpc.StatusCode.OK] * 3,
        codes)
c.check("exit 0, soon after (idle channels do not hold the drain)",
        p.wait(60) == 0 and time.time() - t0 < 5, time.time() - t0)
code, _, _ = call("ServerLive", pb.ServerLiveRequest(), md=(), timeout=5)
c.check("after the exit: calls fail cleanly (UNAVAILABLE)", code == grpc.StatusCode.UNAVAILABLE,
        code)
channel.close()
text = open(log, "rb").read()
c.check("neither token in the log", read_tok.encode() not in text and admin_tok.encode() not in text)


# ---- TLS and mutual TLS ----
def sh(*args):
    subprocess.run(args, check=True, capture_output=True, cwd=d)


def make_ca(name):
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
       "-keyout", f"{name}.key", "-out", f"{name}.pem", "-subj", f"/CN={name}")


def make_cert(name, ca, ext):
    with open(f(f"{name}.ext"), "w") as fh:
        fh.write(ext)
    sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
       "-out", f"{name}.csr", "-subj", f"/CN={name}")
    sh("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
       "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext")


make_ca("ca")
make_ca("otherca")
make_cert("server", "ca", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
make_cert("client", "ca", "extendedKeyUsage=clientAuth\n")
make_cert("stranger", "otherca", "extendedKeyUsage=clientAuth\n")
pem = lambda n: open(f(n), "rb").read()  # noqa: E731


def tls_infer(port, creds):
    """The status of an infer over a channel with these credentials (None: plain)."""
    target = f"127.0.0.1:{port}"
    ch = grpc.secure_channel(target, creds) if creds else grpc.insecure_channel(target)
    try:
        r = pb_grpc.GRPCInferenceServiceStub(ch).ModelInfer(good, timeout=10)
        return grpc.StatusCode.OK if same(grpc_outputs(r), rest_y) else "wrong answer"
    except grpc.RpcError as e:
        return e.code()
    finally:
        ch.close()


TLS = ["--tls-cert", f("server.pem"), "--tls-key", f("server.key")]
p, _, port, _ = start(TLS, "tls")
trusted = grpc.ssl_channel_credentials(root_certificates=pem("ca.pem"))
c.check("TLS: a secure channel trusting the CA is served",
        tls_infer(port, trusted) == grpc.StatusCode.OK)
code = tls_infer(port, None)
c.check(f"TLS: a plain-text channel to the TLS port fails cleanly ({code})",
        code == grpc.StatusCode.UNAVAILABLE)
code = tls_infer(port, grpc.ssl_channel_credentials(root_certificates=pem("otherca.pem")))
c.check(f"TLS: a client that does not trust the CA fails the handshake ({code})",
        code == grpc.StatusCode.UNAVAILABLE)
c.check("TLS: still serving", tls_infer(port, trusted) == grpc.StatusCode.OK)
p.terminate()
c.check("exit 0", p.wait(60) == 0)

p, _, port, _ = start(TLS + ["--tls-client-ca", f("ca.pem")], "mtls")
mine = grpc.ssl_channel_credentials(pem("ca.pem"), pem("client.key"), pem("client.pem"))
c.check("mTLS: a client certificate the CA signed is served",
        tls_infer(port, mine) == grpc.StatusCode.OK)
code = tls_infer(port, trusted)
c.check(f"mTLS: no client certificate: refused ({code})", code == grpc.StatusCode.UNAVAILABLE)
code = tls_infer(port, grpc.ssl_channel_credentials(pem("ca.pem"), pem("stranger.key"),
                                                    pem("stranger.pem")))
c.check(f"mTLS: another CA's certificate: refused ({code})", code == grpc.StatusCode.UNAVAILABLE)
c.check("mTLS: still serving", tls_infer(port, mine) == grpc.StatusCode.OK)
p.terminate()
c.check("exit 0", p.wait(60) == 0)
c.finish()
