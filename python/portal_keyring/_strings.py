"""Strings across the C boundary: non-secret arguments, secret arguments wiped after the call,
and :class:`SecretToken`, the self-wiping copy of a token the library returns."""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any, Iterator, Optional, Union

from ._library import lib as _lib
from ._library import strlen
from .errors import InvalidArgument, Status

TokenLike = Union[str, bytes, bytearray, memoryview]


def _invalid(message: str) -> InvalidArgument:
    return InvalidArgument(Status.INVALID_ARGUMENT, message)


def _text_arg(value: Optional[Union[str, bytes]], name: str, optional: bool = False) -> Optional[bytes]:
    """Encodes a non-secret string argument as NUL-free UTF-8 bytes (the library checks the
    rest: blank, invalid UTF-8, length)."""
    if value is None:
        if optional:
            return None
        raise _invalid(f"{name}: must not be None")
    if isinstance(value, str):
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            raise _invalid(f"{name}: not valid UTF-8 (lone surrogate)") from None
    elif isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    else:
        raise TypeError(f"{name} must be str or bytes, not {type(value).__name__}")
    if b"\0" in data:
        raise _invalid(f"{name}: contains a NUL byte")
    return data


def _api_host_arg(value: Optional[str]) -> Optional[bytes]:
    """``api_host``: ``None``, or a bare ``host`` / ``host:port``. A URL (scheme, path, query,
    user info) is refused here with a message that says what is expected."""
    if value is not None and isinstance(value, str):
        if "://" in value or any(c in value for c in "/?#@") or not value.strip():
            raise _invalid(
                f"api_host: expected a host name or host:port such as 'api.portalhq.io' or "
                f"'127.0.0.1:8443', without a scheme, path or credentials; got {value!r}"
            )
    return _text_arg(value, "api_host", optional=True)


@contextlib.contextmanager
def _secret_arg(value: TokenLike, name: str) -> Iterator[Any]:
    """Yields a NUL-terminated ``char`` array holding a copy of ``value`` that is wiped (zeroed)
    when the block ends."""
    if isinstance(value, str):
        try:
            encoded = value.encode("utf-8")
        except UnicodeEncodeError:
            raise _invalid(f"{name}: not valid UTF-8 (lone surrogate)") from None
        source: Union[bytes, bytearray, memoryview] = encoded
    elif isinstance(value, (bytes, bytearray, memoryview)):
        source = value
    else:
        raise TypeError(f"{name} must be str, bytes or bytearray, not {type(value).__name__}")
    view = memoryview(source).cast("B")
    size = view.nbytes
    buffer = bytearray(size + 1)  # exact size: never grown, so never reallocated with a stale copy
    buffer[:size] = view
    view.release()
    array = (ctypes.c_char * (size + 1)).from_buffer(buffer)
    try:
        if buffer.find(0, 0, size) != -1:
            # The C ABI takes NUL-terminated strings: refuse rather than truncate.
            raise _invalid(f"{name}: contains a NUL byte, which the C ABI cannot pass")
        yield array
    finally:
        ctypes.memset(array, 0, size + 1)
        del array


def _take_string(pointer: Any) -> "SecretToken":
    """Copies a caller-owned library string into a :class:`SecretToken` and releases (wipes) the
    library's copy."""
    try:
        size = strlen(pointer)
        token = SecretToken(size)
        if size:
            ctypes.memmove((ctypes.c_char * size).from_buffer(token), pointer, size)
        return token
    finally:
        _lib.portal_string_free(pointer)


class SecretToken(bytearray):
    """A token copy (UTF-8 bytes) that wipes itself.

    A ``bytearray``: compare it, slice it, ``decode()`` it (a ``str`` copy cannot be wiped, so keep
    those short-lived). Use it in a ``with`` block — it is zeroed and emptied when the block ends —
    or call :meth:`wipe`; garbage collection wipes it too. ``repr``/``str`` never show the bytes,
    and it refuses to be pickled.
    """

    def __enter__(self) -> "SecretToken":
        return self

    def __exit__(self, *exc: object) -> None:
        self.wipe()

    def wipe(self) -> None:
        """Overwrites the bytes with zeros, then empties the token."""
        size = len(self)
        if size:
            try:
                array = (ctypes.c_char * size).from_buffer(self)
            except Exception:  # pragma: no cover - only if exported elsewhere (memoryview held)
                self[:] = bytes(size)
            else:
                ctypes.memset(array, 0, size)
                del array
            del self[:]

    def __del__(self) -> None:
        try:
            self.wipe()
        except Exception:  # pragma: no cover - interpreter shutdown or a live memoryview
            pass

    def __repr__(self) -> str:
        return f"<SecretToken: {len(self)} bytes, redacted>"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a SecretToken cannot be pickled")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a SecretToken cannot be pickled")


def _take_text(pointer: Any) -> str:
    """Copies a caller-owned, non-secret library string into a ``str`` and frees it."""
    try:
        return ctypes.string_at(pointer).decode("utf-8", "replace") if pointer else ""
    finally:
        _lib.portal_string_free(pointer)
