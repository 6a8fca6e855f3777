"""Object stores: the ``stores.objects`` component of the step."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from relmerge.errors import StoreError
from relmerge.stores.base import ObjectStore, validate_key
from relmerge.stores.fsspec_store import FsspecStore
from relmerge.stores.local import LocalStore
from relmerge.stores.memory import MemoryStore

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def is_url(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a remote store (a scheme other than ``file://``)."""
    return local_path(location) is None


def local_path(location: str | os.PathLike[str]) -> Path | None:
    """The local directory or file that ``location`` names (a plain path or a ``file://``
    URL), or ``None`` for a URL of another scheme (``s3://``, ``gs://``, ``memory://``…)."""
    if not isinstance(location, str):
        return Path(location)
    if not _SCHEME.match(location):
        return Path(location)
    parts = urlsplit(location)
    if parts.scheme.lower() != "file":
        return None
    if parts.netloc not in ("", "localhost"):
        raise StoreError(f"a file:// URL names a local path, not a host: {location}")
    return Path(unquote(parts.path))


def open_store(location: str | os.PathLike[str], **storage_options: Any) -> ObjectStore:
    """The store at ``location``: a local path or ``file://`` URL is a :class:`LocalStore`
    (atomic temp + rename); any other URL an :class:`FsspecStore` (``storage_options`` go
    to fsspec)."""
    path = local_path(location)
    if path is not None:
        return LocalStore(path)
    return FsspecStore(str(location), **storage_options)


__all__ = [
    "FsspecStore",
    "LocalStore",
    "MemoryStore",
    "ObjectStore",
    "is_url",
    "local_path",
    "open_store",
    "validate_key",
]
