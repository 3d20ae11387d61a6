#!/usr/bin/python3
"""The docs_links CTest: every relative link of README.md and docs/*.md,
`[text](path)`, `[text](path#anchor)` or `[text](#anchor)`, points to a file
or folder of the repository, and its anchor to a heading of that file
(GitHub's slug rule). Links with a scheme (https:, mailto:) are left alone.

usage: links.py ROOT
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docs_lib  # noqa: E402

LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def main():
    root = os.path.abspath(sys.argv[1])
    broken, checked = [], 0
    for rel in docs_lib.doc_files(root):
        text = docs_lib.read(root, rel)
        prose, _ = docs_lib.split_fences(text)
        prose = re.sub(r"`[^`]*`", "", prose)  # links inside code are code
        for n, line in enumerate(prose.split("\n"), 1):
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue
                checked += 1
                path, _, anchor = target.partition("#")
                file = os.path.normpath(os.path.join(root, os.path.dirname(rel), path)) if path \
                    else os.path.join(root, rel)
                where = f"{rel}:{n}: {target}"
                if not file.startswith(root) or not os.path.exists(file):
                    broken.append(f"{where}: no such file")
                elif anchor:
                    if not file.endswith(".md"):
                        broken.append(f"{where}: an anchor into a file that is not markdown")
                    elif anchor not in docs_lib.anchors(open(file, encoding="utf-8").read()):
                        broken.append(f"{where}: no heading '#{anchor}' in "
                                      f"{os.path.relpath(file, root)}")
    for b in broken:
        print("FAIL", b)
    print(f"{checked} relative links checked, {len(broken)} broken")
    return 1 if broken or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
