#!/usr/bin/python3
"""deploy/container: builds the root file system from Debian packages
(deploy/container/build.sh: mmdebstrap, Debian's mirror, a few minutes),
then runs packrat in it the way a container runtime would, with no podman
or docker needed: new mount and PID namespaces (packrat is PID 1 there, so
SIGTERM must still reach it), chroot into the unpacked tarball, /proc, a
read-only /sys (hwloc reads the topology there), a minimal /dev, the model
repository bind-mounted read-only at /models, the user of the image
(packrat, uid 10001) and its environment. Checks /v2/health/ready, one
inference through the host's loopback, that the profile cache landed in the
image's /var/cache/packrat, and that SIGTERM to PID 1 drains and exits 0.
With podman on the host, also imports the image and runs it with podman.
usage: container.py PACKRAT BUILD_SH [--rootfs TAR (skip the build)]"""
import json
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as c  # noqa: E402

packrat, build_sh = os.path.abspath(sys.argv[1]), sys.argv[2]
tar = sys.argv[sys.argv.index("--rootfs") + 1] if "--rootfs" in sys.argv else None
made = [build_sh, packrat, os.path.join(c.tmp, "rootfs.tar")] if tar is None else None
root = c.made_root(tar or made[-1], "rootfs", made, "build.sh made the root file system", tail=1500)
print(f"root file system: {subprocess.run(['du', '-sh', root], capture_output=True, text=True).stdout.split()[0]}")
c.check("the image holds only Debian packages and packrat",
        os.path.exists(os.path.join(root, "var/lib/dpkg/status"))
        and os.path.isfile(os.path.join(root, "usr/local/bin/packrat")))
models = c.make_repo(os.path.join(c.tmp, "models"), config={"max_batch_size": 2})
port = c.free_port()
script = c.root_mounts(root) + f"""mount --bind {models} {root}/models && mount -o remount,bind,ro {root}/models
exec chroot --userspec=10001:10001 {root} /usr/bin/env -i PATH=/usr/bin:/bin \
  PACKRAT_CACHE=/var/cache/packrat /usr/local/bin/packrat serve --model-repository /models \
  --host 127.0.0.1 --http-port {port}
"""
log = os.path.join(c.tmp, "serve.log")
p = c.spawn(["unshare", "--mount", "--pid", "--fork", "--kill-child", "sh", "-c", script], log)
url = f"http://127.0.0.1:{port}"
ready = c.wait_ready(url, p, 240)
if not c.check("/v2/health/ready inside the root file system", ready, open(log).read()[-2000:]):
    c.finish()
st, body, _ = c.http(url + "/v2/models/mlp/infer", c.MLP_BODY)
c.check("infer", st == 200 and json.loads(body)["outputs"][0]["shape"] == [1, 3], body[:300])
cache = os.path.join(root, "var/cache/packrat")
c.check("profile cached in the image's /var/cache/packrat", len(os.listdir(cache)) > 0)
# packrat is PID 1 in its namespace: find it from here by its executable
pid1 = None
for d in os.listdir("/proc"):
    try:
        if d.isdigit() and os.readlink(f"/proc/{d}/exe") == os.path.join(root, "usr/local/bin/packrat"):
            nspid = open(f"/proc/{d}/status").read().split("NSpid:")[1].split("\n")[0].split()
            pid1 = (int(d), nspid[-1])
    except OSError:
        pass
c.check("packrat is PID 1 in the container", pid1 and pid1[1] == "1", pid1)
if pid1:
    os.kill(pid1[0], signal.SIGTERM)
    try:
        rc = p.wait(100)
    except subprocess.TimeoutExpired:
        rc = None
    c.check("SIGTERM to PID 1: drains and exits 0", rc == 0 and "stopped" in open(log).read(), rc)

if shutil.which("podman"):
    # the image build.sh --import makes, run by podman
    image = "localhost/packrat:test"
    r = subprocess.run([build_sh, "--import-only", tar, image], capture_output=True, text=True)
    c.check("podman import (build.sh --import-only)", r.returncode == 0, r.stdout[-800:] + r.stderr[-800:])
    port = c.free_port()
    name = f"packrat-test-{port}"
    plog = os.path.join(c.tmp, "podman.log")
    p = c.spawn(["podman", "run", "--rm", "--name", name, "--network", "host",
                 "--ulimit", "nofile=8192:8192", "-v", f"{models}:/models:ro", image,
                 "--model-repository", "/models", "--host", "127.0.0.1", "--http-port", str(port)], plog)
    url = f"http://127.0.0.1:{port}"
    ready = c.wait_ready(url, p, 240)
    out = open(plog, errors="replace").read()
    if not ready and "OCI permission denied" in out:
        # this machine's sandbox: no CAP_SYS_RESOURCE, crun cannot set the
        # container's rlimits; the namespace run above stands in for it
        print("SKIP podman run: the OCI runtime is refused here: " + out.strip()[-300:])
    else:
        c.check("podman run: ready", ready, out[-1500:])
        c.check("podman run: infer", c.http(url + "/v2/models/mlp/infer", c.MLP_BODY)[0] == 200)
        subprocess.run(["podman", "stop", "-t", "100", name], capture_output=True)
        c.check("podman stop: exit 0", p.wait(110) == 0)
    subprocess.run(["podman", "rmi", "-f", image], capture_output=True)
else:
    print("SKIP podman: not installed here (the namespace run above stands in for it)")
c.finish()
