#!/usr/bin/python3
"""Files of a library call one way: in each chain given, a file may call
the functions (and read the data) of the files before it, never of those
after it, so that no two files call each other and the chain is an order
a reader can follow from its bottom. Read from the library's symbols (nm):
what each member defines and what it needs.

usage: call_order.py LIBRARY.a CHAIN [CHAIN ...]
CHAIN: member file names (without .c.o), lowest first, comma-separated.
Fails naming each call against the order, or a member named that the
library does not hold."""
import subprocess
import sys

lib, chains = sys.argv[1], [c.split(",") for c in sys.argv[2:]]
out = subprocess.run(["nm", "-A", lib], capture_output=True, text=True, check=True).stdout
defined, needs = {}, {}
for line in out.splitlines():
    # LIBRARY:MEMBER:ADDRESS TYPE NAME, or LIBRARY:MEMBER:  U NAME
    head, sep, rest = line.partition(".c.o:")
    if not sep:
        continue
    member = head.rsplit(":", 1)[-1]
    f = rest.split()
    if len(f) == 2 and f[0] == "U":
        needs.setdefault(member, set()).add(f[1])
    elif len(f) == 3 and f[1] in "TDRBG":
        defined[f[2]] = member
bad = []
for chain in chains:
    for m in chain:
        if m not in needs and m not in defined.values():
            bad.append(f"{lib} holds no {m}.c")
    for i, m in enumerate(chain):
        later = set(chain[i + 1:])
        for sym in sorted(needs.get(m, ())):
            if defined.get(sym) in later:
                bad.append(f"{m}.c calls {sym} of {defined[sym]}.c, which comes after it in {','.join(chain)}")
for b in bad:
    print(b)
print(f"{len(bad)} calls against the order" if bad else "every call goes down its chain")
sys.exit(1 if bad else 0)
