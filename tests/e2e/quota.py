#!/usr/bin/python3
"""A cgroup CPU quota is the machine packrat plans for.

`packrat serve` started inside a cgroup limited to 1 CPU's worth of time
(cgroup v1's cpu.cfs_quota_us = cpu.cfs_period_us, or v2's cpu.max, made
here as root) on this 2-CPU machine: the log's CPUs line names the quota,
the plan gives the model 1 core, and under a closed-loop client its
throttled periods (cpu.stat nr_throttled / nr_periods) stay under 5%.
Outside the cgroup the same server plans for every CPU. `--cpus 1` without
a quota does what the quota does.

Needs root and a cgroup hierarchy with the cpu controller that can be
written (this project's CI machines have cgroup v1's): exits 77 (CTest's
skip) saying why when there is none.

usage: quota.py PACKRAT
"""
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hostile as h  # noqa: E402

check = h.check


def cpu_cgroup():
    """(folder for a new child cgroup, 'v1' or 'v2'), or (None, why)."""
    if os.geteuid() != 0:
        return None, "not root"
    mounts = open("/proc/self/mountinfo").read().splitlines()
    own = dict(line.split(":", 2)[1:] for line in open("/proc/self/cgroup").read().splitlines())
    for line in mounts:
        pre, post = line.split(" - ")
        fstype, _, sup = post.split()[:3]
        mroot, point = pre.split()[3:5]
        if fstype == "cgroup" and "cpu" in sup.split(","):
            key = next((k for k in own if "cpu" in k.split(",")), None)
            if key is None:
                continue
            path = own[key]
            below = path[len(mroot):] if mroot != "/" and path.startswith(mroot) else (
                path if mroot == "/" else "")
            base = point + below.rstrip("/")
            if os.access(base, os.W_OK) and os.path.exists(base + "/cpu.cfs_quota_us"):
                return base, "v1"
    for line in mounts:
        pre, post = line.split(" - ")
        if post.split()[0] == "cgroup2":
            point = pre.split()[4]
            base = point + own.get("", "/").rstrip("/")
            try:
                if "cpu" not in open(base + "/cgroup.controllers").read().split():
                    continue
                with open(base + "/cgroup.subtree_control", "w") as f:
                    f.write("+cpu")
                return base, "v2"
            except OSError:
                continue
    return None, "no writable cgroup hierarchy with the cpu controller"


def cpu_stat(cg):
    d = {}
    for line in open(cg + "/cpu.stat"):
        k, v = line.split()
        d[k] = int(v)
    return d


def load(s, seconds, body):
    """One closed-loop client for `seconds`: (requests, failures)."""
    n = bad = 0
    end = time.time() + seconds
    while time.time() < end:
        st, _, _ = s.request("POST", "/v2/models/chain/infer", body)
        n += 1
        bad += st != 200
    return n, bad


def plan_cores(s):
    st, d = s.json("GET", "/v2/plan")
    if st != 200 or not d:
        return None
    cores = set()
    for m in d.get("models", []):
        for inst in m.get("instances", []):
            cores.update(inst.get("cores", []))
    return len(cores)


def main(packrat):
    base, kind = cpu_cgroup()
    if base is None:
        print(f"SKIP: {kind}")
        sys.exit(77)
    cg = os.path.join(base, f"packrat-quota-{os.getpid()}")
    os.mkdir(cg)
    try:
        if kind == "v1":
            open(cg + "/cpu.cfs_period_us", "w").write("100000")
            open(cg + "/cpu.cfs_quota_us", "w").write("100000")
        else:
            open(cg + "/cpu.max", "w").write("100000 100000")
        repo = h.repo_with({"chain": h.TMP + "/chain.onnx"}, {"chain": {"max_batch_size": 4}})
        # requests of 4 rows: each one's compute is long enough (milliseconds)
        # that an instance planned with 2 threads would need 2 CPUs while it runs
        body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [4, 512],
                                       "data": [0.01] * 2048}]}).encode()

        # inside the quota: started by a shell that joined the cgroup first
        wrapper = os.path.join(h.TMP, "in-cgroup.sh")
        with open(wrapper, "w") as f:
            f.write(f'#!/bin/sh\necho $$ > {cg}/cgroup.procs && exec "$@"\n')
        os.chmod(wrapper, 0o755)
        s = QuotaServer(wrapper, packrat, repo)
        log = s.text()
        m = re.search(r"CPUs: (\d+) of (\d+) CPUs \(the cgroup quota, 1\.00 CPUs: cgroup " + kind, log)
        check("under a 1-CPU quota: the log's CPUs line names it and uses 1 CPU",
              m is not None and m.group(1) == "1", re.findall(r".*CPUs: .*", log))
        check("the plan gives the model 1 core", plan_cores(s) == 1, s.json("GET", "/v2/plan"))
        load(s, 1.0, body)  # warm
        before = cpu_stat(cg)
        n, bad = load(s, 6.0, body)
        after = cpu_stat(cg)
        periods = after["nr_periods"] - before["nr_periods"]
        throttled = after["nr_throttled"] - before["nr_throttled"]
        share = throttled / periods if periods else 1.0
        print(f"under the quota: {n} requests in 6 s, {periods} periods, {throttled} throttled")
        check(f"every request answered ({n})", n > 10 and bad == 0, (n, bad))
        check(f"throttled in {100 * share:.1f}% of the periods under load (at most 5%)",
              periods > 20 and share <= 0.05, (periods, throttled))
        check("SIGTERM: exits 0", s.stop())

        # outside it: every CPU, nothing changed
        s = h.Server(packrat, repo)
        m = re.search(r"CPUs: (\d+) of (\d+) CPUs \(no cgroup CPU quota\)", s.text())
        allowed = len(os.sched_getaffinity(0))
        check("without a quota: every allowed CPU", m is not None and int(m.group(1)) == allowed,
              re.findall(r".*CPUs: .*", s.text()))
        s.stop()
        s = h.Server(packrat, repo, "--cpus", "1")
        check("--cpus 1: 1 CPU, said so", re.search(r"CPUs: 1 of \d+ CPUs \(--cpus 1\)", s.text()),
              re.findall(r".*CPUs: .*", s.text()))
        check("--cpus 1: the plan gives the model 1 core", plan_cores(s) == 1)
        s.stop()
    finally:
        for p in h.SERVERS:
            if p.poll() is None:
                p.kill()
                p.wait()
        time.sleep(0.2)
        try:
            os.rmdir(cg)
        except OSError as e:
            print(f"cannot remove {cg}: {e}")


class QuotaServer(h.Server):
    """h.Server, its command run through the cgroup's wrapper."""

    def __init__(self, wrapper, packrat, repo):
        real = subprocess.Popen

        def popen(argv, **kw):
            return real([wrapper, *argv], **kw)

        subprocess.Popen = popen
        try:
            super().__init__(packrat, repo)
        finally:
            subprocess.Popen = real


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    h.harness("packrat-quota-", lambda: main(os.path.abspath(sys.argv[1])))
