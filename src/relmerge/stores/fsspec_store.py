"""Any fsspec file system as an object store: S3 (s3fs), GCS, Azure, ``memory://``, others.

A key maps to ``{root}/{key}``, where ``root`` is the URL without its scheme
(``s3://bucket/runs/a`` + ``deduplicated_relations/r1.json`` →
``bucket/runs/a/deduplicated_relations/r1.json``), so the key lists a run writes are the
same on S3 as on a local disk, and a prefix can be moved or copied as a whole.

Atomicity: one put is one object PUT. On object stores (S3, GCS, Azure, memory) a PUT
replaces the object whole, so a reader sees the old bytes or the new ones, never a part.
Other file systems reached by URL (sftp, ftp…) write in place; a crashed run there can
leave a partial relation file, which the run protocol still covers: the result file is
removed when a run claims OUT and written last, and a re-run rewrites every relation.
``file://`` and plain paths never come here: :func:`relmerge.stores.open_store` gives them
the :class:`~relmerge.stores.local.LocalStore` (temp file + rename).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from relmerge.errors import StoreError
from relmerge.stores.base import validate_key, validate_prefix

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_CONCURRENCY = 16
# The first path segment of these is a bucket (or container): "not found" may mean it.
_BUCKET_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "oci", "oss"})
_INSTALL_HINTS = {
    "s3": "pip install relmerge[s3]",
    "s3a": "pip install relmerge[s3]",
    "gs": "pip install gcsfs",
    "gcs": "pip install gcsfs",
    "az": "pip install adlfs",
    "abfs": "pip install adlfs",
    "abfss": "pip install adlfs",
}
_USERINFO = re.compile(r"(?<=://)[^/@]*@")
_SECRET_OPTION = re.compile(r"secret|key|token|pass|cred", re.IGNORECASE)
_SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def redact_url(url: str) -> str:
    """``url`` without a ``user:password@`` part: what messages and reprs may show."""
    return _USERINFO.sub("***@", url, count=1)


def url_protocol(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def _secrets(options: dict[str, Any]) -> list[str]:
    """Values that must never appear in a message: credential-like options (also nested,
    as in ``client_kwargs``) and the AWS secret env vars."""
    values = [os.environ[name] for name in _SECRET_ENV if os.environ.get(name)]
    pending = [options]
    while pending:
        for name, value in pending.pop().items():
            if isinstance(value, dict):
                pending.append(value)
            elif value and _SECRET_OPTION.search(str(name)):
                values.append(str(value))
    return sorted({v for v in values if len(v) >= 4}, key=len, reverse=True)


class FsspecStore:
    """Keys below a URL prefix of any fsspec file system.

    ``storage_options`` go to the fsspec file system (``endpoint_url``, ``key``,
    ``anon``…); they are never shown in messages or the repr. For S3, the endpoint also
    comes from ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` and the credentials from the
    usual AWS environment (botocore's chain). File systems with an async API (s3fs, gcsfs,
    adlfs) are driven through it on fsspec's I/O loop, so any event loop can await them;
    blocking ones run in a worker thread. ``concurrency`` bounds the requests in flight of
    :meth:`put_many` and :meth:`get_many`.
    """

    def __init__(
        self, url: str, *, concurrency: int = DEFAULT_CONCURRENCY, **storage_options: Any
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.url = redact_url(url)
        self.protocol = url_protocol(url)
        self.concurrency = concurrency
        options = dict(storage_options)
        options.pop("asynchronous", None)  # the store decides how it drives the file system
        self._secrets = _secrets(options)
        if self.protocol in ("s3", "s3a") and "endpoint_url" not in options:
            endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            if endpoint:
                options["endpoint_url"] = endpoint
        self.fs, root = self._open(url, options)
        self.root = root.rstrip("/")
        if not self.root.strip("/"):
            raise StoreError(f"{self.url}: name a bucket or directory, not a file-system root")
        self._prefix = self.root + "/"
        self._async = bool(getattr(self.fs, "async_impl", False))

    def _open(self, url: str, options: dict[str, Any]) -> tuple[Any, str]:
        """The fsspec file system and the root path, or a StoreError saying what is missing."""
        try:
            import fsspec  # type: ignore[import-untyped]
            import fsspec.core  # type: ignore[import-untyped]
            from fsspec.asyn import AsyncFileSystem  # type: ignore[import-untyped]

            cls = fsspec.get_filesystem_class(self.protocol or "file")
            if issubclass(cls, AsyncFileSystem):
                # Listings cached in this process would hide objects other writers add.
                options.setdefault("use_listings_cache", False)
            fs, root = fsspec.core.url_to_fs(url, **options)
        except ImportError as error:
            hint = _INSTALL_HINTS.get(self.protocol)
            raise StoreError(
                f"{self.protocol}:// URLs need an extra package: "
                + (hint or f"install the fsspec implementation ({self._describe(error)})")
            ) from None
        except Exception as error:  # an unknown scheme, a bad storage option…
            raise StoreError(f"cannot open {self.url}: {self._describe(error)}") from None
        return fs, str(root)

    def __repr__(self) -> str:
        return f"FsspecStore({self.url!r})"

    def _describe(self, error: BaseException) -> str:
        """An error as one line, with any credential masked (library messages may quote
        their arguments)."""
        text = redact_url(" ".join(str(error).split()))
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return f"{type(error).__name__}: {text}" if text else type(error).__name__

    def path_of(self, key: str) -> str:
        return self._prefix + validate_key(key)

    async def _call(self, method: str, *args: Any) -> Any:
        """``fs.method(*args)`` without blocking the caller's event loop."""
        if self._async:
            coroutine = getattr(self.fs, f"_{method}")(*args)
            # The file system lives on fsspec's own I/O loop (its thread): hand the call
            # there and await the result here, whatever loop "here" is.
            return await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(coroutine, self.fs.loop)
            )
        return await asyncio.to_thread(getattr(self.fs, method), *args)

    async def get(self, key: str) -> bytes:
        path = self.path_of(key)
        try:
            data = await self._call("cat_file", path)
        except FileNotFoundError:
            missing = await self._missing_bucket()
            raise missing or StoreError(f"no object {key!r} in {self.url}") from None
        except Exception as error:
            raise self._failure("read", key, error) from None
        return bytes(data)

    async def put(self, key: str, data: bytes) -> None:
        path = self.path_of(key)
        try:
            await self._call("pipe_file", path, bytes(data))
        except FileNotFoundError as error:
            missing = await self._missing_bucket()
            raise missing or self._failure("write", key, error) from None
        except Exception as error:
            raise self._failure("write", key, error) from None

    async def put_parts(self, key: str, parts: Iterable[bytes]) -> None:
        """Write one object from ``parts`` as they come (multipart upload on S3): a large
        log never sits in memory whole. The object appears when it is complete."""
        path = self.path_of(key)

        def write() -> None:
            with self.fs.open(path, "wb") as handle:
                for part in parts:
                    handle.write(part)

        try:
            await asyncio.to_thread(write)
        except FileNotFoundError as error:
            missing = await self._missing_bucket()
            raise missing or self._failure("write", key, error) from None
        except Exception as error:
            raise self._failure("write", key, error) from None

    async def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Write many objects, at most ``concurrency`` requests in flight."""
        for key, _ in items:
            validate_key(key)
        await self._bounded(lambda item: self.put(*item), items)

    async def get_many(self, keys: Sequence[str]) -> list[bytes | StoreError]:
        """Read many objects concurrently, in order; a failed read is its error, so that
        one missing object costs one rejected record, not the batch."""

        async def one(key: str) -> bytes | StoreError:
            try:
                return await self.get(key)
            except StoreError as error:
                return error

        return await self._bounded(one, keys)

    async def _bounded(self, function: Callable[[T], Awaitable[R]], items: Sequence[T]) -> list[R]:
        """``function`` over ``items`` by a few workers; the first failure stops them all."""
        results: list[Any] = [None] * len(items)
        indices = iter(range(len(items)))

        async def worker() -> None:
            for index in indices:
                results[index] = await function(items[index])

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(self.concurrency, len(items))):
                    group.create_task(worker())
        except BaseExceptionGroup as errors:
            raise errors.exceptions[0] from None
        return results

    async def exists(self, key: str) -> bool:
        path = self.path_of(key)
        try:
            info = await self._call("info", path)
        except FileNotFoundError:
            return False
        except Exception as error:
            raise self._failure("look up", key, error) from None
        return bool(info.get("type") == "file")

    async def list(self, prefix: str = "") -> list[str]:
        validate_prefix(prefix)
        directory = prefix.rpartition("/")[0]
        base = self._prefix + directory if directory else self.root
        try:
            paths = await self._call("find", base)
        except FileNotFoundError:
            missing = await self._missing_bucket()
            if missing is not None:
                raise missing from None
            return []  # nothing under the prefix yet
        except Exception as error:
            raise self._failure("list", prefix or "/", error) from None
        keys = []
        for path in map(str, paths):
            key = path.removeprefix(self._prefix)
            if key != path and key.startswith(prefix) and key and not key.endswith("/"):
                keys.append(key)
        return sorted(keys)

    async def delete(self, key: str) -> None:
        path = self.path_of(key)
        try:
            await self._call("rm_file", path)
        except FileNotFoundError:
            return
        except Exception as error:
            raise self._failure("delete", key, error) from None

    @property
    def bucket(self) -> str | None:
        if self.protocol not in _BUCKET_PROTOCOLS:
            return None
        return self.root.split("/", 1)[0]

    async def _missing_bucket(self) -> StoreError | None:
        """The error to report if "not found" meant the whole bucket (asked only once
        something was not found, so the common path costs no request)."""
        if self.bucket is None:
            return None
        try:
            if await self._call("exists", self.bucket):
                return None
        except Exception:
            return None  # unknown: let the original error speak
        return StoreError(f"the bucket {self.bucket!r} does not exist ({self.url})")

    def _failure(self, action: str, key: str, error: Exception) -> StoreError:
        if isinstance(error, StoreError):
            return error
        if isinstance(error, PermissionError):
            where = (
                "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE or --storage-option"
                if self.protocol in ("s3", "s3a")
                else "--storage-option"
            )
            return StoreError(
                f"access denied: cannot {action} {key!r} in {self.url}; "
                f"check the credentials ({where}) and the permissions"
            )
        return StoreError(f"cannot {action} {key!r} in {self.url}: {self._describe(error)}")
