#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# docs/getting-started.md's program, as the page shows it: extract its C
# block, compile it against this build with warnings as errors, run it,
# and compare what it prints with what the page says it prints.
#   getting_started_check.sh SOURCE BUILD [URI | rdma]
# (rdma: rdma://$RXE_VM_ADDR:0, inside the SoftRoCE VM)
set -euo pipefail
src=$1 build=$2 uri=${3:-tcp://127.0.0.1:0}
[ "$uri" = rdma ] && uri=rdma://${RXE_VM_ADDR:-192.0.2.1}:0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
page=$src/docs/getting-started.md
awk '/^```c$/ {on = 1; next} /^```$/ && on {exit} on' "$page" >"$work/hello.c"
[ -s "$work/hello.c" ] || { echo "getting-started: no C block in $page" >&2; exit 1; }
# The expected output: the page's block after "It prints:".
awk '/^It prints:/ {want = 1; next} want && /^```$/ {if (on) exit; on = 1; next} on' "$page" |
  sed 's/PORT/[0-9]*/; s#tcp://127.0.0.1:#'"${uri%:*}"':#' >"$work/expected"
cc -std=c11 -Wall -Wextra -Wno-unused-parameter -Werror -I"$src/include" "$work/hello.c" -L"$build/lib" -lrmx \
  -Wl,-rpath,"$build/lib" -o "$work/hello"
"$work/hello" "$uri" >"$work/out"
if [ "$(wc -l <"$work/out")" != "$(wc -l <"$work/expected")" ]; then
  echo "getting-started: printed:" >&2; cat "$work/out" >&2; exit 1
fi
paste -d '\n' "$work/expected" "$work/out" | while IFS= read -r want && IFS= read -r got; do
  [[ $got =~ ^${want//\[/\\[}$ ]] || [[ $got =~ ^$want$ ]] ||
    { echo "getting-started: '$got' is not what the page says ('$want')" >&2; exit 1; }
done
echo "getting-started: the page's program ran as the page says:"
sed 's/^/  /' "$work/out"
