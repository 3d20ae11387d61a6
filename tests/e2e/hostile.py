#!/usr/bin/python3
"""Hostile clients and faults: each finding is one test that starts the real
server on a loopback port, attacks it as a client or an operator would, and
checks that it answers correctly, stays up and changes nothing else.

usage: hostile.py FINDING PACKRAT MODELS_DIR
FINDING: crash race arithmetic overwrite overread memory caps datatypes
         timeout models http symlinks grpc_memory answers_http answers_grpc
"""
import http.client
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def check(name, cond, detail=""):
    print(("PASS " if cond else "FAIL ") + name + ("" if cond else f"  [{detail}]"), flush=True)
    if not cond:
        failures.append(name)


SERVERS = []  # every server started; killed on exit, whatever happened


class Server:
    """`packrat serve` on a free loopback port, over a repository folder."""

    def __init__(self, packrat, repo, *flags, env=None, wait=120):
        self.log = tempfile.NamedTemporaryFile("w+", dir=TMP, prefix="server-", suffix=".log",
                                               delete=False)
        e = dict(os.environ, **(env or {}))
        self.p = subprocess.Popen([packrat, "serve", "--model-repository", repo, "--http-port", "0",
                                   *flags], stdout=self.log, stderr=subprocess.STDOUT, env=e)
        SERVERS.append(self.p)
        deadline = time.time() + wait
        self.port = None
        while time.time() < deadline and self.p.poll() is None:
            m = re.search(r"ready: http://127\.0\.0\.1:(\d+)", self.text())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.1)
        if not self.port:
            print(self.text())
            raise SystemExit("server did not start")
        m = re.search(r"ready: .*gRPC[^:]*: [^ ]*:(\d+)", self.text())
        self.grpc_port = int(m.group(1)) if m else None

    def text(self):
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def alive(self):
        return self.p.poll() is None

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, body bytes, headers); status 0 when the connection failed."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, r.read(), dict(r.getheaders())
        except (OSError, http.client.HTTPException) as ex:
            return 0, str(ex).encode(), {}
        finally:
            c.close()

    def json(self, method, path, body=None, **kw):
        st, b, _ = self.request(method, path, body, **kw)
        try:
            return st, json.loads(b.decode("utf-8"))  # strict: the body must be UTF-8 JSON
        except (ValueError, UnicodeDecodeError):
            return st, None

    def rss_kb(self, field="VmRSS"):
        with open(f"/proc/{self.p.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def stop(self, timeout=30):
        """SIGTERM; True when it exits 0 within timeout."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(timeout) == 0
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return False


def repo_with(models, configs=None):
    """A repository folder: {name: onnx path}, {name: config dict}."""
    repo = tempfile.mkdtemp(dir=TMP)
    for name, path in models.items():
        os.makedirs(f"{repo}/{name}/1")
        os.symlink(path, f"{repo}/{name}/1/model.onnx")
        if configs and name in configs:
            with open(f"{repo}/{name}/config.json", "w") as f:
                json.dump(configs[name], f)
    return repo


def mlp_body(rows=1, **extra):
    b = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [rows, 4],
                     "data": [0.5] * (4 * rows)}]}
    b.update(extra)
    return b


def still_serving(s, name):
    st, d = s.json("POST", "/v2/models/mlp/infer", mlp_body())
    check(f"still serving after {name}", st == 200 and d and d["outputs"][0]["shape"] == [1, 3],
          f"{st} {d}")


# ---- findings ----

def t_crash(packrat, models):
    """Bytes that are not UTF-8 in names and specs: valid JSON errors, no crash."""
    repo = repo_with({"mlp": MM["mlp"]}, {"mlp": {"max_batch_size": 4, "plan": "1x1"}})
    s = Server(packrat, repo)
    cases = [
        ("load of name %FF", "POST", "/v2/repository/models/%FF/load", None, 404),
        ("unload of name %FF", "POST", "/v2/repository/models/%FF/unload", None, 404),
        ("ready of name %FF", "GET", "/v2/models/%FF/ready", None, 404),
        ("infer of name %C3%28", "POST", "/v2/models/%C3%28/infer", mlp_body(), 404),
        ("input name of 300 x e-acute", "POST", "/v2/models/mlp/infer",
         {"inputs": [{"name": "\u00e9" * 300, "datatype": "FP32", "shape": [1, 4],
                      "data": [1, 2, 3, 4]}]}, 400),
        ("plan spec of 300 x e-acute", "POST", "/v2/models/mlp/plan", {"plan": "\u00e9" * 300}, 400),
        ("raw 0xFF byte in the JSON body", "POST", "/v2/models/mlp/infer",
         b'{"inputs":[{"name":"x\xff","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}', 400),
        ("raw 0xFF byte in a plan body", "POST", "/v2/models/mlp/plan", b'{"plan":"1x\xff"}', 400),
        ("output name not UTF-8", "POST", "/v2/models/mlp/infer",
         b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}],'
         b'"outputs":[{"name":"\xc3"}]}', 400),
        ("id not UTF-8", "POST", "/v2/models/mlp/infer",
         b'{"id":"\xed\xa0\x80","inputs":[{"name":"x","datatype":"FP32","shape":[1,4],'
         b'"data":[1,2,3,4]}]}', 400),
        ("deep nesting", "POST", "/v2/models/mlp/infer", b"[" * 100000 + b"]" * 100000, 400),
    ]
    for name, method, path, body, want in cases:
        st, d = s.json(method, path, body)
        check(f"{name}: {want} with a JSON error body", st == want and d and "error" in d,
              f"{st} {d}")
        check(f"alive after {name}", s.alive())
    still_serving(s, "invalid text")
    check("SIGTERM exits 0", s.stop())


def t_race(packrat, models):
    """Concurrent plan posts, new plans, auto on/off, load/unload during inference."""
    repo = repo_with({"mlp": MM["mlp"]}, {"mlp": {"max_batch_size": 4, "max_queue_delay_us": 200}})
    s = Server(packrat, repo, "--max-prepared-plans", "6")
    errors = []

    def post(spec):
        st, d = s.json("POST", "/v2/models/mlp/plan", {"plan": spec})
        if st not in (200, 400) or d is None:
            errors.append((spec, st, d))

    # two identical posts at once, then ten different new plans at once, twice over
    for rnd in range(2):
        ts = [threading.Thread(target=post, args=("1x2,1x2",)) for _ in range(2)]
        specs = ["1x1", "1x2", "1x3", "1x4", "2x4", "2x1", "1x1,1x1", "1x1,1x3", "1x3,1x1", "2x2"]
        ts += [threading.Thread(target=post, args=(p,)) for p in specs]
        ts += [threading.Thread(target=post, args=("auto",)) for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        check(f"round {rnd}: every plan post answered", not any(t.is_alive() for t in ts))
    check("plan posts: 200 or 400 with JSON", not errors, str(errors[:3]))
    st, d = s.json("GET", "/v2/models/mlp/plan")
    check("plan readable, at most 6 prepared", st == 200 and len(d["prepared"]) <= 6, f"{st} {d}")
    still_serving(s, "concurrent plan posts")
    # inference while loading/unloading and switching plans
    stop = threading.Event()
    bad = []

    def client():
        while not stop.is_set():
            st, d = s.json("POST", "/v2/models/mlp/infer", mlp_body())
            if st not in (200, 404, 503) or (st == 200 and d["outputs"][0]["shape"] != [1, 3]):
                bad.append((st, d))

    def admin():
        for i in range(6):
            s.json("POST", "/v2/repository/models/mlp/unload")
            s.json("POST", "/v2/repository/models/mlp/load")
            s.json("POST", "/v2/models/mlp/plan", {"plan": ["1x1", "1x2,1x2", "auto"][i % 3]})

    cs = [threading.Thread(target=client) for _ in range(4)]
    for t in cs:
        t.start()
    a = threading.Thread(target=admin)
    a.start()
    a.join(300)
    stop.set()
    for t in cs:
        t.join(60)
    check("load/unload during inference: finished", not a.is_alive())
    check("load/unload during inference: answers 200/404/503 only, correct shapes", not bad,
          str(bad[:3]))
    st, _ = s.json("POST", "/v2/repository/models/mlp/load")
    still_serving(s, "load/unload during inference")
    t0 = time.time()
    check("SIGTERM exits 0 promptly", s.stop(60) and time.time() - t0 < 60)
    # the autoscaler switching while requests flow: pinned by hand to a plan
    # of batch 4 the optimizer never makes (an instance of 3 beside one of 1;
    # 1x4 on one core), then handed back: it moves to its own plan. Three
    # rounds, while another client reads the plan.
    repo = repo_with({"chain": MM["chain"]},
                     {"chain": {"max_batch_size": 4, "max_queue_delay_us": 2000}})
    s = Server(packrat, repo, wait=300)
    stop.clear()
    seen, bad = [], []

    def light_client():
        while not stop.is_set():
            st, d = s.json("POST", "/v2/models/chain/infer",
                           {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 512],
                                        "data": [0.01] * 512}]})
            if st != 200:
                bad.append(st)
            time.sleep(0.02)

    def reader():
        while not stop.is_set():
            seen.append(s.json("GET", "/v2/models/chain/plan")[0])
            time.sleep(0.05)

    ts = [threading.Thread(target=light_client), threading.Thread(target=reader)]
    for t in ts:
        t.start()
    switched = 0
    for rnd in range(3):
        pin = "1x1,1x3" if len(os.sched_getaffinity(0)) >= 2 else "1x4"
        seen.append(s.json("POST", "/v2/models/chain/plan", {"plan": pin})[0])
        before = len(re.findall(r"reconfigured .*target batch", s.text()))
        seen.append(s.json("POST", "/v2/models/chain/plan", {"plan": "auto"})[0])
        deadline = time.time() + 20
        while time.time() < deadline:
            if len(re.findall(r"reconfigured .*target batch", s.text())) > before:
                switched += 1
                break
            time.sleep(0.2)
    stop.set()
    for t in ts:
        t.join(60)
    check("the autoscaler switched in each of 3 rounds", switched == 3, s.text()[-600:])
    check("requests during the switches: all 200", not bad, str(bad[:5]))
    check("plan reads and posts: all 200", seen and all(x == 200 for x in seen), str(seen[:20]))
    check("SIGTERM exits 0", s.stop(60))


def t_arithmetic(packrat, models):
    """Integer Div of INT_MIN by -1 and by 0, Add overflow, on client data."""
    repo = repo_with({"intdiv": MM["intdiv"], "mlp": MM["mlp"]},
                     {"intdiv": {"max_batch_size": 2, "plan": "1x2"},
                      "mlp": {"max_batch_size": 2, "plan": "1x1"}})
    s = Server(packrat, repo)
    lo, lo32 = -2**63, -2**31
    body = {"inputs": [
        {"name": "a", "datatype": "INT64", "shape": [1, 2], "data": [lo, 7]},
        {"name": "b", "datatype": "INT64", "shape": [1, 2], "data": [-1, 0]},
        {"name": "c", "datatype": "INT32", "shape": [1, 2], "data": [lo32, 7]},
        {"name": "d", "datatype": "INT32", "shape": [1, 2], "data": [-1, 0]}]}
    st, d = s.json("POST", "/v2/models/intdiv/infer", body)
    check("INT_MIN / -1 and x / 0 answered", st == 200, f"{st} {d}")
    if st == 200:
        out = {o["name"]: o["data"] for o in d["outputs"]}
        check("int64: INT_MIN / -1 = INT_MIN, 7 / 0 = 0", out["q"] == [lo, 0], str(out))
        check("int32: INT_MIN / -1 = INT_MIN, 7 / 0 = 0", out["q32"] == [lo32, 0], str(out))
        check("int64 add wraps: INT_MIN + -1 = INT64_MAX", out["s"][0] == 2**63 - 1, str(out))
    check("alive", s.alive())
    still_serving(s, "integer edge cases")
    s.stop()


def t_overwrite(packrat, models):
    """No writable cache directory: a warning, config.json untouched, restarts."""
    repo = repo_with({"mlp": MM["mlp"]}, {"mlp": {"max_batch_size": 2}})
    cfg = f"{repo}/mlp/config.json"
    before = open(cfg, "rb").read()
    blocker = os.path.join(TMP, "not-a-dir")
    open(blocker, "w").write("a file where the cache folder should be\n")
    env = {"PACKRAT_CACHE": blocker + "/cache"}
    for run in range(2):
        s = Server(packrat, repo, env=env)
        st, _ = s.json("POST", "/v2/models/mlp/infer", mlp_body())
        check(f"start {run + 1}: served", st == 200)
        check(f"start {run + 1}: cache failure is a warning",
              re.search(r"(?i)warn.*cache", s.text()) is not None, s.text()[-400:])
        s.stop()
    check("config.json unchanged", open(cfg, "rb").read() == before)
    check("the blocking file unchanged",
          open(blocker).read() == "a file where the cache folder should be\n")


def t_overread(packrat, models):
    """A model whose output has no batch axis is refused at load, with the reason."""
    repo = repo_with({"nobatch": MM["nobatch"], "mlp": MM["mlp"]},
                     {"nobatch": {"max_batch_size": 4, "plan": "1x4"},
                      "mlp": {"max_batch_size": 2, "plan": "1x1"}})
    s = Server(packrat, repo)
    st, d = s.json("POST", "/v2/repository/index")
    entry = [e for e in d if e["name"] == "nobatch"][0] if d else {}
    check("refused at load", entry.get("state") == "UNAVAILABLE", str(entry))
    check("the reason names the batch axis", "batch axis" in entry.get("reason", ""), str(entry))
    st, d = s.json("POST", "/v2/models/nobatch/infer",
                   {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "data": [0] * 8}]})
    check("infer on it: 503, not other memory", st == 503 and d and "error" in d, f"{st} {d}")
    st, d = s.json("POST", "/v2/repository/models/nobatch/load")
    check("load by hand: refused with the reason", st == 400 and "batch axis" in d["error"],
          f"{st} {d}")
    still_serving(s, "a model without batch axis")
    s.stop()


def t_memory(packrat, models):
    """60 MB JSON bodies cost at most 5x the body; plan switches and requests leak nothing."""
    repo = repo_with({"mlp": MM["mlp"]}, {"mlp": {"max_batch_size": 4, "max_queue_delay_us": 100}})
    s = Server(packrat, repo, "--max-prepared-plans", "4")
    body = (b'{"inputs":[{"name":"x","datatype":"FP32","shape":[4,4],"data":['
            + b"0.125," * 10_000_000 + b'0]}]}')
    size_kb = len(body) // 1024
    for _ in range(20):
        s.json("POST", "/v2/models/mlp/infer", mlp_body())
    with open(f"/proc/{s.p.pid}/clear_refs", "w") as f:
        f.write("5")  # resets the peak resident size
    base = s.rss_kb()
    st, d = s.json("POST", "/v2/models/mlp/infer", body)
    check("60 MB body of the wrong size: 400", st == 400 and d and "error" in d, f"{st} {d}")
    peak = s.rss_kb("VmHWM")
    check(f"peak growth {peak - base} kB <= 5 x body ({size_kb} kB)",
          peak - base <= 5 * size_kb)
    # three at once
    with open(f"/proc/{s.p.pid}/clear_refs", "w") as f:
        f.write("5")
    base = s.rss_kb()
    ts = [threading.Thread(target=s.json, args=("POST", "/v2/models/mlp/infer", body))
          for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    peak = s.rss_kb("VmHWM")
    check(f"three at once: peak growth {peak - base} kB <= 3 x 5 x body",
          peak - base <= 15 * size_kb)
    time.sleep(0.5)
    # plan switches and requests: resident memory back within 10%. Five hand
    # plans and the three autoscale ones over a limit of four prepared plans:
    # every switch evicts one and prepares another. The first visit of each
    # plan and request size (threads, their malloc arenas, oneDNN's kernel
    # cache) and the first few evictions (the allocator's free lists settle
    # in about 20 switches) are the warm-up; what is checked is that the
    # churn after it does not grow.
    specs = ["1x2,1x2", "1x4", "2x4", "1x1", "1x3"]
    for sp in specs * 4:  # every plan, with every request size it will see
        s.json("POST", "/v2/models/mlp/plan", {"plan": sp})
        for rows in range(1, 5):
            s.json("POST", "/v2/models/mlp/infer", mlp_body(rows=rows))
    for _ in range(50):
        s.json("POST", "/v2/models/mlp/infer", mlp_body())
    after50 = s.rss_kb()
    for i in range(100):
        st, d = s.json("POST", "/v2/models/mlp/plan", {"plan": specs[i % len(specs)]})
        if st != 200 or len(d["prepared"]) > 4:
            check(f"plan switch {i}", False, f"{st} {d}")
            break
        for _ in range(10):
            s.json("POST", "/v2/models/mlp/infer", mlp_body(rows=1 + i % 4))
    end = s.rss_kb()
    check(f"after 100 switches and 1000 requests: {end} kB within 10% of {after50} kB",
          end <= after50 * 1.10, f"{end} vs {after50}")
    still_serving(s, "memory attacks")
    s.stop()


def t_caps(packrat, models):
    """Batch sizes per instance and prepared plans are bounded without failing requests."""
    repo = repo_with({"mlp": MM["mlp"]},
                     {"mlp": {"max_batch_size": 64, "plan": "1x1", "max_queue_delay_us": 0}})
    s = Server(packrat, repo, "--max-prepared-plans", "3")
    codes = [s.json("POST", "/v2/models/mlp/infer", mlp_body(rows=r))[0] for r in range(1, 65)]
    check("every batch size 1..64 on one instance: 200", all(c == 200 for c in codes),
          str(codes))
    codes = [s.json("POST", "/v2/models/mlp/infer", mlp_body(rows=r))[0] for r in (33, 47, 64)]
    check("and again", all(c == 200 for c in codes), str(codes))
    specs = ["1x1", "1x2", "1x3", "1x4", "1x5", "2x8", "1x2,1x2", "1x16"]
    for sp in specs:
        st, d = s.json("POST", "/v2/models/mlp/plan", {"plan": sp})
        check(f"plan {sp}: 200, at most 3 prepared", st == 200 and len(d["prepared"]) <= 3,
              f"{st} {d}")
    t0 = time.time()
    st, d = s.json("POST", "/v2/models/mlp/plan", {"plan": "auto"}, timeout=20)
    check("auto on a model whose config fixes the plan: 400 at once",
          st == 400 and time.time() - t0 < 5, f"{st} {d}")
    st, d = s.json("POST", "/v2/models/mlp/infer", mlp_body(), timeout=20)
    check("and it serves on", st == 200, f"{st} {d}")
    st, d = s.json("GET", "/v2/models/mlp/stats")
    check("evictions reported",
          st == 200 and d["model_stats"][0]["packrat"]["prepared_plans_evicted"] >= 5, str(d))
    for bad in ["1x1,", " 1x1", "+1x1", "1X1", "1x+1", "1x1,,1x1"]:
        st, d = s.json("POST", "/v2/models/mlp/plan", {"plan": bad})
        check(f"plan spec {bad!r}: 400", st == 400, f"{st} {d}")
    st, d = s.json("POST", "/v2/models/mlp/plan", {"plan": "3x1"})
    check("a plan needing 3 cores: 400 with the reason", st == 400 and "cores" in d["error"],
          f"{st} {d}")
    st2, d2 = s.json("POST", "/v2/models/mlp/plan", {"plan": "3x1"})
    check("re-posting it: 400 again", st2 == 400, f"{st2} {d2}")
    st, d = s.json("GET", "/v2/models/mlp/plan")
    check("the failed plan is not prepared",
          all(p["plan"] != "3x1" for p in d["prepared"]) and d["instances"][0]["batch"] == 16,
          str(d))
    st, text, _ = s.request("GET", "/metrics")
    check("evictions in /metrics",
          re.search(rb'packrat_prepared_plans_evicted_total\{model="mlp",version="1"\} [1-9]', text) is not None)
    still_serving(s, "caps")
    s.stop()


def t_datatypes(packrat, models):
    """Every datatype both ways; NaN and Inf kept; long ids intact; ragged data refused."""
    repo = repo_with({"types": MM["types"], "mlp": MM["mlp"]},
                     {"types": {"max_batch_size": 2, "plan": "1x2"},
                      "mlp": {"max_batch_size": 2, "plan": "1x1"}})
    s = Server(packrat, repo)
    data = {"f64": ["NaN", "Infinity", "-Infinity"], "f16": [0.5, 65504, -0.0009765625],
            "u64": [0, 2**63, 2**64 - 1], "u32": [0, 7, 2**32 - 1], "u16": [1, 2, 65535],
            "i8": [-128, 0, 127], "b": [True, False, True], "f32": ["NaN", 1.5, "-Infinity"]}
    types = {"f64": "FP64", "f16": "FP16", "u64": "UINT64", "u32": "UINT32", "u16": "UINT16",
             "i8": "INT8", "b": "BOOL", "f32": "FP32"}
    ident = "r" * 1000 + "\u00e9"
    body = {"id": ident, "inputs": [{"name": k, "datatype": types[k], "shape": [1, 3], "data": v}
                                    for k, v in data.items()]}
    st, d = s.json("POST", "/v2/models/types/infer", body)
    check("all datatypes: 200", st == 200, f"{st} {d}")
    if st == 200:
        check("id of 1000+ bytes echoed intact", d.get("id") == ident)
        out = {o["name"][:-4]: o for o in d["outputs"]}
        for k, v in data.items():
            o = out.get(k, {})
            check(f"{types[k]}: datatype, shape and every value back",
                  o.get("datatype") == types[k] and o.get("shape") == [1, 3] and o.get("data") == v,
                  str(o))
    # binary output keeps NaN bits too
    body = {"inputs": [{"name": k, "datatype": types[k], "shape": [1, 3], "data": v}
                       for k, v in data.items()],
            "outputs": [{"name": "f64_out", "parameters": {"binary_data": True}}]}
    st, raw, hdr = s.request("POST", "/v2/models/types/infer", json.dumps(body).encode())
    n = int(hdr.get("Inference-Header-Content-Length", "0"))
    import struct
    vals = struct.unpack("<3d", raw[n:n + 24]) if st == 200 and len(raw) >= n + 24 else ()
    check("binary FP64 output keeps NaN/Inf", len(vals) == 3 and math.isnan(vals[0])
          and vals[1] == math.inf and vals[2] == -math.inf, f"{st} {vals}")
    for name, bad in [
        ("ragged nested data", [[0.5, 0.5, 0.5, 0.5], [0.5]]),
        ("nested deeper than the shape", [[[0.5, 0.5, 0.5, 0.5]], [[0.5, 0.5, 0.5, 0.5]]]),
        ("flat and nested mixed", [0.5, 0.5, 0.5, 0.5, [0.5, 0.5, 0.5, 0.5]]),
        ("too few values", [0.5] * 7),
        ("too many values", [0.5] * 9),
        ("a string", ["1"] * 8),
        ("null", [None] * 8),
        ("an object", [{}] * 8),
    ]:
        st, d = s.json("POST", "/v2/models/mlp/infer",
                       {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "data": bad}]})
        check(f"{name}: 400", st == 400 and d and "error" in d, f"{st} {d}")
    st, d = s.json("POST", "/v2/models/mlp/infer",
                   {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4],
                                "data": [[1, 2, 3, 4], [5, 6, 7, 8]]}]})
    check("nested data as the shape says: 200", st == 200, f"{st} {d}")
    st, d = s.json("POST", "/v2/models/mlp/infer",
                   mlp_body(outputs=[{"name": "y"}, {"name": "y"}]))
    check("an output requested twice: 400", st == 400, f"{st} {d}")
    # BOOL in binary: one byte each, any non-zero is true
    hdr_json = json.dumps({"inputs": [
        {"name": k, "datatype": types[k], "shape": [1, 3], **(
            {"parameters": {"binary_data_size": 3}} if k == "b" else {"data": v})}
        for k, v in data.items()], "outputs": [{"name": "b_out", "parameters": {"binary_data": True}}]})
    st, raw, hdr = s.request("POST", "/v2/models/types/infer",
                             hdr_json.encode() + bytes([2, 0, 255]),
                             {"Inference-Header-Content-Length": str(len(hdr_json))})
    n = int(hdr.get("Inference-Header-Content-Length", "0"))
    check("BOOL bytes 2, 0, 255 in binary come back as 1, 0, 1", st == 200 and raw[n:] == b"\1\0\1",
          f"{st} {raw[-40:]}")
    for name, v in [("UINT64 over 2^64-1", 2**64), ("INT8 of 128", 128)]:
        dt, k = ("UINT64", "u64") if "UINT64" in name else ("INT8", "i8")
        b = {"inputs": [{"name": kk, "datatype": types[kk], "shape": [1, 3],
                         "data": ([v, 0, 0] if kk == k else vv)} for kk, vv in data.items()]}
        st, d = s.json("POST", "/v2/models/types/infer", b)
        check(f"{name}: 400", st == 400, f"{st} {d}")
    still_serving(s, "datatypes")
    s.stop()


def t_timeout(packrat, models):
    """A request's timeout holds while it waits in the queue, even behind a long batch."""
    rn = os.path.join(models, "resnet50", "model.onnx")
    timeout_s = 0.2
    repo = repo_with({"resnet50": rn},
                     {"resnet50": {"max_batch_size": 16, "plan": "1x16", "request_timeout_ms":
                                   int(timeout_s * 1000), "queue_capacity": 64,
                                   "max_queue_delay_us": 0}})
    s = Server(packrat, repo, wait=300)
    name = s.json("GET", "/v2/models/resnet50")[1]["inputs"][0]["name"]

    def payload(rows):
        nbytes = rows * 3 * 224 * 224 * 4
        body = json.dumps({"inputs": [{"name": name, "datatype": "FP32",
                                       "shape": [rows, 3, 224, 224],
                                       "parameters": {"binary_data_size": nbytes}}]}).encode()
        return body + b"\0" * nbytes, {"Inference-Header-Content-Length": str(len(body)),
                                       "Content-Type": "application/octet-stream"}

    results = []

    def one(rows, out):
        data, hdr = payload(rows)
        t0 = time.time()
        st, _, _ = s.request("POST", "/v2/models/resnet50/infer", data, hdr)
        out.append((st, round(time.time() - t0, 3)))

    # a batch of 16 rows runs for about a second or more; the small
    # requests queued behind it must get their 504 at the timeout, not when
    # the instance comes back to the queue
    big = []
    tb = threading.Thread(target=one, args=(16, big))
    tb.start()
    time.sleep(0.15)
    ts = [threading.Thread(target=one, args=(1, results)) for _ in range(5)]
    for t in ts:
        t.start()
    for t in ts + [tb]:
        t.join()
    results += big
    late = [r for r in results if r[0] == 504 and r[1] > timeout_s + 0.25]
    check("some requests time out (504)", any(r[0] == 504 for r in results), str(results))
    check("some are served (200)", any(r[0] == 200 for r in results), str(results))
    check("every 504 within the timeout + 0.25 s", not late, str(results))
    check("nothing but 200 and 504", all(r[0] in (200, 504) for r in results), str(results))
    s.stop()
    # an instance waiting to fill its batch runs it at a held request's deadline
    repo = repo_with({"mlp": MM["mlp"]},
                     {"mlp": {"max_batch_size": 4, "plan": "1x4", "request_timeout_ms": 300,
                              "max_queue_delay_us": 100_000_000}})
    s = Server(packrat, repo)
    t0 = time.time()
    st, d = s.json("POST", "/v2/models/mlp/infer", mlp_body(), timeout=30)
    dt = time.time() - t0
    check(f"a queue delay of 100 s and a timeout of 0.3 s: answered in {dt:.2f} s",
          st in (200, 504) and dt < 1.5, f"{st} {dt}")
    s.stop()


def t_models(packrat, models):
    """More models than --max-models: the rest refused, logged and reported."""
    names = ["m1", "m2", "m3"]
    repo = repo_with({n: MM["mlp"] for n in names},
                     {n: {"max_batch_size": 1, "plan": "1x1"} for n in names})
    s = Server(packrat, repo, "--max-models", "2")
    check("the log says some are not served",
          re.search(r"3 models; 2 are served", s.text()) is not None, s.text()[-500:])
    served = [n for n in names if s.json("GET", f"/v2/models/{n}/ready")[0] == 200]
    check("two served", len(served) == 2, str(served))
    other = [n for n in names if n not in served][0]
    st, d = s.json("POST", f"/v2/repository/models/{other}/load")
    check("loading a third: 503 naming the limit", st == 503 and "--max-models" in d["error"],
          f"{st} {d}")
    st, d = s.json("POST", f"/v2/repository/models/{served[0]}/load")
    check("reloading a known one: 200", st == 200, f"{st} {d}")
    st, text, _ = s.request("GET", "/metrics")
    check("limit in /metrics", b"packrat_models_limit 2" in text)
    st, d = s.json("POST", f"/v2/repository/models/{served[1]}/unload")
    st, d = s.json("POST", f"/v2/repository/models/{other}/load")
    check("an unloaded model gives its slot: the third loads", st == 200, f"{st} {d}")
    # a reload that fails leaves the loaded version serving
    path = f"{repo}/{other}/1/model.onnx"
    os.remove(path)
    open(path, "wb").write(b"not an onnx file")
    st, d = s.json("POST", f"/v2/repository/models/{other}/load")
    check("reload of a broken file: 400", st == 400, f"{st} {d}")
    st, d = s.json("POST", f"/v2/models/{other}/infer", mlp_body())
    check("the loaded version serves on", st == 200, f"{st} {d}")
    st, _ = s.json("GET", "/v2/health/ready")
    check("the server stays ready", st == 200)
    s.stop()
    # a bare NAME.onnx is the model NAME; "NAME.onnx" names nothing
    repo = tempfile.mkdtemp(dir=TMP)
    shutil.copy(MM["mlp"], f"{repo}/bare.onnx")
    s = Server(packrat, repo, "--max-models", "3")
    codes = [s.json("POST", "/v2/repository/models/bare.onnx/load")[0] for _ in range(4)]
    check("load of 'bare.onnx': 404 each time", codes == [404] * 4, str(codes))
    st, text, _ = s.request("GET", "/metrics")
    check("no model slot taken by it", b"packrat_models 1" in text, text[-200:])
    check("'bare' serves", s.json("POST", "/v2/models/bare/infer", mlp_body())[0] == 200)
    s.stop()


def t_http(packrat, models):
    """HEAD, conflicting Content-Length, Transfer-Encoding with Content-Length, any
    Transfer-Encoding but one `chunked`, long chunk lines, encoded slashes in the path, 413
    before the body, admin bodies bounded."""
    repo = repo_with({"mlp": MM["mlp"]}, {"mlp": {"max_batch_size": 1, "plan": "1x1"}})
    s = Server(packrat, repo, "--max-body-mb", "1", "--max-inflight-mb", "8")
    st, b, _ = s.request("HEAD", "/v2/health/live")
    check("HEAD /v2/health/live: 200, no body", st == 200 and b == b"", f"{st} {b}")
    st, b, _ = s.request("HEAD", "/v2/models/mlp")
    check("HEAD of model metadata: 200", st == 200, str(st))

    def raw(data, wait=5):
        with socket.create_connection(("127.0.0.1", s.port), timeout=wait) as c:
            c.sendall(data)
            t0 = time.time()
            try:
                got = c.recv(4096)
            except socket.timeout:
                got = b""
            return got, time.time() - t0

    got, _ = raw(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n"
                 b"Content-Length: 20\r\n\r\n0123456789")
    check("two different Content-Length: 400", got.startswith(b"HTTP/1.1 400"), got[:80])
    smuggled = (b"POST /v2/health/live HTTP/1.1\r\nHost: x\r\nContent-Length : 39\r\n\r\n"
                b"GET /v2/models/mlp HTTP/1.1\r\nHost: x\r\n\r\n")
    got, _ = raw(smuggled)
    time.sleep(0.3)
    check("'Content-Length :' (space before the colon): 400, nothing smuggled",
          got.startswith(b"HTTP/1.1 400") and got.count(b"HTTP/1.1") == 1, got[:200])
    def whole(data):
        """Everything the server sends back on one connection until it closes (3 s at most)."""
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as c:
            try:
                c.sendall(data)
            except OSError:  # refused and closed before all of it was read: the answer is in
                pass
            got, t0 = b"", time.time()
            while time.time() - t0 < 3:
                try:
                    part = c.recv(4096)
                except OSError:  # a timeout, or a reset after the answer
                    break
                if not part:
                    break
                got += part
            return got

    # read by Content-Length (a proxy's way) the body is "0\r\n\r", read
    # chunked (libmicrohttpd's) it ends sooner and a GET follows; a GET with
    # a body as well (the connection must close whatever the method)
    for method in ("POST", "GET"):
        got = whole(method.encode() + b" /v2/health/live HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                    b"Content-Length: 4\r\n\r\n0\r\n\r\nGET /v2/models/mlp HTTP/1.1\r\nHost: x\r\n\r\n")
        check(f"{method} with Transfer-Encoding and Content-Length: 400, closed, nothing smuggled",
              got.startswith(b"HTTP/1.1 400") and got.count(b"HTTP/1.1") == 1
              and b"Content-Length together" in got, got[:300])
    got = whole(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nContent-Length: 39\r\nContent-Length: 5\r\n\r\n"
                b"GET /v2/models/mlp HTTP/1.1\r\nHost: x\r\n\r\n")
    check("GET with two different Content-Length: 400, closed, nothing smuggled",
          got.startswith(b"HTTP/1.1 400") and got.count(b"HTTP/1.1") == 1, got[:300])
    got, _ = raw(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n"
                 b"Content-Length: 5\r\n\r\nhello")
    check("Transfer-Encoding other than chunked: 400 with a JSON body",
          got.startswith(b"HTTP/1.1 400") and b'"error"' in got, got[:300])
    # RFC 9112 6.3: exactly one Transfer-Encoding, `chunked`, is served; anything else is
    # 400 and the connection closes (libmicrohttpd reads the first header only: a proxy
    # that reads the last, or the list, would frame the body differently)
    chunked_live = b"5\r\nhello\r\n0\r\n\r\nGET /v2/models/mlp HTTP/1.1\r\nHost: x\r\n\r\n"
    for name, headers in (
            ("chunked, then a second header 'identity'",
             b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n"),
            ("chunked twice", b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"),
            ("the list 'chunked, identity'", b"Transfer-Encoding: chunked, identity\r\n"),
            ("the list 'gzip, chunked'", b"Transfer-Encoding: gzip, chunked\r\n"),
            ("'identity', then 'chunked'",
             b"Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n")):
        got = whole(b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n"
                    + chunked_live)
        check(f"Transfer-Encoding {name}: 400 with a JSON body, closed, nothing smuggled",
              got.startswith(b"HTTP/1.1 400") and got.count(b"HTTP/1.1") == 1 and
              b'{"error":' in got and b"Transfer-Encoding" in got, got[:300])
    body = json.dumps(mlp_body()).encode()
    got = whole(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                b"Connection: close\r\n\r\n" + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
    check("Transfer-Encoding: chunked alone is served", got.startswith(b"HTTP/1.1 200"), got[:300])
    # a chunk-size line or extension longer than the connection's read buffer (about 32 KiB,
    # libmicrohttpd's per-connection memory): libmicrohttpd 0.9.75 answers it itself, 500
    # and its own HTML, before packrat sees a byte of the body (no hook; docs/api.md); one
    # within it is served. Either way the connection closes and nothing is held.
    for name, line in (("1 MB chunk-size line", b"0" * 1_000_000 + b"5"),
                       ("1 MB chunk extension", b"5;" + b"x" * 1_000_000)):
        got = whole(b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                    b"\r\n" + line + b"\r\n{}   \r\n0\r\n\r\n")
        check(f"{name}: refused (libmicrohttpd's 500, or a 4xx with a JSON body), closed",
              (got.startswith(b"HTTP/1.1 500") or (got[9:10] == b"4" and b'"error"' in got))
              and got.count(b"HTTP/1.1") == 1, got[:300])
    got = whole(b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                b"Connection: close\r\n\r\n5;" + b"x" * 16000 + b"\r\n{}   \r\n0\r\n\r\n")
    check("a 16 kB chunk extension within the buffer: served", got.startswith(b"HTTP/1.1 200"),
          got[:200])
    still_serving(s, "long chunk lines")
    # an encoded '/' or '\\' in the path: libmicrohttpd decodes it before routing (so
    # /v2%2Frepository%2Findex would reach the repository routes where a proxy's path rules
    # saw one segment): refused, 400; in the query it is data
    for path in (b"/v2%2Frepository%2Findex", b"/v2/models/mlp%2fready", b"/v2/models/mlp%5Cready",
                 b"/v2%2fhealth%2flive", b"/v2/health/live/..%5c..%5cmetrics"):
        got = whole(b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                    b"Connection: close\r\n\r\n{}")
        check(f"{path.decode()}: 400 with a JSON body naming the encoded separator",
              got.startswith(b"HTTP/1.1 400") and b"%2F" in got, got[:300])
    st, _, _ = s.request("GET", "/v2/health/live?next=%2Fv2%2Fmodels")
    check("an encoded '/' in the query: served", st == 200, st)
    st, _, _ = s.request("GET", "/v2/models/%6Dlp")
    check("other encoded characters in the path: decoded and served", st == 200, st)
    chunks = b"".join(b"10000\r\n" + b" " * 0x10000 + b"\r\n" for _ in range(20)) + b"0\r\n\r\n"
    got, _ = raw(b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                 b"\r\n" + chunks)
    check("chunked admin body over 1 MiB: 413 with a JSON body",
          got.startswith(b"HTTP/1.1 413") and b'"error"' in got, got[:200])
    got, dt = raw(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n"
                  b"\r\n")
    check("413 from the headers, before any body byte", got.startswith(b"HTTP/1.1 413") and dt < 3,
          f"{got[:80]} after {dt:.1f} s")
    got, dt = raw(b"POST /v2/models/mlp/plan HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n"
                  b"\r\n")
    check("admin body over 1 MiB: 413 from the headers", got.startswith(b"HTTP/1.1 413"),
          got[:80])
    # bytes in flight: 8 uploads of 1 MB stall one byte short, the server holds
    # 8 MB; one more is 503 from its headers. Announcing without sending holds
    # nothing (bodies are counted as they arrive).
    conns = []
    for _ in range(20):
        c = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        c.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n"
                  b"\r\n{")
        conns.append(c)
    time.sleep(0.3)
    still_serving(s, "20 uploads announced, not sent")
    for c in conns:
        c.close()
    conns = []
    for _ in range(8):
        c = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        c.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n"
                  b"\r\n" + b" " * 999_999)
        conns.append(c)
    time.sleep(0.5)
    got, _ = raw(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n"
                 b"\r\n")
    check("over --max-inflight-mb: 503 from the headers", got.startswith(b"HTTP/1.1 503"),
          got[:80])
    st, text, _ = s.request("GET", "/metrics")
    m = re.search(rb"packrat_http_connections (\d+)", text)
    check("open connections in /metrics", m is not None and int(m.group(1)) >= 8, text[-300:])
    m = re.search(rb"packrat_inflight_bytes (\d+)", text)
    check("bytes in flight in /metrics", m is not None and int(m.group(1)) >= 7_000_000)
    for c in conns:
        c.close()
    time.sleep(0.5)
    still_serving(s, "stalled uploads closed")
    st, text, _ = s.request("GET", "/metrics")
    check("refusals counted", re.search(rb"packrat_http_refused_total [1-9]", text) is not None)
    st, d = s.json("GET", "/v2/nothing/here")
    check("unknown path: 404 JSON", st == 404 and d and "error" in d)
    st, d = s.json("DELETE", "/v2/models/mlp")
    check("wrong method: 405 JSON", st == 405 and d and "error" in d)
    # SIGTERM: new connections refused at once; a stalled upload holds the
    # exit for its grace period only
    stalled = socket.create_connection(("127.0.0.1", s.port), timeout=5)
    stalled.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    time.sleep(0.2)
    t0 = time.time()
    s.p.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    try:
        socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
        refused = False
    except OSError:
        refused = True
    check("after SIGTERM a new connection is refused", refused)
    try:
        code = s.p.wait(30)
    except subprocess.TimeoutExpired:
        code = None
    check("a stalled upload holds the exit 10 s at most", code == 0 and time.time() - t0 < 15,
          f"{code} after {time.time() - t0:.1f} s")
    stalled.close()
    s.stop()


def t_symlinks(packrat, models):
    """External-data files may not lead out of the model's folder."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper, TensorProto
    W = np.arange(4 * 3, dtype=np.float32).reshape(4, 3)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "ext",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
                          [numpy_helper.from_array(W, "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    repo = tempfile.mkdtemp(dir=TMP)
    outside = tempfile.mkdtemp(dir=TMP)
    for name in ("inside", "escape"):
        os.makedirs(f"{repo}/{name}/1")
        mc = onnx.ModelProto()
        mc.CopyFrom(m)  # saving moves the tensors out of the proto it is given
        onnx.save_model(mc, f"{repo}/{name}/1/model.onnx", save_as_external_data=True,
                        all_tensors_to_one_file=True, location="weights.bin",
                        size_threshold=0)
        with open(f"{repo}/{name}/config.json", "w") as f:
            json.dump({"max_batch_size": 1, "plan": "1x1"}, f)
    # fifo: the weights file is a FIFO (opening it for reading would block)
    os.makedirs(f"{repo}/fifo/1")
    mc = onnx.ModelProto()
    mc.CopyFrom(m)
    onnx.save_model(mc, f"{repo}/fifo/1/model.onnx", save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    os.remove(f"{repo}/fifo/1/weights.bin")
    os.mkfifo(f"{repo}/fifo/1/weights.bin")
    # confdir: config.json is a folder
    os.makedirs(f"{repo}/confdir/1")
    shutil.copy(MM["mlp"], f"{repo}/confdir/1/model.onnx")
    os.makedirs(f"{repo}/confdir/config.json")
    # escape: the weights file is a symlink to a secret outside the folder
    os.replace(f"{repo}/escape/1/weights.bin", f"{outside}/secret.bin")
    os.symlink(f"{outside}/secret.bin", f"{repo}/escape/1/weights.bin")
    s = Server(packrat, repo)
    st, d = s.json("POST", "/v2/models/inside/infer",
                   {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4],
                                "data": [1, 0, 0, 0]}]})
    check("external data inside the folder: served", st == 200 and d["outputs"][0]["data"]
          == [0, 1, 2], f"{st} {d}")
    st, d = s.json("POST", "/v2/repository/index")
    e = [x for x in d if x["name"] == "escape"][0] if d else {}
    check("a symlink out of the folder: refused at load", e.get("state") == "UNAVAILABLE", str(e))
    check("the reason names the location", "weights.bin" in e.get("reason", ""), str(e))
    for name, why in (("fifo", "regular file"), ("confdir", "regular file")):
        e = [x for x in d if x["name"] == name][0] if d else {}
        check(f"{name}: refused at load, not hung", e.get("state") == "UNAVAILABLE" and
              why in e.get("reason", ""), str(e))
    t0 = time.time()
    check("SIGTERM exits 0 promptly", s.stop(30) and time.time() - t0 < 30)


def t_grpc_memory(packrat, models):
    """gRPC messages cost at most a small constant times their size to decode:
    64 MB ModelInfer messages of empty repeated inputs (2 bytes each on the
    wire, a hundred unpacked), 8 at once, are refused from the wire in under a
    second each, raise peak resident memory by at most 3x the bytes in
    flight, and the server answers other clients meanwhile; the same sent
    on 8 ModelStreamInfer streams (each refused on its stream); after 100 more,
    resident memory is back within 10%."""
    import grpc
    repo = repo_with({"mlp": MM["mlp"]}, {"mlp": {"max_batch_size": 4}})
    s = Server(packrat, repo, "--grpc-port", "0")
    check("the ready line names the gRPC port", s.grpc_port is not None, s.text()[-500:])
    if not s.grpc_port:
        return
    ch = grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}",
                               options=[("grpc.max_send_message_length", 128 << 20)])
    infer = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer")  # bytes in, bytes out
    model = b"\x0a\x03mlp"  # model_name: mlp

    def send(body, out, i, call=infer, streamed=False):
        """out[i]: (status code name, details, seconds) of one call of body; of a stream
        carrying body (streamed), ("OK", the answers' bytes, seconds) when it ended OK."""
        t0 = time.time()
        try:
            got = list(call(iter([body]), timeout=60)) if streamed else call(body, timeout=60)
            out[i] = ("OK", got if streamed else "", time.time() - t0)
        except grpc.RpcError as e:
            out[i] = (e.code().name, e.details() or "", time.time() - t0)

    def burst(method, body, streamed=False):
        """8 calls of body at once while another client keeps inferring over HTTP:
        (the 8 results, the other client's (status, seconds))."""
        call = ch.stream_stream(method) if streamed else ch.unary_unary(method)
        out, answered, stop = [None] * 8, [], threading.Event()

        def others():
            while not stop.is_set():
                t0 = time.time()
                st, _ = s.json("POST", "/v2/models/mlp/infer", mlp_body())
                answered.append((st, time.time() - t0))

        o = threading.Thread(target=others)
        o.start()
        ts = [threading.Thread(target=send, args=(body, out, i, call, streamed)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        stop.set()
        o.join()
        return out, answered

    for _ in range(20):
        s.json("POST", "/v2/models/mlp/infer", mlp_body())
    hostile = model + b"\x2a\x00" * 32_000_000  # 64 MB of empty inputs (field 5)
    # what the transfer alone takes, under the same load: the same 8 messages at once to
    # an RPC that refuses them unread (over ModelMetadata's 1 MB limit)
    base_out, _ = burst("/inference.GRPCInferenceService/ModelMetadata", hostile)
    transfer = max(r[2] for r in base_out) if all(base_out) else 0
    time.sleep(0.5)
    with open(f"/proc/{s.p.pid}/clear_refs", "w") as f:
        f.write("5")  # resets the peak resident size
    base = s.rss_kb()
    cpu0 = server_cpu_s(s)
    out, answered = burst("/inference.GRPCInferenceService/ModelInfer", hostile)
    unary_cpu = server_cpu_s(s) - cpu0
    peak = s.rss_kb("VmHWM")
    check("8 x 64 MB of empty inputs: each refused INVALID_ARGUMENT naming the field",
          all(r and r[0] == "INVALID_ARGUMENT" and "inputs holds more than" in r[1] for r in out),
          out)
    # a call's time is mostly its transfer (64 MB through gRPC's framing on both
    # sides, 8 at once on this machine's cores): what decoding adds is under a
    # second (it took 6 s of CPU before the wire check). Compared as medians
    # (the slowest of 8 concurrent transfers on 2 cores varies by a second
    # from run to run, which made a max-to-max check fail now and then),
    # with the slowest call within 2 s of the slowest unread one.
    def median(xs):
        xs = sorted(xs)
        return (xs[len(xs) // 2] + xs[(len(xs) - 1) // 2]) / 2 if xs else 0

    times = [r[2] for r in out if r]
    base_med = median([r[2] for r in base_out if r])
    check(f"refused in under a second beyond the transfer (median {median(times):.2f} s against "
          f"{base_med:.2f} s for 8 refused unread; slowest {max(times, default=0):.2f} s against "
          f"{transfer:.2f} s)",
          transfer > 0 and len(times) == 8 and median(times) < base_med + 1.0 and
          max(times) < transfer + 2.0, ([round(t, 2) for t in times], base_out[:1]))
    in_flight_kb = 8 * len(hostile) // 1024
    check(f"peak growth {peak - base} kB <= 3 x the {in_flight_kb} kB in flight",
          peak - base <= 3 * in_flight_kb)
    check(f"other clients answered meanwhile ({len(answered)} requests, all 200, slowest "
          f"{max((a[1] for a in answered), default=0):.2f} s)",
          answered and all(a[0] == 200 for a in answered) and max(a[1] for a in answered) < 2.0,
          answered[:5])
    # the same on ModelStreamInfer: each stream's one request refused as its answer's
    # error_message (ModelStreamInferResponse field 1), the stream ending OK
    time.sleep(0.5)
    with open(f"/proc/{s.p.pid}/clear_refs", "w") as f:
        f.write("5")
    base = s.rss_kb()
    cpu0 = server_cpu_s(s)
    out, answered = burst("/inference.GRPCInferenceService/ModelStreamInfer", hostile, True)
    stream_cpu = server_cpu_s(s) - cpu0
    peak = s.rss_kb("VmHWM")
    check("stream: 8 x 64 MB of empty inputs, each answered with an error_message naming the field",
          all(r and r[0] == "OK" and len(r[1]) == 1 and r[1][0][:1] == b"\x0a" and
              b"inputs holds more than" in r[1][0] for r in out),
          [(r[0], r[1][:1] if r[0] == "OK" else r[1]) for r in out if r])
    # (a stream's wall time is mostly grpcio's Python side feeding the stream; what the
    # server spends is compared instead: unpacking them would take minutes of CPU)
    check(f"stream: the server's CPU for them ({stream_cpu:.2f} s) within 2x + 1 s of "
          f"the same sent unary ({unary_cpu:.2f} s)", stream_cpu <= 2 * unary_cpu + 1.0,
          [round(r[2], 2) for r in out if r])
    check(f"stream: peak growth {peak - base} kB <= 3 x the {in_flight_kb} kB in flight",
          peak - base <= 3 * in_flight_kb)
    check(f"stream: other clients answered meanwhile ({len(answered)} requests)",
          answered and all(a[0] == 200 for a in answered) and max(a[1] for a in answered) < 2.0,
          answered[:5])
    # the same shape nested (an input of 1025 empty parameters), unknown fields, an
    # input's contents sent twice (protobuf-c would merge them), a string sent again and
    # again (each copy 32 bytes unpacked)
    entries = b"\x22\x00" * 1025
    nested = {"1025 parameters in one input": model + b"\x2a" + bytes([0x80 | (len(entries) & 0x7f),
                                                                       len(entries) >> 7]) + entries,
              "65 unknown fields": model + b"\xf8\x06\x01" * 65,
              "an input's contents twice": model + b"\x2a\x04\x2a\x00\x2a\x00",
              "model_name 5 million times": b"\x0a\x01a" * 5_000_000}
    for name, body in nested.items():
        r = [None]
        send(body, r, 0)
        check(f"{name}: INVALID_ARGUMENT with a reason", r[0][0] == "INVALID_ARGUMENT" and
              ("more than" in r[0][1] or "more than once" in r[0][1]), r[0])
    # 100 more refused calls: resident memory back within 10%
    small = model + b"\x2a\x00" * 4_000_000
    r = [None]
    def settled_rss():  # the least of a few samples: gRPC frees a call's buffers after answering
        samples = []
        for _ in range(4):
            time.sleep(0.3)
            samples.append(s.rss_kb())
        return min(samples)

    for _ in range(5):
        send(small, r, 0)
    before = settled_rss()
    for _ in range(100):
        send(small, r, 0)
    after = settled_rss()
    check(f"after 100 more refused calls: {after} kB within 10% of {before} kB",
          after <= before * 1.10, r[0])
    still_serving(s, "hostile gRPC messages")
    ch.close()
    s.stop()
    # a valid message whose decoding can never fit the in-flight bytes: refused for good
    # (RESOURCE_EXHAUSTED naming the setting), not "busy, retry later"
    s = Server(packrat, repo, "--grpc-port", "0", "--max-inflight-mb", "64")
    ch = grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}",
                               options=[("grpc.max_send_message_length", 128 << 20)])
    infer = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer")
    zeros = b"\x00" * (8 << 20)  # 8M packed int64 zeros: 64 MB unpacked
    contents = b"\x1a" + varint(len(zeros)) + zeros  # int64_contents
    tensor = b"\x0a\x01x\x12\x05INT64\x1a\x02\x01\x01\x2a" + varint(len(contents)) + contents
    r = [None]
    send(model + b"\x2a" + varint(len(tensor)) + tensor, r, 0, infer)
    check("a message that needs more than --max-inflight-mb to decode: RESOURCE_EXHAUSTED naming it",
          r[0][0] == "RESOURCE_EXHAUSTED" and "--max-inflight-mb" in r[0][1], r[0])
    still_serving(s, "a message over the in-flight bytes")
    ch.close()
    s.stop()


# ---- answers nobody reads ----

ROW_FLOATS = 1 << 18  # 1 MiB of FP32 per row of the "big" model's answer


def big_model():
    """A repository with "big": y = Expand(x[rows, 1], [1, 262144]), 1 MiB of answer per row
    from 4 bytes of request."""
    import onnx
    from onnx import helper, numpy_helper, TensorProto
    import numpy as np
    shape = numpy_helper.from_array(np.array([1, ROW_FLOATS], dtype=np.int64), "shape")
    g = helper.make_graph([helper.make_node("Expand", ["x", "shape"], ["y"])], "big",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         ["batch", ROW_FLOATS])], [shape])
    path = os.path.join(TMP, "big.onnx")
    onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return repo_with({"big": path}, {"big": {"max_batch_size": 8, "plan": "1x8"}})


def metric(s, name):
    st, text, _ = s.request("GET", "/metrics", timeout=10)
    m = re.search(rb"\n" + name.encode() + rb" (\d+)", text)
    return int(m.group(1)) if m else None


def wait_metric(s, name, pred, timeout):
    """Polls /metrics until pred(value) (True) or timeout (False); and the last value."""
    deadline, v = time.time() + timeout, None
    while time.time() < deadline:
        v = metric(s, name)
        if v is not None and pred(v):
            return True, v
        time.sleep(0.2)
    return False, v


def settled_rss(s):
    """The least of a few samples (freed memory goes back to the system a moment later)."""
    samples = []
    for _ in range(4):
        time.sleep(0.3)
        samples.append(s.rss_kb())
    return min(samples)


def reset_peak(s):
    with open(f"/proc/{s.p.pid}/clear_refs", "w") as f:
        f.write("5")


def answers_bounded(s, base, what):
    """The checks of an answers_* finding once its unread clients are in: the peak
    resident growth within 2x --max-inflight-mb, answers held and within the
    bound, and the answers beyond it refused."""
    peak = s.rss_kb("VmHWM")
    held = metric(s, "packrat_answer_bytes")
    inflight = metric(s, "packrat_inflight_bytes")
    limit_kb = LIMIT_MB * 1024
    check(f"{what}: peak growth {peak - base} kB <= 2 x --max-inflight-mb ({2 * limit_kb} kB)",
          peak - base <= 2 * limit_kb, f"{peak - base} kB; base {base}")
    check(f"answers held ({held}) > 0 and within --max-inflight-mb",
          held is not None and 0 < held <= LIMIT_MB << 20 and inflight <= LIMIT_MB << 20,
          f"{held} {inflight}")
    refused = metric(s, "packrat_answers_refused_total")
    check(f"answers beyond it refused ({refused})", refused is not None and refused > 0, refused)


def answers_freed(s, base):
    """Once an answers_* finding's unread clients closed: the answer and in-flight
    counters back to 0, the resident size back within --max-inflight-mb of base."""
    ok, v = wait_metric(s, "packrat_answer_bytes", lambda v: v == 0, 10)
    check(f"clients closed: packrat_answer_bytes back to 0 ({v})", ok, v)
    ok, v = wait_metric(s, "packrat_inflight_bytes", lambda v: v == 0, 10)
    check(f"clients closed: packrat_inflight_bytes back to 0 ({v})", ok, v)
    after = settled_rss(s)
    check(f"clients closed: resident {after} kB within --max-inflight-mb of the {base} kB before",
          after - base <= LIMIT_MB * 1024, f"{after - base} kB more")


def unread_socket(port):
    """A connection that reads nothing: a receive buffer as small as the kernel allows."""
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.settimeout(10)
    c.connect(("127.0.0.1", port))
    return c


BIG_HTTP = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [8, 1],
                                   "data": [1.0] * 8}],
                       "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
BIG_HTTP_REQ = (b"POST /v2/models/big/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(BIG_HTTP)).encode() + b"\r\n\r\n" + BIG_HTTP)
LIMIT_MB = 64
ANSWER = 8 * ROW_FLOATS * 4  # bytes of one answer (8 rows)


def good_http_infer(s, until):
    """A client that reads: retries a 503 (as its Retry-After asks, at most 1 s apart) until a
    200 or `until`. (status of the last try, seconds, tries, first status)."""
    t0, tries, first = time.time(), 0, None
    while True:
        tries += 1
        st, b, h = s.request("POST", "/v2/models/big/infer", BIG_HTTP,
                             {"Content-Type": "application/json"}, timeout=30)
        first = first or st
        ok = st == 200 and len(b) >= ANSWER
        if ok or time.time() > until or st not in (503,):
            return (200 if ok else st), time.time() - t0, tries, first
        time.sleep(min(1.0, float(h.get("Retry-After", 1))))


def t_answers_http(packrat, models):
    """HTTP answers nobody reads are bounded by --max-inflight-mb: 96 connections each send
    two pipelined requests whose answers are 8 MiB (from 190 bytes) and never read; resident
    memory grows by at most 2x the bound (unbounded, by what the kernel's socket buffers do
    not take: 140-180 MB for 48), the answers held
    (packrat_answer_bytes) stay within it and the rest are 503; other clients are served
    (health at once; an infer once there is room); when the clients close, the counters are
    back to 0 and memory falls back; and connections that never read are closed after
    --idle-timeout-s, their answers freed."""
    repo = big_model()
    idle = 5
    s = Server(packrat, repo, "--max-inflight-mb", str(LIMIT_MB), "--idle-timeout-s", str(idle))
    for _ in range(3):  # warm up: plans, threads, allocator
        st, _, _ = s.request("POST", "/v2/models/big/infer", BIG_HTTP)
    check("the big model answers 8 MiB", st == 200, st)
    time.sleep(0.5)
    base = settled_rss(s)
    reset_peak(s)
    reqs0 = metric(s, "packrat_http_requests_total") or 0
    bad = []
    for _ in range(96):
        c = unread_socket(s.port)
        c.sendall(BIG_HTTP_REQ * 2)
        bad.append(c)
    # every connection's first request in (the second waits behind its unread answer)
    ok, n = wait_metric(s, "packrat_http_requests_total", lambda v: v >= reqs0 + 96, 30)
    time.sleep(4.0)  # their answers made (on a busy machine a few a second before the bound)
    answers_bounded(s, base, "96 unread connections")
    t0 = time.time()
    st, _, _ = s.request("GET", "/v2/health/live", timeout=10)
    check(f"health answered meanwhile ({time.time() - t0:.2f} s)",
          st == 200 and time.time() - t0 < 2, st)
    st, b, h = s.request("POST", "/v2/models/big/infer", BIG_HTTP, timeout=30)
    check("an infer meanwhile: 200, or 503 with Retry-After naming --max-inflight-mb",
          st == 200 or (st == 503 and "Retry-After" in h and b"--max-inflight-mb" in b),
          f"{st} {b[:200]}")
    # the clients go: every answer freed, the counters back to 0
    for c in bad:
        c.close()
    answers_freed(s, base)
    st, secs, tries, _ = good_http_infer(s, time.time() + 10)
    check(f"then a client that reads is answered ({tries} tries, {secs:.1f} s)", st == 200, st)
    # connections that stay open and never read: closed after --idle-timeout-s
    bad = []
    for _ in range(24):
        c = unread_socket(s.port)
        c.sendall(BIG_HTTP_REQ)
        bad.append(c)
    ok, v = wait_metric(s, "packrat_answer_bytes", lambda v: v > 0, 10)
    check("24 more unread connections hold answers", ok, v)
    t0 = time.time()
    ok, v = wait_metric(s, "packrat_answer_bytes", lambda v: v == 0, idle + 10)
    check(f"held answers freed by --idle-timeout-s {idle} ({time.time() - t0:.1f} s), the "
          "clients still connected", ok and time.time() - t0 < idle + 5, v)
    st, secs, tries, first = good_http_infer(s, time.time() + 10)
    check(f"a client that reads is answered ({tries} tries, {secs:.1f} s)", st == 200, st)
    for c in bad:
        c.close()
    ok, v = wait_metric(s, "packrat_inflight_bytes", lambda v: v == 0, 10)
    check(f"in flight back to 0 ({v})", ok, v)
    check("alive", s.alive())
    check("SIGTERM exits 0", s.stop())


# a gRPC client that never reads, on raw HTTP/2 (grpcio's transport always reads)

def h2_frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def hpack_literal(name, value):
    """A header field, literal without indexing, new name, no Huffman coding."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def h2_grpc_headers(method):
    return b"".join(hpack_literal(n, v) for n, v in (
        (b":method", b"POST"), (b":scheme", b"http"),
        (b":path", b"/inference.GRPCInferenceService/" + method), (b":authority", b"127.0.0.1"),
        (b"content-type", b"application/grpc"), (b"te", b"trailers")))


def big_grpc_message():
    """ModelInferRequest for "big": 8 rows, raw contents (so the answer is raw: 8 MiB)."""
    tensor = b"\x0a\x01x\x12\x04FP32\x1a\x02\x08\x01"  # name x, FP32, shape [8, 1]
    raw = b"\x00\x00\x80\x3f" * 8  # eight 1.0f
    msg = b"\x0a\x03big" + b"\x2a" + bytes([len(tensor)]) + tensor + b"\x3a" + bytes([len(raw)]) + raw
    return b"\x00" + len(msg).to_bytes(4, "big") + msg


def h2_unread_client(port, calls=0, streams=0, per_stream=0):
    """An HTTP/2 connection that sends `calls` unary ModelInfer calls, and `streams`
    ModelStreamInfer streams of per_stream requests each (left open), then reads nothing
    (past the server's first SETTINGS, which it acknowledges)."""
    c = unread_socket(port)
    c.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0))
    c.recv(1024)  # the server's SETTINGS (and perhaps a WINDOW_UPDATE)
    out = [h2_frame(4, 1, 0)]  # SETTINGS ACK
    msg, sid = big_grpc_message(), 1
    for _ in range(calls):
        out.append(h2_frame(1, 4, sid, h2_grpc_headers(b"ModelInfer")))
        out.append(h2_frame(0, 1, sid, msg))  # END_STREAM
        sid += 2
    for _ in range(streams):
        out.append(h2_frame(1, 4, sid, h2_grpc_headers(b"ModelStreamInfer")))
        out += [h2_frame(0, 0, sid, msg) for _ in range(per_stream)]
        sid += 2
    c.sendall(b"".join(out))
    return c


def t_answers_grpc(packrat, models):
    """gRPC answers nobody reads are bounded by --max-inflight-mb: raw HTTP/2 clients that never
    read (nor grant flow-control window) send 32 unary ModelInfer calls and 8 ModelStreamInfer
    streams of 4 requests, each answered with 8 MiB (256 MiB + 256 MiB unbounded); resident
    memory grows by at most 2x the bound, the answers held stay within it (the rest
    UNAVAILABLE, a stream stops being read), a client that reads is served; when the clients
    close, the counters are back to 0; calls and streams whose answers are not read within
    --idle-timeout-s are cancelled, their answers freed, though the clients stay connected."""
    import grpc
    repo = big_model()
    idle = 5
    s = Server(packrat, repo, "--grpc-port", "0", "--max-inflight-mb", str(LIMIT_MB),
               "--idle-timeout-s", str(idle), "--max-body-mb", "1")
    ch = grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}",
                               options=[("grpc.max_receive_message_length", 64 << 20)])
    infer = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer")
    health = ch.unary_unary("/grpc.health.v1.Health/Check")
    body = big_grpc_message()[5:]

    def good(until):
        """(code name, seconds, tries) of a client that reads, retrying UNAVAILABLE until `until`."""
        t0, tries = time.time(), 0
        while True:
            tries += 1
            try:
                got = infer(body, timeout=30)
                if len(got) >= ANSWER:
                    return "OK", time.time() - t0, tries
                code = "SHORT"
            except grpc.RpcError as e:
                code = e.code().name
            if code != "UNAVAILABLE" or time.time() > until:
                return code, time.time() - t0, tries
            time.sleep(1.0)

    for _ in range(3):
        code, _, _ = good(time.time())
    check("the big model answers 8 MiB over gRPC", code == "OK", code)
    time.sleep(0.5)
    base = settled_rss(s)
    reset_peak(s)
    bad = [h2_unread_client(s.grpc_port, calls=32), h2_unread_client(s.grpc_port, streams=8,
                                                                     per_stream=4)]
    # the unary calls all answered (or refused), the streams' first requests too
    ok, _ = wait_metric(s, "packrat_grpc_requests_total", lambda v: v >= 3 + 32 + 8, 30)
    time.sleep(4.0)
    answers_bounded(s, base, "unread calls and streams")
    t0 = time.time()
    try:
        health(b"", timeout=5)
        hok = True
    except grpc.RpcError as e:
        hok = e.code().name
    check(f"health answered meanwhile ({time.time() - t0:.2f} s)", hok is True, hok)
    try:
        infer(body, timeout=30)
        code, details = "OK", ""
    except grpc.RpcError as e:
        code, details = e.code().name, e.details() or ""
    check("an infer meanwhile: OK, or UNAVAILABLE naming --max-inflight-mb",
          code == "OK" or (code == "UNAVAILABLE" and "--max-inflight-mb" in details),
          f"{code} {details}")
    for c in bad:
        c.close()
    answers_freed(s, base)
    code, secs, tries = good(time.time() + 10)
    check(f"then a client that reads is answered ({tries} tries, {secs:.1f} s)", code == "OK", code)
    # clients that stay connected and never read: their calls and streams cancelled. A
    # stream whose answers are not read stops being read: 4 requests, then 28 more once its
    # answers wait (over its bound, --max-body-mb)
    reqs0 = metric(s, "packrat_grpc_stream_requests_total")
    bad = [h2_unread_client(s.grpc_port, streams=1, per_stream=4)]
    ok, v = wait_metric(s, "packrat_answer_bytes", lambda v: v > 0, 10)
    check("an unread stream holds answers", ok, v)
    time.sleep(0.5)
    bad[0].sendall(b"".join(h2_frame(0, 0, 1, big_grpc_message()) for _ in range(28)))
    bad.append(h2_unread_client(s.grpc_port, calls=8))
    time.sleep(1.0)
    reqs = metric(s, "packrat_grpc_stream_requests_total") - reqs0
    check(f"a stream whose answers wait is read no more ({reqs} of its 32 requests read)",
          reqs <= 5, reqs)
    t0 = time.time()
    ok, v = wait_metric(s, "packrat_answer_bytes", lambda v: v == 0, idle + 10)
    check(f"held answers freed by --idle-timeout-s {idle} ({time.time() - t0:.1f} s), the "
          "client still connected", ok and time.time() - t0 < idle + 5, v)
    check("the log says why", "answers not read" in s.text(), s.text()[-300:])
    code, secs, tries = good(time.time() + 10)
    check(f"a client that reads is answered ({tries} tries, {secs:.1f} s)", code == "OK", code)
    for c in bad:
        c.close()
    ok, v = wait_metric(s, "packrat_inflight_bytes", lambda v: v == 0, 10)
    check(f"in flight back to 0 ({v})", ok, v)
    ch.close()
    check("alive", s.alive())
    check("SIGTERM exits 0", s.stop())


def server_cpu_s(s):
    """The server's user + system CPU seconds so far."""
    fields = open(f"/proc/{s.p.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def varint(n):
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7f | 0x80])
        n >>= 7
    return out + bytes([n])


FINDINGS = {"crash": t_crash, "race": t_race, "arithmetic": t_arithmetic,
            "overwrite": t_overwrite, "overread": t_overread, "memory": t_memory, "caps": t_caps,
            "datatypes": t_datatypes, "timeout": t_timeout, "models": t_models, "http": t_http,
            "symlinks": t_symlinks, "grpc_memory": t_grpc_memory,
            "answers_http": t_answers_http, "answers_grpc": t_answers_grpc}

def harness(prefix, run):
    """The frame of a test script built on this module (this one's, startup.py's,
    quota.py's): a temp folder (TMP) with its own profile cache and the small
    models of make_models.py (MM), then run(); whatever happens, every server
    killed, their logs printed when a check failed, the folder removed, and
    the exit status the checks' (CTest's timeout, SIGTERM, ends through here)."""
    global TMP, MM
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    TMP = tempfile.mkdtemp(prefix=prefix)
    os.environ["PACKRAT_CACHE"] = os.path.join(TMP, "cache")
    try:
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "make_models.py"), TMP], check=True)
        MM = {n: os.path.join(TMP, n + ".onnx")
              for n in ("mlp", "nobatch", "types", "intdiv", "chain")}
        run()
    finally:
        for p in SERVERS:
            if p.poll() is None:
                p.kill()
                p.wait()
        if failures:  # the servers' logs tell why (sanitizer reports included)
            for f in sorted(os.listdir(TMP)):
                if f.startswith("server-"):
                    print(f"---- {f} (last 80 lines)")
                    print("".join(open(os.path.join(TMP, f), errors="replace").readlines()[-80:]))
        shutil.rmtree(TMP, ignore_errors=True)
    print(f"{len(failures)} failed" if failures else "all passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in FINDINGS:
        sys.exit(__doc__)
    harness("packrat-hostile-", lambda: FINDINGS[sys.argv[1]](os.path.abspath(sys.argv[2]),
                                                              os.path.abspath(sys.argv[3])))
