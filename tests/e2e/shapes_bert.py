#!/usr/bin/python3
"""BERT-base (tools/export_models.py: input [batch, sequence] of token ids) served
with a dynamic sequence axis, dims {"sequence": {"min": 8, "max": 128}},
one instance of batch 2 (a fixed plan) and a session cache of 2: requests
of lengths 8, 37, 100 and 128 (the planned one) from concurrent clients,
each answer within 1e-5 (relative to the output's largest magnitude) of
`packrat run` on the same input alone; the stats list each length with the
requests sent at it; /metrics shows the cache's misses (one per new shape
and rows at least), evictions (three shapes past a cache of two) and hits
adding up to the batches run off the planned shape; length 129 gets 400.

usage: shapes_bert.py PACKRAT MODELS_DIR
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

packrat, models = sys.argv[1], sys.argv[2]
src = os.path.join(models, "bert", "model.onnx")
if not c.check("BERT exported", os.path.exists(src), src):
    c.finish()
repo = os.path.join(c.tmp, "models")
os.makedirs(os.path.join(repo, "bert", "1"))
os.symlink(src, os.path.join(repo, "bert", "1", "model.onnx"))
with open(os.path.join(repo, "bert", "config.json"), "w") as f:
    json.dump({"max_batch_size": 2, "plan": "1x2", "max_queue_delay_us": 50000,
               "request_timeout_ms": 600000, "dims": {"sequence": {"min": 8, "max": 128}},
               "session_cache": {"max_sessions": 2}}, f)
for root, dirs, files in os.walk(repo):
    for d in dirs:
        os.chmod(os.path.join(root, d), 0o755)

port = c.free_port()
p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port)],
            os.path.join(c.tmp, "serve.log"))
url = f"http://127.0.0.1:{port}"
if not c.check("server ready", c.wait_ready(url, p, 600)):
    print(open(os.path.join(c.tmp, "serve.log")).read()[-3000:])
    c.finish()

LENGTHS = [8, 37, 100, 128, 37, 8]
rng = np.random.default_rng(3)
inputs = {n: rng.integers(1, 30000, size=(1, n), dtype=np.int64) for n in set(LENGTHS)}


def alone(n):
    """`packrat run` on inputs[n] alone: the reference."""
    path = os.path.join(c.tmp, f"ids_{n}.npy")
    np.save(path, inputs[n])
    out = os.path.join(c.tmp, f"run_{n}")
    r = subprocess.run([packrat, "run", src, "--input", "input=" + path, "--output-dir", out],
                       capture_output=True, text=True, timeout=600)
    return np.load(os.path.join(out, "output_0.npy")) if r.returncode == 0 else r.stderr


refs = {n: alone(n) for n in sorted(inputs)}
c.check("packrat run on each length alone", all(isinstance(v, np.ndarray) for v in refs.values()),
        [v for v in refs.values() if not isinstance(v, np.ndarray)])


def infer(ids):
    body = json.dumps({"inputs": [{"name": "input", "shape": list(ids.shape),
                                   "datatype": "INT64", "data": ids.ravel().tolist()}]}).encode()
    st, out, _ = c.http(f"{url}/v2/models/bert/infer", body, timeout=600)
    if st != 200:
        return st, out
    o = json.loads(out)["outputs"][0]
    return st, np.array(o["data"], np.float32).reshape(o["shape"])


bad = []
lock = threading.Lock()


def client(lengths):
    for n in lengths:
        st, y = infer(inputs[n])
        ref = refs[n]
        ok = st == 200 and isinstance(ref, np.ndarray) and y.shape == ref.shape
        err = float(np.abs(y - ref).max() / max(1.0, np.abs(ref).max())) if ok else None
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

st, body, _ = c.http(url + "/v2/models/bert/stats")
served = {}
if st == 200:
    for s in json.loads(body)["model_stats"][0]["packrat"]["shapes"]["served"]:
        served[s["dims"]["sequence"]] = (s["requests"], s["batches"])
sent = {n: LENGTHS.count(n) for n in set(LENGTHS)}
c.check("stats: each length with the requests sent at it",
        {n: r for n, (r, _) in served.items()} == sent, (served, sent))


def metric(name):
    st, body, _ = c.http(url + "/metrics")
    m = re.search(r'^%s\{model="bert",version="1"\} (\S+)$' % re.escape(name), body.decode(), re.M)
    return float(m.group(1)) if m else None


hits, misses, evictions = (metric(f"packrat_session_cache_{k}_total")
                           for k in ("hits", "misses", "evictions"))
off_plan = sum(b for n, (_, b) in served.items() if n != 128)
c.check("metrics: misses for each new shape, evictions past the bound, hits + misses = batches "
        "off the planned shape",
        misses >= 3 and evictions >= 1 and hits + misses == off_plan,
        (hits, misses, evictions, off_plan))
st, body = infer(np.ones((1, 129), np.int64))
c.check("length 129: 400 naming the dim and the range",
        st == 400 and b"'sequence'" in body and b"8..128" in body, (st, body))
p.terminate()
c.check("server stops cleanly", p.wait(120) == 0)
c.finish()
