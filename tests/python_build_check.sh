#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Python package built as an sdist is: from a copy of python/ alone,
# with pip (offline, Debian's setuptools and cffi), from another directory,
# against this build tree (RMX_BUILD_DIR) and against a `cmake --install`
# prefix found through pkg-config (PKG_CONFIG_PATH). Each result is imported
# from elsewhere and echoes one message over tcp loopback.
#   python_build_check.sh SOURCE BUILD
set -euo pipefail
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$src/python" "$tmp/pkg"
rm -rf "$tmp/pkg/tests" "$tmp/pkg/build" "$tmp/pkg"/*.egg-info
cat > "$tmp/echo.py" <<'PY'
import asyncio, sys
import rmx
async def main():
    async with rmx.Context() as ctx:
        lst = await ctx.listen("tcp://127.0.0.1:0")
        conn = await ctx.connect(lst.uri)
        peer = await lst.accept()
        await conn.send(b"built")
        assert await peer.recv() == b"built"
    print(rmx.__file__, rmx.library_version())
asyncio.run(main())
PY
install() { # install DIR, with the environment given
  (cd / && env "$@" "$py" -m pip install -q --no-build-isolation --no-deps --no-index \
     --no-cache-dir --target "$tmp/$dest" "$tmp/pkg" >"$tmp/pip.log" 2>&1) ||
    { cat "$tmp/pip.log"; echo "python.build: pip install ($*) failed" >&2; exit 1; }
  rm -rf "$tmp/pkg/build" "$tmp/pkg"/*.egg-info
  (cd / && PYTHONPATH="$tmp/$dest" "$py" "$tmp/echo.py")
}
dest=site-build install RMX_BUILD_DIR="$build"
# ldd's output read whole before grep: grep -q leaving early would end ldd
# with SIGPIPE, which pipefail counts as a failure
grep -q "$build/lib/librmx.so" <<<"$(ldd "$tmp"/site-build/rmx/_rmx_cffi*.so)" ||
  { echo "python.build: the module does not run with $build's librmx" >&2; exit 1; }
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pc=$(dirname "$(find "$tmp/prefix" -name rmx.pc | head -1)")
dest=site-prefix install -u RMX_BUILD_DIR PKG_CONFIG_PATH="$pc"
grep -q "$tmp/prefix/.*librmx.so" <<<"$(ldd "$tmp"/site-prefix/rmx/_rmx_cffi*.so)" ||
  { echo "python.build: the module does not run with the installed librmx" >&2; exit 1; }
echo "python.build: ok"
