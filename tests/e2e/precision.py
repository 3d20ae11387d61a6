#!/usr/bin/python3
"""A model's precision (config.json "precision"), against the real server:

- "mlp" (fp32, the default) and "mlp16" (the same model, "precision":
  "bf16") in one repository. Where the CPU has native bf16 (packrat run
  --precision bf16 says so): both load; the plan endpoint and the dashboard
  state name each one's precision; a batch of 4 rows (the MatMul then runs
  in bf16) answers within bf16's rounding of the fp32 model's answer; the
  bf16 profile is cached apart from the fp32 one ("precision" in the file).
  Elsewhere: mlp16 fails to load with a reason that names bf16 and mlp
  serves.
- packrat profile --precision bf16 writes a profile that says bf16 (where
  native); --precision fp8 exits 2.
- "precision": "fp16" is refused on load (400, the message names the key)
  and changes nothing: the model keeps serving as it did.

usage: precision.py PACKRAT
"""
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402

packrat = sys.argv[1]
repo = c.make_repo(os.path.join(c.tmp, "models"))
c.make_repo(repo, name="mlp16", config={"precision": "bf16"})
probe = subprocess.run([packrat, "run", os.path.join(repo, "mlp", "1", "model.onnx"), "--precision", "bf16"],
                       capture_output=True, text=True)
native = probe.returncode == 0
c.check("packrat run --precision bf16: runs, or refuses naming bf16",
        native or (probe.returncode == 1 and "bf16" in probe.stderr), probe.stderr)
cache = os.path.join(c.tmp, "cache")
os.makedirs(cache)
bad = subprocess.run([packrat, "profile", os.path.join(repo, "mlp", "1", "model.onnx"), "--precision", "fp8"],
                     capture_output=True, text=True)
c.check("packrat profile --precision fp8: exit 2, says what is allowed",
        bad.returncode == 2 and "fp32 or bf16" in bad.stderr, bad.stderr)
if native:
    out = os.path.join(c.tmp, "p16.json")
    r = subprocess.run([packrat, "profile", os.path.join(repo, "mlp", "1", "model.onnx"), "--precision", "bf16",
                        "--cores", "1", "--max-batch", "2", "--out", out], capture_output=True, text=True,
                       env=dict(os.environ, PACKRAT_CACHE=os.path.join(c.tmp, "cli-cache")))
    c.check("packrat profile --precision bf16: the profile says bf16",
            r.returncode == 0 and json.load(open(out)).get("precision") == "bf16", r.stderr[-300:])
port = c.free_port()
log = os.path.join(c.tmp, "serve.log")
p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port)], log,
            env=dict(os.environ, PACKRAT_CACHE=cache))
url = f"http://127.0.0.1:{port}"
# without native bf16 mlp16 fails to load and /v2/health/ready stays 503: wait for the log's line
if not c.check("the server started", c.wait_started(log, p, 180)):
    print(open(log).read()[-3000:])
    c.finish()
c.check("/v2/health/ready: 200 where both models loaded, 503 where mlp16 could not (every model must be ready)",
        c.http(url + "/v2/health/ready")[0] == (200 if native else 503))


def get(path):
    st, body, _ = c.http(url + path)
    return st, (json.loads(body) if body[:1] in (b"{", b"[") else body)


def infer(model, rows):
    data = [((i * 7) % 11 - 5) / 3 for i in range(4 * rows)]
    body = {"inputs": [{"name": "x", "shape": [rows, 4], "datatype": "FP32", "data": data}]}
    st, out, _ = c.http(f"{url}/v2/models/{model}/infer", json.dumps(body).encode(), timeout=60)
    return st, (json.loads(out)["outputs"][0]["data"] if st == 200 else out)


def dash_model(name):
    st, state = get("/dashboard/state")
    return next((m for m in state.get("models", []) if m["name"] == name), None) if st == 200 else None


st, a = infer("mlp", 4)
c.check("the fp32 model serves", st == 200, a)
c.check("its plan names fp32", get("/v2/models/mlp/plan")[1].get("precision") == "fp32")
c.check("its dashboard state names fp32", (dash_model("mlp") or {}).get("precision") == "fp32")
if native:
    st, b = infer("mlp16", 4)
    c.check("the bf16 model serves", st == 200, b)
    if st == 200:
        scale = max(abs(x) for x in a)
        diff = max(abs(x - y) for x, y in zip(a, b))
        c.check("bf16 answers within bf16 rounding of fp32's", scale > 0 and diff <= 2e-2 * scale,
                f"diff {diff} of {scale}")
    c.check("its plan names bf16", get("/v2/models/mlp16/plan")[1].get("precision") == "bf16")
    c.check("its dashboard state names bf16", (dash_model("mlp16") or {}).get("precision") == "bf16")
    kinds = sorted(json.load(open(f)).get("precision") for f in glob.glob(os.path.join(cache, "profile-*.json")))
    c.check("the fp32 and bf16 profiles cached apart", kinds == ["bf16", "fp32"], kinds)
else:
    m = dash_model("mlp16") or {}
    c.check("mlp16 fails to load, the reason names bf16",
            m.get("state") != "READY" and "bf16" in str(m.get("reason")), m)

with open(os.path.join(repo, "mlp", "config.json"), "w") as f:
    json.dump({"precision": "fp16"}, f)
st, body, _ = c.http(f"{url}/v2/repository/models/mlp/load", b"{}")
c.check("precision fp16 refused (400, names the key)", st == 400 and b"precision" in body, (st, body))
c.check("the model still serves after the refused config", infer("mlp", 4)[0] == 200)
c.finish()
