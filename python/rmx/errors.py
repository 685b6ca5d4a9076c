# SPDX-License-Identifier: BSD-3-Clause
"""Exceptions of the rmx package: every failure rmx reports is an RmxError
carrying the library's code (a negative RMX_E* number), its name and its
sentence."""
from __future__ import annotations

from typing import Dict, Optional, Type

from ._rmx_cffi import ffi, lib


class RmxError(Exception):
    """An rmx call or operation failed.

    Attributes:
        code: the negative RMX_E* code (``rmx.errors.codes`` maps names to codes)
        name: its symbolic name, e.g. ``"RMX_ECONNRESET"``
        text: rmx_strerror()'s sentence
        failed: for a transfer request, the index of the first entry that
            failed (None: no entry is to blame, or not a transfer)
    """

    code: int = 0
    name: str = "RMX_OK"
    text: str = ""
    failed: Optional[int] = None


class RmxTimeoutError(RmxError, TimeoutError):
    """RMX_ETIMEDOUT: an RPC call, a connect or a silent peer timed out."""


class RmxConnectionError(RmxError, ConnectionError):
    """The connection is refused, lost or not established."""


class ConnectionClosed(RmxConnectionError):
    """The connection was closed, by this side or on purpose by the peer:
    ``recv()`` raises it once every message that arrived has been taken
    (``async for`` just ends). ``code`` is RMX_ENOTCONN."""


class RmxThreadError(RuntimeError):
    """An rmx object was used from a thread other than its context's."""


def _code(name: str) -> int:
    return int(getattr(lib, name))


codes: Dict[str, int] = {
    n: _code(n) for n in dir(lib) if n.startswith("RMX_E") and isinstance(getattr(lib, n), int)
}

_CLASSES: Dict[int, Type[RmxError]] = {
    _code("RMX_ETIMEDOUT"): RmxTimeoutError,
    _code("RMX_ECONNRESET"): RmxConnectionError,
    _code("RMX_ECONNREFUSED"): RmxConnectionError,
    _code("RMX_ENOTCONN"): RmxConnectionError,
}


def strerror(code: int) -> str:
    """rmx_strerror(): the sentence for a code."""
    return ffi.string(lib.rmx_strerror(code)).decode()


def err_name(code: int) -> str:
    """rmx_err_name(): the symbolic name of a code."""
    return ffi.string(lib.rmx_err_name(code)).decode()


def make_error(code: int, what: Optional[str] = None,
               cls: Optional[Type[RmxError]] = None) -> RmxError:
    """The exception for rmx code ``code`` (``what``: the call or operation)."""
    name, text = err_name(code), strerror(code)
    prefix = f"{what}: " if what else ""
    err = (cls or _CLASSES.get(code, RmxError))(f"{prefix}{name} ({code}): {text}")
    err.code, err.name, err.text = code, name, text
    return err


def check(rc: int, what: str) -> int:
    """Raise the RmxError for a negative return code; pass others through."""
    if rc < 0:
        raise make_error(rc, what)
    return rc
