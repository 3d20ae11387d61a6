#!/usr/bin/python3
"""Engine speed, side by side in one run: packrat vs ONNX Runtime vs PyTorch.

For each model, thread count t and batch b: the same random input (fixed
seed) is fed to `packrat run`, ONNX Runtime (npm onnxruntime-node, graph
optimizations on, intraOpNumThreads = t) and PyTorch (TorchScript frozen and
optimized, torch.set_num_threads(t)), each pinned with taskset to cores
0..t-1. Reports median latencies, the ratios packrat/peer, and packrat's
fraction of the machine's peak (model FLOPs / latency / t / per-core peak,
the peak measured by bench/peak_flops).

usage: bench/engine_peers.py [--models resnet50,inception_v3] [--threads 1,2]
                             [--batches 1,2,4,8,16] [--repeat 7] [--out bench/results]
Needs: scripts/install-deps.sh, a build in build/, models from
tools/export_models.py, and `npm install --ignore-scripts` in bench/.
"""
import argparse
import json
import os
import sys

import numpy as np

from common import ROOT, add_paths, cpu_name, run_json, sample_input, utc_stamp, write_results



def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet50,inception_v3")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", default="1,2,4,8,16")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per engine per round")
    ap.add_argument("--rounds", type=int, default=3,
                    help="the engines take turns this many times; the median of round medians is kept")
    add_paths(ap)
    ap.add_argument("--name", default="engine_peers", help="result files: NAME.json and NAME.md")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    packrat = os.path.join(args.build, "packrat")
    peak = run_json(["taskset", "-c", "0", os.path.join(args.build, "bench", "peak_flops")])["peak_gflops_per_core"]
    tmp = os.path.join(args.out, "inputs.tmp")
    os.makedirs(tmp, exist_ok=True)
    rows = []
    for model in args.models.split(","):
        onnx_path = os.path.join(args.models_dir, model, "model.onnx")
        for t in map(int, args.threads.split(",")):
            cores = ",".join(str(i) for i in range(t))
            for b in map(int, args.batches.split(",")):
                inp = os.path.join(tmp, f"{model}_{b}.npy")
                np.save(inp, sample_input(model, b, b))
                pin = ["taskset", "-c", cores]
                med = {"packrat": [], "ort": [], "torch": []}
                for _ in range(args.rounds):
                    pr = run_json(pin + [packrat, "run", onnx_path, "--input", f"input={inp}", "--threads", str(t),
                                   "--repeat", str(args.repeat), "--warmup", "2", "--json"])
                    med["packrat"].append(pr["median_ms"])
                    med["ort"].append(run_json(pin + ["node", os.path.join(ROOT, "bench", "ort_run.js"), onnx_path,
                                                inp, str(t), str(args.repeat)])["median_ms"])
                    med["torch"].append(run_json(pin + ["/usr/bin/python3", os.path.join(ROOT, "bench", "torch_run.py"),
                                                  model, inp, str(t), str(args.repeat)])["median_ms"])
                p, o, q = (float(np.median(med[k])) for k in ("packrat", "ort", "torch"))
                gflop = pr["gflop"]
                row = {"model": model, "threads": t, "batch": b, "packrat_ms": p, "ort_ms": o, "torch_ms": q,
                       "packrat_vs_ort": p / o, "packrat_vs_torch": p / q,
                       "peak_fraction": gflop / (p * 1e-3) / t / peak}
                rows.append(row)
                print(json.dumps(row), flush=True)
    stamp = utc_stamp()
    machine = f"{cpu_name()}, {os.cpu_count()} cores, per-core peak {peak:.0f} GFLOP/s fp32"
    lines = [f"Command: `bench/engine_peers.py --models {args.models} --threads {args.threads} "
             f"--batches {args.batches} --repeat {args.repeat} --rounds {args.rounds} --name {args.name}`  ",
             f"Machine: {machine}; {stamp}. Median ms (median over rounds of each round's median); ratio < 1 means packrat is faster.", "",
             "| model | t | b | packrat ms | ORT ms | PyTorch ms | packrat/ORT | packrat/PyTorch | % of peak |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['threads']} | {r['batch']} | {r['packrat_ms']:.1f} | {r['ort_ms']:.1f} "
                     f"| {r['torch_ms']:.1f} | {r['packrat_vs_ort']:.2f} | {r['packrat_vs_torch']:.2f} "
                     f"| {100 * r['peak_fraction']:.0f}% |")
    write_results(args.out, args.name, stamp, machine, rows, lines)


if __name__ == "__main__":
    sys.exit(main())
