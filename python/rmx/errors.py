# SPDX-License-Identifier: BSD-3-Clause
"""Exceptions of the rmx package: every failure rmx reports is an RmxError
carrying the library's code (a negative RMX_E* number), its name and its
sentence."""
from __future__ import annotations

from typing import Any, Dict, Optional, Type, Union

from ._rmx_cffi import ffi, lib


class RmxError(Exception):
    """An rmx call or operation failed.

    ``RmxError(code, what=None)``: ``code`` is a negative RMX_E* number or
    its name (``rmx.errors.codes`` maps names to codes), ``what`` the call or
    operation that failed. An RPC handler that raises one gives its caller
    that code (``raise rmx.RmxError("RMX_EACCES")``).

    Attributes:
        code: the negative RMX_E* code
        name: its symbolic name, e.g. ``"RMX_ECONNRESET"``
        text: rmx_strerror()'s sentence
        what: the call or operation, or None
        failed: for a transfer request, the index of the first entry that
            failed (None: no entry is to blame, or not a transfer)
    """

    failed: Optional[int] = None

    def __init__(self, code: Union[int, str], what: Optional[str] = None) -> None:
        if isinstance(code, str) and code in codes:
            code = codes[code]
        if isinstance(code, bool) or not isinstance(code, int):
            raise TypeError(f"RmxError(code, what=None): code is a negative RMX_E* number "
                            f"or its name (rmx.errors.codes), not {code!r}")
        if code >= 0:
            raise ValueError(f"RmxError: an error code is below 0, not {code}")
        name, text = err_name(code), strerror(code)
        prefix = f"{what}: " if what else ""
        super().__init__(f"{prefix}{name} ({code}): {text}")
        self.code, self.name, self.text, self.what = code, name, text, what

    def __reduce__(self) -> Any:  # pickled as the call that makes it again
        return type(self), (self.code, self.what), {"failed": self.failed}


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


class RmxValueError(RmxError, ValueError):
    """RMX_EINVAL for an argument rmx refused, such as a URI it cannot parse."""


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
    """The exception for rmx code ``code`` (``what``: the call or operation),
    of the class that fits it (RmxTimeoutError for RMX_ETIMEDOUT, ...)."""
    return (cls or _CLASSES.get(code, RmxError))(code, what)


def check(rc: int, what: str) -> int:
    """Raise the RmxError for a negative return code; pass others through."""
    if rc < 0:
        raise make_error(rc, what)
    return rc
