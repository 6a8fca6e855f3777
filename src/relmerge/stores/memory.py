"""An in-memory object store for tests and for pipelines that keep artifacts in RAM."""

from __future__ import annotations

from relmerge.errors import StoreError
from relmerge.stores.base import validate_key, validate_prefix


class MemoryStore:
    """Bytes in a dict; same key rules as every other store."""

    def __init__(self, objects: dict[str, bytes] | None = None) -> None:
        self.objects: dict[str, bytes] = {}
        for key, data in (objects or {}).items():
            self.objects[validate_key(key)] = data

    async def get(self, key: str) -> bytes:
        try:
            return self.objects[validate_key(key)]
        except KeyError:
            raise StoreError(f"no object {key!r} in memory store") from None

    async def put(self, key: str, data: bytes) -> None:
        # Copy to exact size: orjson's buffers are over-allocated, and a store keeps many.
        self.objects[validate_key(key)] = bytes(memoryview(data))

    async def exists(self, key: str) -> bool:
        return validate_key(key) in self.objects

    async def list(self, prefix: str = "") -> list[str]:
        validate_prefix(prefix)
        return sorted(key for key in self.objects if key.startswith(prefix))

    async def delete(self, key: str) -> None:
        self.objects.pop(validate_key(key), None)
