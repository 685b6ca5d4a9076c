#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What a program outside the tree needs to build against an installed rmx:
#   1. the shared library with only libuv's and libsodium's pkg-config
#      files visible (no rdma-core development files): pkg-config
#      --cflags --libs rmx works and adds no rdma-core include directory,
#      find_package(rmx) finds rmx::rmx, and both programs run;
#   2. every global the static library defines is rmx__ (internal) or an
#      rmx_ function librmx.so exports (the API), and a program defining tcp_connect, tf_check and vb_send
#      links librmx.a statically and runs.
#
#   consumer_check.sh BUILD SOURCE
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
here=$src/tests/install
work=$(mktemp -d)
srv=
cleanup() {
  [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "consumer: FAIL: $*" >&2; exit 1; }
step() { echo "consumer: $*"; }

prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
lib=$(dirname "$(find "$prefix" -name librmx.so -print -quit)")

# Only libuv's and libsodium's .pc files, and rmx's own.
pcdir=$work/pc
mkdir "$pcdir"
for dep in libuv libsodium; do
  f=$(pkg-config --variable=pcfiledir "$dep")/$dep.pc
  [ -f "$f" ] || fail "no $dep.pc on this machine"
  cp "$f" "$pcdir/"
done
export PKG_CONFIG_LIBDIR=$pcdir:$lib/pkgconfig PKG_CONFIG_PATH=
pkg-config --exists libibverbs && fail "libibverbs.pc is still visible"
flags=$(pkg-config --cflags --libs rmx) || fail "pkg-config --cflags --libs rmx: $(pkg-config --cflags --libs rmx 2>&1)"
case $flags in *libnl* | *ibverbs* | *rdmacm*) fail "rmx's flags name rdma-core: $flags" ;; esac
step "pkg-config --cflags --libs rmx: $flags"

"$build/bin/rmx-echo" server tcp://127.0.0.1:0 >"$work/echo.log" 2>&1 &
srv=$!
for _ in $(seq 100); do grep -q listening "$work/echo.log" && break; sleep 0.1; done
uri=$(sed -n 's/^server: listening on //p' "$work/echo.log")
[ -n "$uri" ] || fail "the echo server did not start: $(cat "$work/echo.log")"

# shellcheck disable=SC2086 # the flags are words
cc -std=c11 -Wall -Werror "$here/hello.c" $flags -o "$work/hello-pc"
out=$(LD_LIBRARY_PATH=$lib "$work/hello-pc" "$uri") || fail "the pkg-config build did not run"
step "pkg-config, shared, without rdma-core's .pc files: $out"

cmake -S "$here" -B "$work/pkg" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1 ||
  fail "find_package without rdma-core's .pc files: $(cat "$work/cmake.log")"
cmake --build "$work/pkg" >/dev/null
out=$("$work/pkg/rmx-hello" "$uri") || fail "the find_package build did not run"
step "find_package, shared, without rdma-core's .pc files: $out"
unset PKG_CONFIG_LIBDIR PKG_CONFIG_PATH

# The static library's namespace.
foreign=$(nm -g --defined-only "$lib/librmx.a" | awk 'NF == 3 && $3 !~ /^rmx_/ {print $3}' | sort -u)
[ -z "$foreign" ] || fail "librmx.a defines globals outside rmx_/rmx__: $(echo $foreign)"
# ... and an rmx_ name (one underscore) is the API: one librmx.so exports.
nm -D --defined-only "$lib/librmx.so" | awk '{print $3}' | sed 's/@.*//' | sort -u >"$work/api"
nm -g --defined-only "$lib/librmx.a" | awk 'NF == 3 && $3 ~ /^rmx_[^_]/ {print $3}' | sort -u >"$work/rmx_"
internal=$(comm -23 "$work/rmx_" "$work/api")
[ -z "$internal" ] || fail "librmx.a has internal globals named as the API (rmx_, not rmx__): $(echo $internal)"
step "librmx.a: $(nm -g --defined-only "$lib/librmx.a" | awk 'NF == 3' | wc -l) globals, $(wc -l <"$work/rmx_") of them the API, the rest rmx__"
export PKG_CONFIG_PATH=$lib/pkgconfig
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror $(pkg-config --cflags rmx) "$here/own_names.c" "$lib/librmx.a" \
  $(pkg-config --static --libs rmx | tr ' ' '\n' | grep -vx -- '-lrmx') -o "$work/own-names" ||
  fail "a program defining tcp_connect, tf_check and vb_send does not link librmx.a"
ldd "$work/own-names" | grep -q librmx && fail "the static build links librmx.so"
step "static, with its own tcp_connect: $("$work/own-names")"
