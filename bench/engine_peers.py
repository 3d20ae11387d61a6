#!/usr/bin/python3
"""Engine speed, side by side in one run: packrat vs ONNX Runtime vs PyTorch.

For each model, thread count t and batch b: the same random input (fixed
seed) is fed to `packrat run`, ONNX Runtime (npm onnxruntime-node, graph
optimizations on, intraOpNumThreads = t) and PyTorch (TorchScript frozen and
optimized, torch.set_num_threads(t)), each pinned with taskset to cores
0..t-1. Reports median latencies, the ratios packrat/peer, and packrat's
fraction of the machine's peak (model FLOPs / latency / t / per-core peak,
the peak measured by bench/peak_flops).

With --isa-cap AVX2 (the AVX2 proxy on an AVX-512 machine): packrat runs
with ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN's AVX2 kernels, and packrat's AVX2
MatMul kernel), the peak is the 256-bit FMA peak (peak_flops under the same
setting), the peers are not run (ONNX Runtime's kernels cannot be capped),
and packrat's percent of the AVX2 peak is set against ONNX Runtime's on an
AVX2 machine (bench/reference/ort_avx2_zen3.json) where that has the point.

usage: bench/engine_peers.py [--models resnet50,inception_v3] [--threads 1,2]
                             [--batches 1,2,4,8,16] [--repeat 7] [--out bench/results]
                             [--isa-cap AVX2]
Needs: scripts/install-deps.sh, a build in build/, models from
tools/export_models.py, and `npm install --ignore-scripts` in bench/.
"""
import argparse
import json
import os
import sys

import numpy as np

from common import ROOT, add_paths, cpu_name, run_json, sample_input, utc_stamp, write_results



def points(args):
    """(model, onnx path, t, b, input file) of the grid, the seeded input saved."""
    tmp = os.path.join(args.out, "inputs.tmp")
    os.makedirs(tmp, exist_ok=True)
    for model in args.models.split(","):
        onnx_path = os.path.join(args.models_dir, model, "model.onnx")
        for t in map(int, args.threads.split(",")):
            for b in map(int, args.batches.split(",")):
                inp = os.path.join(tmp, f"{model}_{b}.npy")
                np.save(inp, sample_input(model, b, b))
                yield model, onnx_path, t, b, inp


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
    ap.add_argument("--isa-cap", choices=["AVX2"], help="hold packrat to AVX2 (the capped proxy; no peers)")
    args = ap.parse_args()
    if args.isa_cap:
        return capped(args)
    os.makedirs(args.out, exist_ok=True)
    packrat = os.path.join(args.build, "packrat")
    peak = run_json(["taskset", "-c", "0", os.path.join(args.build, "bench", "peak_flops")])["peak_gflops_per_core"]
    rows = []
    for model, onnx_path, t, b, inp in points(args):
        pin = ["taskset", "-c", ",".join(str(i) for i in range(t))]
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


def capped(args):
    """The AVX2 proxy: packrat alone under ONEDNN_MAX_CPU_ISA, by percent of that ISA's peak."""
    os.makedirs(args.out, exist_ok=True)
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA=args.isa_cap)
    packrat = os.path.join(args.build, "packrat")
    peak = run_json(["taskset", "-c", "0", os.path.join(args.build, "bench", "peak_flops")], env=env)
    assert peak["isa"] == args.isa_cap.lower(), peak
    peak = peak["peak_gflops_per_core"]
    with open(os.path.join(ROOT, "bench", "reference", "ort_avx2_zen3.json")) as f:
        ref = {(r["model"], r["threads"], r["batch"]): r for r in json.load(f)["rows"]}
    rows = []
    for model, onnx_path, t, b, inp in points(args):
        meds = []
        for _ in range(args.rounds):
            pr = run_json(["taskset", "-c", ",".join(str(i) for i in range(t)), packrat, "run", onnx_path,
                           "--input", f"input={inp}", "--threads", str(t), "--repeat", str(args.repeat),
                           "--warmup", "2", "--json"], env=env)
            assert pr["isa"].startswith(args.isa_cap.lower()), pr["isa"]
            meds.append(pr["median_ms"])
        p = float(np.median(meds))
        row = {"model": model, "threads": t, "batch": b, "packrat_ms": p, "isa": pr["isa"],
               "matmul_kernel": pr["matmul_kernel"], "peak_fraction": pr["gflop"] / (p * 1e-3) / t / peak}
        r = ref.get((model, t, b))
        if r:
            row["ort_ref_peak_fraction"] = r["peak_fraction"]
            row["packrat_minus_ort_points"] = 100 * (row["peak_fraction"] - r["peak_fraction"])
        rows.append(row)
        print(json.dumps(row), flush=True)
    stamp = utc_stamp()
    machine = (f"{cpu_name()} held to {args.isa_cap} (ONEDNN_MAX_CPU_ISA={args.isa_cap}: the capped proxy of an "
               f"{args.isa_cap} machine), {os.cpu_count()} cores, per-core {args.isa_cap} FMA peak {peak:.0f} GFLOP/s fp32")
    lines = [f"Command: `bench/engine_peers.py --isa-cap {args.isa_cap} --models {args.models} --threads {args.threads} "
             f"--batches {args.batches} --repeat {args.repeat} --rounds {args.rounds} --name {args.name}`  ",
             f"Machine: {machine}; {stamp}. Median ms (median over rounds). ORT % of peak: ONNX Runtime 1.30 on an "
             "AVX2 machine (AMD EPYC Zen 3, bench/reference/ort_avx2_zen3.json), where measured.", "",
             "| model | t | b | packrat ms | packrat % of AVX2 peak | ORT % of AVX2 peak (Zen 3) | difference |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        o = r.get("ort_ref_peak_fraction")
        ort = f"{100 * o:.0f}%" if o else ""
        diff = f"{r.get('packrat_minus_ort_points', 0):+.0f} points" if o else ""
        lines.append(f"| {r['model']} | {r['threads']} | {r['batch']} | {r['packrat_ms']:.1f} "
                     f"| {100 * r['peak_fraction']:.0f}% | {ort} | {diff} |")
    write_results(args.out, args.name, stamp, machine, rows, lines)


if __name__ == "__main__":
    sys.exit(main())
