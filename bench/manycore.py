"""The Packrat effect on this machine's cores, inside a hard time budget.

Run it through bench/manycore.sh (which finds python3 on PATH). Phases, each
printed with the time left:
 1. export the paper's four models with tools/export_models.py (random
    weights, nothing downloaded; timed: it counts against the budget);
 2. per model, in the budget left for it: profile latency[t][b] for t in
    1..T and the paper's batch grid (powers of two up to --max-batch; the
    largest batches are dropped when a calibration run says the grid would
    not fit), with a time cap per point and the co-run correction as
    `packrat profile` does it;
 3. plan every batch 1..--plan-batches from that profile (`packrat plan`),
    then for as many batches as time allows (16, 8, 4, 2, 1 first) measure
    side by side in one `packrat run` process: the fat instance (T threads,
    the whole batch), packrat's plan, and a sampled set of other plans (even
    splits into i instances of T/i threads, and seeded random ones) whose
    best is the oracle; where Python has onnxruntime, ONNX Runtime on T
    threads at the same batches;
 4. the server end to end for the first model: `packrat serve` (profile from
    phase 2's cache) under open-loop Poisson load in phases (`packrat bench
    --schedule`): p50/p99 per phase, errors, plan switches.
Writes OUT/manycore.json after every model and OUT/manycore.md at the end.
--quick: a small CNN, batches up to 4, a few seconds per phase (CI).
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PAPER = ["resnet50", "inception_v3", "gpt2", "bert"]
# the paper's speed-ups of its own plans over one fat instance (2x16-core Xeon, PyTorch)
PAPER_SPEEDUP = {"resnet50": 1.53, "inception_v3": 1.52, "gpt2": 1.18, "bert": 1.13}
SEQUENCE = {"gpt2": 128, "bert": 128}


class Budget:
    def __init__(self, seconds):
        self.start, self.seconds = time.monotonic(), seconds

    def left(self):
        return self.seconds - (time.monotonic() - self.start)

    def used(self):
        return time.monotonic() - self.start


budget = None


def say(msg):
    print(f"[manycore {budget.used():5.0f} s, {max(budget.left(), 0):4.0f} s left] {msg}", flush=True)


class Timeout(Exception):
    pass


def run(cmd, timeout, env=None, what=None):
    """Runs cmd with a hard timeout (its process group killed); (stdout, stderr). Raises
    Timeout, or RuntimeError with the tail of stderr when it fails."""
    if timeout <= 1:
        raise Timeout(f"{what or cmd[1]}: no time left")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise Timeout(f"{what or ' '.join(cmd[:3])}: stopped after {timeout:.0f} s (its share of the budget)")
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed ({p.returncode}): {err.strip()[-800:]}")
    return out, err


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def physical_cores():
    """Cores this process may use, one per physical core (SMT siblings counted once)."""
    seen = set()
    for cpu in sorted(os.sched_getaffinity(0)):
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        try:
            key = (open(f"{base}/physical_package_id").read().strip(), open(f"{base}/core_id").read().strip())
        except OSError:
            key = ("cpu", str(cpu))
        seen.add(key)
    return len(seen)


def machine():
    """lscpu's summary where it exists, else /proc/cpuinfo's model name."""
    info = {"cpus": os.cpu_count(), "cores": physical_cores()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            if k.strip() in ("Model name", "Socket(s)", "Core(s) per socket", "Thread(s) per core",
                             "NUMA node(s)", "L3"):
                info[k.strip()] = v.strip()
        info["lscpu"] = out
    except (OSError, subprocess.TimeoutExpired):
        pass
    if "Model name" not in info:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["Model name"] = line.split(":", 1)[1].strip()
                break
    flags = open("/proc/cpuinfo").read()
    info["isa"] = "AVX-512" if " avx512f" in flags else "AVX2" if " avx2" in flags else "no AVX2"
    return info


def spec(cfg):
    return ",".join(f"{t}x{b}" for t, b in cfg)


def cell(text):
    """text as one Markdown table cell: one line, no column bar."""
    return " ".join(str(text).split()).replace("|", "/")


def canon(cfg):
    return tuple(sorted(cfg, reverse=True))


def split(total, parts):
    """total as parts near-equal positive integers, largest first."""
    return [total // parts + (1 if k < total % parts else 0) for k in range(parts)]


def sampled_plans(T, B, picked, n_random, seed):
    """The fat instance, the picked plan, even splits into i instances of T//i threads
    (i = 2..min(T, B), at most 8 of them, spread), and n_random seeded random plans."""
    out = [canon([(T, B)]), canon(picked)]
    if T > 1:  # one instance on half the cores: where intra-op threads stop paying
        out.append(canon([(T // 2, B)]))
    counts = list(range(2, min(T, B) + 1))
    if len(counts) > 8:
        step = (len(counts) - 1) / 7
        counts = sorted({counts[round(k * step)] for k in range(8)})
    for i in counts:
        out.append(canon(list(zip([T // i] * i, split(B, i)))))
    rng = random.Random(seed)
    for _ in range(n_random * 20):
        if len(out) >= 2 + len(counts) + n_random:
            break
        i = rng.randint(1, min(T, B))
        cuts = sorted(rng.sample(range(1, T), i - 1)) if i > 1 else []
        threads = [b - a for a, b in zip([0] + cuts, cuts + [T])]
        bcuts = sorted(rng.sample(range(1, B), i - 1)) if i > 1 else []
        batches = [b - a for a, b in zip([0] + bcuts, bcuts + [B])]
        cfg = canon(list(zip(threads, batches)))
        if cfg not in out:
            out.append(cfg)
    seen, uniq = set(), []
    for c in out:
        if c not in seen:
            seen.add(c)
            uniq.append(c)
    return uniq


def batch_order(n):
    """Which batches to measure first: powers of two from the largest down, then the rest."""
    pw = [b for b in (16, 8, 4, 2, 1, 32, 64) if b <= n]
    return pw + [b for b in (12, 6, 3, 10, 14, 5, 7, 9, 11, 13, 15) if b <= n and b not in pw] + \
        [b for b in range(17, n + 1) if b not in pw]


def ort_fat(python, model_path, model, T, batches, timeout):
    """ONNX Runtime on T intra-op threads: median ms per batch, {} without onnxruntime."""
    script = os.path.join(HERE, "manycore_ort.py")
    cmd = [python, script, model_path, str(T), ",".join(map(str, batches))]
    if model in SEQUENCE:
        cmd += ["--sequence", str(SEQUENCE[model])]
    out, _ = run(cmd, timeout, what="onnxruntime")
    return {int(k): v for k, v in last_json(out).items()}


def profile_model(a, packrat, env, model, path, T, share, end):
    """Profiles model, its grid fitted to share seconds; (profile dict, grid, seconds, point cap).
    Without a profile nothing else of the model is measured, so the profile may run on to 10 s
    before end (the model's whole share) where the estimate falls short."""
    dims = ["--dim", f"sequence={SEQUENCE[model]}"] if model in SEQUENCE else []
    # calibration: one run of 1 thread at batch 1 prices the grid (a point's floor is its
    # session's compile, a warm-up and 3 timed runs, and latency grows about linearly with
    # the batch)
    out, _ = run([packrat, "run", path, "--threads", "1", "--batch", "1", "--repeat", "2", "--json"] + dims,
                 share / 4, env, "calibration run")
    calib = last_json(out)
    one = calib["median_ms"] / 1e3
    # every point compiles a session of its own
    setup = calib.get("prepare_ms", 0) / 1e3
    scale = sum(t ** -0.8 for t in range(1, T + 1))
    grid = [b for b in (1, 2, 4, 8, 16, 32, 64) if b <= a.max_batch]
    if model == a.serve_model:
        # the server's own grid (every batch to 8, then powers of two) so that it finds this profile cached
        grid = sorted(set(range(1, min(8, a.max_batch) + 1)) | set(grid))

    def cost(g, point_s):
        # a point: its session's compile, a warm-up, then at least 3 timed runs, at most 10
        # when they settle at once, cut at point_s; plus the co-run correction (6 lock-step
        # runs at batch 4 for each t <= T/2)
        def point(lat):
            return lat + max(3 * lat, min(point_s, 10 * lat)) + setup + 0.05
        return sum(point(one * b / t ** 0.8) for b in g for t in range(1, T + 1)) + 24 * one * scale
    point_s = 0.5 if not a.quick else 0.05
    while len(grid) > 2 and cost(grid, point_s) > 0.6 * share:
        grid.pop()
    while point_s > 0.05 and cost(grid, point_s) > 0.6 * share:
        point_s /= 2
    say(f"{model}: 1 thread x batch 1 takes {one * 1e3:.1f} ms; profiling t = 1..{T} x batches "
        f"{','.join(map(str, grid))} (point cap {point_s:.2f} s, about {cost(grid, point_s):.0f} s)")
    t0 = time.monotonic()
    run([packrat, "profile", path, "--cores", str(T), "--batches", ",".join(map(str, grid)),
                    "--point-budget", f"{point_s:g}", "--out", os.path.join(a.out, f"profile-{model}.json")] + dims,
                   max(share * 0.8, end - time.monotonic() - 10), env, f"profile of {model}")
    secs = time.monotonic() - t0
    prof = json.load(open(os.path.join(a.out, f"profile-{model}.json")))
    return prof, grid, secs, point_s


def measure_model(a, packrat, env, python, model, path, T, share, row):
    dims = ["--dim", f"sequence={SEQUENCE[model]}"] if model in SEQUENCE else []
    end = time.monotonic() + share
    prof, grid, secs, point_s = profile_model(a, packrat, env, model, path, T, share * 0.55, end)
    row.update({"grid": grid, "point_budget_s": point_s, "profile_s": round(secs, 1),
                "profile_points": len(prof["points"]), "profile_suspicious": prof.get("suspicious", 0),
                "profile_cached": not prof.get("suspicious", 0)})  # a suspicious profile is in no cache
    say(f"{model}: profiled {len(prof['points'])} points in {secs:.0f} s")
    plans = {}
    prof_path = os.path.join(a.out, f"profile-{model}.json")
    for B in range(1, a.plan_batches + 1):
        try:
            out, _ = run([packrat, "plan", "--profile", prof_path, "--batch", str(B), "--cores", str(T), "--json"],
                         max(5.0, end - time.monotonic()), env, "plan")
        except RuntimeError as e:
            # a batch no sum of at most T profiled batches makes (7 from 1,2,4,8 on 2 cores)
            if "no combination" not in str(e):
                raise
            plans[B] = {"plan": None, "unreachable": True}
            continue
        p = last_json(out)
        plans[B] = {"plan": spec(canon([(i["threads"], i["batch"]) for i in p["instances"]])),
                    "predicted_ms": p["latency_ms"], "solve_ms": p.get("solve_ms")}
    row["plans"] = plans
    row["batches"] = []
    last = None  # (B, seconds) of the last measurement: prices the next
    unreachable = [B for B in plans if plans[B]["plan"] is None]
    if unreachable:
        say(f"{model}: no plan from the profiled batches for batch {','.join(map(str, unreachable))}")
    for B in batch_order(a.plan_batches):
        if plans[B]["plan"] is None:
            continue
        left = end - time.monotonic()
        if last and last[1] * B / last[0] * 1.3 > left - 2:
            say(f"{model}: no time for batch {B} ({left:.0f} s left of its share)")
            continue
        picked = [tuple(map(int, x.split("x"))) for x in plans[B]["plan"].split(",")]
        cfgs = sampled_plans(T, B, picked, a.random_plans, seed=B)
        # rounds: --repeat, more where the plans are fast (about 0.3 s of runs, at most 50 rounds)
        fast = max(plans[B]["predicted_ms"], 1e-3) * len(cfgs) / 1e3
        rounds = max(a.repeat, min(50, int(0.3 / fast)))
        argv = [packrat, "run", path, "--batch", str(B), "--repeat", str(rounds), "--warmup", "1", "--json"]
        for c in cfgs if len(cfgs) > 1 else cfgs * 2:  # one plan alone is not a comparison run
            argv += ["--plan", spec(c)]
        t0 = time.monotonic()
        try:
            out, _ = run(argv + dims, left - 1, env, f"{model} batch {B}")
        except Timeout as e:
            say(f"{model}: {e}")
            break
        last = (B, time.monotonic() - t0)
        got = {p["plan"]: p["median_ms"] for p in last_json(out)["plans"]}
        # the picked plan may be the fat instance itself (then the list holds it once)
        mine_spec = spec(canon(picked))
        fat, mine = got[spec(cfgs[0])], got[mine_spec]
        best = min(got, key=got.get)
        r = {"batch": B, "fat_ms": fat, "plan": mine_spec, "plan_ms": mine,
             "predicted_ms": plans[B]["predicted_ms"], "oracle": best, "oracle_ms": got[best],
             "fat_over_plan": fat / mine, "plan_over_oracle": mine / got[best], "sampled": got,
             "rounds": rounds, "seconds": round(last[1], 1)}
        row["batches"].append(r)
        say(f"{model} B={B}: fat {fat:.2f} ms, plan {r['plan']} {mine:.2f} ms ({fat / mine:.2f}x), "
            f"oracle of {len(cfgs)} {best} {got[best]:.2f} ms")
    row["batches"].sort(key=lambda r: r["batch"])
    measured = [r["batch"] for r in row["batches"]]
    if measured and python and end - time.monotonic() > 3:
        try:
            ort = ort_fat(python, path, model, T, measured, end - time.monotonic())
            for r in row["batches"]:
                r["ort_ms"] = ort.get(r["batch"])
            row["ort"] = "onnxruntime" if ort else "not installed"
        except (Timeout, RuntimeError, ValueError) as e:
            row["ort"] = f"not measured: {str(e)[:200]}"
        say(f"{model}: ONNX Runtime: {row['ort']}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_model(a, packrat, env, model, path, T, row, share):
    """packrat serve for one model under open-loop load in phases."""
    import urllib.request
    end = time.monotonic() + share
    repo = os.path.join(a.out, "repository")
    os.makedirs(os.path.join(repo, model, "1"), exist_ok=True)
    dst = os.path.join(repo, model, "1", "model.onnx")
    if not os.path.exists(dst):
        os.symlink(os.path.abspath(path), dst)
    cfg = {"max_batch_size": a.max_batch if a.max_batch <= 16 else 16}
    if model in SEQUENCE:
        cfg["dims"] = {"sequence": SEQUENCE[model]}
    json.dump(cfg, open(os.path.join(repo, model, "config.json"), "w"))
    port = free_port()
    log = open(os.path.join(a.out, "serve.log"), "w")
    srv = subprocess.Popen([packrat, "serve", "--model-repository", repo, "--host", "127.0.0.1",
                            "--http-port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env,
                           start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        ready = False
        while time.monotonic() < end - 5 and srv.poll() is None:
            try:
                with urllib.request.urlopen(url + "/v2/health/ready", timeout=2) as r:
                    ready = r.status == 200
            except OSError:
                pass
            if ready:
                break
            time.sleep(0.5)
        if not ready:
            why = "not ready in its share of the budget"
            if row.get("profile_suspicious"):
                why += (f": the kit's profile of {model} had {row['profile_suspicious']} suspicious points (a busy "
                        "machine), so it was not cached and the server profiled again")
            row["serve"] = {"error": why + "; see serve.log"}
            say(f"serve {model}: {row['serve']['error']}")
            return
        # rates: fractions of the capacity: the plan's at the largest batch measured, or what a
        # short closed-loop probe (2T connections) gets through the server, whichever is lower
        top = max(row["batches"], key=lambda r: r["batch"]) if row.get("batches") else None
        cap = top["batch"] / (top["plan_ms"] / 1e3) if top else 1e9
        out, _ = run([packrat, "bench", "--url", url, "--model", model, "--concurrency", str(2 * T),
                      "--duration", "2", "--json"], 30, env, "closed-loop probe")
        probe = last_json(out)["throughput_rps"]
        cap = min(cap, probe)
        phase_s = max(2.0, min(4.0 if a.quick else 15.0, (end - time.monotonic() - 8) / 3))
        rates = [round(cap * f, 1) for f in (0.2, 0.5, 0.8)]
        sched = ",".join(f"{r}:{phase_s:.0f}" for r in rates)
        say(f"serve {model}: open-loop phases {sched} (req/s:s; capacity about {cap:.0f} req/s)")
        out, _ = run([packrat, "bench", "--url", url, "--model", model, "--schedule", sched, "--json"],
                     end - time.monotonic(), env, "packrat bench")
        res = last_json(out)
        with urllib.request.urlopen(url + f"/v2/models/{model}/plan", timeout=5) as r:
            plan = json.loads(r.read())
        row["serve"] = {"schedule": sched, "capacity_rps": cap, "probe_rps": probe, "phases": res.get("phases"),
                        "errors": res.get("errors"), "reconfigurations": res.get("reconfigurations"),
                        "plan_at_end": plan}
    except (Timeout, RuntimeError, ValueError, OSError) as e:
        row["serve"] = {"error": str(e)[:300]}
        say(f"serve {model}: {e}")
    finally:
        srv.send_signal(signal.SIGTERM)
        try:
            srv.wait(max(2.0, min(20.0, budget.left() - 2)))
        except subprocess.TimeoutExpired:
            os.killpg(srv.pid, signal.SIGKILL)
            srv.wait()
        log.close()


def table(res):
    m = res["machine"]
    lines = [f"Command: `{res['command']}`  ",
             f"Machine: {m.get('Model name', '?')} ({m['isa']}), {res['cores']} cores used of {m['cpus']} CPUs "
             f"(sockets {m.get('Socket(s)', '?')}, cores per socket {m.get('Core(s) per socket', '?')}, "
             f"threads per core {m.get('Thread(s) per core', '?')}); {res['date']}; budget {res['budget_s']:.0f} s, "
             f"used {res['used_s']:.0f} s (export {res.get('export_s', 0):.0f} s).  ",
             "Median ms per batch, one `packrat run` process per model and batch with every plan side by side "
             "(rounds in rotating order). fat: one instance on all T threads; plan: packrat's optimizer on the "
             "profile; oracle: the best of the sampled plans (fat, plan, even splits, random).", "",
             "| model | B | fat ms | packrat plan | predicted ms | plan ms | fat / plan | oracle | oracle ms | "
             "plan / oracle | ORT (T threads) ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in res["models"]:
        if not row.get("batches"):
            lines.append(f"| {row['model']} | - | {cell(row.get('error', 'not measured'))} | | | | | | | | |")
        for r in row.get("batches", []):
            ort = f"{r['ort_ms']:.2f}" if r.get("ort_ms") else "-"
            lines.append(f"| {row['model']} | {r['batch']} | {r['fat_ms']:.2f} | {r['plan']} | "
                         f"{r['predicted_ms']:.2f} | {r['plan_ms']:.2f} | {r['fat_over_plan']:.2f} | {r['oracle']} | "
                         f"{r['oracle_ms']:.2f} | {r['plan_over_oracle']:.2f} | {ort} |")
    lines += ["", "| model | profile grid (batches) | point cap s | profile s | best fat / plan | paper's speed-up |",
              "|---|---|---|---|---|---|"]
    for row in res["models"]:
        best = max((r["fat_over_plan"] for r in row.get("batches", [])), default=None)
        lines.append(f"| {row['model']} | {','.join(map(str, row.get('grid', [])))} | "
                     f"{row.get('point_budget_s', 0):.2f} | {row.get('profile_s', 0):.0f} | "
                     f"{'%.2f' % best if best else '-'} | {PAPER_SPEEDUP.get(row['model'], '-')} |")
    for row in res["models"]:
        s = row.get("serve")
        if not s:
            continue
        lines += ["", f"Server end to end, {row['model']} (`packrat serve`, open-loop Poisson `packrat bench "
                      f"--schedule {s.get('schedule', '')}`):"]
        if "error" in s:
            lines.append(f"not measured: {cell(s['error'])}")
            continue
        lines += ["", "| rate req/s | requests | errors | p50 ms | p99 ms |", "|---|---|---|---|---|"]
        for ph in s["phases"] or []:
            lines.append(f"| {ph['rate']:.1f} | {ph['requests']} | {ph['errors']} | {ph['p50_ms']:.2f} | "
                         f"{ph['p99_ms']:.2f} |")
        lines.append(f"\nPlan switches during the load: {s.get('reconfigurations')}.")
    return lines


def main():
    global budget
    ap = argparse.ArgumentParser(prog="bench/manycore.sh", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="folder for manycore.json, manycore.md, profiles and logs")
    ap.add_argument("--budget", type=float, help="seconds in all (default 540; --quick: 55)")
    ap.add_argument("--quick", action="store_true", help="the small CNN, batches to 4 (CI: under 60 s)")
    ap.add_argument("--packrat", default=None,
                    help="the packrat to run (default: bundle/packrat where bundled, else build/packrat)")
    ap.add_argument("--models", help=f"comma-separated (default {','.join(PAPER)}; --quick: small_cnn)")
    ap.add_argument("--models-dir", help="exported models (default OUT/models; exported there when missing)")
    ap.add_argument("--cores", type=int, help="T (default: every physical core this process may use)")
    ap.add_argument("--max-batch", type=int, help="largest batch of the profile grid (default 16; --quick 4)")
    ap.add_argument("--plan-batches", type=int, help="plan batches 1..N (default 16; --quick 4)")
    ap.add_argument("--repeat", type=int, help="rounds per measurement (default 5; --quick 3)")
    ap.add_argument("--random-plans", type=int, default=3, help="random plans in each oracle sample (default 3)")
    ap.add_argument("--no-serve", action="store_true", help="skip the server's end-to-end run")
    a = ap.parse_args()
    q = a.quick
    budget = Budget(a.budget or (55 if q else 540))
    a.max_batch = a.max_batch or (4 if q else 16)
    a.plan_batches = a.plan_batches or (4 if q else 16)
    a.repeat = a.repeat or (3 if q else 5)
    models = (a.models or ("small_cnn" if q else ",".join(PAPER))).split(",")
    a.serve_model = None if a.no_serve else models[0]
    for name in (a.max_batch, a.plan_batches, a.repeat):
        if name < 1:
            sys.exit("manycore: --max-batch, --plan-batches and --repeat must be at least 1")
    if a.packrat is None:
        a.packrat = next(p for p in (os.path.join(ROOT, "bundle", "packrat"), os.path.join(ROOT, "build", "packrat"),
                                     "packrat") if os.path.exists(p) or p == "packrat")
    packrat = shutil.which(a.packrat) or a.packrat
    if not os.access(packrat, os.X_OK):
        sys.exit(f"manycore: no packrat at {a.packrat}: build it (cmake --build build), or make the bundle "
                 "(scripts/bundle.sh bundle), or give --packrat")
    os.makedirs(a.out, exist_ok=True)
    a.out = os.path.abspath(a.out)
    env = dict(os.environ, PACKRAT_CACHE=os.path.join(a.out, "cache"))
    T = a.cores or physical_cores()
    try:
        version = subprocess.run([packrat, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        sys.exit(f"manycore: {packrat} --version failed: {e}")
    if not version.startswith("packrat"):
        sys.exit(f"manycore: {packrat} --version printed {version!r}")
    res = {"command": "bench/manycore.sh " + " ".join(sys.argv[1:]), "date": time.strftime("%Y-%m-%d %H:%M UTC",
           time.gmtime()), "packrat": version.strip(), "machine": machine(), "cores": T,
           "budget_s": budget.seconds, "python": sys.executable, "models": []}
    say(f"{version.splitlines()[0]} ({packrat}) on {res['machine'].get('Model name', '?')}, T = {T} cores")

    def save():
        res["used_s"] = budget.used()
        with open(os.path.join(a.out, "manycore.json"), "w") as f:
            json.dump(res, f, indent=1)

    models_dir = a.models_dir or os.path.join(a.out, "models")
    t0 = time.monotonic()
    try:
        run([sys.executable, os.path.join(ROOT, "tools", "export_models.py"), "--out", models_dir, "--models",
             ",".join(models)], budget.left() * 0.4, what="export_models.py")
    except (Timeout, RuntimeError) as e:
        sys.exit(f"manycore: exporting the models failed: {e}")
    res["export_s"] = time.monotonic() - t0
    say(f"exported {', '.join(models)} in {res['export_s']:.0f} s")
    serve_share = 0 if a.no_serve else (0.3 if q else 0.08) * budget.left()
    for k, model in enumerate(models):
        row = {"model": model}
        res["models"].append(row)
        share = (budget.left() - serve_share - 2) / (len(models) - k)
        say(f"{model}: {share:.0f} s for it")
        try:
            measure_model(a, packrat, env, sys.executable, model, os.path.join(models_dir, model, "model.onnx"),
                          T, share, row)
        except (Timeout, RuntimeError, ValueError, OSError, KeyError) as e:
            row["error"] = str(e)[:500]
            say(f"{model}: {row['error']}")
        save()
    if a.serve_model:
        row = res["models"][0]
        serve_model(a, packrat, env, a.serve_model, os.path.join(models_dir, a.serve_model, "model.onnx"), T,
                    row, budget.left() - 1)
    save()
    lines = table(res)
    with open(os.path.join(a.out, "manycore.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    say(f"wrote {a.out}/manycore.json and manycore.md")
    bad = [r["model"] for r in res["models"] if not r.get("batches")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
