#!/usr/bin/python3
"""Many models, one host: the joint plan divides the cores, against the real
server.

- Two models loaded together own disjoint cores (GET /v2/plan, each model's
  plan): every instance on its model's share, no core in two shares, every
  core in one; the startup divided the cores once, neither model planned
  again for the other.
- Under a steady load on model a, b is unloaded (a's share grows to every
  core) and loaded again (a's share shrinks back): a switches each time,
  logged with the reason, and no request of a fails.
- A model with "cores": {"share": true} plans over every core, outside the
  division; the divided models' shares ignore it.
- "cores": {"min": N} over the server's cores: the load fails naming the
  setting, and the loaded models' shares do not move; one that fits alone
  but not beside the others loads sharing every core (a warning says why);
  a malformed "cores" setting fails naming it.
- A plan pinned by hand lands on the model's share; one needing more cores
  than the share is refused with 400 naming the share.

usage: cores.py PACKRAT
"""
import json
import os
import re
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import common as c  # noqa: E402

packrat = sys.argv[1]
repo = os.path.join(c.tmp, "models")
for name in ("a", "b"):
    c.make_repo(repo, name, {"max_batch_size": 8})
port = c.free_port()
log = os.path.join(c.tmp, "serve.log")
p = c.spawn([packrat, "serve", "--model-repository", repo, "--http-port", str(port)], log)
url = f"http://127.0.0.1:{port}"
if not c.check("server ready", c.wait_ready(url, p, 180)):
    c.finish()
# the startup scan divides the cores once, among both, before either is
# planned: neither is planned again for the other
startup = open(log).read()
c.check("the startup plans each model once (no re-division, no model moving)",
        "re-divided" not in startup and ": moving" not in startup
        and len(re.findall(r"model [ab] v1: cores \d+\.\.\d+ of", startup)) >= 2,
        startup[-1500:])


def get(path):
    st, body, _ = c.http(url + path)
    return st, json.loads(body) if st == 200 else body


def post(path, obj):
    st, body, _ = c.http(url + path, json.dumps(obj).encode(), timeout=120)
    return st, json.loads(body) if body[:1] in (b"{", b"[") else body


def shares():
    """{model: (share cores, instance cores, divided)} from GET /v2/plan."""
    st, host = get("/v2/plan")
    out = {}
    for m in host["models"] if st == 200 else []:
        inst = [core for i in m["instances"] for core in i["cores"]]
        out[m["name"]] = (m["share"]["cores"], inst, m["share"]["divided"])
    return host if st == 200 else None, out


host, sh = shares()
c.check("GET /v2/plan lists both models", host is not None and set(sh) == {"a", "b"}, host)
cores = host["cores"] if host else []
a_cores, b_cores = (sh.get("a", ([], [], False)), sh.get("b", ([], [], False)))
c.check("both divided", a_cores[2] and b_cores[2], sh)
c.check("the shares are disjoint and cover every core",
        not set(a_cores[0]) & set(b_cores[0]) and sorted(a_cores[0] + b_cores[0]) == sorted(cores)
        and host["unassigned_cores"] == [], (sh, host and host["unassigned_cores"]))
c.check("every instance on its model's share",
        set(a_cores[1]) <= set(a_cores[0]) and set(b_cores[1]) <= set(b_cores[0]), sh)
st, plan_a = get("/v2/models/a/plan")
c.check("a model's plan names its share", st == 200 and plan_a["share"]["cores"] == a_cores[0]
        and plan_a["share"]["planned_batch"] == 8 and plan_a["share"]["score"] >= 1, plan_a)

# a steady load on a while b leaves and comes back
stop = threading.Event()
results = []


def load():
    while not stop.is_set():
        st, _, _ = c.http(url + "/v2/models/a/infer", c.MLP_BODY, timeout=30)
        results.append(st)


threads = [threading.Thread(target=load) for _ in range(3)]
for t in threads:
    t.start()
st, _ = post("/v2/repository/models/b/unload", {})
_, after_unload = shares()
c.check("b unloaded: 200", st == 200)
c.check("a's share grew to every core",
        "b" not in after_unload and after_unload.get("a", ([],))[0] == cores, after_unload)
st, _ = post("/v2/repository/models/b/load", {})
_, after_load = shares()
c.check("b loaded again: 200", st == 200)


def divided_as_before(now):
    """a and b own as many cores as at first, disjoint, every core between them."""
    a, b = now.get("a", ([], [], False)), now.get("b", ([], [], False))
    return (len(a[0]) == len(a_cores[0]) and len(b[0]) == len(b_cores[0]) and a[2] and b[2]
            and not set(a[0]) & set(b[0]) and sorted(a[0] + b[0]) == sorted(cores)
            and set(a[1]) <= set(a[0]) and set(b[1]) <= set(b[0]))


c.check("a's share shrank back beside b's", divided_as_before(after_load), after_load)
stop.set()
for t in threads:
    t.join()
c.check(f"every request of a answered while the cores moved ({len(results)})",
        len(results) > 0 and all(s == 200 for s in results), sorted(set(results)))
text = open(log).read()
c.check("each move logged with its reason",
        "cores re-divided: model b unloaded" in text and "cores re-divided: model b v1 loads" in text,
        re.findall(r".*re-divided.*", text)[-4:])

# a pinned plan lands on the share; one over it is refused
if len(cores) >= 2:
    st, d = post("/v2/models/b/plan", {"plan": f"{len(cores)}x1"})
    c.check("a pinned plan over the share: 400 naming it", st == 400 and "share" in d.get("error", ""),
            (st, d))
st, d = post("/v2/models/b/plan", {"plan": "1x1"})
c.check("a pinned plan on the share",
        st == 200 and d["instances"][0]["cores"] == [d["share"]["cores"][0]], (st, d))
post("/v2/models/b/plan", {"plan": "auto"})

# share: true plans over every core, outside the division
c.make_repo(repo, "s", {"max_batch_size": 4, "cores": {"share": True}})
st, _ = post("/v2/repository/models/s/load", {})
_, with_s = shares()
c.check("a sharing model: loaded, every core, not divided",
        st == 200 and with_s.get("s", ([], [], True))[0] == cores and not with_s["s"][2], with_s)
c.check("the divided shares ignore it", divided_as_before(with_s) and with_s["a"][0] == after_load["a"][0],
        with_s)

# bounds the server cannot meet, and a malformed setting
c.make_repo(repo, "big", {"max_batch_size": 4, "cores": {"min": len(cores) + 1}})
st, d = post("/v2/repository/models/big/load", {})
c.check("min cores over the server's: refused naming the setting",
        st != 200 and "cores" in d.get("error", ""), (st, d))
_, after_big = shares()
c.check("the loaded models' shares did not move",
        divided_as_before(after_big) and after_big["a"][0] == after_load["a"][0], after_big)
# more than the cores hold apart (its min is every core, beside a and b):
# it loads sharing every core, with a warning, and the others stay
c.make_repo(repo, "wide", {"max_batch_size": 4, "cores": {"min": len(cores)}})
st, _ = post("/v2/repository/models/wide/load", {})
_, with_wide = shares()
c.check("a model the cores cannot hold apart: loaded, sharing every core",
        st == 200 and with_wide.get("wide", ([], [], True))[0] == cores and not with_wide["wide"][2],
        with_wide)
c.check("the others stay as they were, and the log says why",
        divided_as_before(with_wide) and with_wide["a"][0] == after_load["a"][0]
        and "cannot be divided among 3 models" in open(log).read(), with_wide)
st, d = c.http(url + "/v2/models/wide/infer", c.MLP_BODY)[:2]
c.check("it serves", st == 200, d)
c.make_repo(repo, "bad", {"cores": {"weight": -1}})
st, d = post("/v2/repository/models/bad/load", {})
c.check("a malformed \"cores\": refused naming it", st != 200 and "'cores'" in d.get("error", ""),
        (st, d))
p.terminate()
c.check("exit 0", p.wait(60) == 0)
c.finish()
