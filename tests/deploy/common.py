"""Shared by the deploy tests: processes cleaned up on any exit, free ports,
a tiny model repository, PASS/FAIL counting and HTTP helpers."""
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.join(HERE, "..", "e2e")
procs = []
tmp = tempfile.mkdtemp(prefix="packrat-deploy-")
os.chmod(tmp, 0o755)  # the unprivileged processes the tests start read from it
passed = failed = 0


def cleanup():
    for p in reversed(procs):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    shutil.rmtree(tmp, ignore_errors=True)


atexit.register(cleanup)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, lambda *_: sys.exit(1))


def spawn(argv, log, **kw):
    """Starts argv in its own process group (killed with it on exit)."""
    p = subprocess.Popen(argv, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                         start_new_session=True, **kw)
    procs.append(p)
    return p


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"PASS {name}")
    else:
        failed += 1
        print(f"FAIL {name}{': ' + str(detail) if detail else ''}")
    sys.stdout.flush()
    return ok


def finish():
    print(f"{passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 else 1)


def made_root(tar, name, argv=None, what="", tail=1000):
    """Unpacks the root file system tar into a new folder tmp/name and returns its path;
    with argv, first runs it to write tar (timed, a check named what; the run ends when it
    fails)."""
    if argv:
        t0 = time.time()
        r = subprocess.run(argv, capture_output=True, text=True)
        print(r.stdout[-tail:] + r.stderr[-3000:])
        if not check(f"{what} ({time.time() - t0:.0f} s)", r.returncode == 0):
            finish()
    root = os.path.join(tmp, name)
    os.makedirs(root)
    subprocess.run(["tar", "-C", root, "-xf", tar], check=True)
    return root


def root_mounts(root):
    """The shell lines that give a chroot into root (in a new mount namespace) /proc, a
    read-only /sys, a minimal /dev (null, zero, random, urandom, shm) and a /tmp."""
    return f"""set -e
mount --make-rprivate /
mount -t proc proc {root}/proc
mount --rbind /sys {root}/sys && mount -o remount,bind,ro {root}/sys
mount -t tmpfs -o mode=755 tmpfs {root}/dev
for d in null zero random urandom; do touch {root}/dev/$d; mount --bind /dev/$d {root}/dev/$d; done
mkdir {root}/dev/shm && mount -t tmpfs tmpfs {root}/dev/shm
mount -t tmpfs tmpfs {root}/tmp
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_repo(path, name="mlp", config=None, model="mlp"):
    """path/<name>/1/model.onnx (tests/e2e/make_models.py's model, mlp unless
    told) and its config.json."""
    models = os.path.join(tmp, "made")
    if not os.path.exists(os.path.join(models, "mlp.onnx")):
        os.makedirs(models, exist_ok=True)
        subprocess.run(["/usr/bin/python3", os.path.join(E2E, "make_models.py"), models], check=True)
    os.makedirs(os.path.join(path, name, "1"), exist_ok=True)
    shutil.copy(os.path.join(models, model + ".onnx"), os.path.join(path, name, "1", "model.onnx"))
    if config is not None:
        with open(os.path.join(path, name, "config.json"), "w") as f:
            json.dump(config, f)
    return readable(path)


def readable(path):
    """Makes the repository under path readable by the unprivileged
    processes the tests start (folders 755, files 644; a link's target is
    left as it is); returns path."""
    for root, dirs, files in os.walk(path):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
        for f in files:
            if not os.path.islink(os.path.join(root, f)):
                os.chmod(os.path.join(root, f), 0o644)
    return path


MLP_BODY = json.dumps({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32",
                                   "data": [1, 2, 3, 4]}]}).encode()


def grpc_stubs(out):
    """Generates (into out) and imports the Python stubs of the server's
    .proto files (protoc and grpc_python_plugin, or grpc_tools when
    installed): grpc_service_pb2, its _grpc, health_pb2, its _grpc."""
    import importlib
    proto = os.path.join(HERE, "..", "..", "src", "server", "proto")
    os.makedirs(out, exist_ok=True)
    files = ["grpc_service.proto", "health.proto"]
    try:
        importlib.import_module("grpc_tools.protoc")
        cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{proto}", f"--python_out={out}",
               f"--grpc_python_out={out}", *files]
    except ImportError:
        cmd = ["protoc", f"-I{proto}", f"--python_out={out}", f"--grpc_out={out}",
               f"--plugin=protoc-gen-grpc={shutil.which('grpc_python_plugin')}", *files]
    subprocess.run(cmd, check=True, cwd=proto)
    sys.path.insert(0, out)
    return [importlib.import_module(m) for m in
            ("grpc_service_pb2", "grpc_service_pb2_grpc", "health_pb2", "health_pb2_grpc")]


def http(url, body=None, timeout=10.0, headers=None):
    """(status, body bytes, headers); status 0 and the error text when no answer came."""
    req = urllib.request.Request(url, data=body, headers=headers or {},
                                 method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)
    except Exception as e:  # connection refused, reset, timeout
        return 0, repr(e).encode(), {}


def wait_ready(url, proc, seconds=60.0):
    t = time.time()
    while time.time() - t < seconds:
        if proc.poll() is not None:
            return False
        if http(url + "/v2/health/ready", timeout=2)[0] == 200:
            return True
        time.sleep(0.1)
    return False


def wait_started(log, proc, seconds=60.0):
    """Waits for `packrat serve`'s "ready:" line in its log: it has loaded (or
    failed to load) every model of the repository and listens. Unlike
    /v2/health/ready, this also ends when a model failed to load (the server
    then is not ready, by design)."""
    t = time.time()
    while time.time() - t < seconds:
        if proc.poll() is not None:
            return False
        with open(log, errors="replace") as f:
            if " ready: " in f.read():
                return True
        time.sleep(0.1)
    return False
