#!/usr/bin/python3
"""The server on ResNet-50, side by side in one run.

1. Overhead: closed loop, one connection, batch-1 requests (binary tensors)
   through `packrat serve` with one T-thread instance, against the engine
   alone (`packrat run --threads T --batch 1`): the difference of the medians
   is the server's cost per request (HTTP, codec, queue, copies). Then the
   server's own time per request outside compute, from its histograms: the
   p50 of `packrat_request_overhead_seconds` (each request's time from parse
   to sent, minus its batch's compute; interpolated in its bucket) and the
   share of requests under 0.1 ms, and the mean of each stage
   (`packrat_request_stage_seconds`), for ResNet-50 and for the tiny test
   model (tests/e2e/make_models.py), with the client asleep in recv and
   with a busy-polling client (`packrat bench --busy-poll`: the server's
   send then wakes no idle core, as with a client on another host).
2. Throughput with 1000 connections: a closed loop of 1000 connections
   against a server whose plan is the one packrat picks for --max-batch,
   against the engine's capacity on that plan (`packrat run --plan P --batch
   B`: B rows per batch latency, measured before and after the run), and
   against the capacity its own compute stage shows in the run; once with
   the client sharing every CPU with the plan, once with the client alone on
   the last CPU and the plan on the others (as with a client on another
   host). Requests wait in the queue (its bound is the connection limit);
   their timeout (120 s) holds the whole backlog, so none is turned away.
3. Fat instance vs packrat's plan under the same open-loop load (Poisson
   arrivals at --rate requests/s): a server whose plan is the fat instance
   (T threads, batch --max-batch) against one with the plan packrat picks
   (`plan: auto`) for the same max batch.

   The machine's floor under those stages: build/bench/wake_floor times the
   operating system's part of a request's path alone (the hand-off to an
   instance's thread, the answer's wake of the HTTP thread, the send to a
   client in recv), back to back and after a 100 MB two-CPU pass, with the
   wakes across two cores and on one (as the server meets them with
   --http-colocate, its default).

   The same for each protocol: REST with binary tensors, REST with JSON
   tensors and gRPC (ModelInfer with raw_input_contents), each on one
   connection against the same server, from the histograms' growth during
   its own run.

usage: bench/serve.py [--rate 20] [--duration 20] [--max-batch 8] [--protocol-seconds 10]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

from common import add_paths, cpu_name, run_json, utc_stamp


STAGES = ("parse", "queue", "assemble", "compute", "scatter", "resume", "encode", "send")


def snapshot(url, model):
    """The model's stage sums and counts and its overhead buckets, from /metrics."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    snap = {"sum": {}, "count": {}, "buckets": []}
    q = re.escape(model)
    for line in text.splitlines():
        m = re.match(r'packrat_request_stage_seconds_(sum|count)\{model="%s",[^}]*stage="(\w+)"\} (\S+)' % q, line)
        if m:
            snap[m.group(1)][m.group(2)] = float(m.group(3))
        m = re.match(r'packrat_request_overhead_seconds_bucket\{model="%s",[^}]*le="([^"]+)"\} (\S+)' % q, line)
        if m:
            snap["buckets"].append((float(m.group(1)), float(m.group(2))))
    return snap


def delta(before, after):
    """What after counted beyond before (two snapshots of one server)."""
    d = {k: {st: v - before[k].get(st, 0) for st, v in after[k].items()} for k in ("sum", "count")}
    was = dict(before["buckets"])
    d["buckets"] = [(le, n - was.get(le, 0)) for le, n in after["buckets"]]
    return d


def stage_means_us(snap):
    """Mean microseconds of each stage (sum / count)."""
    return {st: 1e6 * snap["sum"].get(st, 0) / snap["count"][st] if snap["count"].get(st) else 0.0
            for st in STAGES}


def overhead_us(snap):
    """(p50 us, share under 100 us, count) of packrat_request_overhead_seconds."""
    buckets = snap["buckets"]
    total = buckets[-1][1] if buckets else 0
    if not total:
        return 0.0, 0.0, 0
    lo_b, lo_n, p50 = 0.0, 0.0, buckets[-2][0]
    for le, n in buckets:
        if n >= total / 2:  # linear within the bucket that holds the median
            p50 = lo_b + (le - lo_b) * ((total / 2 - lo_n) / (n - lo_n)) if le != float("inf") else lo_b
            break
        lo_b, lo_n = le, n
    under = next((n for le, n in buckets if abs(le - 1e-4) < 1e-12), 0) / total
    return p50 * 1e6, under, int(total)


def stage_row(name, means, over):
    return (f"| {name} | {over[0]:.0f} | {100 * over[1]:.0f}% | " +
            " | ".join(f"{means[k]:.1f}" for k in STAGES) + " |")


PROTOCOLS = (("REST, binary tensors", []), ("REST, binary tensors, busy-polling client", ["--busy-poll"]),
             ("REST, JSON tensors", ["--json-data"]),
             ("gRPC, raw contents", ["--protocol", "grpc"]))


def free_cpu(s, name):
    """A CPU none of server s's instances runs on (the busy-polling client's:
    it spins on a core of its own), or None."""
    plan = json.loads(urllib.request.urlopen(f"{s.url}/v2/models/{name}/plan", timeout=30).read())
    used = {c for inst in plan["instances"] for c in inst["cores"]}
    free = sorted(set(os.sched_getaffinity(0)) - used)
    return free[-1] if free else None


def protocols(packrat, s, name, seconds, which=PROTOCOLS):
    """One connection, closed loop, on server s: for each protocol, the
    requests' time outside compute (p50, share under 0.1 ms), the stage means
    and the client's p50, from the histograms' growth during its own run. The
    busy-polling client runs pinned to a core no instance uses."""
    out = {}
    for label, extra in which:
        if "grpc" in extra:
            extra = extra + ["--grpc-address", s.grpc]
        cmd = [packrat, "bench", "--url", s.url, "--model", name, "--concurrency", "1", *extra, "--json"]
        if "--busy-poll" in extra:
            cpu = free_cpu(s, name)
            if cpu is None:
                raise RuntimeError(f"no core left for the busy-polling client beside plan {s.plan}")
            cmd = ["taskset", "-c", str(cpu)] + cmd
        run_json(cmd + ["--duration", "2"])  # warm-up
        before = snapshot(s.url, name)
        r = run_json(cmd + ["--duration", str(seconds)])
        d = delta(before, snapshot(s.url, name))
        out[label] = {"client_p50_ms": r["p50_ms"], "requests": r["requests"], "errors": r["errors"],
                      "stage_means_us": stage_means_us(d), "overhead": overhead_us(d)}
    return out


def protocol_row(model, label, r):
    over, means = r["overhead"], r["stage_means_us"]
    return (f"| {model} | {label} | {over[0]:.0f} | {100 * over[1]:.0f}% | {means['parse']:.1f} | "
            f"{means['encode']:.1f} | {r['client_p50_ms']:.3f} | {r['requests']} |")


def tiny_model():
    """The tiny mlp of tests/e2e/make_models.py, written to a temporary folder."""
    tmp = tempfile.mkdtemp()
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e",
                                                 "make_models.py"), tmp], check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(tmp, "mlp.onnx")


class Server:
    def __init__(self, packrat, model_path, config, name="resnet50", extra=()):
        self.dir = tempfile.mkdtemp()
        os.makedirs(f"{self.dir}/{name}/1")
        os.symlink(model_path, f"{self.dir}/{name}/1/model.onnx")
        json.dump(config, open(f"{self.dir}/{name}/config.json", "w"))
        self.log = open(f"{self.dir}/log", "w+")
        self.p = subprocess.Popen([packrat, "serve", "--model-repository", self.dir, "--http-port", "0",
                                   "--grpc-port", "0", *extra], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(3000):
            self.log.seek(0)
            m = re.search(r"ready: (http://127.0.0.1:\d+).*gRPC: (\S+?)\)", self.log.read())
            if m:
                self.url, self.grpc = m.group(1), m.group(2)
                break
            if self.p.poll() is not None:
                raise RuntimeError("server exited")
            time.sleep(0.1)
        else:
            raise RuntimeError("server did not start")
        self.log.seek(0)
        self.plan = re.search(r"plan ([0-9x, ]+)", self.log.read()).group(1).replace(" ", "")

    def stop(self):
        self.p.terminate()
        self.p.wait()


def siblings(cpu):
    """cpu and the other hardware threads of its core (Linux sysfs)."""
    try:
        text = open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read().strip()
    except OSError:
        return {cpu}
    out = {cpu}
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def plan_cpus(client_cpu):
    """The CPUs left to the plan beside a client alone on client_cpu: not
    its core's other hardware threads either."""
    return sorted(set(os.sched_getaffinity(0)) - siblings(client_cpu))


def many_connections(packrat, model, max_batch, connections=1000, seconds=20, client_cpu=None):
    """Server throughput with `connections` closed-loop connections against the
    engine's capacity on the same plan, measured just before and just after
    the served run (the machine's speed drifts by several percent within
    minutes here), and against the capacity the server's own compute stage
    gives in the run (its batches' mean compute time). With client_cpu (the
    last CPU) the client runs there alone and the server's plan takes the
    other cores (`--cores`, plan_cpus), as with a client on another host; without,
    the client shares every CPU with the plan. The queue's timeout (120 s)
    holds the whole closed loop's backlog, so that no request is turned away
    (503) on the smaller plan."""
    extra = ["--request-timeout-ms", "120000"]
    client = []
    if client_cpu is not None:
        extra += ["--cores", ",".join(map(str, plan_cpus(client_cpu)))]
        client = ["taskset", "-c", str(client_cpu)]
    s = Server(packrat, model, {"max_batch_size": max_batch, "plan": "auto", "autoscale": False,
                                "max_queue_delay_us": 5000}, extra=extra)
    plan = s.plan
    engine = [packrat, "run", model, "--plan", plan, "--batch", str(max_batch), "--repeat", "20",
              "--warmup", "2", "--json"]
    before = run_json(engine)["median_ms"]
    run_json(client + [packrat, "bench", "--url", s.url, "--model", "resnet50", "--concurrency", "16",
                       "--duration", "3", "--json"])
    snap = snapshot(s.url, "resnet50")
    served = run_json(client + [packrat, "bench", "--url", s.url, "--model", "resnet50", "--concurrency",
                                str(connections), "--duration", str(seconds), "--json"])
    compute_us = stage_means_us(delta(snap, snapshot(s.url, "resnet50")))["compute"]
    s.stop()
    after = run_json(engine)["median_ms"]
    capacity = max_batch / ((before + after) / 2 / 1e3)
    in_run = max_batch / (compute_us / 1e6) if compute_us else 0.0
    return {"plan": plan, "connections": connections, "client_cpu": client_cpu, "throughput_rps": served["throughput_rps"],
            "errors": served["errors"], "backoffs": served.get("backoffs", 0), "p50_ms": served["p50_ms"],
            "engine_ms_before": before, "engine_ms_after": after, "capacity_rps": capacity,
            "ratio": served["throughput_rps"] / capacity, "compute_capacity_rps": in_run,
            "ratio_to_compute": served["throughput_rps"] / in_run if in_run else 0.0}


def many_row(m):
    where = "all CPUs, shared" if m["client_cpu"] is None else f"CPU {m['client_cpu']} alone"
    return (f"| {where} | {m['plan']} | {m['engine_ms_before']:.1f}, {m['engine_ms_after']:.1f} | "
            f"{m['capacity_rps']:.1f} | {m['throughput_rps']:.1f} | {m['ratio']:.3f} | "
            f"{m['compute_capacity_rps']:.1f} | {m['ratio_to_compute']:.3f} | {m['errors']} | "
            f"{m['p50_ms']:.0f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=20)
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--protocol-seconds", type=float, default=10,
                    help="seconds of load per protocol and model (one connection)")
    add_paths(ap)
    args = ap.parse_args()
    packrat = os.path.join(args.build, "packrat")
    model = os.path.abspath(os.path.join(args.models_dir, "resnet50", "model.onnx"))
    T = os.cpu_count()
    floor = run_json([os.path.join(args.build, "bench", "wake_floor"), "--json"])
    engine = run_json([packrat, "run", model, "--threads", str(T), "--batch", "1", "--repeat", "40", "--warmup", "3",
                       "--json"])
    s = Server(packrat, model, {"max_batch_size": 1, "plan": f"{T}x1", "max_queue_delay_us": 0})
    run_json([packrat, "bench", "--url", s.url, "--model", "resnet50", "--concurrency", "1", "--duration", "3",
              "--json"])
    served = run_json([packrat, "bench", "--url", s.url, "--model", "resnet50", "--concurrency", "1",
                       "--duration", "15", "--json"])
    asleep = tuple(p for p in PROTOCOLS if "--busy-poll" not in p[1])
    polling = tuple(p for p in PROTOCOLS if "--busy-poll" in p[1])
    by_protocol = {"resnet50": protocols(packrat, s, "resnet50", args.protocol_seconds, asleep)}
    s.stop()
    # the busy-polling client spins on a core of its own: one instance on the others
    s = Server(packrat, model, {"max_batch_size": 1, "plan": f"{max(T - 1, 1)}x1", "max_queue_delay_us": 0})
    by_protocol["resnet50"].update(protocols(packrat, s, "resnet50", args.protocol_seconds, polling))
    s.stop()
    s = Server(packrat, tiny_model(), {"max_batch_size": 1, "plan": "1x1", "max_queue_delay_us": 0},
               name="mlp")
    by_protocol["tiny mlp"] = protocols(packrat, s, "mlp", args.protocol_seconds)
    s.stop()
    binary, poll_label = PROTOCOLS[0][0], polling[0][0]
    stages = {k: (v[binary]["stage_means_us"], v[binary]["overhead"]) for k, v in by_protocol.items()}
    polled = {k: (v[poll_label]["stage_means_us"], v[poll_label]["overhead"]) for k, v in by_protocol.items()}
    many = [many_connections(packrat, model, args.max_batch)]
    last = max(os.sched_getaffinity(0))
    if plan_cpus(last):
        many.append(many_connections(packrat, model, args.max_batch, client_cpu=last))
    print(json.dumps(many), flush=True)
    rows = []
    for name, cfg in (("fat", {"plan": f"{T}x{args.max_batch}"}), ("packrat", {"plan": "auto"})):
        cfg.update({"max_batch_size": args.max_batch, "max_queue_delay_us": 5000})
        s = Server(packrat, model, cfg)
        run_json([packrat, "bench", "--url", s.url, "--model", "resnet50", "--concurrency", "2", "--duration",
                  "3", "--json"])
        r = run_json([packrat, "bench", "--url", s.url, "--model", "resnet50", "--rate", str(args.rate),
                      "--duration", str(args.duration), "--json"])
        r.update({"server": name, "plan": s.plan})
        rows.append(r)
        s.stop()
        print(json.dumps(r), flush=True)
    stamp = utc_stamp()
    cpu = cpu_name()
    out = {"date": stamp, "cpu": cpu, "engine_median_ms": engine["median_ms"], "served": served, "load": rows,
           "stage_means_us": {k: v[0] for k, v in stages.items()},
           "overhead_p50_us": {k: v[1][0] for k, v in stages.items()},
           "overhead_under_100us": {k: v[1][1] for k, v in stages.items()},
           "polling_client": {k: {"stage_means_us": v[0], "overhead_p50_us": v[1][0],
                                  "overhead_under_100us": v[1][1]} for k, v in polled.items()},
           "many_connections": many,
           "os_floor": floor,
           "protocols": by_protocol}
    os.makedirs(args.out, exist_ok=True)
    json.dump(out, open(os.path.join(args.out, "serve.json"), "w"), indent=1)
    lines = [f"Command: `bench/serve.py --rate {args.rate:g} --duration {args.duration:g} --max-batch {args.max_batch}"
             f" --protocol-seconds {args.protocol_seconds:g}`  ",
             f"Machine: {cpu}, {T} cores; {stamp}. ResNet-50, batch-1 requests with binary tensors.", "",
             "| path | p50 ms | p99 ms | server overhead per request |", "|---|---|---|---|",
             f"| engine alone (`packrat run --threads {T}`) | {engine['median_ms']:.1f} | - | - |",
             f"| through the server, 1 connection | {served['p50_ms']:.1f} | {served['p99_ms']:.1f} | "
             f"{served['p50_ms'] - engine['median_ms']:.2f} ms |", "",
             "The server's own time per request outside compute (the same closed loop, one connection, "
             "binary tensors): the p50 of `packrat_request_overhead_seconds` (parse to sent, minus the "
             "batch's compute), the share of requests under 0.1 ms, and where the time goes (mean "
             "microseconds per request from `packrat_request_stage_seconds`; assemble, compute and "
             "scatter are per execution, one request each here):", "",
             "| model | client | outside compute p50 us | under 0.1 ms | " + " | ".join(STAGES) + " |",
             "|---|---|---|---|" + "---|" * len(STAGES),
             *[stage_row(f"{k} | asleep in recv", *v) for k, v in stages.items()],
             *[stage_row(f"{k} | busy-polling", *v) for k, v in polled.items()], "",
             "The client is `packrat bench` on the same machine. Asleep in recv (libcurl's poll), its "
             "core idles through ResNet-50's compute, and the server's send of the answer, which on "
             "loopback runs the client's receive path, wakes that core: under a hypervisor a halted "
             "vCPU. With `--busy-poll` the client polls its socket without sleeping, as a latency "
             "client does, and the send wakes no one; a client on another host puts no wake on the "
             "server's send either. The floor below times both. The polling client spins on a core "
             "of its own (`taskset`), so ResNet-50 is served there by one instance on the other "
             f"core(s) (plan {max(T - 1, 1)}x1: its compute differs, the stages outside it are the "
             "same code).", "",
             "The operating system's floor under those stages on this machine (`build/bench/wake_floor`: "
             "two threads, nothing of packrat; p50 us): the hand-off of a request to an "
             "instance's thread (condition variable: queue), the answer's wake of the HTTP thread "
             "(eventfd into epoll: resume), each across two cores and on one core (the waker then "
             "blocks), a 4 KB answer's send to a client in recv (the call: send; until the client has "
             "it), and the path: the two wakes and the send call, the least the server's stages of a "
             "request hold, across cores and on one (as `packrat serve` meets them: its HTTP thread "
             "moves to the core of the instance it hands a request to, `--http-colocate`); back to "
             "back (as the tiny model's requests meet them) and after a 100 MB pass on both CPUs (as "
             "ResNet-50's do):", "",
             "| when | hand-off wake | answer wake | hand-off, one core | answer, one core | send call | "
             "send to arrival | path | path, one core |",
             "|---|---|---|---|---|---|---|---|---|",
             *[f"| {label} | {floor[w + '_condvar_wake']['p50_us']:.1f} | "
               f"{floor[w + '_eventfd_epoll_wake']['p50_us']:.1f} | "
               f"{floor[w + '_condvar_wake_same_core']['p50_us']:.1f} | "
               f"{floor[w + '_eventfd_epoll_wake_same_core']['p50_us']:.1f} | "
               f"{floor[w + '_tcp_send_call']['p50_us']:.1f} | "
               f"{floor[w + '_tcp_send_arrive']['p50_us']:.1f} | {floor[w + '_path_p50_us']:.1f} | "
               f"{floor[w + '_path_same_core_p50_us']:.1f} |"
               for label, w in (("back to back", "hot"), ("after a 100 MB pass", "after_pass"))], "",
             f"The send after one CPU streamed alone for {floor['idle_ms']:g} ms while the client's "
             "CPU idled (ResNet-50 on one connection), p50 us; polling takes the wake out, not the "
             "cold caches the pass leaves (the send call back to back: "
             f"{floor['hot_tcp_send_call']['p50_us']:.0f} us):", "",
             "| client | send call | send to arrival |", "|---|---|---|",
             *[f"| {label} | {floor[w + '_tcp_send_call']['p50_us']:.1f} | "
               f"{floor[w + '_tcp_send_arrive']['p50_us']:.1f} |"
               for label, w in (("asleep in recv", "idle_sleeping_reader"),
                                ("polling", "idle_polling_reader"))], "",
             f"ResNet-50's {stages['resnet50'][1][0]:.0f} us outside compute with the client asleep "
             f"({polled['resnet50'][1][0]:.0f} us with it polling) is that floor after a pass "
             f"({floor['after_pass_path_same_core_p50_us']:.0f} us on one core), the wake of the "
             "client's idle core inside the send (the table above), and the code of "
             "libmicrohttpd and packrat run with the caches and TLBs the pass emptied; the tiny "
             f"model's {stages['tiny mlp'][1][0]:.0f} us is about the floor back to back on one core "
             f"({floor['hot_path_same_core_p50_us']:.0f} us; across cores "
             f"{floor['hot_path_p50_us']:.0f} us). The first table's difference of two "
             "medians, from two processes, moves by milliseconds from run to run: the histograms time "
             "the server itself.", "",
             "The same by protocol (one connection, closed loop, each protocol on the same server: "
             "REST with the binary tensor extension, REST with JSON tensors, gRPC ModelInfer with "
             "`raw_input_contents`); the client's p50 includes compute:", "",
             "| model | protocol | outside compute p50 us | under 0.1 ms | parse us | encode us | "
             "client p50 ms | requests |", "|---|---|---|---|---|---|---|---|",
             *[protocol_row(m, label, r) for m, rows in by_protocol.items() for label, r in rows.items()],
             "",
             f"Throughput with {many[0]['connections']} connections (closed loop, ResNet-50, max batch "
             f"{args.max_batch}, the plan packrat picks for the server's CPUs), against the engine's "
             "capacity on that plan (`packrat run --plan`, batch latency measured just before and just "
             "after) and against the capacity the server's own batches' compute time in the run gives. "
             "The client (`packrat bench`, 1000 connections) shares the machine's CPUs with the plan, "
             "or runs alone on the last CPU (`taskset`) while the plan takes the others (`--cores`), as "
             "a client on another host would:", "",
             "| client | plan | engine ms before, after | engine capacity req/s | served req/s | "
             "served / capacity | capacity from the run's compute | served / that | errors | p50 ms |",
             "|---|---|---|---|---|---|---|---|---|---|",
             *[many_row(m) for m in many], "",
             f"Open loop at {args.rate:g} requests/s for {args.duration:g} s, max batch {args.max_batch}:", "",
             "| server | plan | requests | errors | p50 ms | p90 ms | p99 ms |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['server']} | {r['plan']} | {r['requests']} | {r['errors']} | {r['p50_ms']:.1f} | "
                     f"{r['p90_ms']:.1f} | {r['p99_ms']:.1f} |")
    open(os.path.join(args.out, "serve.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
