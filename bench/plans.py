#!/usr/bin/python3
"""Plans on real runs: the fat instance vs the plan packrat picks vs every
other feasible configuration (the oracle), side by side in one run.

For each model and batch B: profiles the model (cached by packrat), asks
`packrat plan --json` for its plan and predicted latency, then measures with
`packrat run --plan` (pinned instances in one process): the fat instance
(T threads x B), the picked plan, and every configuration of at most T
instances (threads adding up to at most T, batches to B). Also measures the
resident memory of 1 instance vs T instances of the first model.

usage: bench/plans.py [--models resnet50,inception_v3] [--batches 2,4,8,16] [--repeat 5]
"""
import argparse
import itertools
import json
import os
import subprocess
import sys

from common import add_paths, cpu_name, run_json, utc_stamp


def configs(T, B):
    """Every multiset of instances (t, b): sum t <= T, sum b = B, at most T instances."""
    out = set()
    for n in range(1, T + 1):
        for threads in itertools.combinations_with_replacement(range(1, T + 1), n):
            if sum(threads) > T:
                continue
            for cuts in itertools.combinations(range(1, B), n - 1):
                bs = [b - a for a, b in zip((0,) + cuts, cuts + (B,))]
                out.add(tuple(sorted(zip(threads, bs), reverse=True)))
    return sorted(out)


def spec(cfg):
    return ",".join(f"{t}x{b}" for t, b in cfg)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet50,inception_v3")
    ap.add_argument("--batches", default="2,4,8,16")
    ap.add_argument("--repeat", type=int, default=5)
    add_paths(ap)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    packrat = os.path.join(args.build, "packrat")
    rows = []
    T = None
    for model in args.models.split(","):
        path = os.path.join(args.models_dir, model, "model.onnx")
        subprocess.run([packrat, "profile", path, "--max-batch", "16"], check=True, capture_output=True)
        for B in map(int, args.batches.split(",")):
            plan = run_json([packrat, "plan", path, "--batch", str(B), "--json"])
            T = plan["cores"]
            picked = tuple(sorted(((i["threads"], i["batch"]) for i in plan["instances"]), reverse=True))

            def measure(cfg):
                return run_json([packrat, "run", path, "--batch", str(B), "--plan", spec(cfg),
                                 "--repeat", str(args.repeat), "--warmup", "1", "--json"])["median_ms"]

            measured = {cfg: measure(cfg) for cfg in configs(T, B)}
            if picked not in measured:
                measured[picked] = measure(picked)
            fat = ((T, B),)
            best = min(measured, key=measured.get)
            row = {"model": model, "batch": B, "cores": T, "plan": spec(picked),
                   "predicted_ms": plan["latency_ms"], "plan_ms": measured[picked], "fat_ms": measured[fat],
                   "oracle": spec(best), "oracle_ms": measured[best],
                   "all": {spec(c): v for c, v in measured.items()}}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "all"}), flush=True)
    first = os.path.join(args.models_dir, args.models.split(",")[0], "model.onnx")
    one = run_json([packrat, "run", first, "--batch", "1", "--plan", "1x1", "--repeat", "3", "--json"])["rss_mb"]
    many = run_json([packrat, "run", first, "--batch", str(T), "--plan", ",".join(["1x1"] * T), "--repeat", "3",
                     "--json"])["rss_mb"]
    memory = {"model": args.models.split(",")[0], "instances": T, "rss_one_mb": one, "rss_many_mb": many,
              "ratio": many / one}
    print(json.dumps(memory))
    stamp = utc_stamp()
    cpu = cpu_name()
    with open(os.path.join(args.out, "plans.json"), "w") as f:
        json.dump({"date": stamp, "cpu": cpu, "rows": rows, "memory": memory}, f, indent=1)
    lines = [f"Command: `bench/plans.py --models {args.models} --batches {args.batches} --repeat {args.repeat}`  ",
             f"Machine: {cpu}, {T} cores; {stamp}. Median ms of `packrat run --plan` (pinned instances, one process).",
             "",
             "| model | B | fat (1 x T threads) ms | packrat plan | predicted ms | measured ms | pred. error | "
             "oracle (best of all configs) | oracle ms | fat / plan | plan / oracle |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        err = 100 * (r["predicted_ms"] - r["plan_ms"]) / r["plan_ms"]
        lines.append(f"| {r['model']} | {r['batch']} | {r['fat_ms']:.1f} | {r['plan']} | {r['predicted_ms']:.1f} | "
                     f"{r['plan_ms']:.1f} | {err:+.1f}% | {r['oracle']} | {r['oracle_ms']:.1f} | "
                     f"{r['fat_ms'] / r['plan_ms']:.2f} | {r['plan_ms'] / r['oracle_ms']:.2f} |")
    lines += ["", f"Resident memory, {memory['model']}: 1 instance {one:.0f} MB, {T} instances {many:.0f} MB "
                  f"({memory['ratio']:.2f}x)."]
    with open(os.path.join(args.out, "plans.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
