#!/usr/bin/python3
"""Serving every shape a model's dims allow, against the real server, with a
model that has a symbolic sequence axis (x [batch, seq, 16] -> MatMul, Add,
Softmax -> y [batch, seq, 16]):

- "seq": dims {"seq": {"min": 1, "max": 64}}, one instance of batch 4, a
  session cache of 3: the metadata says -1 for the batch and the sequence
  axes, the config endpoint the range; requests of several lengths from
  concurrent clients are each answered as numpy computes them; the stats
  list each shape served with exactly the requests sent at that length (a
  batch holds one shape); a length outside 1..64 gets 400 naming the input,
  the dim and the range; new shapes past the cache's bound evict (the
  session cache counters in /metrics, exactly), a shape still cached hits.
- "seqlist": dims {"seq": [8, 16, 32]}: the listed lengths are compiled
  ahead (a request at one is a cache hit, not a miss), another length gets
  400 naming the list.
- "pair" (x + m, both [batch, seq, 16]): the inputs must agree on seq.
- "seqfixed": dims {"seq": 16} (the fixed form): served as before, the
  metadata says 16, another length gets today's 400, no cache is used.
- "seqbad" (loaded later): a range on a dim the model does not have: the
  load fails with 400 naming it; the others serve on.
- `packrat run` on an input file of length 7 (no --dim) answers as numpy.

usage: shapes.py PACKRAT
"""
import json
import os
import random
import re
import subprocess
import sys
import threading

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402
from seq_model import SeqModel  # noqa: E402

packrat = sys.argv[1]
seq = SeqModel(7)
make_model, reference = seq.save, seq.reference


def make_pair(path):
    """x + m over [batch, seq, 16]: two inputs that share the seq dim."""
    t = ["batch", "seq", 16]
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "m"], ["y"])], "pair",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, t),
         helper.make_tensor_value_info("m", TensorProto.FLOAT, t)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, t)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


repo = os.path.join(c.tmp, "models")
configs = {
    "seq": {"max_batch_size": 4, "plan": "1x4", "max_queue_delay_us": 20000,
            "dims": {"seq": {"min": 1, "max": 64}}, "session_cache": {"max_sessions": 3}},
    "seqlist": {"max_batch_size": 2, "plan": "1x2", "dims": {"seq": [8, 16, 32]}},
    "seqfixed": {"max_batch_size": 2, "plan": "1x2", "dims": {"seq": 16}},
    "pair": {"max_batch_size": 2, "plan": "1x2", "dims": {"seq": {"max": 32}}},
}
for name, cfg in configs.items():
    os.makedirs(os.path.join(repo, name, "1"))
    (make_pair if name == "pair" else make_model)(os.path.join(repo, name, "1", "model.onnx"))
    with open(os.path.join(repo, name, "config.json"), "w") as f:
        json.dump(cfg, f)
c.readable(repo)

port = c.free_port()
p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port)],
            os.path.join(c.tmp, "serve.log"))
url = f"http://127.0.0.1:{port}"
if not c.check("server ready", c.wait_ready(url, p, 180)):
    print(open(os.path.join(c.tmp, "serve.log")).read()[-3000:]); c.finish()


def get(path):
    st, body, _ = c.http(url + path)
    try:
        return st, json.loads(body)
    except ValueError:
        return st, body


def infer(model, x, timeout=60.0):
    body = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                   "data": x.ravel().tolist()}]}).encode()
    st, out, _ = c.http(f"{url}/v2/models/{model}/infer", body, timeout=timeout)
    try:
        d = json.loads(out)
    except ValueError:
        return st, out
    if st != 200:
        return st, d.get("error", "")
    o = d["outputs"][0]
    return st, np.array(o["data"], np.float32).reshape(o["shape"])


def metric(name, model):
    st, body, _ = c.http(url + "/metrics")
    m = re.search(r'^%s\{model="%s",version="1"\} (\S+)$' % (re.escape(name), model),
                  body.decode(), re.M)
    return float(m.group(1)) if m else None


def cache_counts(model="seq"):
    return [metric(f"packrat_session_cache_{k}_total", model) for k in ("hits", "misses",
                                                                          "evictions")]


# ---- metadata and configuration ----
st, meta = get("/v2/models/seq")
c.check("metadata: -1 for the batch and the dynamic axis",
        st == 200 and meta["inputs"][0]["shape"] == [-1, -1, 16]
        and meta["outputs"][0]["shape"] == [-1, -1, 16], meta)
st, cfg = get("/v2/models/seq/config")
c.check("config: the range and the cache bounds",
        st == 200 and cfg["dims"] == {"seq": {"min": 1, "max": 64, "profile_at": 64}}
        and cfg["session_cache"]["max_sessions"] == 3, cfg)
st, cfg = get("/v2/models/seqlist/config")
c.check("config: the list", st == 200 and cfg["dims"] == {"seq": [8, 16, 32]}, cfg)

# ---- concurrent requests of several lengths ----
LENGTHS = [1, 5, 13, 64, 13, 5, 30, 1]
sent = {}
bad = []
lock = threading.Lock()


def client(k):
    r = random.Random(k)
    for i in range(6):
        n = LENGTHS[(k + i) % len(LENGTHS)]
        rows = r.randint(1, 2)
        x = np.asarray(r.random() * 2 - 1 + np.arange(rows * n * 16).reshape(rows, n, 16) % 7 * 0.1,
                       np.float32)
        st, y = infer("seq", x)
        with lock:
            sent[n] = sent.get(n, 0) + 1
            if st != 200 or not np.allclose(y, reference(x), rtol=1e-5, atol=1e-6):
                bad.append((n, rows, st, y if st != 200 else float(np.abs(y - reference(x)).max())))


threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
c.check(f"{sum(sent.values())} concurrent requests of lengths {sorted(sent)}: each as numpy",
        not bad, bad[:3])
st, stats = get("/v2/models/seq/stats")
shapes = stats["model_stats"][0]["packrat"]["shapes"] if st == 200 else {}
served = {s["dims"]["seq"]: s["requests"] for s in shapes.get("served", [])}
c.check("stats: each shape served with the requests sent at it (a batch holds one shape)",
        served == sent and shapes["other_requests"] == 0, (served, sent))
c.check("stats: batches of each shape counted, requests of one shape batched together",
        all(s["batches"] >= 1 and s["rows"] >= s["requests"] for s in shapes["served"])
        and sum(s["batches"] for s in shapes["served"]) < sum(sent.values()), shapes)

# ---- outside the range ----
for n in (65, 200):
    st, msg = infer("seq", np.zeros((1, n, 16), np.float32))
    c.check(f"length {n}: 400 naming the input, the dim and the range",
            st == 400 and "'x'" in msg and "'seq'" in msg and "1..64" in msg, (st, msg))
st, msg = infer("seq", np.zeros((1, 4, 15), np.float32))
c.check("a static axis of another size: 400", st == 400, (st, msg))

# ---- the cache: bounded, least recently used out ----
h0, m0, e0 = cache_counts()
for n in (2, 3, 4, 6):  # four new shapes at one row: the cache (3) was full
    infer("seq", np.ones((1, n, 16), np.float32))
h1, m1, e1 = cache_counts()
c.check("four new shapes: four misses, four evictions", (m1 - m0, e1 - e0) == (4, 4),
        (h0, m0, e0, h1, m1, e1))
infer("seq", np.ones((1, 6, 16), np.float32))  # cached
infer("seq", np.ones((1, 64, 16), np.float32))  # the prepared shape: no cache
h2, m2, e2 = cache_counts()
c.check("a cached shape hits, the prepared one bypasses the cache",
        (h2 - h1, m2 - m1, e2 - e1) == (1, 0, 0), (h1, m1, e1, h2, m2, e2))
infer("seq", np.ones((1, 2, 16), np.float32))  # evicted: compiled again
h3, m3, e3 = cache_counts()
c.check("the least recently used shape was evicted", (m3 - m2, e3 - e2) == (1, 1),
        (h2, m2, e2, h3, m3, e3))
cnt = metric("packrat_session_compile_seconds_count", "seq")
c.check("compile seconds: one observation per miss", cnt == m3, (cnt, m3))

# ---- the list form ----
x = np.full((2, 16, 16), 0.25, np.float32)
st, y = infer("seqlist", x)
c.check("list: a listed length served", st == 200 and np.allclose(y, reference(x), rtol=1e-5))
c.check("list: the listed sizes were compiled ahead (a hit, no miss)",
        cache_counts("seqlist") == [1, 0, 0], cache_counts("seqlist"))
st, msg = infer("seqlist", np.zeros((1, 12, 16), np.float32))
c.check("list: another length gets 400 naming the list",
        st == 400 and "one of 8, 16, 32" in msg, (st, msg))

# ---- two inputs that share the dim ----
def pair_body(nx, nm):
    x, m = np.ones((1, nx, 16), np.float32), np.full((1, nm, 16), 2, np.float32)
    return json.dumps({"inputs": [
        {"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()},
        {"name": "m", "shape": list(m.shape), "datatype": "FP32", "data": m.ravel().tolist()}]
    }).encode()


st, body, _ = c.http(url + "/v2/models/pair/infer", pair_body(9, 9))
c.check("two inputs of one length: served", st == 200
        and json.loads(body)["outputs"][0]["shape"] == [1, 9, 16]
        and set(json.loads(body)["outputs"][0]["data"]) == {3.0}, (st, body[:200]))
st, body, _ = c.http(url + "/v2/models/pair/infer", pair_body(9, 10))
c.check("two inputs that disagree on the dim: 400 naming both",
        st == 400 and b"'seq'" in body and b"input 'x' gives it 9" in body, (st, body))

# ---- the fixed form, unchanged ----
st, meta = get("/v2/models/seqfixed")
c.check("fixed: metadata with the fixed size", st == 200
        and meta["inputs"][0]["shape"] == [-1, 16, 16], meta)
x = np.linspace(-1, 1, 2 * 16 * 16, dtype=np.float32).reshape(2, 16, 16)
st, y = infer("seqfixed", x)
c.check("fixed: served", st == 200 and np.allclose(y, reference(x), rtol=1e-5))
st, msg = infer("seqfixed", np.zeros((1, 17, 16), np.float32))
c.check("fixed: another length gets today's 400",
        st == 400 and "dimension 1 is 17, model expects 16" in msg, (st, msg))
st, stats = get("/v2/models/seqfixed/stats")
fixed = stats["model_stats"][0]["packrat"] if st == 200 else {}
c.check("fixed: no cache, no shapes table", cache_counts("seqfixed") == [0, 0, 0]
        and fixed["shapes"]["served"] == [], fixed)

# ---- a dim the model does not have ----
os.makedirs(os.path.join(repo, "seqbad", "1"))
make_model(os.path.join(repo, "seqbad", "1", "model.onnx"))
with open(os.path.join(repo, "seqbad", "config.json"), "w") as f:
    json.dump({"max_batch_size": 2, "plan": "1x2", "dims": {"sequence": {"max": 8}}}, f)
for f in ("seqbad", "seqbad/1", "seqbad/1/model.onnx", "seqbad/config.json"):
    os.chmod(os.path.join(repo, f), 0o755 if "." not in f else 0o644)
st, body, _ = c.http(url + "/v2/repository/models/seqbad/load", b"{}", timeout=60)
c.check("a range on a dim the model does not have: the load fails naming it",
        st == 400 and b"'sequence' is not a symbolic dimension" in body and b"'seq'" in body,
        (st, body))
c.check("the other models serve on", infer("seq", np.ones((1, 3, 16), np.float32))[0] == 200)

# ---- packrat run: any allowed shape, no --dim ----
x = np.linspace(-2, 2, 3 * 7 * 16, dtype=np.float32).reshape(3, 7, 16)
np.save(os.path.join(c.tmp, "x.npy"), x)
out_dir = os.path.join(c.tmp, "run_out")
r = subprocess.run([packrat, "run", os.path.join(repo, "seq", "1", "model.onnx"), "--input",
                    "x=" + os.path.join(c.tmp, "x.npy"), "--output-dir", out_dir],
                   capture_output=True, text=True, timeout=120)
ok = r.returncode == 0 and os.path.exists(os.path.join(out_dir, "output_0.npy"))
y = np.load(os.path.join(out_dir, "output_0.npy")) if ok else None
c.check("packrat run: an input of length 7 without --dim, as numpy",
        ok and y.shape == (3, 7, 16) and np.allclose(y, reference(x), rtol=1e-5),
        r.stderr[-500:])

p.terminate()
c.check("server stops cleanly", p.wait(60) == 0)
c.finish()
