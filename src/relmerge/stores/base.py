"""The object-store protocol: bytes by key, as the step's ``stores.objects`` component.

Keys are relative, ``/``-separated paths. They are validated before any I/O so that a key
read from input (``../../etc/passwd``, ``/abs``, ``a//b``) can never escape the store root.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from relmerge.errors import InvalidKeyError


def validate_key(key: str) -> str:
    """Return ``key`` if it is a safe relative key, else raise :class:`InvalidKeyError`."""
    if not isinstance(key, str) or not key:
        raise InvalidKeyError(f"object key must be a non-empty string, got {key!r}")
    if key.startswith("/") or "\\" in key or (len(key) > 1 and key[1] == ":"):
        raise InvalidKeyError(f"object key must be relative: {key!r}")
    if "\x00" in key:
        raise InvalidKeyError(f"object key contains a NUL byte: {key!r}")
    for segment in key.split("/"):
        if segment == "":
            raise InvalidKeyError(f"object key has an empty segment: {key!r}")
        if segment in (".", ".."):
            raise InvalidKeyError(f"object key may not contain '.' or '..' segments: {key!r}")
    return key


def validate_prefix(prefix: str) -> str:
    """A listing prefix: empty (everything) or a valid key, optionally ending in ``/``."""
    if prefix == "":
        return prefix
    validate_key(prefix.rstrip("/"))
    return prefix


@runtime_checkable
class ObjectStore(Protocol):
    """Async bytes-by-key storage. Writes are atomic: a reader sees old or new, never half."""

    async def get(self, key: str) -> bytes: ...

    async def put(self, key: str, data: bytes) -> None: ...

    async def exists(self, key: str) -> bool: ...

    async def list(self, prefix: str = "") -> list[str]: ...

    async def delete(self, key: str) -> None: ...
