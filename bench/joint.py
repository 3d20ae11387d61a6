#!/usr/bin/python3
"""Two models, one host: sharing every core, the best static split, and the
joint plan with online re-division, side by side in one run.

One server serves ResNet-50 and MobileNet-v3-large (--models) from one
repository. Two open-loop Poisson loads (`packrat bench --schedule`), one
per model, shift between the models in phases: the first model busy and the
second light, then the other way round, then both moderate. The rates are
fractions of each model's one-core capacity (its batch-1 latency on one
thread, `packrat run`), so that the loads fit every split on any machine.
Each configuration is a fresh server on the same --cores:

  (a) shared: both models "cores": {"share": true}, each planning every
      core (what each model did alone before the joint plan);
  (b) static: each split c / T-c (c in 1..T-1, at most --splits of them,
      spread), "cores": {"min": c, "max": c}, --balance-window-s 0; the
      split with the lowest worst p99 is kept;
  (c) joint: no "cores" setting, the balancer on (its default window).

Reported per configuration, model and phase: requests, errors, p50 and p99;
per configuration the worst p99 over models and phases and the balancer's
moves (packrat_core_moves_total). Then the joint optimizer alone on the two
models' profiles measured here, stretched to 16 and 64 cores (latency of t
threads from the measured 1..T points by a fit of a + b / t per batch), for
a few load mixes: the divisions it would choose.

The configurations run --rounds times, each round in the other order (a, b,
c, then c, b, a: a drift of the machine's speed weighs on all alike); a
configuration's worst p99 is the mean over the rounds of its worst.

usage: bench/joint.py [--cores T] [--phase-seconds 30] [--rounds 2] [--splits 3]
                      [--models resnet50,mobilenet_v3_large]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

from common import add_paths, cpu_name, run_json, utc_stamp, write_results

# (first model's, second model's) share of its one-core capacity, per phase
PHASES = ((0.7, 0.15), (0.15, 0.7), (0.4, 0.4))


class Server:
    """packrat serve on a repository of the models with these configs."""

    def __init__(self, packrat, models_dir, names, configs, cores, extra=()):
        self.dir = tempfile.mkdtemp()
        for name, cfg in zip(names, configs):
            os.makedirs(f"{self.dir}/repo/{name}/1")
            os.symlink(os.path.join(models_dir, name, "model.onnx"), f"{self.dir}/repo/{name}/1/model.onnx")
            json.dump(cfg, open(f"{self.dir}/repo/{name}/config.json", "w"))
        self.log_path = f"{self.dir}/log"
        self.log = open(self.log_path, "w+")
        self.p = subprocess.Popen([packrat, "serve", "--model-repository", f"{self.dir}/repo", "--http-port",
                                   "0", "--cores", cores, *extra], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(6000):
            self.log.seek(0)
            m = re.search(r"ready: (http://127.0.0.1:\d+)", self.log.read())
            if m:
                self.url = m.group(1)
                return
            if self.p.poll() is not None:
                raise RuntimeError("server exited: " + open(self.log_path).read()[-2000:])
            time.sleep(0.1)
        raise RuntimeError("server did not start")

    def shares(self):
        host = json.loads(urllib.request.urlopen(self.url + "/v2/plan", timeout=30).read())
        return {m["name"]: len(m["share"]["cores"]) if m["share"]["divided"] else "all" for m in host["models"]}

    def moves(self):
        text = urllib.request.urlopen(self.url + "/metrics", timeout=30).read().decode()
        m = re.search(r"^packrat_core_moves_total (\d+)", text, re.M)
        return int(m.group(1)) if m else 0

    def stop(self):
        self.p.terminate()
        self.p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def one_core_rps(packrat, models_dir, name):
    """Requests per second one thread serves at batch 1 (packrat run)."""
    r = run_json([packrat, "run", os.path.join(models_dir, name, "model.onnx"), "--threads", "1", "--batch", "1",
                  "--repeat", "10", "--json"])
    return 1000.0 / r["median_ms"]


def measure(packrat, models_dir, names, caps, configs, cores, seconds, extra=()):
    """Runs the phased loads on a fresh server; per model the bench's JSON,
    and the balancer's moves."""
    s = Server(packrat, models_dir, names, configs, cores, extra)
    try:
        start_shares = s.shares()
        procs = []
        for k, name in enumerate(names):
            sched = ",".join(f"{max(0.2, caps[k] * ph[k]):.2f}:{seconds}" for ph in PHASES)
            d = os.path.join(models_dir, name, "test_data_set_0")
            procs.append(subprocess.Popen(
                [packrat, "bench", "--url", s.url, "--model", name, "--input", f"{d}/input_0.pb",
                 "--expect", f"{d}/output_0.pb", "--schedule", sched, "--json"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        out = {}
        for name, p in zip(names, procs):
            stdout, stderr = p.communicate()
            if p.returncode:
                raise RuntimeError(f"packrat bench {name}: {stderr[-500:]}")
            out[name] = json.loads(stdout.strip().splitlines()[-1])
        moved = re.findall(r"cores re-divided: the loads moved.*", open(s.log_path).read())
        return out, s.moves(), start_shares, s.shares(), moved
    finally:
        s.stop()


def worst_p99(out):
    return max(ph["p99_ms"] for r in out.values() for ph in r["phases"])


def stretch(profile, T):
    """The profile with thread counts 1..T: per batch, latency a + b / t
    fitted to the measured points (least squares in 1/t)."""
    by_b = {}
    for pt in profile["points"]:
        by_b.setdefault(pt["batch"], []).append((pt["threads"], pt["latency_ms"]))
    pts = []
    for b, obs in by_b.items():
        xs = [1.0 / t for t, _ in obs]
        ys = [y for _, y in obs]
        n = len(xs)
        mx, my = sum(xs) / n, sum(ys) / n
        var = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var > 0 else 0.0
        a = my - slope * mx
        for t in range(1, T + 1):
            lat = max(a + slope / t, 0.05 * ys[0])
            pts.append({"threads": t, "batch": b, "latency_ms": lat, "p90_ms": lat, "isolated_ms": lat})
    out = dict(profile)
    out["points"], out["cores"], out["n_suspicious"] = pts, T, 0
    return out


def main():
    ap = argparse.ArgumentParser()
    add_paths(ap)
    ap.add_argument("--cores", default=None, help="CPU list for the servers (default: every CPU)")
    ap.add_argument("--phase-seconds", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--splits", type=int, default=3, help="static splits tried, at most")
    ap.add_argument("--models", default="resnet50,mobilenet_v3_large")
    args = ap.parse_args()
    packrat = os.path.join(args.build, "packrat")
    names = args.models.split(",")
    cpus = sorted(os.sched_getaffinity(0))
    cores = args.cores or ",".join(map(str, cpus))
    T = len([c for part in cores.split(",") for c in
             (range(int(part.split("-")[0]), int(part.split("-")[1]) + 1) if "-" in part else [int(part)])])
    caps = [one_core_rps(packrat, args.models_dir, n) for n in names]
    print(f"one-core capacity: " + ", ".join(f"{n} {c:.1f} req/s" for n, c in zip(names, caps)), flush=True)
    splits = list(range(1, T))
    if len(splits) > args.splits:
        step = (len(splits) - 1) / (args.splits - 1)
        splits = sorted({splits[round(i * step)] for i in range(args.splits)})
    configs = [("(a) shared: every model on every core", [{"max_batch_size": 8, "cores": {"share": True}}] * 2,
                [])]
    configs += [(f"(b) static split {c}/{T - c}", [{"max_batch_size": 8, "cores": {"min": c, "max": c}},
                                                   {"max_batch_size": 8, "cores": {"min": T - c, "max": T - c}}],
                 ["--balance-window-s", "0"]) for c in splits]
    configs.append(("(c) joint plan, re-divided online", [{"max_batch_size": 8}] * 2, []))
    runs = {label: {"config": label, "rounds": []} for label, _, _ in configs}
    for rnd in range(args.rounds):
        for label, cfgs, extra in (configs if rnd % 2 == 0 else configs[::-1]):
            print(f"== round {rnd}: {label}", flush=True)
            out, moves, before, after, moved = measure(packrat, args.models_dir, names, caps, cfgs, cores,
                                                       args.phase_seconds, extra)
            runs[label]["rounds"].append({"results": out, "moves": moves, "shares_at_start": before,
                                          "shares_at_end": after, "move_lines": moved})
            print(f"   worst p99 {worst_p99(out):.1f} ms, moves {moves}, shares {before} -> {after}", flush=True)
    for r in runs.values():
        r["worst_p99_ms"] = sum(worst_p99(x["results"]) for x in r["rounds"]) / len(r["rounds"])
    runs = list(runs.values())
    static = [r for r in runs if r["config"].startswith("(b)")]
    best = min(static, key=lambda r: r["worst_p99_ms"])
    best["best_static"] = True

    # the optimizer alone on these profiles, stretched to more cores
    tmp = tempfile.mkdtemp()
    profiles = []
    for n in names:
        path = os.path.join(tmp, n + ".json")
        subprocess.run([packrat, "profile", os.path.join(args.models_dir, n, "model.onnx"), "--cores", str(T),
                        "--max-batch", "8", "--out", path], check=True, capture_output=True)
        profiles.append(json.load(open(path)))
    decisions = []
    for big in (16, 64):
        files = []
        for n, p in zip(names, profiles):
            path = os.path.join(tmp, f"{n}_{big}.json")
            json.dump(stretch(p, big), open(path, "w"))
            files.append(path)
        for mix in ((8, 1), (1, 8), (4, 4), (8, 8)):
            r = run_json([packrat, "plan", "--profile", files[0], "--profile", files[1], "--batch",
                          f"{mix[0]},{mix[1]}", "--cores", str(big), "--json"])
            decisions.append({"cores": big, "batches": mix, "plan": r})
    shutil.rmtree(tmp, ignore_errors=True)

    machine = cpu_name()
    stamp = utc_stamp()
    lines = [f"Made by `bench/joint.py --phase-seconds {args.phase_seconds} --rounds {args.rounds}` on {machine}, "
             f"{T} cores, {stamp}.",
             "",
             f"Phases of {args.phase_seconds} s, Poisson arrivals; rates as shares of each model's one-core "
             f"capacity ({', '.join(f'{n} {c:.1f} req/s' for n, c in zip(names, caps))}): "
             + "; ".join(f"phase {i}: {names[0]} {a:.0%}, {names[1]} {b:.0%}" for i, (a, b) in enumerate(PHASES))
             + f". Each configuration ran {args.rounds} times, the rounds in alternate orders; p50 and p99 "
             "per round, separated by /.",
             "",
             "| configuration | model | phase | requests | errors | p50 ms | p99 ms |",
             "|---|---|---|---|---|---|---|"]
    for r in runs:
        tag = r["config"] + (" (best static)" if r.get("best_static") else "")
        for n in names:
            for i in range(len(PHASES)):
                phs = [x["results"][n]["phases"][i] for x in r["rounds"]]
                each = lambda key, fmt: "/".join(fmt.format(p[key]) for p in phs)  # noqa: E731
                lines.append(f"| {tag} | {n} | {i} | {each('requests', '{}')} | {sum(p['errors'] for p in phs)} | "
                             f"{each('p50_ms', '{:.0f}')} | {each('p99_ms', '{:.0f}')} |")
    lines += ["", "| configuration | worst p99 ms (mean of rounds) | vs (a) | vs best (b) | errors | balancer moves | "
                  "cores at start -> end |", "|---|---|---|---|---|---|---|"]
    wa, wb = runs[0]["worst_p99_ms"], best["worst_p99_ms"]
    for r in runs:
        w = r["worst_p99_ms"]
        errs = sum(x["results"][n]["errors"] for x in r["rounds"] for n in names)
        last = r["rounds"][-1]
        lines.append(f"| {r['config']} | {w:.1f} | {w / wa:.2f}x | {w / wb:.2f}x | {errs} | "
                     f"{sum(x['moves'] for x in r['rounds'])} | {last['shares_at_start']} -> "
                     f"{last['shares_at_end']} |")
    lines += ["", f"The joint optimizer alone (`packrat plan --profile A --profile B --batch BA,BB --cores N`) on "
                  f"the profiles measured here (1..{T} threads, batches 1..8), stretched to N cores by a fit of "
                  "a + b/t per batch:", "",
              f"| cores | batches ({names[0]}, {names[1]}) | {names[0]} cores | {names[1]} cores | "
              "worst slowdown | solve ms |", "|---|---|---|---|---|---|"]
    for d in decisions:
        ms = {m["model"]: m for m in d["plan"]["models"]}
        c0, c1 = (d["plan"]["models"][0]["cores"], d["plan"]["models"][1]["cores"])
        lines.append(f"| {d['cores']} | {d['batches'][0]}, {d['batches'][1]} | {c0} | {c1} | "
                     f"{d['plan']['worst_score']:.2f}x | {d['plan']['solve_ms']:.3f} |")
        del ms
    write_results(args.out, "joint", stamp, machine, {"runs": runs, "decisions": decisions}, lines)


if __name__ == "__main__":
    sys.exit(main())
