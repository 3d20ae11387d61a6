# Shared by the end-to-end scripts (sourced): a temp folder cleaned on exit,
# PASS/FAIL counting, and `packrat serve` started on a free loopback port.
# Needs PACKRAT set; sets tmp, srv (the server's pid) and URL.
tmp=$(mktemp -d)
srv=
passed=0 failed=0
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
# check NAME SHELL-CONDITION
check() { if eval "$2"; then passed=$((passed + 1)); echo "PASS $1"; else failed=$((failed + 1)); echo "FAIL $1"; fi; }
# start_server REPOSITORY [SECONDS [SERVE FLAGS...]]: serve it, wait until ready (default 60 s)
start_server() {
  "$PACKRAT" serve --model-repository "$1" --http-port 0 "${@:3}" >"$tmp/log" 2>&1 &
  srv=$!
  local tries=$((${2:-60} * 10))
  for _ in $(seq "$tries"); do grep -qs "ready: http" "$tmp/log" && break; sleep 0.1; done
  URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$tmp/log" | head -1)
  [ -n "$URL" ] || { cat "$tmp/log"; echo "server did not start"; exit 1; }
}
