#!/usr/bin/python3
"""Scale-out: three packrat servers on loopback behind nginx (deploy/nginx.conf,
passive checks) or HAProxy (deploy/haproxy.cfg, active checks on
/v2/health/ready), the balancer run unprivileged from a temp folder. An
open-loop client POSTs infer at a fixed rate; server A gets SIGTERM, later
server B gets SIGKILL. Every request carries an X-Request-Id, and the
balancer's access log says which servers it went to, so each failure gets a
cause. The servers batch with a 50 ms queue delay, so requests are really in
flight at each event.
Checks: every request succeeds except those in flight on B when it was
killed (the balancer had sent them, POST is not retried: 502, counted apart);
requests sent after each event all succeed; connections refused by A (after
SIGTERM) and B (after SIGKILL) were retried, never a request a server had
read; A answered every request it accepted (each one the balancer sent it
got a 200, those in flight at SIGTERM included) and exited 0.
usage: scaleout.py PACKRAT nginx|haproxy CONFIG [--rate R] [--duration S]"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as c  # noqa: E402

packrat, kind, conf_path = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]
opt = lambda k, d: float(sys.argv[sys.argv.index(k) + 1]) if k in sys.argv else d  # noqa: E731
rate, duration = opt("--rate", 60.0), opt("--duration", 15.0)
t_sigterm_at, t_sigkill_at = duration * 0.25, duration * 0.55

# three servers, a fixed plan (no profiling), batching with a 50 ms queue delay
repo = c.make_repo(os.path.join(c.tmp, "repo"),
                   config={"max_batch_size": 4, "plan": "1x4", "max_queue_delay_us": 50000})
ncpu = len(os.sched_getaffinity(0))
servers = []
for i in range(3):
    log = os.path.join(c.tmp, f"packrat{i}.log")
    p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", "0",
                 "--cores", str(sorted(os.sched_getaffinity(0))[i % ncpu])], log)
    servers.append({"name": "ABC"[i], "proc": p, "log": log})
for s in servers:
    for _ in range(600):
        m = re.search(r"ready: http://127.0.0.1:(\d+)", open(s["log"]).read())
        if m or s["proc"].poll() is not None:
            break
        time.sleep(0.1)
    if not m:
        print(open(s["log"]).read())
        sys.exit("a server did not start")
    s["port"] = int(m.group(1))
A, B, C = servers
print("servers: " + ", ".join(f'{s["name"]}=127.0.0.1:{s["port"]}' for s in servers))

# the balancer: the deploy config with its listen address, servers and files rewritten
lb_dir = os.path.join(c.tmp, kind)
os.makedirs(lb_dir)
lb_port = c.free_port()
conf = open(conf_path).read()
for i, s in enumerate(servers):
    conf = conf.replace(f"127.0.0.1:800{i + 1}", f"127.0.0.1:{s['port']}")
conf = conf.replace("127.0.0.1:8000", f"127.0.0.1:{lb_port}")
access = os.path.join(lb_dir, "access.log")
if kind == "nginx":
    conf = re.sub(r"(?m)^pid .*;", f"pid {lb_dir}/nginx.pid;", conf)
    conf = re.sub(r"(?m)^error_log \S+", f"error_log {lb_dir}/error.log", conf)
    conf = re.sub(r"access_log \S+", f"access_log {access}", conf)
    temps = "".join(f"    {t}_temp_path {lb_dir}/{t};\n" for t in
                    ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = conf.replace("http {\n", "http {\n" + temps, 1)
    argv = ["nginx", "-p", lb_dir, "-e", f"{lb_dir}/error.log", "-c", f"{lb_dir}/lb.conf",
            "-g", "daemon off;"]
else:
    argv = ["haproxy", "-db", "-f", f"{lb_dir}/lb.conf"]
open(f"{lb_dir}/lb.conf", "w").write(conf)
if os.getuid() == 0:  # unprivileged: nobody, in a folder of its own
    shutil.chown(lb_dir, "nobody", "nogroup")
    argv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--no-new-privs"] + argv
lb_log = os.path.join(c.tmp, f"{kind}.out")
lb = c.spawn(argv, lb_log)
url = f"http://127.0.0.1:{lb_port}"
ok_lb = False
for _ in range(100):
    if lb.poll() is not None:
        break
    if c.http(url + "/v2/health/ready", timeout=1)[0] == 200:
        ok_lb = True
        break
    time.sleep(0.1)
if not c.check(f"{kind} runs unprivileged in front of the servers", ok_lb, open(lb_log).read()[-1500:]):
    c.finish()
time.sleep(1.5)  # HAProxy: every server seen up by its checks

# the open-loop load: request n is due at n / rate, whatever came before
results = {}
lock = threading.Lock()


def one(n, due):
    t_send = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", lb_port, timeout=20)
    try:
        conn.request("POST", "/v2/models/mlp/infer", body=c.MLP_BODY,
                     headers={"X-Request-Id": f"r{n}", "Content-Type": "application/json"})
        r = conn.getresponse()
        body = r.read()
        st = r.status
        upstream = r.getheader("X-Upstream", "")
        if st == 200 and json.loads(body)["outputs"][0]["shape"] != [1, 3]:
            st = -1
    except Exception as e:
        st, body, upstream = 0, repr(e).encode(), ""
    finally:
        conn.close()
    with lock:
        results[f"r{n}"] = {"due": due, "sent": t_send, "done": time.monotonic(), "status": st,
                            "body": body[:200], "upstream": upstream}


events = {}


def chaos(t0):
    time.sleep(max(0, t0 + t_sigterm_at - time.monotonic()))
    events["sigterm"] = time.monotonic()
    A["proc"].send_signal(signal.SIGTERM)
    time.sleep(max(0, t0 + t_sigkill_at - time.monotonic()))
    events["sigkill"] = time.monotonic()
    B["proc"].send_signal(signal.SIGKILL)
    B["proc"].wait()
    events["dead"] = time.monotonic()  # its sockets are closed from here on


n_total = int(rate * duration)
t0 = time.monotonic()
threading.Thread(target=chaos, args=(t0,), daemon=True).start()
late = 0.0
with ThreadPoolExecutor(max_workers=96) as pool:
    for n in range(n_total):
        due = t0 + n / rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        late = max(late, time.monotonic() - due)
        pool.submit(one, n, due)
print(f"load: {n_total} POST infer at {rate:g}/s over {duration:g} s (open loop, most late {late * 1e3:.0f} ms); "
      f"SIGTERM to A at {events['sigterm'] - t0:.3f} s, SIGKILL to B at {events['sigkill'] - t0:.3f} s "
      f"(dead at {events['dead'] - t0:.3f} s)")
try:
    a_rc = A["proc"].wait(100)
except subprocess.TimeoutExpired:
    a_rc = None
B["proc"].wait()
time.sleep(0.5)  # the access log is written
lb.send_signal(signal.SIGTERM)  # also flushes it
try:
    lb.wait(10)
except subprocess.TimeoutExpired:
    lb.kill()

# which servers each request went to, from the balancer's log
port_of = {s["port"]: s["name"] for s in servers}
names = {"p1": "A", "p2": "B", "p3": "C"}
tried = {}
if kind == "nginx":
    for line in open(access):
        m = re.match(r'\S+ (\S+) (\d+) "([^"]*)" "([^"]*)"', line)
        if m:
            addrs = [a.strip() for a in m.group(3).replace(":", " ").replace(",", " , ").split(",")]
            tried[m.group(1)] = ([port_of.get(int(a.split()[-1]), "?") for a in addrs if a.strip()],
                                 m.group(4))
else:
    for line in open(lb_log):
        m = re.match(r"\S+ \{?(r\d+)\}? (-?\d+) (\S+) (\S+) (\+?\d+)", line)
        if m:
            retries = int(m.group(5).lstrip("+"))
            tried[m.group(1)] = ([names.get(m.group(3), "?")] * 1 + [] if retries == 0
                                 else ["retried"] * retries + [names.get(m.group(3), "?")], m.group(4))

# a request missing from the log (HAProxy drops log lines it cannot write at
# once) is placed by the X-Upstream header of its answer
for rid, r in results.items():
    if rid not in tried and r["upstream"]:
        hops = [h.strip() for h in r["upstream"].split(",")]
        tried[rid] = ([names.get(h) or port_of.get(int(h.rsplit(":", 1)[-1]), "?") for h in hops],
                      "from X-Upstream")
t_term, t_kill, t_dead = events["sigterm"], events["sigkill"], events["dead"]
counts = {"sent": len(results), "ok": 0}
failures = {}
in_flight_A_term = answered_A = retried = 0
for rid, r in results.items():
    path, detail = tried.get(rid, (["?"], ""))
    last = path[-1]
    if len(path) > 1:
        retried += 1
    if last == "A":
        answered_A += r["status"] == 200
        if r["sent"] < t_term < r["done"]:
            in_flight_A_term += 1
    if r["status"] == 200:
        counts["ok"] += 1
        continue
    if last == "B" and r["sent"] < t_dead and r["done"] >= t_kill:
        cause = "in flight on B at its SIGKILL (sent, not retried: POST)"
    elif last == "A" and r["sent"] < t_term:
        cause = "on A across its SIGTERM (drain lost it)"
    else:
        cause = f"other (status {r['status']}, via {'>'.join(path)} {detail})"
    failures[cause] = failures.get(cause, 0) + 1
    if cause.startswith(("other", "on A")):
        print(f"  {rid}: status {r['status']}, sent {r['sent'] - t0:.3f} s, done {r['done'] - t0:.3f} s, "
              f"via {path} {detail}: {r['body'][:120]!r}")
to_A = sum(1 for rid in results if tried.get(rid, (["?"],))[0][-1] == "A")
print(f"counts: sent {counts['sent']}, ok {counts['ok']}, failed {sum(failures.values())}"
      + "".join(f"; {k}: {v}" for k, v in failures.items()))
print(f"retried on another server after a failed connection: {retried}; "
      f"answered by A: {answered_A} of {to_A}, {in_flight_A_term} of them in flight at its SIGTERM")
unlogged = [rid for rid in results if rid not in tried]
print(f"requests placed by X-Upstream, not the log: {sum(1 for v in tried.values() if v[1] == 'from X-Upstream')}")
raw = open(access if kind == "nginx" else lb_log).read().splitlines()
c.check("every request placed on a server (the log, X-Upstream)", not unlogged,
        [(rid, results[rid]["status"], [ln for ln in raw if rid in ln]) for rid in unlogged[:5]])
c.check("no failure but those in flight on B at its SIGKILL",
        all(k.startswith("in flight on B") for k in failures), failures)
# sent between the two events, except those B still held when it was killed
# (counted above: a balancer cannot resend a POST a server has read)
after_term = [r for rid, r in results.items() if t_term < r["sent"] < t_kill and
              not (tried.get(rid, (["?"],))[0][-1] == "B" and r["done"] >= t_kill)]
after_kill = [r for r in results.values() if r["sent"] > t_dead]
c.check(f"all {len(after_term)} requests sent between SIGTERM and SIGKILL succeed",
        all(r["status"] == 200 for r in after_term))
c.check(f"all {len(after_kill)} requests sent after SIGKILL succeed", all(r["status"] == 200 for r in after_kill))
c.check("connections refused by the stopped servers were retried elsewhere", retried > 0, retried)
c.check("A answered every request it was sent (its drain)", answered_A == to_A and to_A > 0)
a_log = open(A["log"]).read()
c.check("A exited 0 after finishing its accepted requests", a_rc == 0 and "stopped" in a_log, a_rc)
st, body, _ = c.http(f"http://127.0.0.1:{C['port']}/metrics")
m = re.search(r'packrat_requests_total\{model="mlp",version="1",outcome="success"\} (\d+)', body.decode(errors="replace"))
print(f"C's /metrics: {m.group(0) if m else 'no success count'}")
c.finish()
