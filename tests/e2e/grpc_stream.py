#!/usr/bin/python3
"""ModelStreamInfer (Triton's stream, as tritonclient's start_stream /
async_stream_infer use it) against the real server, with a client written
from the proto (grpcio stubs generated here):

- one stream carries requests of two models and one for a model that does
  not exist: every request is answered on the stream with its id, the bad
  one as that answer's error_message, the stream going on; each answer
  equals ModelInfer's for the same input; the stream ends with OK once the
  client closed its side; packrat_grpc_streams counts it while open and
  packrat_grpc_stream_requests_total its requests;
- a client that stops reading: with --grpc-stream-max-pending 4 and answers
  of 128 KiB, the server reads at most a few requests past the cap however
  many the client tries to send, and its resident memory stays flat; once
  the client reads again, every request is answered;
- garbage messages on a stream: each answered with an error, the stream
  going on; a stream the client cancels with requests queued is freed
  once they are done, and the server goes on;
- SIGTERM with requests of a stream waiting in the queue: each is
  answered, then the stream ends (UNAVAILABLE) and the server exits 0.

usage: grpc_stream.py PACKRAT
"""
import os
import queue
import re
import sys
import threading
import time

import grpc
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402

packrat = sys.argv[1]
d = c.tmp
pb, pb_grpc, _, _ = c.grpc_stubs(os.path.join(d, "stubs"))
repo = c.make_repo(os.path.join(d, "models"), config={"max_batch_size": 4, "plan": "1x4"})
c.make_repo(repo, "chain", {"max_batch_size": 64, "plan": "1x64", "max_queue_delay_us": 0},
            model="chain")
c.make_repo(repo, "slow", {"max_batch_size": 4, "plan": "1x4", "max_queue_delay_us": 1000000})


def start(extra, name):
    log = os.path.join(d, f"serve-{name}.log")
    http_port = c.free_port()
    p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(http_port),
                 "--grpc-port", "0", *extra], log)
    m = None
    for _ in range(1200):
        m = re.search(rb"ready: .*gRPC[^:]*: [^ ]*:(\d+)", open(log, "rb").read())
        if m or p.poll() is not None:
            break
        time.sleep(0.1)
    if not c.check(f"{name}: ready", m is not None, open(log, "rb").read()[-800:]):
        c.finish()
    return p, f"http://127.0.0.1:{http_port}", int(m.group(1))


def metric(url, name):
    text = c.http(url + "/metrics")[1].decode()
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else -1


def mlp_req(i):
    x = np.full((1, 4), float(i), dtype=np.float32)
    req = pb.ModelInferRequest(model_name="mlp", id=f"mlp-{i}")
    req.inputs.add(name="x", datatype="FP32", shape=[1, 4])
    req.raw_input_contents.append(x.tobytes())
    return req


def chain_req(i, rows=4):
    x = np.full((rows, 512), 0.01 * (i % 7), dtype=np.float32)
    req = pb.ModelInferRequest(model_name="chain", id=f"chain-{i}")
    req.inputs.add(name="x", datatype="FP32", shape=[rows, 512])
    req.raw_input_contents.append(x.tobytes())
    return req


p, url, port = start(["--grpc-stream-max-pending", "4"], "plain")
channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[
    ("grpc.max_receive_message_length", 64 << 20)])
stub = pb_grpc.GRPCInferenceServiceStub(channel)

# ---- several models and an error on one stream ----
reqs = []
for i in range(12):
    reqs.append(mlp_req(i) if i % 2 == 0 else chain_req(i))
    if i == 5:
        reqs.append(pb.ModelInferRequest(model_name="nope", id="bad"))
gate = threading.Event()


def sender(items, wait=None):
    for r in items:
        yield r
    if wait is not None:
        wait.wait(30)  # the stream stays open until told


answers = []
stream = stub.ModelStreamInfer(sender(reqs, gate), timeout=60)
for resp in stream:
    answers.append(resp)
    if len(answers) == len(reqs):
        c.check("a stream open: packrat_grpc_streams 1", metric(url, "packrat_grpc_streams") == 1)
        gate.set()  # the client closes its side
code = stream.code()
c.check(f"every request answered on the stream ({len(answers)} of {len(reqs)})",
        len(answers) == len(reqs))
errors = [a for a in answers if a.error_message]
c.check("the bad request: its answer's error_message, the stream went on",
        len(errors) == 1 and "unknown model" in errors[0].error_message, [a.error_message for a in errors])
by_id = {a.infer_response.id: a.infer_response for a in answers if not a.error_message}
c.check("every good request answered with its id",
        sorted(by_id) == sorted(r.id for r in reqs if r.model_name != "nope"), sorted(by_id))
same = True
for r in reqs:
    if r.model_name == "nope" or r.id not in by_id:
        continue
    unary = stub.ModelInfer(r, timeout=30)
    got = by_id[r.id]
    same &= (got.model_name == r.model_name and list(got.raw_output_contents) ==
             list(unary.raw_output_contents) and [o.name for o in got.outputs] ==
             [o.name for o in unary.outputs])
c.check("each answer equals ModelInfer's for the same input", same)
c.check("the stream ended with OK once the client closed its side", code == grpc.StatusCode.OK, code)
c.check("stream requests counted", metric(url, "packrat_grpc_stream_requests_total") == len(reqs))
time.sleep(0.2)
c.check("no stream open after it", metric(url, "packrat_grpc_streams") == 0)

# ---- a client that stops reading ----


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


N = 300
sent = [0]


def many():
    for i in range(N):
        sent[0] += 1
        yield chain_req(i, rows=64)  # 128 KiB answers: the client's window fills


rss0 = rss_kb(p.pid)
stream = stub.ModelStreamInfer(many(), timeout=120)
time.sleep(3)  # nothing read meanwhile
taken = metric(url, "packrat_grpc_stream_requests_total") - len(reqs)
rss1 = rss_kb(p.pid)
c.check(f"not read: the server took {taken:.0f} of {sent[0]} requests (cap 4)",
        0 < taken <= 64 and sent[0] > taken, (taken, sent[0]))
c.check(f"not read: resident memory flat ({rss0 // 1024} -> {rss1 // 1024} MiB)",
        rss1 - rss0 < 64 * 1024, (rss0, rss1))
got = 0
for resp in stream:
    got += not resp.error_message
c.check(f"read again: every request answered ({got} of {N})", got == N and stream.code() ==
        grpc.StatusCode.OK, stream.code())

# ---- garbage on a stream: each message answered with an error, the stream goes on ----
raw = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer")
rng = np.random.default_rng(7)
junk = [rng.bytes(int(n)) for n in rng.integers(1, 4096, 20)] + [b"\x2a\x00" * 2000]
got = list(raw(iter(junk + [mlp_req(1).SerializeToString()]), timeout=60))
answers = [pb.ModelStreamInferResponse.FromString(b) for b in got]
c.check(f"garbage: every message answered ({len(answers)} of {len(junk) + 1}), the junk with "
        "errors, the good one after it with its response",
        len(answers) == len(junk) + 1 and sum(bool(a.error_message) for a in answers) == len(junk)
        and any(a.infer_response.id == "mlp-1" for a in answers), [a.error_message for a in answers][:4])

# ---- a client that cancels its stream with requests queued ----
def slow_many():
    for i in range(16):
        r = mlp_req(i)
        r.model_name, r.id = "slow", f"gone-{i}"
        yield r
    time.sleep(30)


stream = stub.ModelStreamInfer(slow_many(), timeout=60)
time.sleep(0.3)
stream.cancel()
closed = False
for _ in range(100):  # the stream is freed once its requests are answered (and dropped)
    if metric(url, "packrat_grpc_streams") == 0:
        closed = True
        break
    time.sleep(0.1)
c.check("cancelled with requests queued: the stream is gone once they are done", closed)
c.check("cancelled: the server still answers", stub.ModelInfer(mlp_req(3), timeout=30).id == "mlp-3")

# ---- SIGTERM with a stream's requests in the queue ----
slow_q = queue.Queue()


def slow_items():
    for i in range(3):
        r = mlp_req(i)
        r.model_name, r.id = "slow", f"slow-{i}"
        yield r
    slow_q.get()  # open until the server ends it


stream = stub.ModelStreamInfer(slow_items(), timeout=60)
time.sleep(0.4)  # the three wait for a fourth (up to 1 s)
p.terminate()
late = []
try:
    for resp in stream:
        late.append(resp)
    end = stream.code()
except grpc.RpcError as e:
    end = e.code()
slow_q.put(None)
c.check(f"SIGTERM: the stream's queued requests answered ({len(late)} of 3)",
        len(late) == 3 and all(not a.error_message for a in late), [a.error_message for a in late])
c.check("SIGTERM: then the stream ended (UNAVAILABLE)", end == grpc.StatusCode.UNAVAILABLE, end)
c.check("SIGTERM: exit 0", p.wait(60) == 0)
channel.close()
c.finish()
