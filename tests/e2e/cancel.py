#!/usr/bin/python3
"""Requests whose client went away leave the queue without running.

One instance (plan 1x64) of the chain model (about 52 MFLOP a row): a
request of 64 rows fills a batch alone. A blocker of 4096 rows (64 runs of
64, about a second of work here) holds the instance once it runs; behind
it wait seven requests that stay (4 REST, 3 gRPC), then eight that go away
while they wait: 3 REST connections the client closes, 2 gRPC calls it
cancels, 1 gRPC call whose deadline passes, and one gRPC stream of 2
requests it cancels. Then:

- every request that stayed is answered 200 / OK with the model's output;
- the model's execution count rose by 64 + 7 (none of the others ran) and
  its inference count by the rows of those that stayed;
- packrat_requests_total{outcome="cancelled"} counts the 8 that went, the
  successes the 8 that stayed (the blocker too), nothing failed or timed out;
- the queue is empty after, and the server answers the next request;
- churn: 60 clients that send and close within 50 ms beside 4 that stay:
  each request queued answered or cancelled, none failed; then SIGTERM amid more
  of both: those that stayed are answered (or refused 503), exit 0.

With --http-only (the TSan build: Debian's gRPC is not instrumented), the
same over REST alone: the blocker and the seven that stay are REST
requests, the eight that go REST connections the client closes.

usage: cancel.py PACKRAT [--http-only]
"""
import json
import os
import queue
import re
import socket
import sys
import threading
import time

import grpc
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402

packrat = sys.argv[1]
GRPC = "--http-only" not in sys.argv[2:]
d = c.tmp
if GRPC:
    pb, pb_grpc, _, _ = c.grpc_stubs(os.path.join(d, "stubs"))
ROWS = 64
BIG = 4096
repo = c.make_repo(os.path.join(d, "models"), "chain",
                   {"max_batch_size": BIG, "plan": f"1x{ROWS}", "max_queue_delay_us": 0},
                   model="chain")
log = os.path.join(d, "serve.log")
http_port = c.free_port()
p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(http_port),
             *(["--grpc-port", "0"] if GRPC else [])], log)
url = f"http://127.0.0.1:{http_port}"
m = None
for _ in range(1200):
    m = re.search(rb"ready: .*gRPC[^:]*: [^ ]*:(\d+)" if GRPC else rb"ready: http", open(log, "rb").read())
    if m or p.poll() is not None:
        break
    time.sleep(0.1)
t0 = time.time()
while m and c.http(url + "/v2/models/chain/ready")[0] != 200 and time.time() - t0 < 120:
    time.sleep(0.1)
if not c.check("server and model ready", m is not None and
               c.http(url + "/v2/models/chain/ready")[0] == 200, open(log, "rb").read()[-800:]):
    c.finish()
if GRPC:
    channel = grpc.insecure_channel(f"127.0.0.1:{int(m.group(1))}",
                                    options=[("grpc.max_receive_message_length", 64 << 20)])
    stub = pb_grpc.GRPCInferenceServiceStub(channel)

# bodies in the binary extension: no JSON floats to print or parse


def grpc_req(i, rows=ROWS):
    req = pb.ModelInferRequest(model_name="chain", id=f"r{i}")
    req.inputs.add(name="x", datatype="FP32", shape=[rows, 512])
    req.raw_input_contents.append(np.full((rows, 512), 0.01, dtype=np.float32).tobytes())
    return req


def body(rows):
    x = np.full((rows, 512), 0.01, dtype=np.float32)
    head = json.dumps({"inputs": [{"name": "x", "shape": [rows, 512], "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    return head + x.tobytes(), {"Inference-Header-Content-Length": str(len(head)),
                                "Content-Type": "application/octet-stream"}


BODY, BIN = body(ROWS)


def infer(rows=ROWS):
    b, h = (BODY, BIN) if rows == ROWS else body(rows)
    return c.http(url + "/v2/models/chain/infer", b, timeout=300, headers=h)


def raw_request():
    """A socket that has sent an infer request (read by nobody here)."""
    s = socket.create_connection(("127.0.0.1", http_port))
    s.sendall(b"POST /v2/models/chain/infer HTTP/1.1\r\nHost: x\r\n"
              + "".join(f"{k}: {v}\r\n" for k, v in BIN.items()).encode()
              + b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)
    return s


def data(answer):
    return np.array(json.loads(answer)["outputs"][0]["data"], dtype=np.float32)


def metrics():
    return c.http(url + "/metrics")[1].decode()


def metric(text, name, **labels):
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def outcome(text, o):
    return metric(text, "packrat_requests_total", model="chain", outcome=o)


def stats():
    s = json.loads(c.http(url + "/v2/models/chain/stats")[1])["model_stats"][0]
    return s["execution_count"], s["inference_count"]


def depth():
    return metric(metrics(), "packrat_queue_depth", model="chain") or 0


def wait_depth(n, seconds=60):
    t = time.time()
    while depth() < n and time.time() - t < seconds:
        time.sleep(0.01)
    return depth() >= n


# the reference answer, and the counts before
status, ref_body, _ = infer()
c.check("a first request answered", status == 200, ref_body[:300])
ref = data(ref_body)
before = metrics()
exec0, inf0 = stats()

# the blocker, then seven that stay: 4 REST (threads), 3 gRPC (futures)
rest_answers = queue.Queue()


def rest_one(rows=ROWS):
    rest_answers.put(infer(rows))


if GRPC:
    blocker = stub.ModelInfer.future(grpc_req(99, BIG), timeout=300)
else:
    blocker = threading.Thread(target=rest_one, args=(BIG,))
    blocker.start()
t0 = time.time()  # its body is read and parsed first (slow under a sanitizer)
while stats()[0] == exec0 and time.time() - t0 < 120:
    time.sleep(0.01)
c.check("the blocker runs (not done yet)", stats()[0] > exec0 and
        (not blocker.done() if GRPC else blocker.is_alive()))
keep_threads = [threading.Thread(target=rest_one) for _ in range(4 if GRPC else 7)]
for t in keep_threads:
    t.start()
keep_futures = [stub.ModelInfer.future(grpc_req(i), timeout=120) for i in range(3)] if GRPC else []
c.check("the seven that stay are queued behind it", wait_depth(7), depth())

# eight that go away, queued behind them
socks = []
for _ in range(3 if GRPC else 8):
    socks.append(raw_request())
if GRPC:
    gone_futures = [stub.ModelInfer.future(grpc_req(10 + i), timeout=120) for i in range(2)]
    late = stub.ModelInfer.future(grpc_req(20), timeout=0.5)
    stream_q = queue.Queue()

    def stream_requests():
        for i in range(2):
            yield grpc_req(30 + i)
        stream_q.get()  # keeps the client's side open until cancelled

    stream = stub.ModelStreamInfer(stream_requests(), timeout=120)
c.check("the eight that go are queued behind them", wait_depth(15), depth())
for s in socks:
    s.close()
if GRPC:
    for f in gone_futures:
        f.cancel()
    stream.cancel()
    stream_q.put(None)
    try:
        late.result()
        late_code = grpc.StatusCode.OK
    except grpc.RpcError as e:
        late_code = e.code()
    c.check("the call past its deadline: DEADLINE_EXCEEDED",
            late_code == grpc.StatusCode.DEADLINE_EXCEEDED, late_code)

# the eight that stayed are answered with the model's output
for t in keep_threads + ([] if GRPC else [blocker]):
    t.join()
rest = [rest_answers.get() for _ in range(len(keep_threads) + (0 if GRPC else 1))]
row = ref.reshape(ROWS, 512)[0]
c.check("the REST requests that stayed: 200 with the model's output",
        all(st == 200 and np.allclose(data(b).reshape(-1, 512), row) for st, b, _ in rest),
        [(st, b[:200]) for st, b, _ in rest if st != 200])
if GRPC:
    big = np.frombuffer(blocker.result().raw_output_contents[0], dtype=np.float32)
    c.check("the blocker: OK with the model's output", np.allclose(big.reshape(BIG, 512), row))
    outs = [np.frombuffer(f.result().raw_output_contents[0], dtype=np.float32)
            for f in keep_futures]
    c.check("the gRPC requests that stayed: OK with the model's output",
            all(np.allclose(o, ref) for o in outs))

# the counts: only the eight that stayed ran
t0 = time.time()
while time.time() - t0 < 30:
    after = metrics()
    if (outcome(after, "cancelled") or 0) - (outcome(before, "cancelled") or 0) >= 8 and depth() == 0:
        break
    time.sleep(0.1)
exec1, inf1 = stats()
c.check("the execution count rose by the blocker's 64 runs and 7", exec1 - exec0 == BIG // ROWS + 7,
        (exec0, exec1))
c.check("the inference count by their rows", inf1 - inf0 == BIG + 7 * ROWS, (inf0, inf1))
delta = {o: (outcome(after, o) or 0) - (outcome(before, o) or 0)
         for o in ("success", "cancelled", "failure", "timeout")}
c.check('packrat_requests_total: 8 cancelled, 8 success, no failure or timeout',
        delta == {"success": 8, "cancelled": 8, "failure": 0, "timeout": 0}, delta)
c.check("the queue is empty", depth() == 0, depth())
stat = json.loads(c.http(url + "/v2/models/chain/stats")[1])["model_stats"][0]
c.check("the model's stats count the cancelled", stat.get("packrat", {}).get("cancelled") == 8,
        stat.get("packrat"))
status, body, _ = infer()
c.check("the next request is answered", status == 200, body[:200])

# churn: 60 REST clients that send a request and close after 0..50 ms,
# beside 4 that stay, then SIGTERM with more of both under way: every
# request that stayed is answered, each that went is answered or
# cancelled (never failed), and the server exits 0
before = metrics()
churn_ok = queue.Queue()


def churner(i):
    s = raw_request()
    time.sleep((i % 6) * 0.01)
    s.close()


stayers = [threading.Thread(target=lambda: churn_ok.put(infer()[0])) for _ in range(4)]
churners = [threading.Thread(target=churner, args=(i,)) for i in range(60)]
for t in stayers + churners:
    t.start()
for t in stayers + churners:
    t.join()
t0 = time.time()
while depth() > 0 and time.time() - t0 < 60:
    time.sleep(0.05)
after = metrics()
delta = {o: (outcome(after, o) or 0) - (outcome(before, o) or 0)
         for o in ("success", "cancelled", "failure", "timeout")}
stay = [churn_ok.get() for _ in range(4)]
c.check("churn: the 4 that stayed answered 200", stay == [200] * 4, stay)
# (a client that closes before its body is in never got a request queued)
c.check("churn: every request queued answered or cancelled, none failed",
        4 < delta["success"] + delta["cancelled"] <= 64 and delta["failure"] == 0
        and delta["timeout"] == 0 and delta["cancelled"] > 0, delta)
late_stay = [threading.Thread(target=lambda: churn_ok.put(infer()[0])) for _ in range(2)]
late_go = [threading.Thread(target=churner, args=(i,)) for i in range(20)]
for t in late_stay + late_go:
    t.start()
time.sleep(0.02)
if GRPC:
    channel.close()
p.terminate()
for t in late_stay + late_go:
    t.join()
c.check("SIGTERM amid the churn: the requests that stayed answered 200 or refused 503",
        all(churn_ok.get() in (200, 503) for _ in late_stay))
c.check("the server exits 0 on SIGTERM", p.wait(60) == 0)
c.finish()
