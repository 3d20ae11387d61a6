#!/usr/bin/env bash
# The main job installs no test-only package: apt-get simulates installing
# scripts/install-deps.sh's main list on an empty system (an empty dpkg
# status, so every dependency counts) and none of the test and benchmark
# packages may be among the result; the --test list must bring them.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
deps=$here/scripts/install-deps.sh
status=$(mktemp)
trap 'rm -f "$status"' EXIT
simulate() {
  apt-get -s -o Dir::State::Status="$status" install --no-install-recommends "$@" 2>&1 |
    awk '/^Inst /{print $2}' | sort -u
}
mapfile -t main < <(simulate $("$deps" --print))
mapfile -t test_only < <("$deps" --print-test)
[ ${#main[@]} -gt 50 ] || { echo "FAIL: apt-get simulated only ${#main[@]} packages (apt lists missing?)"; exit 1; }
bad=0
for p in "${test_only[@]}" prometheus nodejs npm; do
  if grep -qx "$p" <<<"$(printf '%s\n' "${main[@]}")"; then
    echo "FAIL: the main job would install test-only package $p"
    bad=1
  fi
done
mapfile -t all < <(simulate $("$deps" --print) $("$deps" --print-test))
for p in "${test_only[@]}"; do
  grep -qx "$p" <<<"$(printf '%s\n' "${all[@]}")" || { echo "FAIL: --test does not install $p"; bad=1; }
done
echo "main job: ${#main[@]} packages on an empty system; with tests: ${#all[@]}"
exit $bad
