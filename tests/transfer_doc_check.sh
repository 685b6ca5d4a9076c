#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# docs/transfer.md's complete program, as the page shows it: extract the C
# block under "A complete program", compile it against this build with
# warnings as errors, run it, and compare what it prints with the block
# after "It prints:" (lines in any order: the page says two of them race).
# With rdma, the program is compiled here and run where RDMA works
# (tests/vm/run-in-vm: the SoftRoCE VM, whose emulated CPU compiles slowly).
#   transfer_doc_check.sh SOURCE BUILD [URI | rdma]
set -euo pipefail
src=$1 build=$2 uri=${3:-tcp://127.0.0.1:0}
run=()
if [ "$uri" = rdma ]; then
  run=("$src/tests/vm/run-in-vm" env)
  uri='rdma://$RXE_VM_ADDR:0' # expanded inside, where the address is known
fi
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
if ! "${run[@]}" bash -c 'RMX_LOG=error "$0" "$(eval echo "$1")"' "$work/prog" "$uri" \
  >"$work/out" 2>"$work/err"; then
  echo "transfer-doc: the program failed:" >&2
  cat "$work/out" "$work/err" >&2
  exit 1
fi
if ! tr -d '\r' <"$work/out" | sort | diff -u "$work/expected" - >&2; then
  echo "transfer-doc: the program printed something other than the page says" >&2
  exit 1
fi
echo "transfer-doc: the page's program ran over ${uri%%:*} and printed what the page says"
