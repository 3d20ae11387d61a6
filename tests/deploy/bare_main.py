#!/usr/bin/python3
"""The README's main command on a fresh machine: a bare Debian 12 root.

Makes (or, with --rootfs TAR, reuses) a root of mmdebstrap's
variant=minbase and nothing else, copies the checkout's tracked files into
it, and there, chrooted in new mount and PID namespaces (with /proc, a
read-only /sys, a minimal /dev, a /tmp and this machine's resolv.conf),
runs exactly `scripts/run-main.sh` (with `--http-port` to a free port):
its own `scripts/install-deps.sh` (main packages only) from Debian's
mirror, the build, the export of ResNet-50, the profile and the serve. The
.deb files this machine's apt cache already holds are offered to the
root's apt first (apt still checks each one against the mirror's index),
which only spares the download. Then: the `ready:` line within the time
given, one inference of a 1x3x224x224 image from this machine's loopback
(1000 scores), none of the tests' packages in the root (cmocka, clang),
and SIGTERM ends it.

usage: bare_main.py SOURCE_DIR [--rootfs TAR] [--timeout-s S]"""
import glob
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as c  # noqa: E402

src = os.path.abspath(sys.argv[1])
tar = sys.argv[sys.argv.index("--rootfs") + 1] if "--rootfs" in sys.argv else None
limit = float(sys.argv[sys.argv.index("--timeout-s") + 1]) if "--timeout-s" in sys.argv else 2400

if tar and os.path.isfile(tar):
    root = c.made_root(tar, "root")
else:
    out = tar or os.path.join(c.tmp, "minbase.tar")
    root = c.made_root(out, "root", ["mmdebstrap", "--variant=minbase", "bookworm", out],
                       "mmdebstrap made a minbase root")
c.check("the bare root has no compiler, cmake or python3",
        not any(os.path.exists(os.path.join(root, p)) for p in ("usr/bin/gcc", "usr/bin/cmake",
                                                                "usr/bin/python3")))

# the checkout as a clean clone has it: the files git tracks, as they are here
dest = os.path.join(root, "opt/src/packrat")
os.makedirs(dest)
files = subprocess.run(["git", "-C", src, "ls-files", "-z"], capture_output=True, check=True).stdout
subprocess.run(f"tar -C '{src}' --null -T - -cf - | tar -C '{dest}' -xf -", shell=True,
               input=files, check=True)
c.check("the checkout copied", os.path.isfile(os.path.join(dest, "scripts/run-main.sh")))
archives = os.path.join(root, "var/cache/apt/archives")
os.makedirs(archives, exist_ok=True)
debs = glob.glob("/var/cache/apt/archives/*.deb")
for d in debs:  # links where the folders share a file system, copies else
    try:
        os.link(d, os.path.join(archives, os.path.basename(d)))
    except OSError:
        subprocess.run(["cp", d, archives], check=True)
print(f"offered {len(debs)} cached .deb files to the root's apt")
subprocess.run(["cp", "-L", "/etc/resolv.conf", os.path.join(root, "etc/resolv.conf")], check=True)

port = c.free_port()
log = os.path.join(c.tmp, "main.log")
script = c.root_mounts(root) + (
    f"exec chroot {root} /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "
    f"HOME=/root LANG=C.UTF-8 /bin/sh -c 'cd /opt/src/packrat && exec scripts/run-main.sh --http-port {port}'")
t0 = time.time()
p = c.spawn(["unshare", "--mount", "--pid", "--fork", "--kill-child", "sh", "-c", script], log)
started = c.wait_started(log, p, limit)
took = time.time() - t0
text = open(log, errors="replace").read()
if c.check(f"scripts/run-main.sh reached ready in the bare root ({took:.0f} s)", started, text[-4000:]):
    url = f"http://127.0.0.1:{port}"
    st, _, _ = c.http(url + "/v2/health/ready", timeout=10)
    c.check("ready: 200", st == 200, st)
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 3, 224, 224],
                                   "data": [0.5] * (3 * 224 * 224)}]}).encode()
    st, out, _ = c.http(url + "/v2/models/resnet50/infer", body, timeout=120)
    try:
        outputs = json.loads(out)["outputs"]
    except (ValueError, KeyError):
        outputs = []
    c.check("one inference answered: 1000 scores", st == 200 and len(outputs) == 1 and
            outputs[0]["shape"] == [1, 1000] and len(outputs[0]["data"]) == 1000, (st, out[:300]))
    c.check("the plan was chosen from this machine's profile", "profiled" in text and "plan " in text,
            text[-2000:])
c.check("only the main packages: no cmocka, no clang in the root",
        not glob.glob(os.path.join(root, "usr/lib/x86_64-linux-gnu/libcmocka.so*")) and
        not os.path.exists(os.path.join(root, "usr/bin/clang")))
c.check("the tests were not configured (no cmocka)",
        not os.path.exists(os.path.join(dest, "build/tests")))
os.killpg(p.pid, signal.SIGTERM)
try:
    p.wait(60)
except subprocess.TimeoutExpired:
    pass
c.finish()
