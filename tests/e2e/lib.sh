# Shared by the end-to-end scripts (sourced): a temp folder cleaned on exit,
# PASS/FAIL counting (check, check_cmd, expect_status), and `packrat serve`
# started on a free loopback port.
# Needs PACKRAT set; sets tmp, srv (the server's pid) and URL.
tmp=$(mktemp -d)
srv=
passed=0 failed=0
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
# check NAME SHELL-CONDITION
check() { if eval "$2"; then passed=$((passed + 1)); echo "PASS $1"; else failed=$((failed + 1)); echo "FAIL $1"; fi; }
# check_cmd NAME COMMAND...: the command must succeed; its output goes to
# $CHECK_OUT and $CHECK_ERR (default $tmp/check.out, $tmp/check.err: a
# script that reads $tmp/out in its checks keeps them apart)
check_cmd() {
  local name=$1 out=${CHECK_OUT:-$tmp/check.out} err=${CHECK_ERR:-$tmp/check.err}; shift
  if "$@" >"$out" 2>"$err"; then passed=$((passed + 1)); echo "PASS $name"
  else failed=$((failed + 1)); echo "FAIL $name"; tail -n 5 "$out" "$err"; fi
}
# expect_status NAME STATUS COMMAND...: the command exits with STATUS, its
# output in $tmp/out and $tmp/err; with EXPECT_MESSAGE=1, a message on stderr
# as well
expect_status() {
  local name=$1 want=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  if [ "$got" = "$want" ] && { [ "${EXPECT_MESSAGE:-0}" = 0 ] || [ -s "$tmp/err" ]; }; then
    passed=$((passed + 1)); echo "PASS $name"
  else failed=$((failed + 1)); echo "FAIL $name: status $got, wanted $want"; cat "$tmp/out" "$tmp/err"; fi
}
# start_server REPOSITORY [SECONDS [SERVE FLAGS...]]: serve it, wait until ready (default 60 s)
start_server() {
  "$PACKRAT" serve --model-repository "$1" --http-port 0 "${@:3}" >"$tmp/log" 2>&1 &
  srv=$!
  local tries=$((${2:-60} * 10))
  for _ in $(seq "$tries"); do grep -qs "ready: http" "$tmp/log" && break; sleep 0.1; done
  URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$tmp/log" | head -1)
  [ -n "$URL" ] || { cat "$tmp/log"; echo "server did not start"; exit 1; }
}
