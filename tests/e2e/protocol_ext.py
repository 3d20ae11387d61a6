#!/usr/bin/python3
"""The Open Inference Protocol extensions clients parse: statistics in the
KServe v2 / Triton schema (per model and for every model) and the model
configuration endpoint. The schema check is written out here (no JSON
Schema package in Debian's base): every key, its type, and that the counts
add up to the requests sent.

usage: protocol_ext.py PACKRAT
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402

packrat = sys.argv[1]
port = c.free_port()
config = {"max_batch_size": 4, "plan": "1x4", "queue_capacity": 77, "max_queue_delay_us": 1500}
repo = c.make_repo(os.path.join(c.tmp, "models"), config=config)
p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port)],
            os.path.join(c.tmp, "serve.log"))
url = f"http://127.0.0.1:{port}"
if not c.check("server ready", c.wait_ready(url, p, 120)):
    c.finish()
N = 25
ok = sum(c.http(url + "/v2/models/mlp/infer", c.MLP_BODY)[0] == 200 for _ in range(N))
c.check(f"{N} requests answered", ok == N)
bad = b'{"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]}'
c.check("a bad request: 400", c.http(url + "/v2/models/mlp/infer", bad)[0] == 400)

COUNT_NS = {"count": int, "ns": int}


def conforms(v, schema, where="$"):
    """None when v has schema's shape, else where it does not."""
    if isinstance(schema, dict):
        if not isinstance(v, dict):
            return where
        for k, sub in schema.items():
            if k not in v:
                return f"{where}.{k} missing"
            bad = conforms(v[k], sub, f"{where}.{k}")
            if bad:
                return bad
        return None
    if isinstance(schema, list):
        if not isinstance(v, list):
            return where
        return next((b for i, x in enumerate(v) if (b := conforms(x, schema[0], f"{where}[{i}]"))),
                    None)
    ok_type = isinstance(v, schema) and not (schema is int and isinstance(v, bool))
    return None if ok_type else f"{where} is {type(v).__name__}"


STATS = {"model_stats": [{
    "name": str, "version": str, "last_inference": int, "inference_count": int,
    "execution_count": int,
    "inference_stats": {k: COUNT_NS for k in ("success", "fail", "queue", "compute_input",
                                              "compute_infer", "compute_output", "cache_hit",
                                              "cache_miss")},
    "batch_stats": [{"batch_size": int, "compute_input": COUNT_NS, "compute_infer": COUNT_NS,
                     "compute_output": COUNT_NS}]}]}
for path in ("/v2/models/mlp/stats", "/v2/models/mlp/versions/1/stats", "/v2/models/stats"):
    st, body, _ = c.http(url + path)
    d = json.loads(body) if st == 200 else {}
    where = conforms(d, STATS) if st == 200 else f"status {st}"
    c.check(f"{path}: the statistics schema", where is None, where)
    if where is None:
        s = d["model_stats"][0]
        inf = s["inference_stats"]
        c.check(f"{path}: counts add up", s["name"] == "mlp" and inf["success"]["count"] == N
                and s["inference_count"] == N and inf["queue"]["count"] == N
                and sum(b["compute_infer"]["count"] for b in s["batch_stats"]) ==
                s["execution_count"] and inf["compute_infer"]["ns"] > 0
                and s["last_inference"] > 1.7e12, s)
st, body, _ = c.http(url + "/v2/models/mlp/config")
d = json.loads(body) if st == 200 else {}
c.check("config: the effective configuration",
        st == 200 and all(d.get(k) == v for k, v in config.items()) and d["platform"] == "onnx"
        and d["inputs"][0]["name"] == "x" and d["request_timeout_ms"] == 30000, d)
c.check("config of an unknown model: 404", c.http(url + "/v2/models/nope/config")[0] == 404)
meta = json.loads(c.http(url + "/v2")[1])
c.check("server metadata lists the extensions",
        {"statistics", "model_configuration", "model_repository"} <= set(meta["extensions"]))
st, body, _ = c.http(url + "/metrics")
c.check("metrics carry the version label",
        'packrat_requests_total{model="mlp",version="1",outcome="success"}' in body.decode())
p.terminate()
c.check("exit 0", p.wait(60) == 0)

# IPv6: the server on ::1 (when this machine has an IPv6 loopback at all)
import socket  # noqa: E402
try:
    with socket.socket(socket.AF_INET6) as probe:
        probe.bind(("::1", 0))
    have_v6 = True
except OSError:
    have_v6 = False
    print("NOTE this machine has no IPv6 loopback: the IPv6 check cannot run here")
if have_v6:
    port6 = c.free_port()
    p6 = c.spawn([packrat, "serve", "--model-repository", repo, "--host", "::1", "--http-port",
                  str(port6)], os.path.join(c.tmp, "serve6.log"))
    url6 = f"http://[::1]:{port6}"
    c.check("IPv6: ready on ::1", c.wait_ready(url6, p6, 120))
    c.check("IPv6: infer", c.http(url6 + "/v2/models/mlp/infer", c.MLP_BODY)[0] == 200)
    p6.terminate()
    c.check("IPv6: exit 0", p6.wait(60) == 0)
r = __import__("subprocess").run([packrat, "serve", "--model-repository", repo, "--host", "localhost"],
                                 capture_output=True, text=True, timeout=30)
c.check("a host that is not an address: exit 1 at once, with the reason",
        r.returncode == 1 and "IPv4 or IPv6" in r.stderr, r.stderr[-200:])
c.finish()
