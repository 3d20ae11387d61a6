#!/usr/bin/python3
"""The server on ResNet-50, side by side in one run.

1. Overhead: closed loop, one connection, batch-1 requests (binary tensors)
   through `packrat serve` with one T-thread instance, against the engine
   alone (`packrat run --threads T --batch 1`): the difference of the medians
   is the server's cost per request (HTTP, codec, queue, copies). Then where
   that time goes, from the server's own stage histograms
   (`packrat_request_stage_seconds`): the mean of each stage per request,
   for ResNet-50 and for the tiny test model (tests/e2e/make_models.py).
2. Fat instance vs packrat's plan under the same open-loop load (Poisson
   arrivals at --rate requests/s): a server whose plan is the fat instance
   (T threads, batch --max-batch) against one with the plan packrat picks
   (`plan: auto`) for the same max batch.

usage: bench/serve.py [--rate 20] [--duration 20] [--max-batch 8]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

from common import add_paths, cpu_name, run_json, utc_stamp


STAGES = ("parse", "queue", "assemble", "compute", "scatter", "resume", "encode", "send")


def stage_means_us(url, model):
    """Mean microseconds of each stage from /metrics (sum / count)."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    sums, counts = {}, {}
    for line in text.splitlines():
        m = re.match(r'packrat_request_stage_seconds_(sum|count)\{model="%s",[^}]*stage="(\w+)"\} (\S+)'
                     % re.escape(model), line)
        if m:
            (sums if m.group(1) == "sum" else counts)[m.group(2)] = float(m.group(3))
    return {st: 1e6 * sums.get(st, 0) / counts[st] if counts.get(st) else 0.0 for st in STAGES}


def stage_row(name, means):
    outside = sum(v for k, v in means.items() if k != "compute")
    return (f"| {name} | " + " | ".join(f"{means[k]:.1f}" for k in STAGES) + f" | {outside:.1f} |")


def tiny_stages(packrat, seconds):
    """The stage means for the tiny mlp, one connection, binary tensors."""
    tmp = tempfile.mkdtemp()
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e",
                                                 "make_models.py"), tmp], check=True,
                   stdout=subprocess.DEVNULL)
    s = Server(packrat, os.path.join(tmp, "mlp.onnx"),
               {"max_batch_size": 1, "plan": "1x1", "max_queue_delay_us": 0}, name="mlp")
    run_json([packrat, "bench", "--url", s.url, "--model", "mlp", "--concurrency", "1", "--duration",
              str(seconds), "--json"])
    means = stage_means_us(s.url, "mlp")
    s.stop()
    return means


class Server:
    def __init__(self, packrat, model_path, config, name="resnet50"):
        self.dir = tempfile.mkdtemp()
        os.makedirs(f"{self.dir}/{name}/1")
        os.symlink(model_path, f"{self.dir}/{name}/1/model.onnx")
        json.dump(config, open(f"{self.dir}/{name}/config.json", "w"))
        self.log = open(f"{self.dir}/log", "w+")
        self.p = subprocess.Popen([packrat, "serve", "--model-repository", self.dir, "--http-port", "0"],
                                  stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(3000):
            self.log.seek(0)
            m = re.search(r"ready: (http://127.0.0.1:\d+)", self.log.read())
            if m:
                self.url = m.group(1)
                break
            if self.p.poll() is not None:
                raise RuntimeError("server exited")
            time.sleep(0.1)
        else:
            raise RuntimeError("server did not start")
        self.log.seek(0)
        self.plan = re.search(r"plan ([0-9x, ]+)", self.log.read()).group(1).replace(" ", "")

    def stop(self):
        self.p.terminate()
        self.p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=20)
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--max-batch", type=int, default=8)
    add_paths(ap)
    args = ap.parse_args()
    packrat = os.path.join(args.build, "packrat")
    model = os.path.abspath(os.path.join(args.models_dir, "resnet50", "model.onnx"))
    T = os.cpu_count()
    engine = run_json([packrat, "run", model, "--threads", str(T), "--batch", "1", "--repeat", "40", "--warmup", "3",
                       "--json"])
    s = Server(packrat, model, {"max_batch_size": 1, "plan": f"{T}x1", "max_queue_delay_us": 0})
    run_json([packrat, "bench", "--url", s.url, "--model", "resnet50", "--concurrency", "1", "--duration", "3",
              "--json"])
    served = run_json([packrat, "bench", "--url", s.url, "--model", "resnet50", "--concurrency", "1",
                       "--duration", "15", "--json"])
    stages = {"resnet50": stage_means_us(s.url, "resnet50")}
    s.stop()
    stages["tiny mlp"] = tiny_stages(packrat, 10)
    rows = []
    for name, cfg in (("fat", {"plan": f"{T}x{args.max_batch}"}), ("packrat", {"plan": "auto"})):
        cfg.update({"max_batch_size": args.max_batch, "max_queue_delay_us": 5000})
        s = Server(packrat, model, cfg)
        run_json([packrat, "bench", "--url", s.url, "--model", "resnet50", "--concurrency", "2", "--duration",
                  "3", "--json"])
        r = run_json([packrat, "bench", "--url", s.url, "--model", "resnet50", "--rate", str(args.rate),
                      "--duration", str(args.duration), "--json"])
        r.update({"server": name, "plan": s.plan})
        rows.append(r)
        s.stop()
        print(json.dumps(r), flush=True)
    stamp = utc_stamp()
    cpu = cpu_name()
    out = {"date": stamp, "cpu": cpu, "engine_median_ms": engine["median_ms"], "served": served, "load": rows,
           "stage_means_us": stages}
    os.makedirs(args.out, exist_ok=True)
    json.dump(out, open(os.path.join(args.out, "serve.json"), "w"), indent=1)
    lines = [f"Command: `bench/serve.py --rate {args.rate:g} --duration {args.duration:g} --max-batch {args.max_batch}`  ",
             f"Machine: {cpu}, {T} cores; {stamp}. ResNet-50, batch-1 requests with binary tensors.", "",
             "| path | p50 ms | p99 ms | server overhead per request |", "|---|---|---|---|",
             f"| engine alone (`packrat run --threads {T}`) | {engine['median_ms']:.1f} | - | - |",
             f"| through the server, 1 connection | {served['p50_ms']:.1f} | {served['p99_ms']:.1f} | "
             f"{served['p50_ms'] - engine['median_ms']:.2f} ms |", "",
             "Where a request's time goes (mean microseconds per request from `packrat_request_stage_seconds`; "
             "the same closed loop, one connection, binary tensors; assemble, compute and scatter are per "
             "execution, one request each here):", "",
             "| model | " + " | ".join(STAGES) + " | outside compute |", "|---|" + "---|" * (len(STAGES) + 1),
             *[stage_row(k, v) for k, v in stages.items()], "",
             f"Open loop at {args.rate:g} requests/s for {args.duration:g} s, max batch {args.max_batch}:", "",
             "| server | plan | requests | errors | p50 ms | p90 ms | p99 ms |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['server']} | {r['plan']} | {r['requests']} | {r['errors']} | {r['p50_ms']:.1f} | "
                     f"{r['p90_ms']:.1f} | {r['p99_ms']:.1f} |")
    open(os.path.join(args.out, "serve.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
