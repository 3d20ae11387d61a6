#!/usr/bin/env bash
# Builds the fuzz targets with clang (libFuzzer + ASan/UBSan) and fuzzes each
# for SECONDS (default 600), one after the other, each from its seed corpus
# in build-fuzz/corpus/<target>/ (tests/fuzz/make_corpus.sh; it keeps growing
# across runs) with its dictionary tests/fuzz/<target>.dict when there is one.
# An input that fails is written to build-fuzz/crash-* (or leak-*, oom-*,
# timeout-*); the log of each target to build-fuzz/fuzz-<target>.log.
# Exits non-zero when any target found something.
# usage: tests/fuzz/run.sh [SECONDS [TARGET...]]   (default: every target)
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-600}
shift || true
targets=("$@")
cmake -S . -B build-fuzz -DPR_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug >/dev/null || exit 1
# unless named: every target of tests/fuzz/CMakeLists.txt (PR_FUZZ_TARGETS)
[ ${#targets[@]} -gt 0 ] || read -ra targets <build-fuzz/fuzz-targets.txt
cmake --build build-fuzz --target "${targets[@]/#/fuzz_}" -j "$(nproc)" || exit 1
tests/fuzz/make_corpus.sh build-fuzz/corpus || exit 1
status=0
for t in "${targets[@]}"; do
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  echo "== fuzz_$t for $secs s"
  build-fuzz/tests/fuzz/fuzz_"$t" -max_total_time="$secs" -rss_limit_mb=4096 -timeout=10 \
    -print_final_stats=1 "${dict[@]}" -artifact_prefix=build-fuzz/ "build-fuzz/corpus/$t" \
    >"build-fuzz/fuzz-$t.log" 2>&1
  rc=$?
  grep -E '^Done [0-9]+ runs|^#[0-9]+.*INITED|SUMMARY|artifact' "build-fuzz/fuzz-$t.log"
  [ $rc = 0 ] || { status=1; echo "fuzz_$t: FOUND SOMETHING (exit $rc), see build-fuzz/fuzz-$t.log"; }
done
exit $status
