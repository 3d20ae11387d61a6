#!/usr/bin/python3
"""The server's start and its models' states, as an operator meets them:
errors before the wait, nothing silent, readiness a load balancer can use,
files that cannot block it, and signals.

- busy ports: with the HTTP (or gRPC) port taken, `packrat serve` fails
  within a second, though its model would take long to profile;
- an empty repository, a model folder without a numeric version folder, a
  version folder without model.onnx: a warning naming the expected layout,
  and the folder in the repository index, UNAVAILABLE with that reason;
- readiness: strict (the default) is 503 while a model failed, off is 200;
  a failed model's routes answer its load error, 503 without Retry-After;
  a model still loading answers 503 with Retry-After;
- a FIFO at the profile cache's path, and another process holding the
  cache folder's flock: neither blocks a start or a load;
- SIGHUP is logged and ignored; SIGTERM then drains and exits 0.

usage: startup.py PACKRAT
"""
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hostile as h  # noqa: E402  (its Server, check and repository helpers)

check = h.check


def serve_fails_fast(packrat, repo, flags, what):
    """packrat serve with flags must exit non-zero within a second, naming the port."""
    t0 = time.time()
    r = subprocess.run([packrat, "serve", "--model-repository", repo, *flags],
                       capture_output=True, text=True, timeout=300)
    took = time.time() - t0
    check(f"{what}: the start fails in under a second ({took:.2f} s)", r.returncode != 0 and took < 1.0,
          f"rc {r.returncode}, {took:.2f} s")
    check(f"{what}: the error names the port", "listen" in r.stdout + r.stderr,
          (r.stdout + r.stderr)[-500:])


def t_ports(packrat, mm):
    # chain profiles for many seconds with an empty cache: the old start
    # profiled it all before it found the port taken
    repo = h.repo_with({"chain": mm["chain"]})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        serve_fails_fast(packrat, repo, ["--http-port", str(port)], "HTTP port in use")
        serve_fails_fast(packrat, repo, ["--http-port", "0", "--grpc-port", str(port)],
                         "gRPC port in use")


def t_layout(packrat, mm):
    empty = tempfile.mkdtemp(dir=h.TMP)
    s = h.Server(packrat, empty)
    check("empty repository: a warning naming the layout",
          re.search(r"warn .*holds no model \(expected <repository>/<model>/<version>/model\.onnx",
                    s.text()) is not None, s.text()[-1000:])
    st, d = s.json("POST", "/v2/repository/index")
    check("empty repository: an empty index", st == 200 and d == [], f"{st} {d}")
    s.stop()

    repo = h.repo_with({"mlp": mm["mlp"]})
    os.makedirs(f"{repo}/flat")  # the model file without a version folder
    shutil.copy(mm["mlp"], f"{repo}/flat/model.onnx")
    os.makedirs(f"{repo}/nofile/1")  # a version folder without model.onnx
    shutil.copy(mm["mlp"], f"{repo}/nofile/1/mlp.onnx")
    s = h.Server(packrat, repo)
    log = s.text()
    check("no version folder: a warning naming the layout",
          re.search(r"warn .*model flat: not served: folder flat has no numeric version folder "
                    r"\(expected <repository>/<model>/<version>/model\.onnx", log), log[-2000:])
    check("no model.onnx: a warning naming the folder",
          re.search(r"warn .*model nofile: not served: version folder nofile/1 has no model\.onnx",
                    log), log[-2000:])
    st, d = s.json("POST", "/v2/repository/index")
    idx = {e["name"]: e for e in d or []}
    check("the index lists the two folders", st == 200 and {"mlp", "flat", "nofile"} <= set(idx),
          f"{st} {d}")
    for name in ("flat", "nofile"):
        e = idx.get(name, {})
        check(f"{name}: UNAVAILABLE with the reason in the index",
              e.get("state") == "UNAVAILABLE" and "expected <repository>/<model>/<version>"
              in e.get("reason", ""), e)
    check("mlp is READY beside them", idx.get("mlp", {}).get("state") == "READY", idx.get("mlp"))
    h.still_serving(s, "folders that are no model")

    # readiness: strict by default, the failed folders make it 503
    st, _, hd = s.request("GET", "/v2/health/ready")
    check("strict readiness: 503 while a model is unavailable", st == 503, st)
    st, d, hd = s.request("POST", "/v2/models/flat/infer", b"{}")
    check("a failed model's infer: 503 with the reason, no Retry-After",
          st == 503 and b"no numeric version folder" in d and "Retry-After" not in hd,
          f"{st} {d[:300]} {hd}")
    st, d = s.json("GET", "/v2/models/nofile/ready")
    check("a failed model's ready route: not ready, with the reason",
          st == 503 and d and d["ready"] is False and "no model.onnx" in d.get("reason", ""),
          f"{st} {d}")
    st, d = s.json("POST", "/v2/repository/models/flat/load")
    check("loading a folder that is no model: 400 naming the layout",
          st == 400 and d and "expected <repository>/<model>/<version>" in d.get("error", ""),
          f"{st} {d}")
    # fixed, the folder loads and the server becomes ready
    os.makedirs(f"{repo}/flat/1")
    os.rename(f"{repo}/flat/model.onnx", f"{repo}/flat/1/model.onnx")
    shutil.rmtree(f"{repo}/nofile")
    st, _ = s.json("POST", "/v2/repository/models/flat/load")
    check("the fixed folder loads", st == 200, st)
    st, _ = s.json("POST", "/v2/repository/models/nofile/unload")
    st, _, _ = s.request("GET", "/v2/health/ready")
    check("ready once every model is ready or unloaded", st == 200, st)
    s.stop()

    # a model whose file is not ONNX: its load error on its routes
    repo = h.repo_with({"mlp": mm["mlp"]})
    os.makedirs(f"{repo}/junk/1")
    with open(f"{repo}/junk/1/model.onnx", "wb") as f:
        f.write(b"\x0a\xff\xff\xff\xff\x0f not onnx")
    for strict, want in (("on", 503), ("off", 200)):
        s = h.Server(packrat, repo, "--strict-readiness", strict)
        st, _, _ = s.request("GET", "/v2/health/ready")
        check(f"--strict-readiness {strict}: ready is {want} with a failed model", st == want, st)
        st, d, hd = s.request("POST", "/v2/models/junk/infer", b"{}")
        check(f"--strict-readiness {strict}: the failed model answers its load error",
              st == 503 and b"not available" in d and b"protobuf" in d and "Retry-After" not in hd,
              f"{st} {d[:300]} {hd}")
        h.still_serving(s, f"a failed model (strict {strict})")
        s.stop()


def t_loading(packrat, mm):
    """A model being loaded (profiling) answers 503 with Retry-After."""
    repo = h.repo_with({"mlp": mm["mlp"]})
    s = h.Server(packrat, repo)
    os.makedirs(f"{repo}/chain/1")
    os.symlink(mm["chain"], f"{repo}/chain/1/model.onnx")
    with open(f"{repo}/chain/config.json", "w") as f:  # a profile of seconds, not 20 s
        f.write('{"max_batch_size": 2}')
    done = []
    t = threading.Thread(target=lambda: done.append(s.json("POST", "/v2/repository/models/chain/load",
                                                           timeout=600)))
    t.start()
    seen = None
    deadline = time.time() + 60
    while time.time() < deadline and not done and seen is None:
        st, d, hd = s.request("GET", "/v2/models/chain/ready")
        if st == 503:
            seen = (st, d, hd)
        time.sleep(0.05)
    check("a loading model: 503 with Retry-After and 'loading'",
          seen is not None and "Retry-After" in seen[2] and b"loading" in seen[1], seen)
    t.join()
    check("the load then succeeds", done and done[0][0] == 200, done)
    s.stop()


def t_files(packrat, mm):
    """A FIFO at the profile cache's path, a lock held on the cache folder."""
    cache = os.path.join(h.TMP, "fifo-cache")
    os.makedirs(cache)
    env = {"PACKRAT_CACHE": cache}
    repo = h.repo_with({"mlp": mm["mlp"]})
    # find the cache file's name: one start writes it
    s = h.Server(packrat, repo, env=env)
    s.stop()
    files = [os.path.join(dp, f) for dp, _, fs in os.walk(cache) for f in fs]
    check("a profile was cached", len(files) == 1, files)
    if not files:
        return
    path = files[0]
    os.remove(path)
    os.mkfifo(path)
    t0 = time.time()
    s = h.Server(packrat, repo, env=env, wait=120)  # raises when it never gets ready
    check(f"a FIFO at the cache path does not block the start ({time.time() - t0:.1f} s)",
          s.port is not None, s.text()[-500:])
    h.still_serving(s, "a FIFO at the cache path")
    s.stop()
    os.remove(path)
    # another process holds the folder's lock for good: the profile is used, not cached
    holder = os.open(os.path.dirname(path), os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        s = h.Server(packrat, repo, env=env, wait=180)
        check("a held cache lock: a warning, not a hang",
              re.search(r"warn .*locked by another process", s.text()), s.text()[-1000:])
        h.still_serving(s, "a held cache lock")
        s.stop()
    finally:
        os.close(holder)


def t_signals(packrat, mm):
    repo = h.repo_with({"mlp": mm["mlp"]})
    s = h.Server(packrat, repo)
    s.p.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    check("SIGHUP: still running", s.alive())
    check("SIGHUP: logged as ignored", re.search(r"warn .*SIGHUP: ignored", s.text()), s.text()[-500:])
    h.still_serving(s, "SIGHUP")
    check("SIGTERM after SIGHUP: drains and exits 0", s.stop())


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)

    def run_all():
        for t in (t_ports, t_layout, t_loading, t_files, t_signals):
            print(f"== {t.__name__}", flush=True)
            t(os.path.abspath(sys.argv[1]), h.MM)

    h.harness("packrat-startup-", run_all)
