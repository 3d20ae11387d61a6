#!/usr/bin/python3
"""Adaptive packrat vs static plans under the same load schedule.

Default (bursty mode):
1. Capacity: each plan packrat prepares for the model (batches 1..max, one
   per power of two) served alone as a static plan; its capacity is the
   highest rate tried that it serves for --capacity-seconds (30) with p99
   under 1 s and no errors (from its predicted throughput down by 25% a
   step, then bisected to within 10%; a plan that serves its prediction is
   not pushed past it).
2. A bursty schedule: phases of --phase-seconds at rates drawn (seeded)
   between 0.2x and 0.9x of the best static capacity, Poisson arrivals
   within each. The best static plan and the adaptive server are both up;
   phase by phase, each runs the phase before it (--lead-seconds, not
   measured; idle before phase 0) then the phase, the two back to back in
   alternating order, so that a pair sees the same machine (its speed
   drifts within minutes). --rounds (2) times the whole schedule. Reports
   p50/p99 per phase (the rounds' mean) and the adaptive/best-static p99
   ratio.
3. From the adaptive server's own history (/dashboard/state: per-second
   queue depth, every switch): no switch to a plan of lower capacity
   while the queue was growing.
With --aa the second server is a second copy of the best static plan (an
A/A run): the two differ by chance alone, so their p99 ratios per phase are
what the bench resolves on the machine (adaptive_bursty_aa.md).
--capacities FILE takes step 1's plans and capacities from an earlier run's
adaptive_bursty JSON (same model, max batch and prepared plans) instead of
measuring them again.

With --schedule (the fixed-schedule mode): three servers of a model
(ResNet-50 or BERT-base; max batch 8), one after the other, each driven by
`packrat bench --schedule` (open loop, Poisson arrivals, rising then falling):
- static fat: one T-thread instance, batch 8, never changes;
- static plan for the average load: packrat's plan for the batch the
  estimator picks at the schedule's average rate, never changes;
- adaptive: plans prepared for batches 1..8, the autoscaler switches between them.
Reports p50/p99 per phase.

usage: bench/adaptive.py [--model resnet50] [--capacity-seconds 30] [--phase-seconds 20] [--phases 6] [--rounds 2]
                         [--lead-seconds 20] [--aa] [--capacities adaptive_bursty.json]
       bench/adaptive.py [--model resnet50] --schedule 4:20,24:20,4:20
"""
import argparse
import json
import os
import random
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import add_paths, cpu_name, run_json, utc_stamp  # noqa: E402
from serve import Server  # noqa: E402


def get_json(url):
    return json.loads(urllib.request.urlopen(url, timeout=30).read())


def base_config(name, max_batch):
    base = {"max_batch_size": max_batch, "queue_capacity": 4096, "request_timeout_ms": 600000}
    if name.startswith(("bert", "gpt2")):  # symbolic sequence axis: served at length 128
        base["dims"] = {"sequence": 128}
    return base


def prepared_plans(packrat, model, name, base):
    probe = Server(packrat, model, dict(base), name)
    plan = get_json(f"{probe.url}/v2/models/{name}/plan")
    probe.stop()
    return sorted(plan["prepared"], key=lambda p: p["batch"])


def drive(packrat, model, name, cfg, load_args):
    """One server with cfg, warmed, then `packrat bench` with load_args; its
    result, and the server's /dashboard/state at the end."""
    s = Server(packrat, model, cfg, name)
    run_json([packrat, "bench", "--url", s.url, "--model", name, "--concurrency", "1", "--duration", "3",
              "--json"])
    r = run_json([packrat, "bench", "--url", s.url, "--model", name, *load_args, "--json"])
    state = get_json(f"{s.url}/dashboard/state")
    r["plan"] = s.plan
    s.stop()
    return r, state


def active_plan(srv, name):
    """The plan a server runs now, as THREADSxBATCH,... (its instances)."""
    o = get_json(f"{srv.url}/v2/models/{name}/plan")
    return ",".join(f"{i['threads']}x{i['batch']}" for i in o["instances"])


def capacity(packrat, model, name, base, p, seconds, runs=5):
    """The highest rate tried that plan p serves with p99 < 1 s and no
    errors: from its predicted throughput down by 25% a step until one
    passes, then bisecting between the highest pass and the lowest failure
    until they are within 10% (at most `runs` runs)."""
    rate = p["batch"] / (p["predicted_latency_ms"] / 1e3)
    passed, failed, tried = 0.0, None, []
    for _ in range(runs):
        r, _ = drive(packrat, model, name, dict(base, plan=p["plan"]),
                     ["--rate", f"{rate:.2f}", "--duration", str(seconds)])
        ok = r["p99_ms"] < 1000 and r["errors"] == 0
        tried.append({"rate": round(rate, 2), "p99_ms": r["p99_ms"], "errors": r["errors"], "ok": ok})
        print(json.dumps({"plan": p["plan"], **tried[-1]}), flush=True)
        if ok:
            passed = rate
        else:
            failed = rate
        if failed is None or (passed and (failed - passed) / failed < 0.1):
            break
        rate = (passed + failed) / 2 if passed else rate * 0.75
    return passed, tried


def drops_while_growing(state, name, capacities):
    """Switches to a plan of lower capacity made while the queue grew (the
    last two whole seconds before the switch)."""
    m = next(x for x in state["models"] if x["name"] == name)
    series, bad = m["series"], []
    queue, start = series["queue"], series["start_unix_ms"]
    for sw in m["switches"]:
        a, b = capacities.get(sw["from"]), capacities.get(sw["to"])
        if a is None or b is None or b >= a:
            continue
        i = int((sw["unix_ms"] - start) // 1000)
        if 2 <= i <= len(queue) and queue[i - 1] > queue[i - 2]:
            bad.append({"from": sw["from"], "to": sw["to"], "why": sw["why"], "queue": queue[i - 2:i],
                        "unix_ms": sw["unix_ms"],
                        "capacity_ratio": b / a})
    return bad


def mean_run(rs):
    """One row from several runs of a server: each phase's p50 and p99 the
    runs' mean, requests, errors and reconfigurations summed, the drops while
    the queue grew of every run; the rest (the whole run's p50/p99, the
    switches) the first run's ("runs" in the JSON holds each run whole)."""
    out = dict(rs[0])
    out["phases"] = [dict(p, p50_ms=sum(r["phases"][i]["p50_ms"] for r in rs) / len(rs),
                          p99_ms=sum(r["phases"][i]["p99_ms"] for r in rs) / len(rs))
                     for i, p in enumerate(rs[0]["phases"])]
    for k in ("requests", "errors", "reconfigurations"):
        out[k] = sum(r.get(k, 0) for r in rs)
    if "drops_while_growing" in out:
        out["drops_while_growing"] = [d for r in rs for d in r["drops_while_growing"]]
    return out


def unit(args, packrat, name, label, srv, schedule, caps):
    """One measured phase on one server: `schedule` is the lead then the
    phase; the phase's results, and for the adaptive server the plans it ran
    in the phase (the one the lead left it, then each switch), its switches
    and its drops to lower capacity while the queue grew (the lead's left out)."""
    at = active_plan(srv, name)
    t0 = time.time() * 1e3
    r = run_json([packrat, "bench", "--url", srv.url, "--model", name, "--schedule", schedule, "--json"])
    ph = dict(r["phases"][1], server=label, reconfigurations=0)
    if label.startswith("adaptive"):
        state = get_json(f"{srv.url}/dashboard/state")
        m = next(x for x in state["models"] if x["name"] == name)
        begin = t0 + args.lead_seconds * 1e3
        during = []
        for sw in sorted((sw for sw in m["switches"] if sw["unix_ms"] >= t0), key=lambda x: x["unix_ms"]):
            if sw["unix_ms"] < begin:
                at = sw["to"]
            else:
                during.append(sw)
        ph.update(plans=[at] + [sw["to"] for sw in during], switches=during, reconfigurations=len(during),
                  drops_while_growing=[d for d in drops_while_growing(state, name, caps) if d["unix_ms"] >= begin])
    return ph


def paired_rounds(args, packrat, name, servers, live, levels, C, caps):
    """The schedule --rounds times, phase by phase, the two servers back to
    back (in alternating order), each unit the phase before it
    (--lead-seconds, not measured: the adaptive server meets the phase with
    the plan that load left it; an idle lead before phase 0) then the phase.
    The machine's speed drifts by several percent within minutes here, and
    at 0.9x of capacity a few percent moves a p99 by tens of percent: a pair
    a minute apart sees the same machine, where whole schedules run one after
    the other did not (their p99s differed up to 2x between two runs of one
    server). Arrivals are the same for both (packrat bench's fixed seed).
    Each server's runs, one per round."""
    runs = {label: [] for label, _ in servers}
    for k in range(args.rounds):
        measured = []
        for i, lv in enumerate(levels):
            lead = levels[i - 1] * C if i else 0.0
            schedule = f"{max(lead, 0.1):.2f}:{args.lead_seconds:g},{max(lv * C, 0.1):.2f}:{args.phase_seconds:g}"
            order = list(zip(servers, live))
            for (label, _), srv in (order if (k + i) % 2 == 0 else order[::-1]):
                ph = unit(args, packrat, name, label, srv, schedule, caps)
                measured.append(ph)
                print(json.dumps({"round": k, "phase": i, **{x: ph[x] for x in ("server", "p50_ms", "p99_ms")}}),
                      flush=True)
        for label, srv in zip(runs, live):
            mine = [p for p in measured if p["server"] == label]
            runs[label].append({"server": label, "plan": srv.plan, "phases": mine,
                                "requests": sum(p["requests"] for p in mine),
                                "errors": sum(p["errors"] for p in mine),
                                "reconfigurations": sum(p["reconfigurations"] for p in mine),
                                "switches": [sw for p in mine for sw in p.get("switches", [])],
                                "drops_while_growing": [d for p in mine for d in p.get("drops_while_growing", [])]})
    return runs


def measured_capacities(args, packrat, model, name, base):
    """Each prepared plan with its capacity ("capacity_rps", and the rates
    "tried"): measured, or with --capacities read from an earlier run's JSON,
    which must be of the same model and max batch and hold the plans the
    server prepares now (each plan then also has "measured_on": that run's
    date; this run's JSON may overwrite that file)."""
    plans = prepared_plans(packrat, model, name, base)
    if args.capacities:
        prev = json.load(open(args.capacities))
        was = {p["plan"]: p for p in prev.get("plans", [])}
        if prev.get("model") != name or prev.get("max_batch", args.max_batch) != args.max_batch:
            raise SystemExit(f"{args.capacities}: not a run of {name} at max batch {args.max_batch}")
        if sorted(was) != sorted(p["plan"] for p in plans):
            raise SystemExit(f"{args.capacities}: plans {sorted(was)}, the server prepares "
                             f"{sorted(p['plan'] for p in plans)} now")
        for p in plans:
            p["capacity_rps"], p["tried"] = was[p["plan"]]["capacity_rps"], was[p["plan"]].get("tried", [])
            p["measured_on"] = was[p["plan"]].get("measured_on", prev.get("date", "?"))
        return plans
    for p in plans:
        p["capacity_rps"], p["tried"] = capacity(packrat, model, name, base, p, args.capacity_seconds)
    return plans


def bursty(args, packrat, model, name, T):
    base = base_config(name, args.max_batch)
    plans = measured_capacities(args, packrat, model, name, base)
    caps = {p["plan"]: p["capacity_rps"] for p in plans}
    best = max(plans, key=lambda p: p["capacity_rps"])
    C = best["capacity_rps"]
    rng = random.Random(args.seed)
    levels = [0.2] + [round(rng.uniform(0.2, 0.9), 2) for _ in range(args.phases - 2)] + [0.9]
    rng.shuffle(levels)
    schedule = ",".join(f"{max(lv * C, 0.1):.2f}:{args.phase_seconds:g}" for lv in levels)
    second = ("best static, second copy", dict(base, plan=best["plan"])) if args.aa else \
        ("adaptive packrat", dict(base))
    servers = [("best static", dict(base, plan=best["plan"])), second]
    live = []
    try:
        for label, cfg in servers:  # both up at once; the one not driven idles
            live.append(Server(packrat, model, cfg, name))
            run_json([packrat, "bench", "--url", live[-1].url, "--model", name, "--concurrency", "1",
                      "--duration", "3", "--json"])
        runs = paired_rounds(args, packrat, name, servers, live, levels, C, caps)
    finally:
        for srv in live:
            srv.stop()
    rows = [mean_run(runs[label]) for label, _ in servers]
    ratios = [a["p99_ms"] / b["p99_ms"] if b["p99_ms"] > 0 else float("nan")
              for a, b in zip(rows[1]["phases"], rows[0]["phases"])]
    stamp, cpu = utc_stamp(), cpu_name()
    suffix = ("" if name == "resnet50" else f"_{name}") + ("_aa" if args.aa else "")
    out = {"date": stamp, "cpu": cpu, "model": name, "max_batch": args.max_batch, "plans": plans,
           "best": best["plan"], "capacity_rps": C, "levels": levels, "schedule": schedule, "rounds": args.rounds,
           "rows": rows, "runs": runs, "p99_ratios": ratios, "aa": args.aa}
    json.dump(out, open(os.path.join(args.out, f"adaptive_bursty{suffix}.json"), "w"), indent=1)
    cmd = (f"bench/adaptive.py --model {name} --max-batch {args.max_batch} --capacity-seconds "
           f"{args.capacity_seconds:g} --phase-seconds {args.phase_seconds:g} --phases {args.phases} "
           f"--seed {args.seed} --rounds {args.rounds} --lead-seconds {args.lead_seconds:g}"
           + (" --aa" if args.aa else "")
           + (f" --capacities {os.path.basename(args.capacities)}" if args.capacities else ""))
    lines = [f"Command: `{cmd}`  ", f"Machine: {cpu}, {T} cores; {stamp}. {name}, batch-1 requests, open loop.", "",
             "Capacity of each static plan (highest rate served for "
             f"{args.capacity_seconds:g} s with p99 < 1 s, no errors"
             + (f"; measured by the run of {plans[0]['measured_on']}, `--capacities`"
                if args.capacities else "") + "):", "",
             "| plan | batch | predicted req/s | capacity req/s |", "|---|---|---|---|"]
    for p in plans:
        lines.append(f"| {p['plan']} | {p['batch']} | {p['batch'] / p['predicted_latency_ms'] * 1e3:.1f} | "
                     f"{p['capacity_rps']:.1f} |")
    head = "| server | plan | reconfigurations | errors | " + " | ".join(
        f"phase {i} ({lv:.2f}x) p50 / p99 ms" for i, lv in enumerate(levels)) + " |"
    lines += ["", f"Bursty schedule (Poisson within each phase; x = share of the best static capacity, "
              f"{C:.1f} req/s). Both servers up; phase by phase each runs the phase before it for "
              f"{args.lead_seconds:g} s (not measured; idle before phase 0), then the phase, the two back to "
              f"back in alternating order (a pair sees the same machine); the schedule {args.rounds} times. "
              "Each cell the mean of the rounds' p50 and p99 (reconfigurations in the measured phases: "
              "their sum):", "", head, "|" + "---|" * (4 + len(levels))]
    for r in rows:
        cells = " | ".join(f"{p['p50_ms']:.0f} / {p['p99_ms']:.0f}" for p in r["phases"])
        lines.append(f"| {r['server']} | {r['plan']} | {r.get('reconfigurations', 0)} | {r['errors']} | {cells} |")
    other = servers[1][0]
    per_round = [[a["p99_ms"] / b["p99_ms"] if b["p99_ms"] > 0 else float("nan")
                  for a, b in zip(runs[other][k]["phases"], runs["best static"][k]["phases"])]
                 for k in range(args.rounds)]
    what = "second copy / first" if args.aa else "adaptive / best static"
    lines.append(f"| {what} p99 | | | | " + " | ".join(f"{x:.2f}" for x in ratios) + " |")
    lines.append(f"| {what} p99, each round | | | | "
                 + " | ".join("; ".join(f"{r[i]:.2f}" for r in per_round) for i in range(len(levels))) + " |")
    if args.aa:
        flat = [x for r in per_round for x in r]
        lines += ["", f"An A/A run: both servers are the best static plan ({best['plan']}), so they differ by chance "
                  f"alone (the machine's noise under the same arrivals). Their p99 ratio ranges {min(flat):.2f} to "
                  f"{max(flat):.2f} over the phases and rounds ({min(ratios):.2f} to {max(ratios):.2f} for the "
                  "rounds' mean): a p99 ratio inside that range between two servers can be chance alone on "
                  "this machine."]
        open(os.path.join(args.out, f"adaptive_bursty{suffix}.md"), "w").write("\n".join(lines) + "\n")
        print("\n".join(lines))
        return
    ran = [[r["phases"][i]["plans"] for r in runs["adaptive packrat"]] for i in range(len(levels))]
    lines.append("| adaptive's plans in the phase (each round) | | | | "
                 + " | ".join("; ".join(" -> ".join(p) for p in rs) for rs in ran) + " |")
    same = [i for i, rs in enumerate(ran) if all(p == [best["plan"]] for p in rs)]
    drops = rows[1]["drops_while_growing"]
    big = [x for x in drops if x["capacity_ratio"] < 0.95]
    each = ", ".join("%s -> %s, %.1f%% lower" % (x["from"], x["to"], 100 * (1 - x["capacity_ratio"]))
                     for x in drops)
    lines += ["", f"Worst adaptive/best-static p99 ratio: {max(ratios):.2f}. Switches to a plan of lower capacity "
              f"(by the capacities above) while the queue grew: {len(drops)}"
              + (f" ({each}; {len(big)} lower by more than 5%: the capacity search ends within 10%)"
                 if drops else "") + "."]
    if same:
        sr = [ratios[i] for i in same]
        lines += ["", f"In phase{'s' if len(same) > 1 else ''} {', '.join(map(str, same))} the adaptive server ran "
                  f"{best['plan']}, the best static plan, throughout, in every round: there the two servers differ "
                  f"by chance alone, and their p99 ratio ({min(sr):.2f} to {max(sr):.2f}) is what this bench "
                  "resolves on this machine."]
    open(os.path.join(args.out, f"adaptive_bursty{suffix}.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--schedule", help="the fixed-schedule mode: RATE:SECONDS,...")
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--capacity-seconds", type=float, default=30)
    ap.add_argument("--phase-seconds", type=float, default=20)
    ap.add_argument("--phases", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2,
                    help="bursty mode: runs of the schedule, each phase on both servers (default 2)")
    ap.add_argument("--lead-seconds", type=float, default=20,
                    help="bursty mode: the phase before, run ahead of each measured phase (default 20)")
    ap.add_argument("--aa", action="store_true",
                    help="bursty mode: the second server a second copy of the best static plan (the bench's noise)")
    ap.add_argument("--capacities", metavar="JSON",
                    help="bursty mode: the plans' capacities from an earlier run's adaptive_bursty JSON")
    add_paths(ap)
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if args.lead_seconds <= 0 or args.phase_seconds <= 0 or args.capacity_seconds <= 0:
        ap.error("--lead-seconds, --phase-seconds and --capacity-seconds must be positive")
    if args.schedule and (args.aa or args.capacities):
        ap.error("--aa and --capacities are options of the bursty mode, not of --schedule")
    if args.capacities and not os.path.isfile(args.capacities):
        ap.error(f"--capacities: no file {args.capacities}")
    packrat = os.path.join(args.build, "packrat")
    os.makedirs(args.out, exist_ok=True)  # before the run: a long run must not end on a missing folder
    if not args.schedule:
        name = args.model
        model = os.path.abspath(os.path.join(args.models_dir, name, "model.onnx"))
        return bursty(args, packrat, model, name, os.cpu_count())
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
