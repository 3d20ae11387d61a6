#!/usr/bin/env bash
# Builds packrat twice (optimized, and with ASan+UBSan) and runs every test
# in both: unit tests, ONNX conformance, model fidelity, end-to-end. A third
# build (clang, libFuzzer) builds only the fuzz targets and runs each for
# 15 s, two at a time (ctest -L fuzz: libFuzzer uses one core); a fourth
# (clang, ThreadSanitizer, OpenMP teams of one) builds only the server and
# runs the concurrency tests (ctest -L concurrency) with tests/tsan.supp.
# Last, packrat builds in the other build types a user or a distribution
# picks, Release and MinSizeRel (gcc; -Werror here, off by default there).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --test
jobs=$(nproc)
times=()
export PACKRAT_MODELS=${PACKRAT_MODELS:-$PWD/models}
status=0
for cfg in "build:-DCMAKE_BUILD_TYPE=RelWithDebInfo -DPR_WERROR=ON -DPR_TESTS=ON" "build-asan:-DCMAKE_BUILD_TYPE=Debug -DPR_SANITIZE=ON -DPR_WERROR=ON -DPR_TESTS=ON"; do
  dir=${cfg%%:*}
  flags=${cfg#*:}
  echo "== $dir ($flags)"
  t0=$SECONDS
  cmake -S . -B "$dir" $flags -DPACKRAT_MODELS="$PACKRAT_MODELS" >/dev/null
  cmake --build "$dir" -j "$jobs"
  t1=$SECONDS
  (cd "$dir" && ctest --output-on-failure --timeout 1800) || status=1
  times+=("$dir: build $((t1 - t0)) s, tests $((SECONDS - t1)) s")
done
echo "== build-fuzz (clang, -DPR_FUZZ=ON): fuzz targets only"
t0=$SECONDS
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DPR_FUZZ=ON -DPR_WERROR=ON -DPR_TESTS=ON \
  -DPACKRAT_MODELS="$PACKRAT_MODELS" >/dev/null
cmake --build build-fuzz --target fuzz -j "$jobs"
(cd build-fuzz && ctest -L fuzz -j 2 --output-on-failure) || status=1
times+=("build-fuzz: $((SECONDS - t0)) s")
t0=$SECONDS
echo "== build-tsan (clang, -DPR_TSAN=ON): the server's concurrency tests"
cmake -S . -B build-tsan -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DPR_TSAN=ON -DPR_WERROR=ON -DPR_TESTS=ON \
  -DPACKRAT_MODELS="$PACKRAT_MODELS" >/dev/null
cmake --build build-tsan --target packrat test_scheduler -j "$jobs"
# every report goes to its own file (a test shows only the tail of a server's log) and is printed
# whole; a report fails the run even where the test that caused it passed
rm -rf build-tsan/tsan-reports && mkdir build-tsan/tsan-reports
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/../tests/tsan.supp log_path=$PWD/tsan-reports/report" \
  ctest -L concurrency --output-on-failure) || status=1
for report in build-tsan/tsan-reports/report*; do
  [ -f "$report" ] || continue
  echo "== ThreadSanitizer $report"
  cat "$report"
  status=1
done
times+=("build-tsan: $((SECONDS - t0)) s")
for type in Release MinSizeRel; do
  t0=$SECONDS
  echo "== build-$type (gcc): packrat in a user's build type"
  { cmake -S . -B "build-$type" -DCMAKE_BUILD_TYPE=$type -DPR_WERROR=ON -DPACKRAT_MODELS="$PACKRAT_MODELS" \
    >/dev/null &&
    cmake --build "build-$type" --target packrat -j "$jobs" >"build-$type/build.log" 2>&1 &&
    "build-$type/packrat" --version; } || { tail -40 "build-$type/build.log"; status=1; }
  times+=("build-$type: $((SECONDS - t0)) s")
done
echo "== wall time"
printf '  %s\n' "${times[@]}"
exit $status
