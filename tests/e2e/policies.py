#!/usr/bin/python3
"""Version policies and the schedule-policy request parameters, against the
real server:

- a model folder with versions 1, 2 and 3: the default policy serves 3 only;
  {"latest": {"num_versions": 2}} serves 2 and 3 at once (metadata, infer by
  version, the metrics' version label, the repository index);
  {"specific": {"versions": [1]}} serves 1 and unloads 2 and 3;
  {"all": {}} serves all three; a malformed policy is refused with 400 and
  changes nothing; the config endpoint reports the policy.
- "priority": while one request runs on the slow chain model (one instance,
  batch 16; the first request 256 rows, in 16 passes), four requests at
  priority 10 queue, then one at priority 1: it is answered before every
  one of the four. A priority beyond the levels: 400.
- "timeout" (microseconds): a request whose timeout the requests queued
  ahead of it cannot meet is refused at once: 503 with Retry-After; the
  requests around it are answered. One with nothing queued ahead is
  admitted, and if the batch running keeps it waiting past its timeout it
  gets 504 at the deadline.

usage: policies.py PACKRAT
"""
import json
import os
import re
import shutil
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402

packrat = sys.argv[1]
repo = c.make_repo(os.path.join(c.tmp, "models"))
for v in ("2", "3"):
    shutil.copytree(os.path.join(repo, "mlp", "1"), os.path.join(repo, "mlp", v))
made = os.path.join(c.tmp, "made")
os.makedirs(os.path.join(repo, "chain", "1"))
shutil.copy(os.path.join(made, "chain.onnx"), os.path.join(repo, "chain", "1", "model.onnx"))
with open(os.path.join(repo, "chain", "config.json"), "w") as f:
    json.dump({"max_batch_size": 256, "plan": "1x16", "max_queue_delay_us": 0}, f)
port = c.free_port()
p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port)],
            os.path.join(c.tmp, "serve.log"))
url = f"http://127.0.0.1:{port}"
if not c.check("server ready", c.wait_ready(url, p, 180)):
    c.finish()


def get(path):
    st, body, _ = c.http(url + path)
    return st, (json.loads(body) if body.startswith(b"{") or body.startswith(b"[") else body)


def post(path, obj, timeout=60.0):
    st, body, _ = c.http(url + path, json.dumps(obj).encode(), timeout=timeout)
    try:
        return st, json.loads(body)
    except ValueError:
        return st, body


def served_versions():
    """The versions that answer infer, and those the metadata lists."""
    answering = [v for v in ("1", "2", "3")
                 if c.http(f"{url}/v2/models/mlp/versions/{v}/infer", c.MLP_BODY)[0] == 200]
    st, meta = get("/v2/models/mlp")
    return answering, (sorted(meta["versions"]) if st == 200 else None)


def set_policy(policy):
    with open(os.path.join(repo, "mlp", "config.json"), "w") as f:
        json.dump({"version_policy": policy} if policy is not None else {}, f)
    return post("/v2/repository/models/mlp/load", {})


# the default policy: the latest version only
c.check("default policy: version 3 alone", served_versions() == (["3"], ["3"]),
        served_versions())
st, d = post("/v2/models/mlp/infer", json.loads(c.MLP_BODY))
c.check("infer without a version: the highest", st == 200 and d.get("model_version") == "3", d)

st, _ = set_policy({"latest": {"num_versions": 2}})
c.check("latest 2: load 200", st == 200)
c.check("latest 2: versions 2 and 3 served at once", served_versions() == (["2", "3"], ["2", "3"]),
        served_versions())
st, cfg = get("/v2/models/mlp/versions/2/config")
c.check("config reports the policy", st == 200 and cfg.get("version_policy") ==
        {"latest": {"num_versions": 2}} and cfg.get("version") == "2", cfg)
metrics = c.http(url + "/metrics")[1].decode()
c.check("metrics: one series per served version",
        all(f'packrat_requests_total{{model="mlp",version="{v}",outcome="success"}}' in metrics
            for v in ("2", "3")))
st, index = post("/v2/repository/index", {})
states = {(e["name"], e["version"]): e["state"] for e in index} if st == 200 else {}
c.check("index lists each version with its state",
        states.get(("mlp", "2")) == "READY" and states.get(("mlp", "3")) == "READY", index)

st, _ = set_policy({"specific": {"versions": [1]}})
c.check("specific [1]: load 200", st == 200)
c.check("specific [1]: version 1 alone; 2 and 3 unloaded", served_versions() == (["1"], ["1"]),
        served_versions())
st, d = post("/v2/models/mlp/infer", json.loads(c.MLP_BODY))
c.check("infer without a version: the one served", st == 200 and d.get("model_version") == "1", d)
st, index = post("/v2/repository/index", {})
reasons = {e["version"]: e["reason"] for e in index if e["name"] == "mlp"} if st == 200 else {}
c.check("index: why 3 left", "version policy" in reasons.get("3", ""), index)

st, _ = set_policy({"all": {}})
c.check("all: every version served",
        st == 200 and served_versions() == (["1", "2", "3"], ["1", "2", "3"]), served_versions())

for bad in ({"latest": {"num_versions": 0}}, {"specific": {"versions": []}}, {"newest": {}},
            {"all": {}, "latest": {"num_versions": 1}}, "all"):
    st, d = set_policy(bad)
    c.check(f"bad policy {json.dumps(bad)}: 400 naming the setting",
            st == 400 and "version_policy" in d.get("error", ""), (st, d))
c.check("a refused policy changes nothing", served_versions() == (["1", "2", "3"], ["1", "2", "3"]),
        served_versions())
st, d = set_policy({"specific": {"versions": [9]}})
c.check("a policy that selects no version there: 400", st == 400 and "selects no version" in
        d.get("error", ""), (st, d))

# priority: one instance, batch 16; a request is 64 rows of the chain (four
# passes), the first one 256 (16 passes, while the others queue)


def chain_body(rows=64, binary=False, **params):
    """(body, headers): the input as a binary tensor (parsing 32768 JSON numbers
    would take the server longer than the pass under a sanitizer, and the
    order the requests reach the queue would be the parser's)."""
    raw = struct.pack("<f", 0.01) * (rows * 512)
    body = {"inputs": [{"name": "x", "shape": [rows, 512], "datatype": "FP32",
                        "parameters": {"binary_data_size": len(raw)}}]}
    if params:
        body["parameters"] = params
    if binary:
        body.setdefault("parameters", {})["binary_data_output"] = True
    head = json.dumps(body).encode()
    return head + raw, {"Inference-Header-Content-Length": str(len(head))}


def post_body(path, body, timeout=120.0):
    st, out, _ = c.http(url + path, body[0], timeout=timeout, headers=body[1])
    return st, (json.loads(out) if out.startswith(b"{") else out)


t0 = time.time()
st, _ = post_body("/v2/models/chain/infer", chain_body())
one = time.time() - t0
c.check(f"chain: one request answered ({one * 1e3:.0f} ms)", st == 200)
done = {}


def send(name, delay, body):
    # the answer's time is taken as its bytes arrive, before any parsing: five
    # client threads share one interpreter, and parsing a JSON answer of
    # 32768 numbers under the GIL reorders answers that came a pass apart
    time.sleep(delay)
    st, _, _ = c.http(url + "/v2/models/chain/infer", body[0], timeout=120.0, headers=body[1])
    done[name] = (st, time.time())


sent = {}


def queue_stats():
    """(requests queued, requests taken from the queue so far) from /metrics."""
    text = c.http(url + "/metrics")[1].decode()
    depth = re.search(r'^packrat_queue_depth\{model="chain",version="1"\} (\S+)$', text, re.M)
    taken = re.search(r'^packrat_queue_duration_seconds_count\{model="chain",version="1"\} (\S+)$', text,
                      re.M)
    return float(depth.group(1)) if depth else -1, float(taken.group(1)) if taken else -1


def send_at(name, ready, body):
    """Sends body once ready(depth, taken) holds (10 s at most)."""
    t = time.time()
    while time.time() - t < 10 and not ready(*queue_stats()):
        time.sleep(0.005)
    sent[name] = time.time()
    st, out, headers = c.http(url + "/v2/models/chain/infer", body[0], timeout=120, headers=body[1])
    done[name] = (st, time.time(), headers.get("Retry-After"), out[:300])


# the first (16 passes) runs; the four low ones are sent once the instance
# took it, the high one once they all wait: the order they queue in is the
# server's own, whatever the speed of the machine or the client
taken0 = queue_stats()[1]
threads = [threading.Thread(target=send, args=("first", 0, chain_body(256, binary=True)))]
threads += [threading.Thread(target=send_at, args=(f"low{i}", lambda depth, taken: taken > taken0,
                                                   chain_body(priority=10, binary=True)))
            for i in range(4)]
threads += [threading.Thread(target=send_at, args=("high", lambda depth, taken: depth >= 4,
                                                   chain_body(priority=1, binary=True)))]
for t in threads:
    t.start()
for t in threads:
    t.join()
c.check("priority: every request answered", all(v[0] == 200 for v in done.values()), done)
high = done["high"][1]
lows = [done[f"low{i}"][1] for i in range(4)]
c.check("priority 1 answered before the four priority-10 requests queued earlier",
        all(high < t for t in lows), {k: round(v[1] - t0, 3) for k, v in done.items()})
for bad in ({"priority": 11}, {"priority": -1}, {"priority": "high"}, {"timeout": -5},
            {"priority": 2**63 - 1}):
    st, d = post_body("/v2/models/chain/infer", chain_body(**bad))
    key = next(iter(bad))
    number = isinstance(bad[key], int)
    c.check(f"bad parameter {bad}: 400" + (", the error names the range" if number else ""),
            st == 400 and "error" in d and f"'{key}' must" in d["error"]
            and ("to " in d["error"] if key == "priority" and number else True), (st, d))

# timeout: a request whose 1 ms the requests queued ahead cannot meet is
# refused at once (503, Retry-After), not left to time out
done.clear()
sent.clear()
threads = [threading.Thread(target=send, args=(f"busy{i}", 0.001 * i, chain_body()))
           for i in range(3)]
# sent once two of them wait in the queue (the third runs)
threads += [threading.Thread(target=send_at, args=("short", lambda depth, taken: depth >= 2,
                                                   chain_body(timeout=1000)))]
for t in threads:
    t.start()
for t in threads:
    t.join()
st, at, retry, text = done["short"]
c.check("timeout: the request the queue ahead cannot serve in time gets 503 at once",
        st == 503 and at - sent["short"] < one and b"timeout" in text, done["short"])
c.check("timeout: with a Retry-After", retry is not None and retry.isdigit(), retry)
c.check("timeout: the others are answered", all(done[f"busy{i}"][0] == 200 for i in range(3)), done)
# nothing queued ahead, but the instance busy with 256 rows (16 passes;
# sent once the instance took them): admitted, then 504 at its 1 ms deadline
done.clear()
taken0 = queue_stats()[1]
threads = [threading.Thread(target=send, args=("long", 0, chain_body(256))),
           threading.Thread(target=send_at, args=("short", lambda depth, taken: depth == 0 and taken > taken0,
                                                  chain_body(timeout=1000)))]
for t in threads:
    t.start()
for t in threads:
    t.join()
c.check("timeout: admitted behind a running batch, past its deadline: 504", done["short"][0] == 504,
        done)
c.check("timeout: the long request answered", done["long"][0] == 200, done)
st, d = post_body("/v2/models/chain/infer", chain_body(timeout=60 * 10**6))
c.check("a generous timeout: answered", st == 200)
p.terminate()
c.check("exit 0", p.wait(60) == 0)
c.finish()
