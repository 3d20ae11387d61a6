#!/usr/bin/python3
"""bf16 against float32, side by side in one run: `packrat run --precision
bf16` vs `packrat run` (fp32) on the same model and the same seeded input.

For each model (ResNet-50, BERT-base at sequence 128, the PaddleOCR v4
recognizer at 48x320), thread count t and batch b: both precisions pinned
with taskset to cores 0..t-1, taking turns --rounds times (the median of
the round medians is kept). Reports the medians, the speed-up fp32/bf16 and
how far the bf16 answer is from the fp32 one: the largest difference over
the fp32 output's range (max - min), and for ResNet-50 whether each row's
top-1 class is the same. Needs a CPU with native bf16 (AVX512_BF16 or AMX):
elsewhere it says so and exits 1.

usage: bench/bf16.py [--models resnet50,bert,ocr_rec] [--threads 1,2] [--batches 1,4]
                     [--repeat 5] [--rounds 3]
Needs: a build in build/ (its npm fixture for the OCR model: ctest -R npm_install)
and models from tools/export_models.py.
"""
import argparse
import os
import shutil
import sys

import numpy as np

from common import add_paths, cpu_name, run_json, sample_input, utc_stamp, write_results
from quant import input_name, model_path


def run(packrat, path, name, inp, t, precision, args, out_dir):
    cores = ",".join(str(i) for i in range(t))
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    return run_json(["taskset", "-c", cores, packrat, "run", path, "--input", f"{name}={inp}", "--threads",
                     str(t), "--precision", precision, "--repeat", str(args.repeat), "--warmup", "2",
                     "--output-dir", out_dir, "--json"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet50,bert,ocr_rec")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    add_paths(ap)
    ap.add_argument("--name", default="bf16")
    args = ap.parse_args()
    packrat = os.path.join(args.build, "packrat")
    work = os.path.join(args.out, "bf16.tmp")
    os.makedirs(work, exist_ok=True)
    probe = run_json([packrat, "run", model_path("resnet50", args), "--precision", "fp32", "--json"])
    if not probe["isa"].startswith(("avx512_core_bf16", "avx512_core_amx")):
        print(f"bench/bf16.py: this CPU runs {probe['isa']}: no native bf16", file=sys.stderr)
        return 1
    rows = []
    for model in args.models.split(","):
        path = model_path(model, args)
        name = input_name(path)
        for t in map(int, args.threads.split(",")):
            for b in map(int, args.batches.split(",")):
                inp = os.path.join(work, f"{model}_{b}.npy")
                np.save(inp, sample_input(model, b, b))
                med = {"fp32": [], "bf16": []}
                for _ in range(args.rounds):
                    for prec in ("fp32", "bf16"):
                        r = run(packrat, path, name, inp, t, prec, args, os.path.join(work, prec))
                        assert r["precision"] == prec, r
                        med[prec].append(r["median_ms"])
                f32 = np.load(os.path.join(work, "fp32", "output_0.npy")).astype(np.float64)
                b16 = np.load(os.path.join(work, "bf16", "output_0.npy")).astype(np.float64)
                span = float(f32.max() - f32.min()) or 1.0
                row = {"model": model, "threads": t, "batch": b,
                       "fp32_ms": float(np.median(med["fp32"])), "bf16_ms": float(np.median(med["bf16"])),
                       "max_diff_of_range": float(np.abs(f32 - b16).max()) / span}
                row["speedup"] = row["fp32_ms"] / row["bf16_ms"]
                if model == "resnet50":
                    row["top1_same"] = int((f32.argmax(-1) == b16.argmax(-1)).sum())
                rows.append(row)
                print(row, flush=True)
    stamp = utc_stamp()
    machine = f"{cpu_name()} ({probe['isa']}), {os.cpu_count()} cores"
    lines = [f"Command: `bench/bf16.py --models {args.models} --threads {args.threads} --batches {args.batches} "
             f"--repeat {args.repeat} --rounds {args.rounds}`  ",
             f"Machine: {machine}; {stamp}. Median ms (median over rounds); speed-up = fp32 / bf16; "
             "difference: the largest |bf16 - fp32| over the fp32 output's range.", "",
             "| model | t | b | fp32 ms | bf16 ms | speed-up | difference | top-1 same |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        top = f"{r['top1_same']}/{r['batch']}" if "top1_same" in r else ""
        lines.append(f"| {r['model']} | {r['threads']} | {r['batch']} | {r['fp32_ms']:.1f} | {r['bf16_ms']:.1f} "
                     f"| {r['speedup']:.2f}x | {100 * r['max_diff_of_range']:.2f}% | {top} |")
    shutil.rmtree(work, ignore_errors=True)
    write_results(args.out, args.name, stamp, machine, rows, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
