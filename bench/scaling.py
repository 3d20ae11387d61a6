#!/usr/bin/python3
"""Batch 1 on two threads: how each operator type scales from 1 to 2 threads.

For each model, `packrat run --profile-kernels` at batch 1 with 1 and with
2 threads (pinned with taskset to cores 0 and 0,1), taking turns --rounds
times; per operator type the median kernel time of each, the speed-up
t1/t2, and the whole model's. An operator type under --flag (1.8x) that
holds at least 1% of the one-thread time is marked: its parallel split is
the one to look at. With --isa-cap AVX2 packrat runs with
ONEDNN_MAX_CPU_ISA=AVX2 (the AVX2 kernels and layouts).

usage: bench/scaling.py [--models resnet50,inception_v3,bert,gpt2] [--rounds 3] [--isa-cap AVX2]
"""
import argparse
import os
import sys

import numpy as np

from common import add_paths, cpu_name, run_json, sample_input, utc_stamp, write_results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet50,inception_v3,bert,gpt2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--flag", type=float, default=1.8)
    ap.add_argument("--isa-cap", choices=["AVX2"])
    add_paths(ap)
    ap.add_argument("--name", default="scaling")
    args = ap.parse_args()
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA=args.isa_cap) if args.isa_cap else None
    packrat = os.path.join(args.build, "packrat")
    tmp = os.path.join(args.out, "scaling.tmp")
    os.makedirs(tmp, exist_ok=True)
    rows, isa = [], ""
    for model in args.models.split(","):
        inp = os.path.join(tmp, f"{model}.npy")
        np.save(inp, sample_input(model, 1, 1))
        runs = {1: [], 2: []}
        for _ in range(args.rounds):
            for t in (1, 2):
                r = run_json(["taskset", "-c", "0" if t == 1 else "0,1", packrat, "run",
                              os.path.join(args.models_dir, model, "model.onnx"), "--input", f"input={inp}",
                              "--threads", str(t), "--repeat", str(args.repeat), "--warmup", "2",
                              "--profile-kernels", "--json"], env=env)
                isa = r["isa"]
                runs[t].append(r)
        whole = {t: float(np.median([r["median_ms"] for r in runs[t]])) for t in (1, 2)}
        rows.append({"model": model, "op": "(whole model)", "t1_ms": whole[1], "t2_ms": whole[2],
                     "speedup": whole[1] / whole[2], "share": 1.0})
        ops = sorted(runs[1][0]["kernel_ms_by_op"], key=lambda o: -runs[1][0]["kernel_ms_by_op"][o])
        for op in ops:
            ms = {t: float(np.median([r["kernel_ms_by_op"].get(op, 0.0) for r in runs[t]])) for t in (1, 2)}
            share = ms[1] / whole[1]
            if share < 0.005 or ms[2] <= 0:
                continue
            rows.append({"model": model, "op": op, "t1_ms": ms[1], "t2_ms": ms[2], "speedup": ms[1] / ms[2],
                         "share": share})
        for r in rows:
            if r["model"] == model:
                print(r, flush=True)
    stamp = utc_stamp()
    machine = f"{cpu_name()}, kernels {isa}, {os.cpu_count()} cores"
    cap = f" --isa-cap {args.isa_cap}" if args.isa_cap else ""
    lines = [f"Command: `bench/scaling.py --models {args.models} --rounds {args.rounds}{cap}`  ",
             f"Machine: {machine}; {stamp}. Batch 1; kernel ms per run (median over rounds); speed-up = t1 / t2; "
             f"marked: under {args.flag}x with at least 1% of the one-thread time.", "",
             "| model | op | share at t1 | t1 ms | t2 ms | speed-up |", "|---|---|---|---|---|---|"]
    for r in rows:
        mark = " (under)" if r["speedup"] < args.flag and r["share"] >= 0.01 else ""
        lines.append(f"| {r['model']} | {r['op']} | {100 * r['share']:.1f}% | {r['t1_ms']:.2f} | {r['t2_ms']:.2f} "
                     f"| {r['speedup']:.2f}x{mark} |")
    write_results(args.out, args.name, stamp, machine, rows, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
