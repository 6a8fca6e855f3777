"""Object stores: the ``stores.objects`` component of the step."""

from relmerge.stores.base import ObjectStore, validate_key
from relmerge.stores.local import LocalStore
from relmerge.stores.memory import MemoryStore

__all__ = ["LocalStore", "MemoryStore", "ObjectStore", "validate_key"]
