#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# docs/getting-started.md's program, as the page shows it: extract its C
# block and compile it against this build with warnings as errors. Then,
# over TCP, do literally what the page says: install this build under a
# prefix of our own ($HOME/rmx, HOME a scratch directory), and run the
# page's shell block there with no LD_LIBRARY_PATH, so a step the page
# leaves out (PKG_CONFIG_PATH, the rpath) fails here as it would for a
# reader. With another URI (rdma), run the program built against this
# build with that URI. Either way, compare what it prints with what the
# page says it prints.
#   getting_started_check.sh SOURCE BUILD [URI | rdma]
# (rdma: rdma://$RXE_VM_ADDR:0, inside the SoftRoCE VM; CMAKE: the cmake
# that installs, cmake by default)
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
if [ "$uri" = tcp://127.0.0.1:0 ]; then
  home=$work/home
  mkdir -p "$home"
  "${CMAKE:-cmake}" --install "$build" --prefix "$home/rmx" >/dev/null
  cp "$work/hello.c" "$home/hello.c"
  # The shell block after "Save the program as", as the reader runs it.
  awk '/Save the program as/ {want = 1; next} want && /^```sh$/ {on = 1; next} on && /^```$/ {exit} on' \
    "$page" >"$work/page.sh"
  [ -s "$work/page.sh" ] || { echo "getting-started: no shell block to build and run with" >&2; exit 1; }
  if ! (cd "$home" && env -i PATH="$PATH" HOME="$home" bash -e "$work/page.sh") >"$work/out" 2>"$work/err"; then
    echo "getting-started: the page's commands, run as written with rmx under \$HOME/rmx, failed:" >&2
    sed 's/^/  /' "$work/page.sh" >&2
    cat "$work/out" "$work/err" >&2
    exit 1
  fi
else
  "$work/hello" "$uri" >"$work/out"
fi
if [ "$(wc -l <"$work/out")" != "$(wc -l <"$work/expected")" ]; then
  echo "getting-started: printed:" >&2; cat "$work/out" >&2; exit 1
fi
paste -d '\n' "$work/expected" "$work/out" | while IFS= read -r want && IFS= read -r got; do
  [[ $got =~ ^${want//\[/\\[}$ ]] || [[ $got =~ ^$want$ ]] ||
    { echo "getting-started: '$got' is not what the page says ('$want')" >&2; exit 1; }
done
echo "getting-started: the page's program ran as the page says:"
sed 's/^/  /' "$work/out"
