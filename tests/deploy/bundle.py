#!/usr/bin/python3
"""scripts/bundle.sh: the relocatable bundle runs in a bare Debian root.

Makes the bundle of PACKRAT (under 60 MiB), a Debian 12 root of
mmdebstrap's variant=minbase and nothing else (Debian's mirror, about a
minute; --rootfs TAR reuses a made one), and checks that the root holds none
of packrat's libraries. Then, in new mount and PID namespaces chrooted into
that root with /proc, a read-only /sys, a minimal /dev and /tmp: the
bundle's `packrat --version` (also through a symlink on PATH), `packrat run`
of a small model on a plan of two pinned instances, and `packrat serve`
answering an inference from this machine's loopback while every shared
object it maps lies inside the bundle. A second copy of the bundle on a
read-only mount unpacks its libraries under $TMPDIR and runs too.
With --kit OUT [ARGS...], last: the many-core kit's own command,
bench/manycore.sh OUT ARGS, run here against the bundle in that bare root
(every packrat call chrooted into it, OUT mounted at its own path; the
kit's Python stays on this machine, as on the larger machine): the dry run
of the command sent there.
usage: bundle.py PACKRAT BUNDLE_SH [--rootfs TAR] [--kit OUT [ARGS...]]"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as c  # noqa: E402

packrat, bundle_sh = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
tar = sys.argv[sys.argv.index("--rootfs") + 1] if "--rootfs" in sys.argv else None
kit = sys.argv[sys.argv.index("--kit") + 1:] if "--kit" in sys.argv else None

bundle = os.path.join(c.tmp, "bundle")
r = subprocess.run([bundle_sh, bundle, packrat], capture_output=True, text=True)
print(r.stdout + r.stderr[-2000:])
if not c.check("bundle.sh made the bundle", r.returncode == 0):
    c.finish()
size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(bundle) for f in fs)
c.check(f"the bundle is under 60 MiB ({size / 1048576:.1f} MiB)", size < 60 * 1048576)
manifest = open(os.path.join(bundle, "MANIFEST")).read()
c.check("the bundle holds oneDNN, libgomp, hwloc, gRPC, the C library and its loader",
        all(f"  {lib}" in manifest for lib in ("libdnnl.so", "libgomp.so", "libhwloc.so", "libgrpc.so",
                                                 "libc.so.6", "ld-linux-x86-64.so.2")), manifest[:3000])

made = ["mmdebstrap", "--variant=minbase", "bookworm", os.path.join(c.tmp, "minbase.tar")] if tar is None else None
root = c.made_root(tar or made[-1], "root", made, "mmdebstrap made a minbase root")
libs = subprocess.run(["find", root, "-name", "libdnnl.so*", "-o", "-name", "libgomp.so*", "-o",
                       "-name", "libhwloc.so*", "-o", "-name", "libmicrohttpd.so*", "-o",
                       "-name", "libgrpc.so*", "-o", "-name", "libprotobuf-c.so*"],
                      capture_output=True, text=True).stdout.split()
c.check("the bare root has none of packrat's own libraries", libs == [], libs)
c.check("the bare root has no python3", not os.path.exists(os.path.join(root, "usr/bin/python3")))

subprocess.run(["cp", "-a", bundle, os.path.join(root, "opt/packrat")], check=True)
subprocess.run(["cp", "-a", bundle, os.path.join(root, "opt/packrat-ro")], check=True)
os.symlink("/opt/packrat/packrat", os.path.join(root, "usr/local/bin/packrat"))
models = c.make_repo(os.path.join(root, "models"), config={"max_batch_size": 2})
port = c.free_port()
mounts = c.root_mounts(root) + f"""mount --bind {root}/opt/packrat-ro {root}/opt/packrat-ro && mount -o remount,bind,ro {root}/opt/packrat-ro
"""


def in_root(cmd, timeout=300):
    """Runs the shell command cmd in the bare root (namespaces as above); (status, output)."""
    script = mounts + f"exec chroot {root} /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin /bin/sh -c '{cmd}'"
    r = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--kill-child", "sh", "-c", script],
                       capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


rc, out = in_root("/opt/packrat/packrat --version")
c.check("packrat --version in the bare root", rc == 0 and out.startswith("packrat "), out[-1500:])
c.check("the libraries were unpacked next to the launcher",
        os.path.isfile(os.path.join(root, "opt/packrat/lib/.complete")))
rc, out = in_root("packrat --version")
c.check("packrat --version through a symlink on PATH", rc == 0 and out.startswith("packrat "), out[-1500:])
rc, out = in_root("cd /tmp && packrat run /models/mlp/1/model.onnx --batch 2 --plan 1x1,1x1 --repeat 3 --json")
try:
    run = json.loads(out.strip().splitlines()[-1])
except (ValueError, IndexError):
    run = {}
c.check("packrat run on a plan of two pinned instances in the bare root",
        rc == 0 and run.get("plan") == "1x1,1x1" and run.get("median_ms", 0) > 0, out[-1500:])
rc, out = in_root("TMPDIR=/tmp /opt/packrat-ro/packrat run /models/mlp/1/model.onnx --batch 1 --json")
c.check("a read-only copy unpacks under $TMPDIR and runs", rc == 0 and '"median_ms"' in out, out[-1500:])
c.check("nothing was written into the read-only copy",
        not os.path.exists(os.path.join(root, "opt/packrat-ro/lib")))

log = os.path.join(c.tmp, "serve.log")
script = mounts + (f"exec chroot {root} /usr/bin/env -i PATH=/usr/bin:/bin PACKRAT_CACHE=/tmp/cache "
                   f"/opt/packrat/packrat serve --model-repository /models --host 127.0.0.1 --http-port {port}")
p = c.spawn(["unshare", "--mount", "--pid", "--fork", "--kill-child", "sh", "-c", script], log)
url = f"http://127.0.0.1:{port}"
ready = c.wait_ready(url, p, 240)
if c.check("packrat serve ready in the bare root", ready, open(log).read()[-2000:]):
    st, body, _ = c.http(url + "/v2/models/mlp/infer", c.MLP_BODY)
    c.check("an inference through the loopback", st == 200 and json.loads(body)["outputs"][0]["shape"] == [1, 3],
            body[:300])
    # the server is the bundle's loader running bin/packrat serve
    loader = os.path.join(root, "opt/packrat/lib/ld-linux-x86-64.so.2")
    pids = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and os.readlink(f"/proc/{d}/exe") == loader and \
                    b"serve" in open(f"/proc/{d}/cmdline", "rb").read().split(b"\0"):
                pids.append(d)
        except OSError:
            pass
    objects = set()
    for pid in pids:
        for line in open(f"/proc/{pid}/maps"):
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if ".so" in path:
                objects.add(path)
    inside = os.path.join(root, "opt/packrat/lib") + "/"
    c.check(f"the server maps {len(objects)} shared objects, every one from the bundle",
            len(pids) == 1 and len(objects) > 20 and all(o.startswith(inside) for o in objects),
            (pids, sorted(o for o in objects if not o.startswith(inside))[:10]))
p.terminate()
try:
    p.wait(60)
except subprocess.TimeoutExpired:
    pass

if kit:
    out = os.path.abspath(kit[0])
    os.makedirs(out, exist_ok=True)
    # every packrat call of the kit: the bundle in the bare root, in namespaces of its own,
    # the kit's folder at the same path there, PACKRAT_CACHE passed through
    inner, wrapper = os.path.join(c.tmp, "in-root.sh"), os.path.join(c.tmp, "packrat-in-root")
    with open(inner, "w") as f:
        f.write("#!/bin/sh\n" + mounts + f"mkdir -p {root}{out} && mount --bind {out} {root}{out}\n"
                "cwd=$1; shift\n"
                f"exec chroot {root} /usr/bin/env -i PATH=/usr/bin:/bin ${{PACKRAT_CACHE:+PACKRAT_CACHE=$PACKRAT_CACHE}} "
                "/bin/sh -c 'cd \"$0\" 2>/dev/null || cd /; exec /opt/packrat/packrat \"$@\"' \"$cwd\" \"$@\"\n")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nexec unshare --mount --pid --fork --kill-child sh {inner} "$PWD" "$@"\n')
    os.chmod(wrapper, 0o755)
    r = subprocess.run([wrapper, "--version"], capture_output=True, text=True)
    c.check("the kit's packrat, through the bare root: --version", r.returncode == 0 and
            r.stdout.startswith("packrat "), r.stdout + r.stderr[-1000:])
    r = subprocess.run([os.path.join(os.path.dirname(bundle_sh), "..", "bench", "manycore.sh"), out,
                        "--packrat", wrapper] + kit[1:])
    c.check(f"the kit's command against the bundle in the bare root: exit {r.returncode}, "
            f"{out}/manycore.md written", r.returncode == 0 and os.path.exists(os.path.join(out, "manycore.md")))
c.finish()
