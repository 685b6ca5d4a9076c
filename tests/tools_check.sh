#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The command-line tools as a user meets them: --help prints the usage on
# stdout and exits 0; every bad command line gets a line saying what is
# wrong and the usage on stderr, and exit 2 (never a crash: a signal would
# show as 128 + its number).
# rmx-info also shows every setting rmx reads (src/config.c's table), and
# with -c (--json) each one's value, default, source and meaning.
#   tools_check.sh BINDIR SOURCE
set -uo pipefail
bin=$1 src=$2
bad=0
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
u=tcp://127.0.0.1:1

for t in rmx-echo rmx-perf rmx-kv rmx-bulk-copy rmx-info rmx-embed; do
  for h in --help -h; do
    "$bin/$t" "$h" >"$out" 2>"$err"; rc=$?
    if [ "$rc" != 0 ] || ! grep -q '^usage:' "$out" || [ -s "$err" ]; then
      echo "tools: $t $h: exit $rc, stdout '$(head -1 "$out")', stderr '$(head -1 "$err")'"; bad=1
    fi
  done
done

# TOOL ARGS...: must exit 2 with a reason and the usage on stderr.
refuse() {
  "$bin/$1" "${@:2}" >"$out" 2>"$err"; rc=$?
  if [ "$rc" != 2 ] || ! grep -q '^usage:' "$err" || [ "$(grep -c . "$err")" -lt 2 ]; then
    echo "tools: '$*': exit $rc (want 2 with a reason and the usage); stderr: $(head -1 "$err")"
    bad=1
  fi
}
refuse rmx-echo
refuse rmx-echo client
refuse rmx-echo client "$u" 0
refuse rmx-echo client "$u" abc
refuse rmx-echo client "$u" 5 -1
refuse rmx-echo client "$u" 5 12x
refuse rmx-echo client "$u" 1 2 3
refuse rmx-echo server "$u" extra
refuse rmx-echo bogus "$u"
refuse rmx-echo --bogus
refuse rmx-perf
refuse rmx-perf client
refuse rmx-perf client "$u" -s 0
refuse rmx-perf client "$u" -s 10,abc
refuse rmx-perf client "$u" -n 0
refuse rmx-perf client "$u" -W -5
refuse rmx-perf client "$u" -t frob
refuse rmx-perf client "$u" extra
refuse rmx-perf server "$u" extra
refuse rmx-perf frob "$u"
refuse rmx-kv
refuse rmx-kv get "$u"
refuse rmx-kv put "$u" key
refuse rmx-kv frob "$u"
refuse rmx-kv demo "$u" extra
refuse rmx-bulk-copy
refuse rmx-bulk-copy fetch "$u"
refuse rmx-bulk-copy copy "$u" f
refuse rmx-bulk-copy fetch "$u" f 0
refuse rmx-bulk-copy serve "$u" f 10
refuse rmx-embed tcp://127.0.0.1:0 extra

# TOOL ARGS...: must exit 2 with one line on stderr, "TOOL: what is wrong
# (try 'TOOL --help')", and nothing on stdout.
refuse_line() {
  "$bin/$1" "${@:2}" >"$out" 2>"$err"; rc=$?
  if [ "$rc" != 2 ] || [ "$(wc -l <"$err")" != 1 ] || [ -s "$out" ] ||
     ! grep -q "^$1: .* (try '$1 --help')\$" "$err"; then
    echo "tools: '$*': exit $rc (want 2 and one line); stderr: $(head -2 "$err")"; bad=1
  fi
}
refuse_line rmx-info extra
refuse_line rmx-info --verbose
refuse_line rmx-info -x
refuse_line rmx-info --json

"$bin/rmx-info" --version >"$out" 2>"$err"; rc=$?
if [ "$rc" != 0 ] || ! grep -qx 'rmx-info [0-9][0-9.]*' "$out" || [ -s "$err" ]; then
  echo "tools: rmx-info --version: exit $rc, '$(cat "$out" "$err")'"; bad=1
fi

vars=$(sed -n '/rmx__settings\[\] = {/,/^};/p' "$src/src/config.c" | grep -o '"RMX_[A-Z_]*"' | tr -d '"')
[ "$(echo "$vars" | wc -w)" -ge 20 ] || { echo "tools: no table of settings in src/config.c"; bad=1; }
"$bin/rmx-info" >"$out" 2>&1
for v in $vars; do
  grep -q "^ *$v=.*(default)" "$out" || { echo "tools: rmx-info does not show $v"; bad=1; }
done
RMX_RX_DEPTH=010 "$bin/rmx-info" -c >"$out" 2>"$err"
for v in $vars; do
  grep -A1 "^$v=" "$out" | grep -q '^    [a-z_]*: .* Accepts ' ||
    { echo "tools: rmx-info -c does not explain $v"; bad=1; }
done
grep -qx 'RMX_RX_DEPTH=10  (environment; default 64)' "$out" ||
  { echo "tools: rmx-info -c: RMX_RX_DEPTH=010 is not 10 from the environment"; bad=1; }
if command -v python3 >/dev/null; then
  RMX_RX_DEPTH=010 "$bin/rmx-info" -c --json >"$out" 2>"$err"
  python3 - "$out" $vars <<'PY' || bad=1
import json, sys
settings = json.load(open(sys.argv[1]))["settings"]
names = [s["name"] for s in settings]
ok = names == sys.argv[2:]
for s in settings:
    ok &= all(k in s for k in ("field", "value", "default", "source", "description"))
rx = [s for s in settings if s["name"] == "RMX_RX_DEPTH"][0]
ok &= rx["value"] == 10 and rx["default"] == 64 and rx["source"] == "environment"
if not ok:
    print("tools: rmx-info -c --json lacks a setting, a key, or RMX_RX_DEPTH=10")
sys.exit(0 if ok else 1)
PY
fi
RMX_KEEPALIVE_MS=20000 "$bin/rmx-info" >"$out" 2>"$err"; rc=$?
if [ "$rc" != 1 ] || ! grep -q 'RMX_KEEPALIVE_TIMEOUT_MS=10000 .*is less than RMX_KEEPALIVE_MS=20000' "$err"; then
  echo "tools: rmx-info with conflicting settings: exit $rc, stderr '$(head -1 "$err")'"; bad=1
fi
RMX_DEVICE=no_such_device "$bin/rmx-info" >"$out" 2>"$err"
grep -q '^  RMX_DEVICE=no_such_device names no' "$out" ||
  { echo "tools: rmx-info does not flag an RMX_DEVICE that names no device"; bad=1; }
# Without its verbs module, rmx-info says why (the loader's reason), on the
# devices' line and the rdma:// line, instead of a blank line.
if ls "$bin/../lib/"librmx-verbs.so.* >/dev/null 2>&1; then
  lone=$(mktemp -d)
  cp -P "$bin/../lib/"librmx.so* "$bin/rmx-info" "$lone/"
  LD_LIBRARY_PATH=$lone "$lone/rmx-info" >"$out" 2>&1
  grep -q '^RDMA devices: not looked for: the RDMA transport could not be loaded: librmx-verbs' "$out" &&
    grep -q '^  rdma://  not usable here: the RDMA transport could not be loaded' "$out" ||
    { echo "tools: rmx-info without the verbs module: $(sed -n 3p "$out")"; bad=1; }
  rm -rf "$lone"
fi

[ "$bad" = 0 ] && echo "tools: --help, every bad command line and rmx-info's settings behaved"
exit "$bad"
