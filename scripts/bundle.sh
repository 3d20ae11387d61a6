#!/usr/bin/env bash
# Writes a relocatable packrat: DIR/packrat (a launcher), DIR/bin/packrat
# (the binary, stripped) and DIR/libs.tar.gz, every shared library the
# binary loads as ldd resolves them on this build machine (its real
# dependencies, the C library and its loader included: nothing is taken from
# the machine the bundle runs on, whatever its distribution or glibc).
# The launcher unpacks the libraries once, into DIR/lib (or, where DIR is
# read-only, a folder under $TMPDIR), and runs the binary through the
# bundle's own loader with the bundle's libraries only. Copy DIR anywhere
# on an x86-64 Linux machine and run DIR/packrat as you would packrat.
# DIR/MANIFEST lists what is inside. Fails when DIR would be 60 MiB or more.
# usage: scripts/bundle.sh DIR [PACKRAT_BINARY (default build/packrat)]
set -euo pipefail
limit_mib=60
if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,12p' "$0" | cut -c3-
  [ "${1:-}" = --help ] || [ "${1:-}" = -h ] && exit 0
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
out=$1
bin=${2:-$root/build/packrat}
if [ ! -x "$bin" ]; then
  echo "bundle.sh: $bin is not an executable; build it first:" >&2
  echo "  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build -j" >&2
  exit 2
fi
for tool in ldd strip tar gzip; do
  command -v "$tool" >/dev/null || { echo "bundle.sh: needs $tool" >&2; exit 2; }
done
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ] && [ ! -f "$out/MANIFEST" ]; then
  echo "bundle.sh: $out exists and is not a bundle; give a new or empty folder" >&2
  exit 2
fi

# the libraries: "name => /path (addr)" lines, and the loader's "/path (addr)" line
deps=$(ldd "$bin") || { echo "bundle.sh: ldd $bin failed" >&2; exit 1; }
if grep -q "not found" <<<"$deps"; then
  echo "bundle.sh: $bin lacks libraries on this machine:" >&2
  grep "not found" <<<"$deps" >&2
  exit 1
fi
loader=$(awk '$1 ~ /^\// && $1 ~ /ld-linux/ {print $1}' <<<"$deps")
[ -n "$loader" ] || { echo "bundle.sh: no dynamic loader in ldd's output" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib" "$stage/bin"
manifest=$stage/MANIFEST
{
  echo "packrat bundle: $("$bin" --version 2>/dev/null | head -1)"
  echo "made $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m) from $bin"
  echo "libraries (name, size, source):"
} >"$manifest"
add() { # NAME PATH
  cp -L "$2" "$stage/lib/$1"
  chmod u+w "$stage/lib/$1"
  strip --strip-unneeded "$stage/lib/$1" 2>/dev/null || true
  printf '  %s %s %s\n' "$1" "$(stat -c %s "$stage/lib/$1")" "$(readlink -f "$2")" >>"$manifest"
}
while read -r name path; do
  add "$name" "$path"
done < <(awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' <<<"$deps")
add "$(basename "$loader")" "$loader"
strip -o "$stage/bin/packrat" "$bin"

# GOMP_SPINCOUNT as packrat would set it: the binary sets it and re-executes
# itself through /proc/self/exe, which under an explicit loader is the loader
tar -czf "$stage/libs.tar.gz" -C "$stage" lib
rm -rf "$stage/lib"
id=$(cat "$stage/bin/packrat" "$stage/libs.tar.gz" | sha256sum | cut -c1-12)
spins=$(sed -n 's/^#define PR_OMP_SPINS "\([0-9]*\)"$/\1/p' "$root/src/cli/main.c")
[ -n "$spins" ] || { echo "bundle.sh: PR_OMP_SPINS not found in src/cli/main.c" >&2; exit 1; }
cat >"$stage/packrat" <<EOF
#!/bin/sh
# packrat bundle launcher (scripts/bundle.sh): runs bin/packrat with the
# bundle's own loader and libraries, unpacked from libs.tar.gz on first use.
set -e
here=\$(cd "\$(dirname "\$(readlink -f "\$0")")" && pwd -P)
lib=\$here/lib
if [ ! -f "\$lib/.complete" ]; then
  if [ ! -w "\$here" ]; then
    lib=\${TMPDIR:-/tmp}/packrat-bundle-$id/lib
    mkdir -p "\${lib%/lib}"
  fi
  if [ ! -f "\$lib/.complete" ]; then
    # unpacked apart, then renamed into place: a reader never sees half of it
    tmp=\$(mktemp -d "\${lib%/lib}/.lib.XXXXXX")
    tar -xzf "\$here/libs.tar.gz" -C "\$tmp"
    : >"\$tmp/lib/.complete"
    mv -T "\$tmp/lib" "\$lib" 2>/dev/null || true # another launcher may have won
    rm -rf "\$tmp"
    [ -f "\$lib/.complete" ] || { echo "packrat bundle: cannot unpack into \$lib" >&2; exit 1; }
  fi
fi
if [ -z "\${GOMP_SPINCOUNT:-}" ] && [ -z "\${OMP_WAIT_POLICY:-}" ]; then
  export GOMP_SPINCOUNT=$spins
fi
exec "\$lib/$(basename "$loader")" --library-path "\$lib" --argv0 "\$0" "\$here/bin/packrat" "\$@"
EOF
chmod 0755 "$stage/packrat"
size=$(du -cb "$stage/packrat" "$stage/bin/packrat" "$stage/libs.tar.gz" "$manifest" | tail -1 | cut -f1)
echo "total: $size bytes" >>"$manifest"
if [ "$size" -ge $((limit_mib * 1048576)) ]; then
  echo "bundle.sh: the bundle is $((size / 1048576)) MiB, at or above the limit of $limit_mib MiB" >&2
  exit 1
fi
mkdir -p "$out"
rm -rf "$out/lib" "$out/bin" "$out/packrat" "$out/libs.tar.gz" "$out/MANIFEST"
cp -r "$stage/bin" "$stage/packrat" "$stage/libs.tar.gz" "$manifest" "$out/"
n=$(grep -c '^  ' "$out/MANIFEST")
echo "bundle.sh: wrote $out: packrat, bin/packrat and $n libraries in libs.tar.gz," \
  "$((size / 1048576)) MiB in all (limit $limit_mib MiB)"
