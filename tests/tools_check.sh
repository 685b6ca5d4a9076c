#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The command-line tools as a user meets them (examples/tool.h's rules):
#  - --help and -h print the usage on stdout and exit 0;
#  - --version prints "<tool> <the library's version>" and exits 0;
#  - every bad command line (a bad option, operand, number or URI) gets one
#    line on stderr, "<tool>: <what is wrong> (try '<tool> --help')", and
#    exit 2 (never a crash: a signal would show as 128 + its number);
#  - a runtime failure (a refused connection) exits 1;
#  - numbers are decimal (010 is ten) with K, M, G suffixes of 2^10, 2^20,
#    2^30, and one that overflows is refused, naming the argument and range.
# rmx-info also shows every setting rmx reads (src/config.c's table), and
# with -c (--json) each one's value, default, source and meaning.
#   tools_check.sh BINDIR SOURCE
set -uo pipefail
bin=$1 src=$2
bad=0
work=$(mktemp -d)
out=$work/out err=$work/err
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
say() { echo "tools: $*"; bad=1; }
u=tcp://127.0.0.1:1 # nothing listens there: connecting is refused
tools="rmx-echo rmx-perf rmx-xfer rmx-kv rmx-bulk-copy rmx-embed rmx-spin rmx-conns rmx-percore"
version=$(sed -n 's/^#define RMX_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' \
          "$src/include/rmx/rmx.h" | paste -sd.)
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || say "no version found in include/rmx/rmx.h"

for t in $tools rmx-info; do
  for h in --help -h; do
    "$bin/$t" "$h" >"$out" 2>"$err"; rc=$?
    if [ "$rc" != 0 ] || ! grep -q '^usage:' "$out" || [ -s "$err" ]; then
      say "$t $h: exit $rc, stdout '$(head -1 "$out")', stderr '$(head -1 "$err")'"
    fi
  done
done
for t in $tools; do
  "$bin/$t" --version >"$out" 2>"$err"; rc=$?
  if [ "$rc" != 0 ] || [ "$(cat "$out")" != "$t $version" ] || [ -s "$err" ]; then
    say "$t --version: exit $rc, stdout '$(cat "$out")' (want '$t $version'), stderr '$(head -1 "$err")'"
  fi
  grep -q -- '--version' < <("$bin/$t" --help) || say "$t --help does not mention --version"
done

# TOOL ARGS...: exit 2, nothing on stdout, and one line on stderr saying
# what is wrong and pointing at --help. $err keeps that line.
refuse() {
  local t=$1
  "$bin/$t" "${@:2}" >"$out" 2>"$err"; rc=$?
  if [ "$rc" != 2 ] || [ "$(wc -l <"$err")" != 1 ] || [ -s "$out" ] ||
     ! grep -qE "^$t: .+ \(try '$t --help'\)\$" "$err"; then
    say "'$*': exit $rc (want 2 and one line: '$t: ... (try '$t --help')'); stderr: $(head -3 "$err")"
    return 1
  fi
}
# TOOL ARGS...: as refuse, and the line names WHAT (set before the call).
refuse_naming() {
  refuse "$@" || return 0
  grep -qF -- "$what" "$err" || say "'$*': the message does not name '$what': $(cat "$err")"
}

# a bad option, for every tool
for t in $tools; do refuse "$t" --bogus; refuse "$t" -Z; done
refuse rmx-echo
refuse rmx-echo client
refuse rmx-echo client "$u" 0
refuse rmx-echo client "$u" abc
refuse rmx-echo client "$u" 5 -1
refuse rmx-echo client "$u" 5 12x
refuse rmx-echo client "$u" 5 +12
refuse rmx-echo client "$u" 5 0x10
refuse rmx-echo client "$u" 5 ' 12'
refuse rmx-echo client "$u" 1 2 3
refuse rmx-echo server "$u" extra
refuse rmx-echo bogus "$u"
refuse rmx-xfer
refuse rmx-xfer client
refuse rmx-xfer client "$u" --block 0
refuse rmx-xfer client "$u" --op frob
refuse rmx-xfer client "$u" --op read --notify
refuse rmx-xfer server "$u" extra
refuse rmx-perf
refuse rmx-perf client
refuse rmx-perf client "$u" -s 0
refuse rmx-perf client "$u" -s 10,abc
refuse rmx-perf client "$u" -n 0
refuse rmx-perf client "$u" -n
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
refuse rmx-kv get "$u" "$(printf 'k%.0s' $(seq 251))"
refuse rmx-bulk-copy
refuse rmx-bulk-copy fetch "$u"
refuse rmx-bulk-copy copy "$u" f
refuse rmx-bulk-copy fetch "$u" f 0
refuse rmx-bulk-copy serve "$u" f 10
refuse rmx-embed tcp://127.0.0.1:0 extra
refuse rmx-spin tcp://127.0.0.1:0 5 extra
refuse rmx-percore
refuse rmx-percore tcp://127.0.0.1:0 0
refuse rmx-percore tcp://127.0.0.1:0 2 extra
refuse rmx-spin tcp://127.0.0.1:0 0
refuse rmx-spin tcp://127.0.0.1:0 abc

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

# A URI rmx refuses as malformed, or whose scheme no transport has, is a
# bad command line for every tool that takes one.
for uri in nonsense tcp//127.0.0.1:1 tcp://:1 tcp://127.0.0.1:99999 tcp://127.0.0.1:x \
           'tcp://[::1' tcp://127.0.0.1:1/path TCP://127.0.0.1:1 frob://127.0.0.1:1; do
  what="'$uri'"
  refuse_naming rmx-echo client "$uri"
  refuse_naming rmx-echo server "$uri"
  refuse_naming rmx-perf client "$uri"
  refuse_naming rmx-perf server "$uri"
  refuse_naming rmx-kv get "$uri" key
  refuse_naming rmx-kv server "$uri"
  refuse_naming rmx-bulk-copy fetch "$uri" "$work/f"
  refuse_naming rmx-bulk-copy serve "$uri" /dev/null
  refuse_naming rmx-embed "$uri"
  refuse_naming rmx-spin "$uri"
  refuse_naming rmx-percore "$uri"
done
# ... while a well-formed URI that nothing answers is the run's failure: 1
runtime() {
  "$bin/$1" "${@:2}" >"$out" 2>"$err"; rc=$?
  [ "$rc" = 1 ] || say "'$*': exit $rc, not 1 (a refused connection is no usage error)"
}
runtime rmx-echo client "$u" 1
runtime rmx-perf client "$u" -n 1
runtime rmx-kv get "$u" key
runtime rmx-bulk-copy fetch "$u" "$work/f"
runtime rmx-spin tcp://198.51.100.1:0 1 # an address of no host here: cannot listen
runtime rmx-percore tcp://198.51.100.1:0 1

# Numbers: an overflowing size or count is refused, naming the argument
# and its range; a number past 64 bits too.
what="SIZE '17179869184G' is out of range: from 0 to 1099511627776"
refuse_naming rmx-echo client "$u" 3 17179869184G
what="SIZE '2048G' is out of range"
refuse_naming rmx-echo client "$u" 3 2048G
what="COUNT '18446744073709551616' is out of range: from 1 to 1000000000"
refuse_naming rmx-echo client "$u" 18446744073709551616
what="-s size '17179869184G' is out of range: from 1 to 67108864"
refuse_naming rmx-perf client "$u" -s 8,17179869184G
what="-n '99999999999999999999' is out of range"
refuse_naming rmx-perf client "$u" -n 99999999999999999999
what="--progress-ms '4294967296K' is out of range"
refuse_naming rmx-perf client "$u" --progress-ms 4294967296K
what="PROGRESS_MS '18446744073709551615M' is out of range: from 1 to 3600000"
refuse_naming rmx-bulk-copy fetch "$u" "$work/f" 18446744073709551615M
what="PROGRESS_MS '1e3' is not a whole number"
refuse_naming rmx-bulk-copy fetch "$u" "$work/f" 1e3

# ... and a leading zero is decimal: 010 is ten, 016 sixteen, 1K 1024.
start() { # NAME TOOL ARGS...: a server; its URI in $uri
  "$bin/$2" "${@:3}" >"$work/$1.log" 2>&1 &
  pids+=($!)
  uri=
  for _ in $(seq 100); do
    uri=$(sed -n 's/^\(server: \)\{0,1\}listening on //p' "$work/$1.log")
    [ -n "$uri" ] && break; sleep 0.1
  done
  [ -n "$uri" ] || say "the $2 server did not start: $(cat "$work/$1.log")"
}
start echo rmx-echo server tcp://127.0.0.1:0
if [ -n "$uri" ]; then
  "$bin/rmx-echo" client "$uri" 010 016 >"$out" 2>"$err" || say "rmx-echo client 010 016 failed: $(cat "$err")"
  grep -q '^client: 10 echoes of 16 B checked' "$out" ||
    say "rmx-echo client $uri 010 016 did not send 10 messages of 16 B: $(cat "$out")"
  "$bin/rmx-echo" client "$uri" 2 1K >"$out" 2>"$err" || say "rmx-echo client 2 1K failed: $(cat "$err")"
  grep -q '^client: 2 echoes of 1024 B checked' "$out" ||
    say "rmx-echo client $uri 2 1K did not send 2 messages of 1024 B: $(cat "$out")"
fi
"$bin/rmx-spin" tcp://127.0.0.1:0 010 >"$out" 2>"$err" || say "rmx-spin 010 failed: $(cat "$err")"
grep -q '^spin: 10 round trips' "$out" || say "rmx-spin tcp://127.0.0.1:0 010 did not make 10 round trips: $(cat "$out")"
# A server on every core: four clients one after another, handed to its
# two threads in turn; SIGTERM ends it with each thread's count.
"$bin/rmx-percore" tcp://127.0.0.1:0 2 >"$work/percore.log" 2>&1 &
pc=$!
uri=
for _ in $(seq 100); do
  uri=$(sed -n 's/^rmx-percore: 2 threads serving //p' "$work/percore.log")
  [ -n "$uri" ] && break; sleep 0.1
done
for _ in 1 2 3 4; do
  "$bin/rmx-echo" client "$uri" 3 >"$out" 2>"$err" || say "rmx-echo client $uri against rmx-percore: $(cat "$err")"
done
kill -TERM "$pc"; wait "$pc" || say "rmx-percore exited $? on SIGTERM"
[ "$(grep -c '^thread [01]: 2 connections, 6 requests$' "$work/percore.log")" = 2 ] ||
  say "rmx-percore did not hand two clients to each thread: $(cat "$work/percore.log")"
start perf rmx-perf server tcp://127.0.0.1:0
if [ -n "$uri" ]; then
  "$bin/rmx-perf" client "$uri" -t send_lat -s 010 -n 010 -w 010 --json >"$out" 2>"$err" ||
    say "rmx-perf -s 010 -n 010 -w 010 failed: $(cat "$err")"
  grep -q '"size":10,"iters":10,"warmup":10,' "$out" ||
    say "rmx-perf -s 010 -n 010 -w 010 did not measure 10 x 10 B after 10: $(cat "$out")"
fi


[ "$bad" = 0 ] && echo "tools: --help, --version, every bad command line, numbers and rmx-info's settings behaved"
exit "$bad"
