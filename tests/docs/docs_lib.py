"""Shared by the docs tests (links.py, reference.py, snippets.py): the
documentation's files, their code fences and inline code, GitHub's heading
slugs, the `packrat` commands written in them, and `packrat serve` started
on a free loopback port."""
import os
import re
import signal
import subprocess
import time

COMMANDS = ("serve", "run", "profile", "plan", "infer", "quantize", "bench", "tokenize")
FLAG = re.compile(r"--[a-z][a-z0-9-]*")
FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")
# `packrat CMD` at the start of a word or after a path (build/packrat)
COMMAND = re.compile(r"(?:^|(?<=[\s/`(]))packrat\s+(" + "|".join(COMMANDS) + r")\b")


def doc_files(root):
    """README.md and every docs/*.md, as paths relative to root."""
    docs = sorted(f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    return ["README.md"] + [f"docs/{f}" for f in docs]


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


def split_fences(text):
    """(prose, fences): prose is text with every fenced block blanked (its
    lines kept empty, so line numbers hold); fences is a list of
    (info string, body, first line number)."""
    prose, fences, body, info, start, marker, indent = [], [], None, "", 0, None, 0
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if body is None:
            if m:
                body, info, start, marker = [], m.group(3).strip(), n + 1, m.group(2)[0]
                indent = len(m.group(1))
                prose.append("")
            else:
                prose.append(line)
        elif m and m.group(2)[0] == marker and not m.group(3).strip():
            fences.append((info, "\n".join(body), start))
            body = None
            prose.append("")
        else:
            cut = len(line) - len(line.lstrip(" "))
            body.append(line[min(cut, indent):])
            prose.append("")
    return "\n".join(prose), fences


def inline_code(prose):
    """The inline code spans of prose (a span may cross a line break)."""
    return [m.group(1).replace("\n", " ") for m in re.finditer(r"`([^`]+)`", prose)]


def fence_commands(body):
    """The command lines of a code block: a line ending in a backslash, or
    followed by an indented line, continues onto the next."""
    units, cur = [], None
    for line in body.split("\n"):
        if cur is not None and (cur.endswith("\\") or (line[:1].isspace() and line.strip())):
            cur = cur.rstrip("\\") + " " + line.strip()
        else:
            if cur is not None:
                units.append(cur)
            cur = line.strip()
    if cur is not None:
        units.append(cur)
    return units


def packrat_flags(unit):
    """[(command, flag)] for every `packrat CMD ... --flag` in one command
    line or inline code span: the flags after CMD up to the next packrat
    command (or a shell separator)."""
    out = []
    hits = list(COMMAND.finditer(unit))
    for i, m in enumerate(hits):
        end = hits[i + 1].start() if i + 1 < len(hits) else len(unit)
        rest = re.split(r"\s(?:&&|\|\||;|\|)\s", unit[m.end():end])[0]
        out += [(m.group(1), f) for f in FLAG.findall(rest)]
    return out


def documented_flags(root):
    """{(command, flag): [where, ...]} over README.md and docs/*.md."""
    found = {}
    for rel in doc_files(root):
        prose, fences = split_fences(read(root, rel))
        units = inline_code(prose)
        for _, body, _ in fences:
            units += fence_commands(body)
        for unit in units:
            for key in packrat_flags(unit):
                found.setdefault(key, []).append(rel)
    return found


def help_text(packrat, command):
    r = subprocess.run([packrat, command, "--help"], capture_output=True, text=True, timeout=30)
    return r.stdout + r.stderr


def help_flags(text):
    """(listed, options): every --flag the help text names anywhere, and the
    ones it describes as options (a line that starts with the flag, or the
    usage lines)."""
    listed = set(FLAG.findall(text))
    options = set()
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("usage:") or line.startswith("       packrat"):
            options |= set(FLAG.findall(s))
        elif s.startswith("--"):
            options.add(FLAG.match(s).group(0))
    return listed, options


def slug(heading):
    """GitHub's anchor for a heading: lower case, markup and punctuation
    other than '-' and '_' dropped, spaces to '-'."""
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    h = h.lower().replace("`", "")
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(text):
    """Every heading anchor of a markdown text (duplicates get -1, -2, ...)."""
    prose, _ = split_fences(text)
    seen, out = {}, set()
    for line in prose.split("\n"):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


class Server:
    """`packrat serve` on free loopback ports (HTTP, and gRPC when asked),
    waited for until ready; stop() sends SIGTERM and waits."""

    def __init__(self, packrat, repo, log, grpc=False, env=None, wait_s=120):
        args = [packrat, "serve", "--model-repository", repo, "--http-port", "0"]
        if grpc:
            args += ["--grpc-port", "0"]
        self.log = log
        self.proc = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                     env=env)
        deadline = time.time() + wait_s
        while time.time() < deadline:
            text = open(log).read()
            m = re.search(r"ready: http://127\.0\.0\.1:(\d+)/v2.*?(?:gRPC: 127\.0\.0\.1:(\d+))?\)",
                          text)
            if m:
                self.http_port = int(m.group(1))
                self.grpc_port = int(m.group(2)) if m.group(2) else None
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise SystemExit(f"the server did not start:\n{open(log).read()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
