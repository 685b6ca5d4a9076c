# SPDX-License-Identifier: BSD-3-Clause
# The C module is built by cffi from rmx_build.py (the metadata is in
# pyproject.toml). Offline, with Debian's python3-setuptools and
# python3-cffi: pip install --no-build-isolation ./python
from setuptools import setup

setup(cffi_modules=["rmx_build.py:ffibuilder"])
