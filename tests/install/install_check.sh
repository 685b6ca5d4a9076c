#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The install test: install rmx from BUILD into a temporary prefix, check
# what is there (files, SONAME, exported symbols, the tools running
# --version from the prefix), then build rmx-hello
# (hello.c, a program from outside the tree) five ways and run each
# against an rmx-echo server over loopback TCP:
#   pkg-config, find_package (shared and static), add_subdirectory, and
#   add_subdirectory built with -DRMX_MEMHOOKS=OFF.
#
#   install_check.sh BUILD SOURCE
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
fail() { echo "install: FAIL: $*" >&2; exit 1; }
step() { echo "install: $*"; }

prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
lib=$(dirname "$(find "$prefix" -name librmx.so -print -quit)")
[ -d "$lib" ] || fail "no librmx.so under $prefix"
for f in include/rmx/rmx.h include/rmx/rmx_ops.h include/rmx/rmx_config.h include/rmx/rmx_devices.h; do
  [ -f "$prefix/$f" ] || fail "$f not installed"
done
for f in librmx.a pkgconfig/rmx.pc cmake/rmx/rmxConfig.cmake cmake/rmx/rmxConfigVersion.cmake; do
  [ -e "$lib/$f" ] || fail "$f not installed in $lib"
done
soname=$(readelf -d "$lib/librmx.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
abi=$(sed -n 's/^#define RMX_ABI_VERSION \([0-9]*\).*/\1/p' "$prefix/include/rmx/rmx.h")
[ "$soname" = "librmx.so.$abi" ] || fail "SONAME is '$soname', not librmx.so.$abi"
[ -e "$lib/$soname" ] || fail "no $soname link"
# Only the API, under RMX_$abi (no libc function: the registration cache
# hooks munmap at run time, and only once it is used).
extra=$(nm -D --defined-only "$lib/librmx.so" | awk '{print $3}' |
        grep -vE "^rmx_[a-z0-9_]+@@RMX_$abi\$|^RMX_$abi\$" || true)
[ -z "$extra" ] || fail "librmx.so exports more than the API: $extra"
step "installed: $soname, $(nm -D --defined-only "$lib/librmx.so" | grep -c ' rmx_') rmx_ functions under RMX_$abi"

# Every tool README's Tools section names is installed, and runs from the
# prefix (its rpath finds the installed library, not the build's).
version=$(sed -n 's/^#define RMX_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' \
          "$prefix/include/rmx/rmx.h" | paste -sd.)
for t in rmx-info rmx-echo rmx-perf rmx-xfer rmx-kv rmx-bulk-copy rmx-embed; do
  [ -x "$prefix/bin/$t" ] || fail "$t not installed in $prefix/bin"
  found=$(env -u LD_LIBRARY_PATH ldd "$prefix/bin/$t" | sed -n "s/^\s*$soname => \(\S*\) .*/\1/p")
  [ -n "$found" ] && [ "$(realpath "$found")" = "$(realpath "$lib/$soname")" ] ||
    fail "$t finds '$found', not the installed $lib/$soname"
  if [ "$t" = rmx-info ]; then # its options are its own
    env -u LD_LIBRARY_PATH "$prefix/bin/$t" --help >/dev/null || fail "$t --help failed"
    continue
  fi
  out=$(env -u LD_LIBRARY_PATH "$prefix/bin/$t" --version) || fail "$t --version failed"
  [ "$out" = "$t $version" ] || fail "$t --version says '$out', not '$t $version'"
done
step "tools installed: $(cd "$prefix/bin" && echo rmx-*)"

"$build/bin/rmx-echo" server tcp://127.0.0.1:0 >"$work/echo.log" 2>&1 &
srv=$!
for _ in $(seq 100); do grep -q listening "$work/echo.log" && break; sleep 0.1; done
uri=$(sed -n 's/^server: listening on //p' "$work/echo.log")
[ -n "$uri" ] || fail "the echo server did not start: $(cat "$work/echo.log")"

run() { # NAME PROGRAM: run it against the server, show its line
  local out
  out=$("$2" "$uri") || fail "$1: rmx-hello failed"
  step "$1: $out"
}

export PKG_CONFIG_PATH=$lib/pkgconfig
cc -std=c11 -Wall -Werror "$here/hello.c" $(pkg-config --cflags --libs rmx) -o "$work/hello-pc"
LD_LIBRARY_PATH=$lib run pkg-config "$work/hello-pc"

cmake -S "$here" -B "$work/pkg" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/pkg" >/dev/null
run find_package "$work/pkg/rmx-hello"

cmake -S "$here" -B "$work/pkg-static" -DCMAKE_PREFIX_PATH="$prefix" -DHELLO_STATIC=ON >/dev/null
cmake --build "$work/pkg-static" >/dev/null
if ldd "$work/pkg-static/rmx-hello" | grep -q librmx; then fail "the static build links librmx.so"; fi
run "find_package, static" "$work/pkg-static/rmx-hello"

cmake -S "$here" -B "$work/sub" -DHELLO_RMX=subdir -DRMX_SOURCE_DIR="$src" >/dev/null
cmake --build "$work/sub" -j"$(nproc)" >/dev/null
if cmake --build "$work/sub" --target help | grep -q rmx-conformance; then
  fail "add_subdirectory builds rmx's tests"
fi
run add_subdirectory "$work/sub/rmx-hello"

# Built with -DRMX_MEMHOOKS=OFF: no malloc tuning and no hooks (it never
# calls mallopt nor walks the loaded objects), and it still works.
cmake -S "$here" -B "$work/nohooks" -DHELLO_RMX=subdir -DRMX_SOURCE_DIR="$src" \
  -DRMX_MEMHOOKS=OFF >/dev/null
cmake --build "$work/nohooks" -j"$(nproc)" >/dev/null
imports() { nm -D --undefined-only "$1" | awk '{print $2}' | sed 's/@.*//'; }
grep -qx mallopt <<<"$(imports "$lib/librmx.so")" || fail "librmx.so calls no mallopt: nothing to compare"
nohooks=$(find "$work/nohooks" -name librmx.so -print -quit)
bad=$(imports "$nohooks" | grep -xE 'mallopt|dl_iterate_phdr' || true)
[ -z "$bad" ] || fail "built with RMX_MEMHOOKS=OFF, librmx.so still calls: $bad"
run "add_subdirectory, RMX_MEMHOOKS=OFF" "$work/nohooks/rmx-hello"
step "all five builds ran"
