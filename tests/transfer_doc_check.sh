#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# docs/transfer.md's complete program, as the page shows it: extract the C
# block under "A complete program", compile it against this build with
# warnings as errors, run it, and compare what it prints with the block
# after "It prints:" (lines in any order: the page says two of them race).
#   transfer_doc_check.sh SOURCE BUILD [URI | rdma]
set -euo pipefail
src=$1 build=$2 uri=${3:-tcp://127.0.0.1:0}
[ "$uri" = rdma ] && uri=rdma://${RXE_VM_ADDR:-192.0.2.1}:0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
page=$src/docs/transfer.md
awk '/^## A complete program/ {sec = 1} sec && /^```c$/ {on = 1; next} on && /^```$/ {exit} on' \
  "$page" >"$work/prog.c"
[ -s "$work/prog.c" ] || { echo "transfer-doc: no C block under 'A complete program'" >&2; exit 1; }
awk '/^It prints:/ {want = 1; next} want && /^```$/ {if (on) exit; on = 1; next} on' "$page" |
  sort >"$work/expected"
cc -std=c11 -Wall -Wextra -Wno-unused-parameter -Werror -I"$src/include" "$work/prog.c" \
  -L"$build/lib" -lrmx -Wl,-rpath,"$build/lib" -o "$work/prog"
if ! RMX_LOG=error "$work/prog" "$uri" >"$work/out" 2>"$work/err"; then
  echo "transfer-doc: the program failed:" >&2
  cat "$work/out" "$work/err" >&2
  exit 1
fi
if ! sort "$work/out" | diff -u "$work/expected" - >&2; then
  echo "transfer-doc: the program printed something other than the page says" >&2
  exit 1
fi
echo "transfer-doc: the page's program ran over ${uri%%:*} and printed what the page says"
