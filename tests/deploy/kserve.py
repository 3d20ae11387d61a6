#!/usr/bin/python3
"""deploy/kserve: the ServingRuntime and InferenceService parse, agree with
each other (format onnx, protocol v2, the runtime's name, the probes on the
port packrat is told), and packrat started with exactly the container's
command, args and env serves the InferenceService's model: ready, then one
inference. Substituted, as a pod would have them: /mnt/models (where KServe's
storage initializer puts storageUri) and the volume mounts become temp
folders, and port 8080, which may be taken on a shared machine, a free one;
the process runs as runAsUser with no new privileges (when the test runs as
root).
usage: kserve.py PACKRAT SERVINGRUNTIME.yaml INFERENCESERVICE.yaml"""
import json
import os
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as c  # noqa: E402

packrat, rt_path, isvc_path = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]
rt = yaml.safe_load(open(rt_path))
isvc = yaml.safe_load(open(isvc_path))
c.check("ServingRuntime parses", rt["kind"] == "ServingRuntime"
        and rt["apiVersion"] == "serving.kserve.io/v1alpha1")
c.check("InferenceService parses", isvc["kind"] == "InferenceService"
        and isvc["apiVersion"] == "serving.kserve.io/v1beta1")
spec = rt["spec"]
model = isvc["spec"]["predictor"]["model"]
formats = {f["name"] for f in spec["supportedModelFormats"]}
c.check("runtime supports onnx, the service's format", "onnx" in formats
        and model["modelFormat"]["name"] in formats)
c.check("protocol v2 on both", "v2" in spec["protocolVersions"] and model["protocolVersion"] == "v2")
c.check("the service names the runtime", model["runtime"] == rt["metadata"]["name"])
ctr = spec["containers"][0]
args = list(ctr["args"])
print("container:", " ".join(ctr["command"] + args))
port = int(args[args.index("--http-port") + 1])
c.check("containerPort is packrat's --http-port", ctr["ports"][0]["containerPort"] == port)
c.check("readiness probe on /v2/health/ready at that port",
        ctr["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": port})
c.check("listens on every address (pod IP)", args[args.index("--host") + 1] == "0.0.0.0")
c.check("model repository is KServe's /mnt/models", args[args.index("--model-repository") + 1] == "/mnt/models")
timeout_s = int(args[args.index("--request-timeout-ms") + 1]) / 1000
grace = isvc["spec"]["predictor"].get("terminationGracePeriodSeconds", 30)
c.check(f"terminationGracePeriodSeconds above packrat's longest drain ({timeout_s + 60:.0f} s)",
        grace > timeout_s + 60, grace)

# the pod, on this machine
name = isvc["metadata"]["name"]
mnt = os.path.join(c.tmp, "mnt", "models")
c.make_repo(mnt, name=name, config={"max_batch_size": 4, "plan": "1x2,1x2"})
mounts = {"/mnt/models": mnt}
for vm in ctr.get("volumeMounts", []):
    mounts[vm["mountPath"]] = os.path.join(c.tmp, "vol-" + vm["name"])
    os.makedirs(mounts[vm["mountPath"]])
free = c.free_port()


def sub(v):
    for k, m in mounts.items():
        if v == k or v.startswith(k + "/"):
            return m + v[len(k):]
    return str(free) if v == str(port) else v


argv = [packrat] + [sub(a) for a in args]  # the image's command is packrat
env = {"PATH": "/usr/bin:/bin"}
env.update({e["name"]: sub(e["value"]) for e in ctr.get("env", [])})
sc = ctr.get("securityContext", {})
drop = []
if os.getuid() == 0 and "runAsUser" in sc:
    uid = sc["runAsUser"]
    for m in mounts.values():
        if "vol-" in m:
            os.chown(m, uid, uid)
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
if sc.get("allowPrivilegeEscalation") is False:
    drop += ["setpriv", "--no-new-privs"]
print("runs:", " ".join(drop + argv))
print("env:", " ".join(f"{k}={v}" for k, v in env.items()))
log = os.path.join(c.tmp, "serve.log")
p = c.spawn(drop + argv, log, env=env)
url = f"http://127.0.0.1:{free}"
if not c.check("ready (the readiness probe's path)", c.wait_ready(url, p, 120), open(log).read()[-2000:]):
    c.finish()
st, body, _ = c.http(f"{url}/v2/models/{name}/infer", c.MLP_BODY)
ok = st == 200 and json.loads(body)["outputs"][0]["shape"] == [1, 3]
c.check(f"POST /v2/models/{name}/infer", ok, body[:300])
st, _, _ = c.http(url + ctr["livenessProbe"]["httpGet"]["path"])
c.check("liveness probe path answers", st == 200)
st, body, _ = c.http(url + rt["metadata"]["annotations"]["prometheus.kserve.io/path"])
c.check("metrics at the annotated path", st == 200 and b"packrat_requests_total" in body)
p.terminate()
c.check("SIGTERM: exit 0", p.wait(timeout_s + 60) == 0)
c.finish()
