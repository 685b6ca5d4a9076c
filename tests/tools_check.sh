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
# rmx-info also shows every setting rmx reads (src/ctx.c's list).
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
tools="rmx-echo rmx-perf rmx-kv rmx-bulk-copy rmx-embed"
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
# rmx-info's own options are its own; a bad one is still a usage error
for a in extra --verbose; do
  "$bin/rmx-info" "$a" >"$out" 2>"$err"; rc=$?
  [ "$rc" = 2 ] && grep -q '^rmx-info: ' "$err" || say "'rmx-info $a': exit $rc, stderr: $(head -1 "$err")"
done

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
start perf rmx-perf server tcp://127.0.0.1:0
if [ -n "$uri" ]; then
  "$bin/rmx-perf" client "$uri" -t send_lat -s 010 -n 010 -w 010 --json >"$out" 2>"$err" ||
    say "rmx-perf -s 010 -n 010 -w 010 failed: $(cat "$err")"
  grep -q '"size":10,"iters":10,"warmup":10,' "$out" ||
    say "rmx-perf -s 010 -n 010 -w 010 did not measure 10 x 10 B after 10: $(cat "$out")"
fi

vars=$(sed -n '/known_vars\[\] = {/,/};/p' "$src/src/ctx.c" | grep -o '"RMX_[A-Z_]*"' | tr -d '"')
[ -n "$vars" ] || say "no list of settings found in src/ctx.c"
"$bin/rmx-info" >"$out" 2>&1
for v in $vars; do
  grep -q "^  $v=" "$out" || say "rmx-info does not show $v"
done

[ "$bad" = 0 ] && echo "tools: --help, --version, every bad command line, numbers and rmx-info's settings behaved"
exit "$bad"
