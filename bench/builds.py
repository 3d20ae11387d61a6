#!/usr/bin/python3
"""Two builds of packrat side by side in one run: is a change slower?

For each model, thread count t and batch b, `packrat run` of build A and of
build B take turns (--rounds times, --repeat timed runs each, the same seeded
input, pinned with taskset to cores 0..t-1); the median of the round medians
is kept and B/A reported. Plans: the same for `packrat run --plan` with the
fat instance (T x B) and T instances of 1 thread (1 x B/T each).

usage: bench/builds.py --a OLD/packrat --b NEW/packrat [--models resnet50,bert]
                       [--threads 1,2] [--batches 1,4] [--plans 4] [--rounds 5] [--repeat 5]
                       [--limit 1.03]
Exits 1 when B/A exceeds --limit at some point. Writes NAME.json and NAME.md.
"""
import argparse
import json
import os
import statistics
import sys

from common import add_paths, cpu_name, run_json, utc_stamp


def median_of_rounds(binaries, cmd_tail, rounds, pin):
    per = {k: [] for k in binaries}
    for _ in range(rounds):
        for key, exe in binaries.items():
            r = run_json(["taskset", "-c", pin, exe, "run"] + cmd_tail)
            per[key].append(r["median_ms"])
    return {k: statistics.median(v) for k, v in per.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="the packrat binary before the change")
    ap.add_argument("--b", required=True, help="the packrat binary after the change")
    ap.add_argument("--models", default="resnet50,bert")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--plans", default="4", help="batch sizes for the plan runs (empty: none)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--limit", type=float, default=1.03)
    ap.add_argument("--name", default="builds")
    add_paths(ap)
    a = ap.parse_args()
    T = os.cpu_count() or 1
    binaries = {"A": a.a, "B": a.b}
    rows = []
    for model in a.models.split(","):
        path = os.path.join(a.models_dir, model, "model.onnx")
        # transformers: 128 tokens (the exports' dynamic sequence axis)
        dims = ["--dim", "sequence=128"] if model.startswith(("bert", "gpt2")) else []
        for t in map(int, a.threads.split(",")):
            for b in map(int, a.batches.split(",")):
                tail = [path, "--threads", str(t), "--batch", str(b), "--repeat", str(a.repeat), "--json"] + dims
                m = median_of_rounds(binaries, tail, a.rounds, f"0-{t - 1}")
                rows.append({"model": model, "point": f"engine t{t} b{b}", **m})
                print(json.dumps(rows[-1]), flush=True)
        for B in [int(x) for x in a.plans.split(",") if x]:
            for plan in (f"{T}x{B}", ",".join([f"1x{B // T}"] * T)):
                tail = [path, "--batch", str(B), "--plan", plan, "--repeat", str(a.repeat), "--json"] + dims
                m = median_of_rounds(binaries, tail, a.rounds, f"0-{T - 1}")
                rows.append({"model": model, "point": f"plan {plan}", **m})
                print(json.dumps(rows[-1]), flush=True)
    worst = 0.0
    lines = [f"Command: `bench/builds.py --a {a.a} --b {a.b} --models {a.models} --threads {a.threads} "
             f"--batches {a.batches} --plans {a.plans} --rounds {a.rounds} --repeat {a.repeat}`  ",
             f"Machine: {cpu_name()}, {T} cores; {utc_stamp()}. A: `{a.a}`, B: `{a.b}`. "
             f"Median of {a.rounds} round medians ({a.repeat} runs each), builds taking turns.\n",
             "| model | point | A ms | B ms | B/A |", "|---|---|---|---|---|"]
    for r in rows:
        ratio = r["B"] / r["A"]
        worst = max(worst, ratio)
        lines.append(f"| {r['model']} | {r['point']} | {r['A']:.2f} | {r['B']:.2f} | {ratio:.3f} |")
    lines.append(f"\nWorst B/A: {worst:.3f} (limit {a.limit}).")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, a.name + ".json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(a.out, a.name + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if worst > a.limit else 0


if __name__ == "__main__":
    sys.exit(main())
