"""A heta-framework object store (``ObjectStoreProtocol``) seen as relmerge's.

Keys are checked by relmerge before any I/O. A listed key that cannot be read (missing,
unreadable) raises :class:`~relmerge.errors.StoreError`, which turns the record into a
rejected record with its reason instead of ending the build.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from heta_framework.common.stores.object import ObjectStoreProtocol

from relmerge.errors import ConfigError, StoreError
from relmerge.stores.base import ObjectStore, validate_key, validate_prefix

READ_CONCURRENCY = 16  # keys read at once (a remote store answers one round trip each)


class HetaObjectStore:
    def __init__(self, inner: ObjectStoreProtocol, key: str) -> None:
        self.inner = inner
        self.component = key

    def _failure(self, action: str, key: str, error: Exception) -> StoreError:
        if isinstance(error, FileNotFoundError | KeyError):
            return StoreError(f"no object {key!r} in {self.component}")
        detail = getattr(error, "strerror", None) or str(error) or type(error).__name__
        return StoreError(f"cannot {action} {key!r} in {self.component}: {detail}")

    async def get(self, key: str) -> bytes:
        validate_key(key)
        try:
            data = await self.inner.get(key)
        except Exception as error:
            raise self._failure("read", key, error) from None
        if not isinstance(data, bytes):
            raise StoreError(f"{self.component} returned {type(data).__name__} for {key!r}")
        return data

    async def get_many(self, keys: Sequence[str]) -> list[bytes | StoreError]:
        """Each key's bytes or the error that stops it being read, in order."""
        limit = asyncio.Semaphore(READ_CONCURRENCY)

        async def one(key: str) -> bytes | StoreError:
            async with limit:
                try:
                    return await self.get(key)
                except StoreError as error:
                    return error

        return list(await asyncio.gather(*(one(key) for key in keys)))

    async def put(self, key: str, data: bytes) -> None:
        validate_key(key)
        try:
            await self.inner.put(key, data)
        except Exception as error:
            raise self._failure("write", key, error) from None

    async def exists(self, key: str) -> bool:
        validate_key(key)
        return bool(await self.inner.exists(key))

    async def list(self, prefix: str = "") -> list[str]:
        validate_prefix(prefix)
        listed: list[Any] = await self.inner.list(prefix.rstrip("/"))
        return [str(getattr(item, "key", item)) for item in listed]

    async def delete(self, key: str) -> None:
        validate_key(key)
        await self.inner.delete(key)


def object_store(component: object, key: str) -> ObjectStore:
    """The recipe's object store as relmerge's: heta-framework's adapted, relmerge's as it is."""
    if isinstance(component, ObjectStoreProtocol):
        return HetaObjectStore(component, key)
    if isinstance(component, ObjectStore):
        return component
    raise ConfigError(
        f"component {key!r} is not an object store (get, put, exists, list, delete); "
        f"got {type(component).__name__}"
    )
