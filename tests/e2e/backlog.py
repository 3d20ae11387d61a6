#!/usr/bin/python3
"""Many more connections than the old queue bound (256): they wait, none is
refused, and a request that cannot be served within its timeout is refused
at once with 503 and Retry-After.

1. `packrat bench --concurrency 600` (closed loop, 600 connections) for 4 s
   against the chain model (about 52 MFLOP a row, a few hundred rows a
   second here: the queue holds hundreds of requests): every request is
   answered 200 (no 503, no transport error), the server counts as many
   successes as the client got answers (none lost) and no refusals, its
   queue held more than 256 at once, and its threads stay bounded (no
   thread per connection).
2. During that load, a request whose own timeout (parameters.timeout, 50 ms)
   the backlog cannot meet: 503 at once (long before the backlog would
   have served it), a Retry-After of whole seconds, an error that says
   why; a request without that timeout, sent beside it, gets 200.
3. /metrics shows the bounds: the queue capacity (the connection limit by
   default), the live plan's service rate, the refusal counted as
   rejected_over_timeout.

usage: backlog.py PACKRAT
"""
import json
import os
import resource
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402

N_CONN = 600
packrat = sys.argv[1]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < 2 * N_CONN + 256:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 2 * N_CONN + 512), hard))

port = c.free_port()
repo = c.make_repo(os.path.join(c.tmp, "models"), name="chain",
                   config={"max_batch_size": 4, "plan": "1x4"}, model="chain")
p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port)],
            os.path.join(c.tmp, "serve.log"))
url = f"http://127.0.0.1:{port}"
if not c.check("server ready", c.wait_ready(url, p, 120)):
    c.finish()
BODY = json.dumps({"inputs": [{"name": "x", "shape": [1, 512], "datatype": "FP32",
                               "data": [0.01] * 512}]}).encode()
c.check("infer before", c.http(url + "/v2/models/chain/infer", BODY)[0] == 200)


def metric(text, name, **labels):
    """The value of the sample of family `name` whose labels include labels."""
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
    return None


def scrape():
    return c.http(url + "/metrics")[1].decode()


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


before = scrape()
ok0 = metric(before, "packrat_requests_total", outcome="success")
rej0 = metric(before, "packrat_requests_total", outcome="rejected")

# 1. the load, watched from here: the deepest queue and the most threads seen
bench = subprocess.Popen([packrat, "bench", "--url", url, "--model", "chain", "--concurrency", str(N_CONN),
                          "--duration", "4", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
deepest, threads, late = 0, 0, None
t0 = time.time()
while bench.poll() is None and time.time() - t0 < 120:
    text = scrape()
    depth = metric(text, "packrat_queue_depth", model="chain") or 0
    deepest = max(deepest, depth)
    threads = max(threads, proc_status(p.pid, "Threads"))
    if late is None and depth > 100:
        # 2. a request the backlog cannot serve within its 50 ms, and one
        # without that timeout beside it
        tight = json.dumps({"inputs": json.loads(BODY)["inputs"], "parameters": {"timeout": 50000}}).encode()
        plain = {}
        side = threading.Thread(target=lambda: plain.setdefault("r", c.http(url + "/v2/models/chain/infer",
                                                                            BODY, timeout=60)))
        side.start()
        t1 = time.time()
        late = c.http(url + "/v2/models/chain/infer", tight, timeout=60) + (time.time() - t1, depth)
        side.join()
        late += (plain["r"][0],)
    time.sleep(0.2)
out, err = bench.communicate(timeout=120)
lines = out.decode().strip().splitlines()
r = json.loads(lines[-1]) if lines else {}
print(lines[0] if lines else err.decode()[-2000:])
after = scrape()
counts = r.get("status_counts", {})
c.check(f"every request answered 200 ({r.get('requests')} requests, {counts})",
        r.get("requests", 0) > N_CONN and r.get("errors", 1) == 0 and counts.get("5xx", 1) == 0
        and counts.get("transport", 1) == 0, counts)
c.check("no back-off needed (no 503 to wait out)", r.get("backoffs", 1) == 0, r.get("backoffs"))
served = metric(after, "packrat_requests_total", outcome="success") - ok0
# the client's answers, the warm-up's 1 and the two side requests' (at most) 1
c.check(f"none lost: the server's successes match the client's answers ({served:.0f} vs {r.get('requests')})",
        r.get("requests", 0) <= served <= r.get("requests", 0) + 2, served)
c.check(f"the queue held more than the old bound of 256 (deepest {deepest:.0f})", deepest > 256, deepest)
c.check(f"threads bounded ({threads} with {N_CONN} connections)", 0 < threads <= 64, threads)

# 2.
c.check("the backlog was there for the timeout check", late is not None, late)
if late is not None:
    status, body, headers, took, depth, plain_status = late
    text = body.decode(errors="replace")
    retry = headers.get("Retry-After", "")
    print(f"tight request at depth {depth:.0f}: {status} in {took * 1e3:.0f} ms, Retry-After {retry!r}: {text}")
    c.check("a request the backlog cannot serve within its timeout: 503", status == 503, status)
    c.check("refused at once, not after waiting", took < 1.0, took)
    c.check("with a Retry-After of whole seconds", retry.isdigit() and int(retry) >= 1, retry)
    c.check("and an error that says why", "timeout" in text and "queue" in text, text)
    c.check("the request beside it, without that timeout, served", plain_status == 200, plain_status)

# 3.
c.check("queue capacity defaults to the connection limit",
        metric(after, "packrat_queue_capacity", model="chain") == 4096, metric(after, "packrat_queue_capacity"))
c.check("the live plan's service rate is known", (metric(after, "packrat_queue_service_rate", model="chain") or 0) > 0)
c.check("the refusal counted as rejected_over_timeout",
        metric(after, "packrat_requests_total", outcome="rejected_over_timeout") == 1
        and metric(after, "packrat_requests_total", outcome="rejected") - rej0 == 1,
        metric(after, "packrat_requests_total", outcome="rejected_over_timeout"))
p.terminate()
c.check("exit 0", p.wait(60) == 0)
c.finish()
