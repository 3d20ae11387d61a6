#!/usr/bin/python3
"""The docs_snippets CTest: every code fence of README.md and docs/*.md
marked runnable (```sh runnable, ```python runnable) runs against a real
server, in the order the files and fences come, and must succeed.

The server is `packrat serve` on free loopback ports (HTTP and gRPC),
serving the default model (ResNet-50 from PACKRAT_MODELS, as
scripts/run-main.sh serves it, but with a fixed plan: no profile to wait
for). Each snippet runs in one working folder, where `build/packrat` is the
binary under test, `models` the models folder and `src` the source tree's,
with 127.0.0.1:8000 and 127.0.0.1:8001 replaced by the server's ports. A
snippet fails when it exits non-zero, when a sh snippet prints an
`{"error"` body, or when it runs past 180 s. The flags those snippets (and
every other command in the docs) pass to packrat are checked against
`--help` by docs_reference.

usage: snippets.py PACKRAT ROOT MODELS WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docs_lib  # noqa: E402

LANGS = {"sh": ["bash", "-e", "-c"], "bash": ["bash", "-e", "-c"], "python": ["/usr/bin/python3", "-c"]}


def runnable(root):
    """[(where, language, body)] of every fence marked runnable."""
    out = []
    for rel in docs_lib.doc_files(root):
        _, fences = docs_lib.split_fences(docs_lib.read(root, rel))
        for info, body, line in fences:
            words = info.split()
            if "runnable" in words[1:]:
                if words[0] not in LANGS:
                    raise SystemExit(f"{rel}:{line}: runnable fence of unknown language {words[0]}")
                out.append((f"{rel}:{line}", words[0], body))
    return out


def main():
    packrat, root, models, work = (os.path.abspath(a) for a in sys.argv[1:5])
    snippets = runnable(root)
    if not snippets:
        print("FAIL no runnable snippet found")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    repo, cwd = os.path.join(work, "repo"), os.path.join(work, "cwd")
    os.makedirs(os.path.join(repo, "resnet50", "1"))
    os.makedirs(os.path.join(cwd, "build"))
    os.symlink(os.path.join(models, "resnet50", "model.onnx"),
               os.path.join(repo, "resnet50", "1", "model.onnx"))
    json.dump({"max_batch_size": 8, "plan": "1x1"},
              open(os.path.join(repo, "resnet50", "config.json"), "w"))
    os.symlink(packrat, os.path.join(cwd, "build", "packrat"))
    os.symlink(models, os.path.join(cwd, "models"))
    os.symlink(os.path.join(root, "src"), os.path.join(cwd, "src"))
    env = dict(os.environ, PACKRAT_CACHE=os.path.join(work, "cache"))
    srv = docs_lib.Server(packrat, repo, os.path.join(work, "server.log"), grpc=True, env=env)
    failed = 0
    try:
        for where, lang, body in snippets:
            code = body.replace("127.0.0.1:8000", f"127.0.0.1:{srv.http_port}")
            code = code.replace("127.0.0.1:8001", f"127.0.0.1:{srv.grpc_port}")
            try:
                r = subprocess.run(LANGS[lang] + [code], cwd=cwd, env=env, capture_output=True,
                                   text=True, timeout=180)
                ok = r.returncode == 0 and not (lang != "python" and '{"error"' in r.stdout)
                out = r.stdout + r.stderr
                why = f"exit {r.returncode}"
            except subprocess.TimeoutExpired as e:
                ok, out, why = False, str(e.stdout or "") + str(e.stderr or ""), "past 180 s"
            print(("PASS " if ok else "FAIL ") + f"{where} ({lang})" + ("" if ok else f": {why}"))
            if ok and out.strip():
                print("  > " + out.strip().split("\n")[-1][:160])
            if not ok:
                failed += 1
                print("  " + out[-2000:].replace("\n", "\n  "))
    finally:
        srv.stop()
    if srv.proc.returncode != 0:
        print(f"FAIL the server exited {srv.proc.returncode}:\n{open(srv.log).read()[-2000:]}")
        failed += 1
    print(f"{len(snippets)} runnable snippets, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
