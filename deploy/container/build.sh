#!/usr/bin/env bash
# Builds packrat's container root file system from Debian packages only:
# mmdebstrap makes a Debian 12 (bookworm) "essential" system plus the Debian
# packages that hold the built binary's shared libraries (found with ldd and
# dpkg -S on this Debian 12 build host), then adds the binary, a packrat
# user (uid 10001), /models (the model repository, mounted read-only) and
# /var/cache/packrat (the profile cache, PACKRAT_CACHE). The result is a
# tarball; with podman on the host, --import also makes the image
# localhost/packrat:bookworm from it (user 10001, entrypoint `packrat serve`,
# default args: --model-repository /models on 0.0.0.0:8080).
# usage: build.sh PACKRAT_BINARY OUT.tar [--import]
#        build.sh --import-only OUT.tar [IMAGE]   (podman import of a made tarball)
# Needs root (or mmdebstrap's unshare mode) and Debian's mirror (~60 MB).
set -euo pipefail
podman_import() { # TAR IMAGE
  podman import \
    --change 'USER=10001' \
    --change 'ENV=PACKRAT_CACHE=/var/cache/packrat' \
    --change 'EXPOSE=8080' \
    --change 'ENTRYPOINT=["/usr/local/bin/packrat","serve"]' \
    --change 'CMD=["--model-repository","/models","--host","0.0.0.0","--http-port","8080"]' \
    "$1" "$2"
}
if [ "${1:-}" = --import-only ]; then
  podman_import "$2" "${3:-localhost/packrat:bookworm}"
  exit
fi
bin=$(readlink -f "$1")
out=$2
import=${3:-}
[ -x "$bin" ] || { echo "build.sh: $1 is not an executable" >&2; exit 2; }

# the Debian packages holding every shared library the binary loads
pkgs=()
while read -r lib; do
  real=$(readlink -f "$lib")
  p=""
  for f in "$lib" "$real" "/usr$lib" "/usr$real"; do
    p=$(dpkg -S "$f" 2>/dev/null | head -1 | cut -d: -f1) && [ -n "$p" ] && break
  done
  [ -n "$p" ] || { echo "build.sh: no Debian package holds $lib" >&2; exit 1; }
  pkgs+=("$p")
done < <(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
include=$(printf '%s\n' "${pkgs[@]}" | sort -u | paste -sd,)
echo "build.sh: Debian packages for the binary's libraries: $include"

sources='deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main'

mmdebstrap --variant=essential --include="$include" \
  --customize-hook="install -m 0755 '$bin' \"\$1/usr/local/bin/packrat\"" \
  --customize-hook='echo "packrat:x:10001:10001:packrat:/nonexistent:/usr/sbin/nologin" >> "$1/etc/passwd"' \
  --customize-hook='echo "packrat:x:10001:" >> "$1/etc/group"' \
  --customize-hook='mkdir -p "$1/models" && install -d -o 10001 -g 10001 -m 0750 "$1/var/cache/packrat"' \
  --customize-hook='chroot "$1" /usr/local/bin/packrat --help >/dev/null' \
  --customize-hook='if chroot "$1" ldd /usr/local/bin/packrat | grep "not found"; then exit 1; fi' \
  bookworm "$out" - <<<"$sources"
echo "build.sh: wrote $out ($(du -h "$out" | cut -f1))"

if [ "$import" = --import ]; then
  podman_import "$out" localhost/packrat:bookworm
fi
