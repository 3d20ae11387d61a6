#!/usr/bin/python3
"""SIGTERM drains connections the kernel accepted but packrat had not yet:
the server is stopped (SIGSTOP) while clients connect and send their
requests, so those connections wait in the listening socket's backlog; then
SIGTERM and SIGCONT. Every one of those requests must be answered (closing
the listening socket without accepting them would reset them, and a load
balancer would count them as lost), and new connections must be refused.
Then, three times, SIGTERM while new connections keep arriving: exit 0,
every answer whole, and every connection that was made answered (one made
just before the listening socket closed, its request not read yet, was
reset by the daemon's stop).

usage: drain.py PACKRAT
"""
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402

N = 8
packrat = sys.argv[1]
port = c.free_port()
repo = c.make_repo(os.path.join(c.tmp, "models"), config={"max_batch_size": 1, "plan": "1x1"})
p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port)],
            os.path.join(c.tmp, "serve.log"))
url = f"http://127.0.0.1:{port}"
if not c.check("server ready", c.wait_ready(url, p, 120)):
    c.finish()
c.check("infer before", c.http(url + "/v2/models/mlp/infer", c.MLP_BODY)[0] == 200)
os.kill(p.pid, signal.SIGSTOP)
request = (f"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(c.MLP_BODY)}\r\nConnection: close\r\n\r\n").encode() + c.MLP_BODY
socks = []
for _ in range(N):  # the kernel completes these handshakes; packrat, stopped, accepts none
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(request)
    socks.append(s)
os.kill(p.pid, signal.SIGTERM)
time.sleep(0.2)
os.kill(p.pid, signal.SIGCONT)
ok = 0
for s in socks:
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        data += repr(e).encode()
    ok += data.startswith(b"HTTP/1.1 200")
    s.close()
c.check(f"every request waiting in the backlog at SIGTERM answered ({ok} of {N})", ok == N)
try:
    rc = p.wait(60)
except Exception:
    rc = None
c.check("exit 0 after draining", rc == 0, rc)
refused = c.http(url + "/v2/health/live", timeout=2)[0] == 0
c.check("new connections refused after the drain", refused)

# SIGTERM while new connections keep arriving: the server stops accepting
# while its HTTP threads are busy with arrivals (libmicrohttpd's own way,
# MHD_quiesce_daemon, raced those threads and aborted the process now and
# then: exit -6 here). Every answer a client got is whole; the server exits
# 0 each time.
for round_ in range(3):
    port = c.free_port()
    p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port)],
                os.path.join(c.tmp, f"serve{round_}.log"))
    url = f"http://127.0.0.1:{port}"
    if not c.check(f"round {round_}: server ready", c.wait_ready(url, p, 120)):
        c.finish()
    stop, torn, lost = threading.Event(), [], []

    def arrive():
        while not stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                continue  # refused once the listening socket closed
            try:
                s.sendall(request)
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = [int(v) for k, v in (h.split(b":", 1) for h in head.split(b"\r\n")[1:] if b":" in h)
                          if k.strip().lower() == b"content-length"]
                if data and not (head.startswith((b"HTTP/1.1 200", b"HTTP/1.1 503")) and length
                                 and len(body) == length[0]):
                    torn.append(data[:200])
                if not data:
                    lost.append("closed unanswered")
            except OSError as e:
                lost.append(repr(e))  # the connection was made: its request must be answered
            finally:
                s.close()

    threads = [threading.Thread(target=arrive) for _ in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    os.kill(p.pid, signal.SIGTERM)
    t_term = time.time()
    try:
        rc = p.wait(60)
        print(f"round {round_}: exit {time.time() - t_term:.2f} s after SIGTERM")
    except Exception:
        rc = None
    stop.set()
    for t in threads:
        t.join()
    c.check(f"round {round_}: SIGTERM with connections arriving: exit 0", rc == 0, rc)
    c.check(f"round {round_}: every answer whole (200 or 503)", not torn, torn[:2])
    c.check(f"round {round_}: every connection made was answered (none reset, none closed "
            f"unanswered)", not lost, lost[:3])
c.finish()
