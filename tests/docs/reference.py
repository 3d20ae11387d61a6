#!/usr/bin/python3
"""The docs_reference CTest: the reference pages against the code, both ways.

- flags: every `--flag` that README.md or docs/*.md write after `packrat
  CMD` is named by `packrat CMD --help`, and every option `packrat CMD
  --help` describes appears in the `## packrat CMD` section of docs/cli.md;
- config.json: the keys the server's parser accepts (from its own message
  for an unknown key, read from a running server) are exactly the rows of
  the reference table of docs/model-repository.md, and every nested key the
  parser compares against appears on that page;
- routes and RPCs: every HTTP route of the server's route table
  (`pr__http_routes`) is in docs/api.md as `METHOD PATTERN`, every route
  that page's tables name exists, and every RPC of src/server/proto is named;
- metrics: every series `/metrics` describes (`# HELP`) is in
  docs/operations.md, and every `packrat_*` series the docs name exists.

usage: reference.py PACKRAT ROOT WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docs_lib  # noqa: E402

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL", msg)


def section(text, heading):
    """The text under `heading` up to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    out, inside = [], False
    for line in text.split("\n"):
        m = re.match(r"^(#+)\s", line)
        if inside and m and len(m.group(1)) <= level:
            break
        if line.strip() == heading:
            inside = True
        elif inside:
            out.append(line)
    return "\n".join(out)


def check_flags(packrat, root):
    cli = docs_lib.read(root, "docs/cli.md")
    listed = {}
    for cmd in docs_lib.COMMANDS:
        listed[cmd], options = docs_lib.help_flags(docs_lib.help_text(packrat, cmd))
        if not options:
            fail(f"packrat {cmd} --help lists no option")
        body = section(cli, f"## packrat {cmd}")
        if not body:
            fail(f"docs/cli.md has no section '## packrat {cmd}'")
        in_docs = set(docs_lib.FLAG.findall(body))
        for flag in sorted(options - in_docs - {"--help"}):
            fail(f"packrat {cmd} --help lists {flag}, docs/cli.md's 'packrat {cmd}' does not")
    found = docs_lib.documented_flags(root)
    for (cmd, flag), where in sorted(found.items()):
        if flag not in listed[cmd] and flag != "--help":
            fail(f"{', '.join(sorted(set(where)))}: packrat {cmd} {flag}: "
                 f"not in 'packrat {cmd} --help'")
    print(f"{len(found)} documented (command, flag) pairs checked against --help")


def source_with(root, needle):
    """The one file under src/ that holds needle (files move; the text stays)."""
    for d, _, files in os.walk(os.path.join(root, "src")):
        for f in sorted(files):
            if f.endswith(".c"):
                p = os.path.join(d, f)
                if needle in open(p, encoding="utf-8", errors="replace").read():
                    return p
    raise SystemExit(f"no file under src/ holds {needle!r}")


def config_examples(root):
    """[(where, object)]: every JSON object of the ```json fences of
    docs/model-repository.md and docs/planning.md (a fence may hold several,
    one after another), each an example of a config.json."""
    out = []
    for rel in ("docs/model-repository.md", "docs/planning.md"):
        _, fences = docs_lib.split_fences(docs_lib.read(root, rel))
        for info, body, line in fences:
            if info.split()[:1] != ["json"]:
                continue
            text, at, dec = body.strip(), 0, json.JSONDecoder()
            while at < len(text):
                obj, end = dec.raw_decode(text, at)
                out.append((f"{rel}:{line}", obj))
                at = end
                while at < len(text) and text[at].isspace():
                    at += 1
    return out


def check_config(packrat, root, work):
    repo = os.path.join(work, "repo")
    shutil.rmtree(repo, ignore_errors=True)
    os.makedirs(os.path.join(repo, "probe", "1"))
    subprocess.run(["/usr/bin/python3", os.path.join(root, "tests/e2e/make_models.py"), work],
                   check=True, capture_output=True)
    shutil.copy(os.path.join(work, "mlp.onnx"), os.path.join(repo, "probe", "1", "model.onnx"))
    json.dump({"no_such_setting": 1}, open(os.path.join(repo, "probe", "config.json"), "w"))
    examples = config_examples(root)
    for i, (where, example) in enumerate(examples):
        # each example as a model's config.json (a fixed plan: its parse is
        # what is checked, not a profile of the probe model)
        d = os.path.join(repo, f"example{i}")
        os.makedirs(os.path.join(d, "1"))
        shutil.copy(os.path.join(work, "mlp.onnx"), os.path.join(d, "1", "model.onnx"))
        json.dump(dict(example, plan="1x1"), open(os.path.join(d, "config.json"), "w"))
    env = dict(os.environ, PACKRAT_CACHE=os.path.join(work, "cache"))
    srv = docs_lib.Server(packrat, repo, os.path.join(work, "reference.log"), env=env)
    try:
        url = f"http://127.0.0.1:{srv.http_port}"
        metrics = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    finally:
        srv.stop()
    m = re.search(r"unknown setting 'no_such_setting' \(known: ([^)]*)\)", open(srv.log).read())
    if not m:
        fail("the server's log has no 'unknown setting' message listing the known keys")
        return metrics
    accepted = {k.strip() for k in m.group(1).split(",")}
    log = open(srv.log).read()
    for i, (where, example) in enumerate(examples):
        bad = re.search(rf"example{i}/config\.json: (.*)", log)
        if bad:
            fail(f"{where}: the parser refuses this example config.json: {bad.group(1)}")
    page = docs_lib.read(root, "docs/model-repository.md")
    table = section(page, "## config.json reference")
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", table, re.M))
    for k in sorted(accepted - documented):
        fail(f"config.json key '{k}': the parser accepts it, docs/model-repository.md's "
             "reference table does not list it")
    for k in sorted(documented - accepted):
        fail(f"config.json key '{k}': docs/model-repository.md lists it, the parser refuses it")
    parser = open(source_with(root, "unknown setting '"), encoding="utf-8").read()
    nested = set(re.findall(r'strcmp\(k, "([a-z_]+)"\)', parser))
    nested |= set(re.findall(r'json_object_get\([a-z]+, "([a-z_]+)"\)', parser))
    for k in sorted(nested - accepted):
        if f"`{k}`" not in page and f'"{k}"' not in page:
            fail(f"config.json nested key '{k}' (the parser reads it) is not on "
                 "docs/model-repository.md")
    print(f"{len(accepted)} config.json keys, {len(nested)} nested keys and "
          f"{len(examples)} example configs checked")
    return metrics


def check_api(root):
    api = docs_lib.read(root, "docs/api.md")
    table = open(source_with(root, "pr__http_routes["), encoding="utf-8").read()
    routes = set(re.findall(r'R\(PR_ROUTE_\w+,\s*"([A-Z]+)",\s*"([^"]+)"', table))
    if not routes:
        fail("no route found in the route table")
    for method, pattern in sorted(routes):
        if f"`{method} {pattern}`" not in api:
            fail(f"route {method} {pattern} is not in docs/api.md")
    # a route's pattern as written, and with its optional part left out
    known = routes | {(m, re.sub(r"\[[^\]]*\]", "", p)) for m, p in routes}
    for line in api.split("\n"):
        if line.startswith("| `"):
            for method, pattern in re.findall(r"`(GET|POST|PUT|DELETE) (/[^`]*)`", line):
                if (method, pattern) not in known:
                    fail(f"docs/api.md names {method} {pattern}, which the server does not route")
    rpcs = set()
    for proto in ("grpc_service.proto", "health.proto"):
        rpcs |= set(re.findall(r"^\s*rpc (\w+)\(", docs_lib.read(root, f"src/server/proto/{proto}"),
                               re.M))
    for rpc in sorted(rpcs):
        if not re.search(rf"\b{rpc}\b", api):
            fail(f"RPC {rpc} is not in docs/api.md")
    print(f"{len(routes)} routes and {len(rpcs)} RPCs checked")


def expand_braces(text, series):
    """packrat_a_{b,c}_total -> packrat_a_b_total packrat_a_c_total, unless
    the braces are a series' labels (packrat_model_cores{model,version})."""
    def one(m):
        if m.group(1) in series and not m.group(3):
            return m.group(1)
        return " ".join(m.group(1) + p + m.group(3) for p in m.group(2).split(","))
    return re.sub(r"(packrat_[a-z0-9_]*)\{([a-z0-9_]+(?:,[a-z0-9_]+)+)\}([a-z0-9_]*)", one, text)


def check_metrics(root, metrics):
    series = set(re.findall(r"^# HELP (packrat_\w+) ", metrics, re.M))
    if not series:
        fail("/metrics described no series")
    ops = docs_lib.read(root, "docs/operations.md")
    for s in sorted(series):
        if f"`{s}`" not in ops:
            fail(f"metric {s} (in /metrics) is not in docs/operations.md")
    for rel in docs_lib.doc_files(root):
        for name in set(re.findall(r"\bpackrat_[a-z0-9_]+", expand_braces(docs_lib.read(root, rel), series))):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if name not in series and base not in series:
                fail(f"{rel} names the metric {name}, which /metrics does not have")
    print(f"{len(series)} metrics checked")


def main():
    packrat, root, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
    os.makedirs(work, exist_ok=True)
    check_flags(packrat, root)
    metrics = check_config(packrat, root, os.path.abspath(work))
    check_api(root)
    check_metrics(root, metrics)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
