#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The command-line tools as a user meets them: --help prints the usage on
# stdout and exits 0; every bad command line gets a line saying what is
# wrong and the usage on stderr, and exit 2 (never a crash: a signal would
# show as 128 + its number).
# rmx-info also shows every setting rmx reads (src/ctx.c's list).
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
refuse rmx-info extra
refuse rmx-info --verbose

vars=$(sed -n '/known_vars\[\] = {/,/};/p' "$src/src/ctx.c" | grep -o '"RMX_[A-Z_]*"' | tr -d '"')
[ -n "$vars" ] || { echo "tools: no list of settings found in src/ctx.c"; bad=1; }
"$bin/rmx-info" >"$out" 2>&1
for v in $vars; do
  grep -q "^  $v=" "$out" || { echo "tools: rmx-info does not show $v"; bad=1; }
done

[ "$bad" = 0 ] && echo "tools: --help, every bad command line and rmx-info's settings behaved"
exit "$bad"
