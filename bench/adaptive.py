#!/usr/bin/python3
"""Adaptive packrat vs static plans under the same load schedule.

Three servers of a model (ResNet-50 or BERT-base; max batch 8), one after the other, each driven by
`packrat bench --schedule` (open loop, Poisson arrivals, rising then falling):
- static fat: one T-thread instance, batch 8, never changes;
- static plan for the average load: packrat's plan for the batch the
  estimator picks at the schedule's average rate, never changes;
- adaptive: plans prepared for batches 1..8, the autoscaler switches between them.
Reports p50/p99 per phase.

usage: bench/adaptive.py [--model resnet50] [--schedule 4:20,24:20,4:20]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import add_paths, cpu_name, run_json, utc_stamp  # noqa: E402
from serve import Server  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--schedule", default="4:20,24:20,4:20")
    ap.add_argument("--max-batch", type=int, default=8)
    add_paths(ap)
    args = ap.parse_args()
    packrat = os.path.join(args.build, "packrat")
    name = args.model
    model = os.path.abspath(os.path.join(args.models_dir, name, "model.onnx"))
    T = os.cpu_count()
    phases = [tuple(map(float, p.split(":"))) for p in args.schedule.split(",")]
    avg_rate = sum(r * s for r, s in phases) / sum(s for _, s in phases)
    # the transformer exports have a symbolic sequence axis: serve them at length 128
    base = {"max_batch_size": args.max_batch}
    if name.startswith(("bert", "gpt2")):
        base["dims"] = {"sequence": 128}
    # the estimator's choice at the average rate, from the adaptive server's own plans
    probe = Server(packrat, model, dict(base), name)
    plan = json.loads(os.popen(f"curl -s {probe.url}/v2/models/{name}/plan").read())
    probe.stop()
    prepared = sorted(plan["prepared"], key=lambda p: p["batch"])
    avg_plan = next((p for p in prepared if avg_rate * p["predicted_latency_ms"] / 1e3 <= p["batch"]), prepared[-1])
    configs = [("static fat", {"plan": f"{T}x{args.max_batch}"}),
               (f"static plan for the average ({avg_rate:.1f} req/s)", {"plan": avg_plan["plan"]}),
               ("adaptive packrat", {})]
    rows = []
    for label, cfg in configs:
        cfg.update(base)
        cfg.update({"queue_capacity": 4096, "request_timeout_ms": 600000})
        s = Server(packrat, model, cfg, name)
        run_json([packrat, "bench", "--url", s.url, "--model", name, "--concurrency", "1", "--duration", "3",
                  "--json"])
        r = run_json([packrat, "bench", "--url", s.url, "--model", name, "--schedule", args.schedule, "--json"])
        r.update({"server": label, "plan": s.plan})
        rows.append(r)
        s.stop()
        print(json.dumps({k: r[k] for k in ("server", "plan", "requests", "errors", "p50_ms", "p99_ms")}), flush=True)
    stamp = utc_stamp()
    cpu = cpu_name()
    suffix = "" if name == "resnet50" else f"_{name}"
    json.dump({"date": stamp, "cpu": cpu, "model": name, "schedule": args.schedule, "rows": rows},
              open(os.path.join(args.out, f"adaptive{suffix}.json"), "w"), indent=1)
    head = "| server | start plan | reconfigurations | errors | " + " | ".join(
        f"phase {i} ({r:g} req/s) p50 / p99 ms" for i, (r, _) in enumerate(phases)) + " |"
    lines = [f"Command: `bench/adaptive.py --model {name} --schedule {args.schedule} --max-batch {args.max_batch}`  ",
             f"Machine: {cpu}, {T} cores; {stamp}. {name}, batch-1 requests, open loop.", "", head,
             "|" + "---|" * (4 + len(phases))]
    for r in rows:
        cells = " | ".join(f"{p['p50_ms']:.0f} / {p['p99_ms']:.0f}" for p in r["phases"])
        lines.append(f"| {r['server']} | {r['plan']} | {r.get('reconfigurations', 0)} | {r['errors']} | {cells} |")
    open(os.path.join(args.out, f"adaptive{suffix}.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
