#!/usr/bin/python3
"""Per-bucket plans against the real server: a model with a symbolic
sequence axis (x [batch, seq, 16] -> MatMul, Add, Softmax), dims
{"seq": {"min": 1, "max": 64}}, plans from its profile that follow the
load (batches 1, 2, 4):

- the plan endpoint names the buckets (3, 8, 23, 64: packrat/buckets.h's
  split of 1..64) and a prepared plan for each (bucket, batch); the live one
  is at 64 (profile_at, the max);
- traffic of short sequences (length 2) from concurrent clients moves the
  live plan to bucket 3 (after the controller's windows down), then traffic
  of long ones (60) moves it back to 64; every request of both phases is
  answered as numpy computes it (none lost or failed across the switches);
- /metrics counts the requests per bucket exactly, the autoscaler's bucket
  gauge follows, the log names the bucket switches;
- profiling cost: the profile_at bucket is profiled on the full grid
  (batches 1..4), the three others on the planned batches only (1, 2, 4).

usage: buckets.py PACKRAT
"""
import json
import os
import re
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402
from seq_model import SeqModel  # noqa: E402

packrat = sys.argv[1]
seq = SeqModel(11)
reference = seq.reference


repo = os.path.join(c.tmp, "models")
os.makedirs(os.path.join(repo, "seq", "1"))
seq.save(os.path.join(repo, "seq", "1", "model.onnx"))
with open(os.path.join(repo, "seq", "config.json"), "w") as f:
    json.dump({"max_batch_size": 4, "max_queue_delay_us": 2000,
               "dims": {"seq": {"min": 1, "max": 64}}}, f)
c.readable(repo)

port = c.free_port()
log = os.path.join(c.tmp, "serve.log")
env = dict(os.environ, PACKRAT_CACHE=os.path.join(c.tmp, "cache"))
p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port)], log,
            env=env)
url = f"http://127.0.0.1:{port}"
if not c.check("server ready", c.wait_ready(url, p, 240)):
    print(open(log).read()[-3000:]); c.finish()


def plan():
    st, body, _ = c.http(url + "/v2/models/seq/plan")
    return json.loads(body) if st == 200 else {}


def bucket_now():
    return (plan().get("bucket") or {}).get("size")


def metrics():
    st, body, _ = c.http(url + "/metrics")
    return body.decode() if st == 200 else ""


def metric(text, name, extra=""):
    m = re.search(r'^%s\{model="seq",version="1"%s\} (\S+)$' % (re.escape(name), extra), text,
                  re.M)
    return float(m.group(1)) if m else None


pl = plan()
sizes = sorted({q["bucket"]["size"] for q in pl.get("prepared", [])})
c.check("plan: buckets 3, 8, 23, 64, a plan for each (bucket, batch), live at 64",
        sizes == [3, 8, 23, 64] and len(pl["prepared"]) == 12
        and pl["bucket"] == {"dim": "seq", "size": 64} and pl["autoscale"], pl)

sent = {2: 0, 60: 0}
bad = []
lock = threading.Lock()
length = [2]
running = [True]


def client(k):
    r = np.random.default_rng(100 + k)
    while running[0]:
        n = length[0]
        x = r.standard_normal((1, n, 16)).astype(np.float32)
        body = json.dumps({"inputs": [{"name": "x", "shape": [1, n, 16], "datatype": "FP32",
                                       "data": x.ravel().tolist()}]}).encode()
        st, out, _ = c.http(f"{url}/v2/models/seq/infer", body, timeout=60)
        ok = st == 200
        if ok:
            o = json.loads(out)["outputs"][0]
            y = np.array(o["data"], np.float32).reshape(o["shape"])
            ok = y.shape == (1, n, 16) and np.allclose(y, reference(x), rtol=1e-5, atol=1e-6)
        with lock:
            sent[n] += 1
            if not ok:
                bad.append((n, st, out[:200]))


def wait_bucket(size, seconds):
    t0 = time.time()
    while time.time() - t0 < seconds:
        if bucket_now() == size:
            return time.time() - t0
        time.sleep(0.2)
    return None


threads = [threading.Thread(target=client, args=(k,)) for k in range(3)]
for t in threads:
    t.start()
down = wait_bucket(3, 20)  # three windows in a row of short requests, then the switch
c.check("short sequences: the live plan moves to bucket 3", down is not None, plan())
length[0] = 60
up = wait_bucket(64, 10)  # up at once: the next window
c.check("long sequences: the live plan moves back to bucket 64", up is not None, plan())
time.sleep(0.5)
running[0] = False
for t in threads:
    t.join()
print(f"requests: {sent}; down after {down} s, up after {up} s")
c.check("every request answered as numpy computes it, none failed", not bad and
        sent[2] > 0 and sent[60] > 0, bad[:3])
text = metrics()
c.check("/metrics: requests per bucket, exactly",
        metric(text, "packrat_bucket_requests_total", ',bucket="3"') == sent[2]
        and metric(text, "packrat_bucket_requests_total", ',bucket="64"') == sent[60]
        and metric(text, "packrat_bucket_requests_total", ',bucket="8"') == 0, text[-600:])
c.check("/metrics: the autoscaler's bucket is 64, reconfigured at least twice",
        metric(text, "packrat_autoscaler_bucket_size") == 64
        and metric(text, "packrat_reconfigurations_total") >= 2)
reasons = {k: metric(text, "packrat_autoscaler_decisions_total", f',reason="{k}"')
           for k in ("estimate", "held_by_backlog", "raised_by_backlog", "held_by_rate")}
c.check("/metrics: the autoscaler's windows by reason, its target plan's planned capacity and the "
        "backlog at its window's start",
        None not in reasons.values() and sum(reasons.values()) >= 2
        and (metric(text, "packrat_autoscaler_target_capacity") or 0) > 0
        and metric(text, "packrat_autoscaler_backlog_start") is not None,
        (reasons, metric(text, "packrat_autoscaler_target_capacity")))
p.terminate()
c.check("server stops cleanly", p.wait(60) == 0)
text = open(log).read()
cols = sorted(int(pts) // int(cores) for cores, pts in
              re.findall(r"model seq: profiling on (\d+) cores, batches up to 4 \((\d+) points\)",
                         text))
c.check("profiles: profile_at's on the full grid (batches 1..4), the other buckets' on the "
        "planned batches (1, 2, 4)", cols == [3, 3, 3, 4], cols)
c.check("the log names the bucket switches",
        "shape bucket seq <= 3 (was <= 64)" in text and "shape bucket seq <= 64 (was <= 3)" in text
        and "reconfigured" in text, text[-1500:])
c.finish()
