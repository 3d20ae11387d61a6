#!/usr/bin/python3
"""The live dashboard in a real browser: `packrat serve` on a loopback port
with three models (mlp following the load from its profile, `fixed` with a
plan from its config, `evil` whose config makes it fail with markup in the
reason), put under an open-loop load by `packrat bench`, one reconfiguration
made by POSTing a plan; then headless Chromium (Debian's `chromium`) opens
GET / and runs the page's script, and the checks read its DOM: the cores
coloured by instance, each instance's cores, the plan, the live charts with
data points, the reconfiguration with its reason, the failed model's reason
as text (no element made from it). A screenshot is saved. Then a server with
no model: the page says so.

usage: dashboard.py PACKRAT OUT_DIR   (OUT_DIR/dashboard.png: the screenshot)
"""
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

PACKRAT, OUT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
tmp = tempfile.mkdtemp(prefix="packrat-dashboard-")
procs = []
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    passed, failed = passed + bool(ok), failed + (not ok)
    print(("PASS " if ok else "FAIL ") + name + ("" if ok or not detail else f": {detail}"))
    sys.stdout.flush()
    return ok


def http(url, body=None, method=None):
    """(status, body bytes, headers)."""
    req = urllib.request.Request(url, data=body, method=method or ("POST" if body else "GET"))
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


def serve(repo, log):
    env = dict(os.environ, PACKRAT_CACHE=os.path.join(tmp, "cache"))
    p = subprocess.Popen([PACKRAT, "serve", "--model-repository", repo, "--http-port", "0"],
                         stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env)
    procs.append(p)
    for _ in range(1200):
        text = open(log, errors="replace").read()
        m = re.search(r"ready: (http://127\.0\.0\.1:\d+)", text)
        if m:
            return p, m.group(1)
        if p.poll() is not None:
            break
        time.sleep(0.1)
    print(open(log, errors="replace").read())
    sys.exit("the server did not start")


class Dom(html.parser.HTMLParser):
    """Every element of the dumped DOM as (tag, attrs, text inside it)."""

    def __init__(self, text):
        super().__init__()
        self.elements, self.open = [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        e = [tag, dict(attrs), ""]
        self.elements.append(e)
        if tag not in ("meta", "link", "br", "img", "input", "circle", "line", "rect",
                       "polyline"):
            self.open.append(e)

    def handle_endtag(self, tag):
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i][0] == tag:
                del self.open[i:]
                break

    def handle_data(self, data):
        for e in self.open:
            e[2] += data

    def find(self, tag=None, **attrs):
        return [e for e in self.elements if (tag is None or e[0] == tag) and
                all(e[1].get(k.replace("_", "-")) == v for k, v in attrs.items())]


def chromium(url, *args):
    """Runs the page in headless Chromium for about 4 s of (virtual) time."""
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--user-data-dir=" + os.path.join(tmp, "chromium"), "--virtual-time-budget=4000",
            "--window-size=1400,2200", *args, url]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if r.returncode:
        print(r.stderr[-2000:])
    return r.stdout


def make_repo():
    made = os.path.join(tmp, "made")
    os.makedirs(made)
    subprocess.run(["/usr/bin/python3", os.path.join(HERE, "make_models.py"), made], check=True)
    repo = os.path.join(tmp, "repo")
    configs = {"mlp": {"max_batch_size": 4},
               "fixed": {"max_batch_size": 2, "plan": "1x1,1x1"},
               "evil": {"plan": "<img src=x onerror=alert(1)>"}}
    for name, config in configs.items():
        os.makedirs(os.path.join(repo, name, "1"))
        shutil.copy(os.path.join(made, "mlp.onnx"), os.path.join(repo, name, "1", "model.onnx"))
        json.dump(config, open(os.path.join(repo, name, "config.json"), "w"))
    return repo


def check_http(url):
    st, body, h = http(url + "/")
    check("GET / answers the page", st == 200 and b"dashboard/app.js" in body, st)
    check("the page is text/html", h.get("Content-Type", "").startswith("text/html"))
    csp = h.get("Content-Security-Policy", "")
    check("a Content-Security-Policy allows this origin only",
          "default-src 'none'" in csp and "script-src 'self'" in csp and "unsafe" not in csp, csp)
    check("the page is revalidated", h.get("Cache-Control") == "no-cache")
    st, body, h = http(url + "/dashboard/app.js")
    check("the script is served", st == 200 and h.get("Content-Type", "").startswith(
        "text/javascript") and b"textContent" in body)
    st, body, h = http(url + "/dashboard/state")
    check("the state is JSON, never stored",
          st == 200 and h.get("Cache-Control") == "no-store" and json.loads(body)["models"])
    st, _, _ = http(url + "/", body=b"{}")
    check("POST / is refused (405)", st == 405, st)


PINNED = ["1x2,1x2"]  # the plan pinned by hand (load_and_switch)


def load_and_switch(url):
    """Starts the load, waits, pins a plan; returns the bench processes."""
    benches = []
    for model, rate in (("mlp", 40), ("fixed", 10)):
        log = open(os.path.join(tmp, f"bench-{model}.json"), "wb")
        benches.append(subprocess.Popen(
            [PACKRAT, "bench", "--url", url, "--model", model, "--rate", str(rate),
             "--duration", "14", "--json"], stdout=log, stderr=subprocess.STDOUT))
    procs.extend(benches)
    time.sleep(4)
    # a plan other than the live one (the autoscaler's may already be 1x2,1x2)
    live = json.loads(http(url + "/v2/models/mlp/plan")[1])
    spec = ",".join(f"{i['threads']}x{i['batch']}" for i in live["instances"])
    PINNED[0] = "1x2,1x2" if spec != "1x2,1x2" else "2x4"
    st, body, _ = http(url + "/v2/models/mlp/plan", body=json.dumps({"plan": PINNED[0]}).encode())
    check(f"a plan POSTed ({PINNED[0]}, the live one {spec}): the server reconfigures", st == 200,
          body[:200])
    time.sleep(4)
    return benches


def check_machine(dom, plan):
    status = dom.find(id="status")
    check("the page read the state (status live)",
          status and "ok" in status[0][1].get("class", ""), status and status[0][2])
    cores = dom.find("div", **{"class": "core"})
    check("a cell per CPU", len(cores) >= 1, len(cores))
    check("each CPU with its physical core", all(re.search(r"CPU \d+ · core \d+", c[2])
                                                  for c in cores), [c[2] for c in cores])
    for inst in plan["instances"]:
        label = f"mlp #{inst['instance']}"
        for cpu in inst["cores"]:
            cell = dom.find("div", data_cpu=str(cpu))
            check(f"CPU {cpu} is coloured for {label}",
                  cell and label in cell[0][1].get("data-owners", "").split(";"),
                  cell and cell[0][1])
    owners = [e for e in dom.find("span") if e[1].get("class") == "owner"]
    check("core bars carry a colour", owners and all("background" in e[1].get("style", "")
                                                     for e in owners))


def model_dom(dom, name):
    """The elements inside the card of model `name` (in document order)."""
    start = next((i for i, e in enumerate(dom.elements)
                  if e[0] == "section" and e[1].get("data-model") == name), None)
    if start is None:
        return []
    end = next((i for i in range(start + 1, len(dom.elements))
                if dom.elements[i][0] == "section"), len(dom.elements))
    return dom.elements[start:end]


def check_model(dom, plan):
    card = model_dom(dom, "mlp")
    check("the mlp model has a card", card)
    rows = [e for e in card if e[0] == "tr" and "data-instance" in e[1]]
    check("one row per instance", len(rows) == len(plan["instances"]), len(rows))
    for inst, row in zip(plan["instances"], rows):
        want = ",".join(str(c) for c in inst["cores"])
        check(f"instance {inst['instance']}: its cores {want}, threads and batch",
              row[1].get("data-cores") == want and
              re.search(rf"#{inst['instance']}\s*{inst['threads']}\s*{inst['batch']}", row[2]),
              (row[1], row[2]))
    spec = [e for e in card if "data-plan" in e[1]]
    check("the plan is shown", spec and spec[0][1]["data-plan"] == PINNED[0] and
          PINNED[0] in spec[0][2], spec and spec[0][1])
    prepared = [e for e in card if e[0] == "span" and e[1].get("class") == "plan active"]
    check("the active plan is marked among the prepared", prepared and PINNED[0] in prepared[0][2])
    charts = {e[1].get("data-chart"): e for e in card if e[0] == "figure"}
    for kind in ("rate", "latency", "queue", "profile", "plan"):
        check(f"chart '{kind}' is drawn", kind in charts)
    for kind in ("rate", "latency", "profile", "plan"):
        n = int(charts[kind][1].get("data-points", 0)) if kind in charts else 0
        check(f"chart '{kind}' has data points", n >= 2, n)
    lines = [e for e in card if e[0] == "polyline" and len(e[1].get("points", "").split()) >= 2]
    check("the charts have lines", len(lines) >= 3, len(lines))
    switches = [e for e in card if e[0] == "li" and e[1].get("class") == "switch"]
    by_hand = [e for e in switches if "set by hand" in e[1].get("data-why", "")]
    check("the reconfiguration is in the timeline with its reason",
          by_hand and PINNED[0] in by_hand[0][2] and "set by hand" in by_hand[0][2],
          [e[2] for e in switches])
    check("the first plan is in the timeline too",
          any("first plan" in e[1].get("data-why", "") for e in switches))
    markers = [e for e in card if e[0] == "line" and e[1].get("class") == "marker"]
    check("the charts mark the reconfigurations", markers)


def check_others(dom):
    fixed = model_dom(dom, "fixed")
    rows = [e for e in fixed if e[0] == "tr" and "data-instance" in e[1]]
    check("a second model, its two instances", len(rows) == 2, len(rows))
    charts = [e for e in fixed if e[0] == "figure" and e[1].get("data-chart") == "rate"]
    check("its own live chart with data points",
          charts and int(charts[0][1].get("data-points", 0)) >= 2)
    evil = model_dom(dom, "evil")
    reason = [e for e in evil if e[1].get("class") == "reason"]
    check("a model that failed shows its reason as text",
          reason and "<img src=x onerror=alert(1)>" in reason[0][2], reason and reason[0][2])
    check("no element was made from server text", not dom.find("img"))


def main():
    repo = make_repo()
    srv, url = serve(repo, os.path.join(tmp, "serve.log"))
    check_http(url)
    benches = load_and_switch(url)
    plan = json.loads(http(url + "/v2/models/mlp/plan")[1])
    text = chromium(url + "/", "--dump-dom")
    open(os.path.join(OUT, "dashboard.html"), "w").write(text)
    dom = Dom(text)
    check_machine(dom, plan)
    check_model(dom, plan)
    check_others(dom)
    shot = os.path.join(OUT, "dashboard.png")
    if os.path.exists(shot):
        os.remove(shot)
    chromium(url + "/", "--screenshot=" + shot)
    check("a screenshot is saved", os.path.exists(shot) and os.path.getsize(shot) > 20000, shot)
    for b in benches:
        b.wait(timeout=60)
    for model in ("mlp", "fixed"):
        res = json.loads(open(os.path.join(tmp, f"bench-{model}.json")).read().splitlines()[-1])
        check(f"the load on {model} was answered, no error", res["errors"] == 0 and
              res["requests"] > 50, res)
    srv.terminate()
    srv.wait(timeout=60)
    os.makedirs(os.path.join(tmp, "empty"))
    srv, url = serve(os.path.join(tmp, "empty"), os.path.join(tmp, "empty.log"))
    dom = Dom(chromium(url + "/", "--dump-dom"))
    empty = dom.find("p", id="empty")
    check("no model: the page says so", empty and "hidden" not in empty[0][1] and
          "No model" in empty[0][2], empty)
    check("no model: no card, the cores idle", not dom.find("section", **{"class": "card model"})
          and dom.find("span", **{"class": "idle"}))
    check("no model: the page read the state", "ok" in dom.find(id="status")[0][1]["class"])


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    try:
        main()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
