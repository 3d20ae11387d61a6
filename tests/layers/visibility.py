#!/usr/bin/python3
"""Public and internal names apart, and only the public API exported.

usage: visibility.py INCLUDE_DIR [--shared LIB.so:HEADER,...] LIB.a ...

In every library given (readelf -s of each member), each defined global
symbol is either
- public: declared in include/packrat/*.h (a pr_ name without a double
  underscore), with visibility DEFAULT, or
- internal: spelled pr__name or pr_part__name (a double underscore), or
  a generated protobuf name, with visibility HIDDEN.
Anything else fails: a pr_ name that no public header declares (internal
code under a public-looking name), a public name hidden, an internal name
exported.

--shared: the shared library's dynamic symbols (nm -D) that it defines
must be exactly the functions and data the listed public headers declare
(static inline ones aside): no internal name escapes, no public one is
missing."""
import glob
import os
import re
import subprocess
import sys

args = sys.argv[1:]
include = args.pop(0)
shared = []
while args and args[0] == "--shared":
    args.pop(0)
    so, headers = args.pop(0).split(":")
    shared.append((so, headers.split(",")))
archives = args


def declared(paths):
    """pr_ names a header declares as functions or data, and those it
    defines static inline (not symbols)."""
    names, inline = set(), set()
    for p in paths:
        text = open(p).read()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        for m in re.finditer(r"\b(pr_[a-z0-9_]+)\s*\(", text):
            names.add(m.group(1))
        for m in re.finditer(r"\bextern\s+[^;(]*\b(pr_[a-z0-9_]+)\s*(?:\[[^\]]*\])?\s*;", text):
            names.add(m.group(1))
        for m in re.finditer(r"static\s+inline\s+[^;{(]*\b(pr_[a-z0-9_]+)\s*\(", text):
            inline.add(m.group(1))
    names = {n for n in names if not n.endswith("_t")}  # types, as in `pr_status_t (*fn)(...)`
    return names - inline, inline


headers = sorted(glob.glob(os.path.join(include, "packrat", "*.h")))
public, inline = declared(headers)
bad = []
for lib in archives:
    out = subprocess.run(["readelf", "-sW", lib], capture_output=True, text=True, check=True).stdout
    member = "?"
    for line in out.splitlines():
        m = re.match(r"File: .*\((.*)\)", line)
        if m:
            member = m.group(1)
            continue
        f = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(f) < 8 or not f[0].endswith(":") or f[4] not in ("GLOBAL", "WEAK") or f[6] == "UND":
            continue
        vis, name = f[5], f[7]
        where = f"{os.path.basename(lib)}({member}): {name}"
        if name in public:
            if vis != "DEFAULT":
                bad.append(f"{where} is public (include/packrat) but {vis}")
        elif "__" in name:
            if vis != "HIDDEN":
                bad.append(f"{where} is internal but {vis}: exported")
        elif name.startswith("pr_"):
            bad.append(f"{where}: no public header declares it; an internal name is pr__{name[3:]}")
        elif vis != "HIDDEN":
            bad.append(f"{where} is not packrat's and is {vis}: exported")

for so, names in shared:
    mine, _ = declared([os.path.join(include, "packrat", h) for h in names])
    out = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True,
                         check=True).stdout
    exported = {f[2] for f in (l.split() for l in out.splitlines()) if len(f) == 3}
    for name in sorted(exported - mine):
        bad.append(f"{os.path.basename(so)} exports {name}, which {', '.join(names)} do not declare")
    for name in sorted(mine - exported):
        bad.append(f"{os.path.basename(so)} does not export {name} ({', '.join(names)})")

for b in bad:
    print(b)
print(f"{len(bad)} names out of place" if bad else
      f"{len(public)} public names exported, every other name hidden and spelled internal")
sys.exit(1 if bad else 0)
