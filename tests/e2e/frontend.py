#!/usr/bin/python3
"""The HTTP front end under many connections, and its shutdown.

1. Connections: 2000 connections that stay open without finishing a
   request (half of them idle, half with half a header sent) while a normal
   client sends requests: its p99 stays within 100 ms of its p99 before, the
   server's threads stay bounded (no thread per connection), and its
   resident memory grows by less than 100 KiB a connection.
2. Shutdown: four keep-alive clients sending back to back and one stalled
   upload (Content-Length 1000, one byte sent); then SIGTERM. The server
   exits 0 within its --shutdown-timeout-s; every request that got an
   answer got a whole one (200 with every output, or 503), each answer
   after SIGTERM closes its connection, and no request sent on an open
   connection is left without an answer (a refused new connection is not a
   request).
3. SIGTERM while the server profiles its model at start: it exits 0 at
   once, never having said "ready".
4. Limits: at --max-connections a new connection waits in the backlog and
   is served once one closes; over --max-connections-per-client one is
   closed unanswered.
5. Co-location: after requests on one connection to a one-instance plan,
   the HTTP thread that served them runs on the instance's core alone (the
   hand-off and the answer wake a thread on their own core); with
   --http-colocate off no HTTP thread is pinned.

usage: frontend.py PACKRAT
"""
import http.client
import json
import os
import resource
import signal
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402

N_CONN = 2000
packrat = sys.argv[1]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < N_CONN + 256:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, N_CONN + 512), hard))


def server(extra=()):
    port = c.free_port()
    repo = c.make_repo(os.path.join(c.tmp, "models"), config={"max_batch_size": 4, "plan": "1x4"})
    p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port),
                 *extra], os.path.join(c.tmp, f"serve-{port}.log"))
    url = f"http://127.0.0.1:{port}"
    if not c.check("server ready", c.wait_ready(url, p, 120)):
        c.finish()
    return p, port, url


def status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def latencies(port, n):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        try:
            conn.request("POST", "/v2/models/mlp/infer", c.MLP_BODY,
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            body = r.read()
        except (OSError, http.client.HTTPException):
            return None
        if r.status != 200 or b"outputs" not in body:
            return None
        out.append(time.perf_counter() - t0)
    conn.close()
    return out


def p99(xs):
    return sorted(xs)[int(0.99 * (len(xs) - 1))]


def many_connections():
    p, port, url = server()
    base = latencies(port, 200)
    c.check("requests before", base is not None)
    metrics = c.http(url + "/metrics")[1].decode()
    stages = ("parse", "queue", "assemble", "compute", "scatter", "resume", "encode", "send")
    counts = {}
    for line in metrics.splitlines():
        for st in stages:
            if line.startswith(f'packrat_request_stage_seconds_count{{model="mlp",version="1",stage="{st}"}}'):
                counts[st] = int(line.split()[-1])
    c.check(f"/metrics: every request stage timed ({counts})",
            all(counts.get(st, 0) >= 200 for st in ("parse", "queue", "resume", "encode"))
            and all(counts.get(st, 0) >= 1 for st in stages))
    over = [line for line in metrics.splitlines() if line.startswith(
        'packrat_request_overhead_seconds_count{model="mlp",version="1"}')]
    n_over = int(over[0].split()[-1]) if over else 0
    c.check(f"/metrics: each answered request's time outside compute ({n_over})", n_over >= 200)
    rss0 = status(p.pid, "VmRSS")
    socks = []
    try:
        for i in range(N_CONN):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 2:
                s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Le")
            socks.append(s)
    except OSError as e:
        c.check(f"{N_CONN} connections open", False, f"{len(socks)} opened: {e}")
        c.finish()
    time.sleep(1)
    threads, rss1 = status(p.pid, "Threads"), status(p.pid, "VmRSS")
    busy = latencies(port, 200)
    c.check(f"requests with {N_CONN} slow and idle connections open", busy is not None)
    if base and busy:
        c.check(f"p99 within 100 ms of before ({p99(base) * 1e3:.1f} -> {p99(busy) * 1e3:.1f} ms)",
                p99(busy) < p99(base) + 0.1)
    c.check(f"threads bounded ({threads} with {N_CONN} connections)", 0 < threads <= 64, threads)
    grow = (rss1 - rss0) / N_CONN
    c.check(f"memory: {grow:.1f} KiB a connection (resident {rss1 // 1024} MiB)",
            grow < 100 and rss1 < 1024 * 1024, (rss0, rss1))
    for s in socks:
        s.close()
    os.kill(p.pid, signal.SIGTERM)
    c.check("exit 0", p.wait(60) == 0)


class Client(threading.Thread):
    """Requests back to back on one keep-alive connection until it closes or
    is refused; counts answers, whole ones and lost ones."""

    def __init__(self, port, stop_at):
        super().__init__()
        self.port, self.stop_at = port, stop_at
        self.ok = self.busy = self.torn = self.lost = self.refused = 0
        self.close_after_term = True

    def run(self):
        conn = None
        while time.time() < self.stop_at:
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                    conn.connect()
            except OSError:
                self.refused += 1
                conn = None
                time.sleep(0.01)
                continue
            try:
                conn.request("POST", "/v2/models/mlp/infer", c.MLP_BODY,
                             {"Content-Type": "application/json"})
            except OSError:
                conn.close()  # the server closed the connection before this request went out
                conn = None
                continue
            try:
                r = conn.getresponse()
                body = r.read()
            except (http.client.IncompleteRead, http.client.RemoteDisconnected, OSError):
                self.lost += 1  # sent on an open connection, never answered whole
                conn.close()
                conn = None
                continue
            if r.status == 200:
                whole = json.loads(body).get("outputs")
                self.ok += bool(whole)
                self.torn += not whole
            elif r.status == 503:
                self.busy += 1
            else:
                self.torn += 1
            if (r.getheader("Connection") or "").lower() == "close":
                conn.close()
                conn = None
        if conn:
            conn.close()


def terminate(p, wait_s):
    """SIGTERM to p: (its exit status or None after wait_s, seconds it took)."""
    t0 = time.time()
    os.kill(p.pid, signal.SIGTERM)
    try:
        rc = p.wait(wait_s)
    except Exception:
        rc = None
    return rc, time.time() - t0


def shutdown():
    p, port, url = server(["--shutdown-timeout-s", "15"])
    clients = [Client(port, time.time() + 8) for _ in range(4)]
    for t in clients:
        t.start()
    stalled = socket.create_connection(("127.0.0.1", port), timeout=30)
    stalled.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
    time.sleep(1.5)
    rc, took = terminate(p, 20)
    for t in clients:
        t.join()
    stalled.close()
    c.check(f"exit 0 within the shutdown timeout ({took:.1f} s)", rc == 0 and took < 16, rc)
    ok = sum(t.ok for t in clients)
    c.check(f"clients were answered before and during the drain ({ok} answers)", ok > 0)
    c.check("every answer whole", sum(t.torn for t in clients) == 0)
    c.check("no request on an open connection left unanswered",
            sum(t.lost for t in clients) == 0, [t.lost for t in clients])
    c.check("new connections refused after SIGTERM", sum(t.refused for t in clients) > 0)


def term_while_profiling():
    port = c.free_port()
    # the chain model (about 52 MFLOP a row): profiling it up to batch 64
    # takes seconds, where the mlp's takes milliseconds and would be over
    # before the signal
    repo = c.make_repo(os.path.join(c.tmp, "profiled"), name="chain",
                       config={"max_batch_size": 64}, model="chain")
    log = os.path.join(c.tmp, "profiling.log")
    env = dict(os.environ, PACKRAT_CACHE=os.path.join(c.tmp, "cache"))
    p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port)], log,
                env=env)
    deadline = time.time() + 60
    while time.time() < deadline and b"profiling" not in open(log, "rb").read():
        time.sleep(0.02)
    rc, took = terminate(p, 10)
    text = open(log, "rb").read()
    c.check(f"SIGTERM while profiling: exit 0 at once ({took:.2f} s)", rc == 0 and took < 2, rc)
    c.check("never ready", b"ready" not in text, text[-2000:])


def held(port):
    """A keep-alive connection proven open: a request on it answered. The
    readiness probe's connection may still count against the per-client
    limit until the server's thread cleans it up, and a connection refused
    for it is closed unanswered: try again for 5 s."""
    deadline = time.time() + 5
    while time.time() < deadline:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            got = s.recv(4096)
        except OSError:
            got = b""
        if got.startswith(b"HTTP/1.1 200"):
            return s
        s.close()
        time.sleep(0.05)
    return None


def connection_limits():
    """--max-connections 4: with 4 connections open a 5th waits in the
    kernel's backlog (not reset) and is served once one of them closes;
    --max-connections-per-client 2 (every client here is 127.0.0.1):
    a 3rd from the same address is closed unanswered while 2 are open."""
    p, port, url = server(["--max-connections", "4"])
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(4)]
    time.sleep(0.5)  # the four accepted
    fifth = socket.create_connection(("127.0.0.1", port), timeout=10)
    fifth.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    fifth.settimeout(1.0)
    try:
        early = fifth.recv(100)
    except socket.timeout:
        early = None
    c.check("at the limit a new connection waits (no answer, no reset)", early is None, early)
    idle[0].close()
    fifth.settimeout(10)
    try:
        late = fifth.recv(100)
    except OSError as e:
        late = repr(e).encode()
    c.check("served once a connection closes", late.startswith(b"HTTP/1.1 200"), late[:60])
    for s in idle[1:] + [fifth]:
        s.close()
    terminate(p, 10)
    p, port, url = server(["--max-connections-per-client", "2"])
    two = [held(port) for _ in range(2)]
    c.check("two connections from one client held open", all(two), two)
    third = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        third.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = third.recv(100)
    except OSError as e:
        got = b""
    c.check("over the per-client limit: closed unanswered", got == b"", got[:60])
    for s in [x for x in two if x] + [third]:
        s.close()
    # the server learns of the closes when its thread next polls them: a
    # connection made at once may still count them and be closed
    t0, got = time.time(), 0
    while got != 200 and time.time() - t0 < 5:
        got = c.http(url + "/v2/health/live", timeout=10)[0]
        time.sleep(0.05 if got != 200 else 0)
    c.check("under it again: served (within 5 s of the closes)", got == 200, got)
    terminate(p, 10)


def affinities(pid):
    """(name, allowed CPUs) of each thread of pid."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                st = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        except OSError:
            continue  # a thread that ended
        out.append((st["Name"], st["Cpus_allowed_list"].strip()))
    return out


def colocation():
    cpus = len(os.sched_getaffinity(0))
    for mode in ("on", "off"):
        p, port, url = server(["--http-threads", "1", "--http-colocate", mode])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        ok = True
        for _ in range(5):
            time.sleep(0.05)  # the instance waits for work again
            conn.request("POST", "/v2/models/mlp/infer", c.MLP_BODY, {"Content-Type": "application/json"})
            ok = ok and conn.getresponse().read().startswith(b'{"model_name"')
        conn.close()
        c.check(f"co-location {mode}: answered", ok)
        threads = affinities(p.pid)
        http_cpus = {a for n, a in threads if n.startswith("MHD")}
        single = {a for n, a in threads if not n.startswith("MHD") and a.isdigit()}
        if mode == "on":
            c.check("the HTTP thread runs on the instance's core alone",
                    len(single) == 1 and http_cpus == single, threads)
        elif cpus > 1:
            c.check("--http-colocate off: no HTTP thread pinned to one core",
                    http_cpus and not any(a.isdigit() for a in http_cpus), threads)
        terminate(p, 10)


many_connections()
connection_limits()
colocation()
shutdown()
term_while_profiling()
c.finish()
