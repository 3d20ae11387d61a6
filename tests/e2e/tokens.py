#!/usr/bin/python3
"""Bearer tokens end to end, with curl as the client: no token, a wrong
token, and an inference token on an admin endpoint get 401/403 with a JSON
error and change nothing; health, readiness and the dashboard page stay
open; the right tokens work; neither token appears in the server's log.

usage: tokens.py PACKRAT
"""
import json
import os
import secrets
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402

packrat = sys.argv[1]
read_tok, admin_tok = "r-" + secrets.token_hex(16), "a-" + secrets.token_hex(16)
for name, tok in (("read", read_tok), ("admin", admin_tok)):
    with open(os.path.join(c.tmp, name), "w") as f:
        f.write(f"# {name} tokens\n{tok}\n")
port = c.free_port()
repo = c.make_repo(os.path.join(c.tmp, "models"), config={"max_batch_size": 2, "plan": "1x2"})
log = os.path.join(c.tmp, "serve.log")
p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port),
             "--auth-token-file", os.path.join(c.tmp, "read"),
             "--admin-token-file", os.path.join(c.tmp, "admin")], log)
url = f"http://127.0.0.1:{port}"
if not c.check("server ready", c.wait_ready(url, p, 120)):
    c.finish()


def curl(path, token=None, body=None):
    """(status, body, headers text) from curl."""
    cmd = ["curl", "-s", "-D", "-", "-o", os.path.join(c.tmp, "body"), url + path]
    if token:
        cmd += ["-H", f"Authorization: Bearer {token}"]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", body]
    head = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    with open(os.path.join(c.tmp, "body"), "rb") as f:
        data = f.read()
    status = int(head.split()[1]) if head.startswith("HTTP/") else 0
    return status, data, head


def is_error(data):
    try:
        return isinstance(json.loads(data).get("error"), str)
    except ValueError:
        return False


infer = "/v2/models/mlp/infer"
body = c.MLP_BODY.decode()
for path in ("/v2/health/live", "/v2/health/ready", "/v2/models/mlp/ready", "/"):
    c.check(f"{path} open without a token", curl(path)[0] == 200)
st, data, head = curl(infer, body=body)
c.check("infer without a token: 401, JSON error, WWW-Authenticate: Bearer",
        st == 401 and is_error(data) and "www-authenticate: bearer" in head.lower(), (st, data))
st, data, _ = curl(infer, token="not-a-known-token-at-all", body=body)
c.check("infer with a wrong token: 401", st == 401 and is_error(data), (st, data))
st, data, _ = curl(infer, token=read_tok, body=body)
c.check("infer with the inference token: 200", st == 200 and b"outputs" in data, (st, data))
st, data, _ = curl(infer, token=admin_tok, body=body)
c.check("infer with the admin token: 200", st == 200, st)
for path in ("/metrics", "/v2/models/mlp", "/dashboard/state"):
    c.check(f"{path}: 401 without a token, 200 with it",
            curl(path)[0] == 401 and curl(path, token=read_tok)[0] == 200)
plan_before = json.loads(curl("/v2/models/mlp/plan", token=read_tok)[1])["instances"]
st, data, _ = curl("/v2/models/mlp/plan", token=read_tok, body='{"plan": "1x1,1x1"}')
c.check("plan change with the inference token: 403", st == 403 and is_error(data), (st, data))
st, data, _ = curl("/v2/repository/models/mlp/unload", token=read_tok, body="{}")
c.check("unload with the inference token: 403", st == 403 and is_error(data), (st, data))
st, _, _ = curl("/v2/repository/models/mlp/unload", body="{}")
c.check("unload without a token: 401", st == 401, st)
plan_after = json.loads(curl("/v2/models/mlp/plan", token=read_tok)[1])["instances"]
c.check("nothing changed: same plan, model still served",
        plan_before == plan_after and curl(infer, token=read_tok, body=body)[0] == 200)
st, _, _ = curl("/v2/models/mlp/plan", token=admin_tok, body='{"plan": "1x1,1x1"}')
c.check("plan change with the admin token: 200", st == 200, st)
st, _, _ = curl("/v2/repository/models/mlp/unload", token=admin_tok, body="{}")
c.check("unload with the admin token: 200, then the model is gone",
        st == 200 and curl(infer, token=read_tok, body=body)[0] in (404, 503))
p.terminate()
c.check("exit 0", p.wait(60) == 0)
text = open(log, "rb").read()
c.check("neither token in the log", read_tok.encode() not in text and admin_tok.encode() not in text)
bad = os.path.join(c.tmp, "bad")
with open(bad, "w") as f:
    f.write("short\n")
r = subprocess.run([packrat, "serve", "--model-repository", repo, "--http-port", "0",
                    "--auth-token-file", bad], capture_output=True, text=True, timeout=60)
c.check("a bad token file: exit 1 with a clear message, the token not echoed",
        r.returncode == 1 and "token" in r.stderr and "short" not in r.stderr, r.stderr[-300:])
c.finish()
