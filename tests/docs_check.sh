#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The API reference builds without a single Doxygen warning: every public
# function, type, member, callback and error code documented, every
# parameter and every return value of every function documented, every
# reference resolved (docs/Doxyfile). The warnings that make this true must
# stay on: a Doxyfile that turns one off fails here, not silently.
#   docs_check.sh SOURCE DOXYGEN
set -euo pipefail
src=$1 doxygen=$2
for opt in WARNINGS WARN_IF_UNDOCUMENTED WARN_IF_DOC_ERROR WARN_IF_INCOMPLETE_DOC WARN_NO_PARAMDOC; do
  grep -Eq "^$opt[[:space:]]*=[[:space:]]*YES[[:space:]]*$" "$src/docs/Doxyfile" ||
    { echo "docs: docs/Doxyfile must set $opt = YES" >&2; exit 1; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
(cd "$src" && RMX_DOCS_OUT=$out "$doxygen" docs/Doxyfile >/dev/null)
[ -f "$out/html/index.html" ] || { echo "docs: no HTML was written" >&2; exit 1; }
if [ -s "$out/warnings.log" ]; then
  echo "docs: $(grep -c 'warning:' "$out/warnings.log") Doxygen warnings:" >&2
  sed "s#$src/##" "$out/warnings.log" >&2
  exit 1
fi
echo "docs: the API reference built with no warning ($(ls "$out/html" | wc -l) files)"
