"""A Graphiti graph opened from a URL, with graphiti-core's own driver, and the graph's
own embedder from a few settings: what ``relmerge graphiti`` needs beyond the pass.

The URL's scheme picks the driver:

- ``falkordb://[user:password@]host[:port]`` (``falkordbs://`` or ``rediss://`` for TLS):
  ``FalkorDriver``; a Graphiti group is a FalkorDB graph named after the group id, so the
  driver is opened on that graph. Credentials: the URL's, else ``FALKORDB_USERNAME`` /
  ``FALKORDB_PASSWORD``.
- ``kuzu:///absolute/path`` or ``kuzu://relative/path``: ``KuzuDriver`` on that database
  (which must exist); the full-text indexes graphiti's search needs are built where they
  are missing (``KuzuDriver`` itself never builds them).
- ``neo4j://``, ``neo4j+s://``, ``bolt://``, ``bolt+s://`` ``[user:password@]host[:port]
  [/database]``: ``Neo4jDriver`` (the same calls as the others; not tested here).
  Credentials: the URL's, else ``NEO4J_USER`` / ``NEO4J_PASSWORD``.

Messages show the URL without its ``user:password@`` part. Graphiti's telemetry is
switched off for the process unless ``GRAPHITI_TELEMETRY_ENABLED`` is set.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from relmerge.errors import ConfigError, InputError, ProviderError
from relmerge.stores.fsspec_store import redact_url

if TYPE_CHECKING:
    from graphiti_core.driver.driver import GraphDriver
    from graphiti_core.embedder.client import EmbedderClient

FALKORDB_SCHEMES = {"falkordb": False, "redis": False, "falkordbs": True, "rediss": True}
KUZU_SCHEMES = ("kuzu",)
NEO4J_SCHEMES = ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc")
SCHEMES = (*FALKORDB_SCHEMES, *KUZU_SCHEMES, *NEO4J_SCHEMES)
TELEMETRY_ENV = "GRAPHITI_TELEMETRY_ENABLED"
CONNECT_SECONDS = 10.0
_FTS_NAME = re.compile(r"CREATE_FTS_INDEX\('[^']+',\s*'([^']+)'")


def telemetry_off() -> None:
    """Graphiti sends usage telemetry when a ``Graphiti`` is made, unless told not to:
    off for this process, unless the user chose."""
    os.environ.setdefault(TELEMETRY_ENV, "false")


def require_graphiti() -> None:
    try:
        import graphiti_core  # noqa: F401
    except ImportError:
        raise ConfigError(
            "graphiti-core is not installed: pip install 'relmerge[graphiti]'"
        ) from None


def shown(url: str) -> str:
    """The URL as messages may show it (no credentials)."""
    return redact_url(url)


def scheme_of(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def check_url(url: str) -> str:
    """The URL's scheme, or a one-line ``ConfigError`` naming the ones known."""
    scheme = scheme_of(url)
    if scheme not in SCHEMES:
        raise ConfigError(
            f"{shown(url)} is not a Graphiti graph URL: use falkordb://host:port, "
            "kuzu:///path/to/db or neo4j://host:port (also falkordbs://, bolt://)"
        )
    return scheme


def _credentials(url: str, user_env: str, password_env: str) -> tuple[str | None, str | None]:
    parts = urlsplit(url)
    user = unquote(parts.username) if parts.username else os.environ.get(user_env) or None
    password = unquote(parts.password) if parts.password else os.environ.get(password_env) or None
    return user, password


def _host_port(url: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(url)
    try:
        port = parts.port or default_port
    except ValueError:
        raise ConfigError(f"{shown(url)}: the port is not a number") from None
    return parts.hostname or "localhost", port


def kuzu_path(url: str) -> Path:
    """``kuzu:///abs/path`` → ``/abs/path``; ``kuzu://rel/path`` → ``rel/path``."""
    rest = url.split("://", 1)[1]
    if not rest:
        raise ConfigError(f"{url} names no database: kuzu:///absolute/path or kuzu://relative")
    return Path(unquote(rest))


@asynccontextmanager
async def opened(url: str, group_id: str) -> AsyncIterator[GraphDriver]:
    """graphiti-core's driver on the graph at ``url`` (FalkorDB: on the group's graph),
    its indexes ready; closed on exit. A server that does not answer, or a database that
    is not there, is a one-line ``InputError``."""
    require_graphiti()
    telemetry_off()
    scheme = check_url(url)
    if scheme in FALKORDB_SCHEMES:
        driver = await _falkordb(url, group_id, tls=FALKORDB_SCHEMES[scheme])
    elif scheme in KUZU_SCHEMES:
        driver = await _kuzu(url)
    else:
        driver = await _neo4j(url)
    try:
        yield driver
    finally:
        await driver.close()  # type: ignore[no-untyped-call]


def _client(module: str, install: str) -> None:
    """The graph database's Python client, which graphiti-core leaves to the user."""
    try:
        __import__(module)
    except ImportError:
        raise ConfigError(f"{module} is not installed: pip install {install}") from None


async def _falkordb(url: str, group_id: str, *, tls: bool) -> GraphDriver:
    _client("falkordb", "falkordb")
    from falkordb.asyncio import FalkorDB
    from graphiti_core.driver.falkordb_driver import FalkorDriver

    host, port = _host_port(url, 6379)
    user, password = _credentials(url, "FALKORDB_USERNAME", "FALKORDB_PASSWORD")
    client = None
    try:
        client = FalkorDB(
            host=host,
            port=port,
            username=user,
            password=password,
            ssl=tls,
            socket_connect_timeout=CONNECT_SECONDS,
        )
        await client.connection.ping()
    except Exception as error:
        if client is not None:
            await _quietly_close(client.connection)
        raise InputError(f"FalkorDB at {shown(url)} does not answer: {_reason(error)}") from None
    driver = FalkorDriver(falkor_db=client, database=group_id)
    try:
        if driver._init_task is not None:  # the constructor builds the indexes in a task
            await driver._init_task
        else:
            await driver.build_indices_and_constraints()  # type: ignore[no-untyped-call]
    except Exception as error:
        await driver.close()
        raise InputError(f"FalkorDB at {shown(url)}: {_reason(error)}") from None
    return driver


async def _kuzu(url: str) -> GraphDriver:
    _client("kuzu", "kuzu")
    from graphiti_core.driver.kuzu_driver import KuzuDriver

    path = kuzu_path(url)
    if not path.exists():
        raise InputError(f"no Kuzu database at {path}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "Kuzu backend is deprecated"
            driver = KuzuDriver(db=str(path))
    except Exception as error:  # another process holds it, not a database, ...
        raise InputError(f"cannot open the Kuzu database {path}: {_reason(error)}") from None
    await _kuzu_fulltext_indexes(driver)
    return driver


async def _kuzu_fulltext_indexes(driver: Any) -> None:
    """Build graphiti's full-text indexes that the database lacks (graphiti's search needs
    them; creating one that exists fails in Kuzu)."""
    from graphiti_core.driver.driver import GraphProvider
    from graphiti_core.graph_queries import get_fulltext_indices

    rows, _, _ = await driver.execute_query("CALL SHOW_INDEXES() RETURN *")
    present = {str(row.get("index_name")) for row in rows or []}
    for query in get_fulltext_indices(GraphProvider.KUZU):
        name = _FTS_NAME.search(query)
        if name is None or name.group(1) not in present:
            await driver.execute_query(query)


async def _neo4j(url: str) -> GraphDriver:
    _client("neo4j", "neo4j")
    from graphiti_core.driver.neo4j_driver import Neo4jDriver

    parts = urlsplit(url)
    user, password = _credentials(url, "NEO4J_USER", "NEO4J_PASSWORD")
    netloc = parts.hostname or "localhost"
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    database = parts.path.strip("/") or "neo4j"
    driver = Neo4jDriver(f"{parts.scheme}://{netloc}", user, password, database=database)
    try:
        await driver.client.verify_connectivity()
        if driver._init_task is not None:
            await driver._init_task
    except Exception as error:
        await driver.close()
        raise InputError(f"Neo4j at {shown(url)} does not answer: {_reason(error)}") from None
    return driver


async def _quietly_close(connection: Any) -> None:
    with suppress(Exception):  # already failing: the first error is the one to say
        await connection.aclose()


def _reason(error: object) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:300]


@dataclass(frozen=True)
class GraphEmbedding:
    """The graph's own embedder, as Graphiti's ``OpenAIEmbedder`` takes it: an
    OpenAI-compatible base URL, a model, the environment variable holding the key, and the
    dimension vectors are cut to (Graphiti's ``EMBEDDING_DIM``, 1024 unless set)."""

    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    dim: int | None = None

    @property
    def configured(self) -> bool:
        return bool(self.base_url or self.model)


def graph_embedder(settings: GraphEmbedding) -> EmbedderClient | None:
    """Graphiti's ``OpenAIEmbedder`` for ``settings``; None when none is configured (the
    pass then lists the changed edges as stale). The key is read from the environment
    variable named (``OPENAI_API_KEY`` by default); a server that needs none gets a
    placeholder."""
    if not settings.configured:
        if settings.api_key_env or settings.dim:
            raise ConfigError(
                "--graph-embedding-api-key-env and --graph-embedding-dim need "
                "--graph-embedding-base-url or --graph-embedding-model"
            )
        return None
    require_graphiti()
    from graphiti_core.embedder.openai import (
        DEFAULT_EMBEDDING_MODEL,
        OpenAIEmbedder,
        OpenAIEmbedderConfig,
    )

    name = settings.api_key_env or "OPENAI_API_KEY"
    key = os.environ.get(name)
    if not key:
        if settings.api_key_env:
            raise ConfigError(f"the environment variable {name} (the embeddings' key) is not set")
        if not settings.base_url:
            raise ConfigError(
                "OPENAI_API_KEY is not set: the graph's embeddings need a key (or give "
                "--graph-embedding-base-url for a server that needs none)"
            )
        key = "unused"  # a local server without keys: the OpenAI client insists on one
    fields: dict[str, Any] = {
        "embedding_model": settings.model or DEFAULT_EMBEDDING_MODEL,
        "api_key": key,
        "base_url": settings.base_url,
    }
    if settings.dim:
        fields["embedding_dim"] = settings.dim
    return OpenAIEmbedder(OpenAIEmbedderConfig(**fields))


async def check_embedder(embedder: EmbedderClient, settings: GraphEmbedding) -> None:
    """One small request before anything is written: an endpoint that is not there, a
    wrong model or key, is said now (one line, never the key), not after half the edges."""
    try:
        vector = await embedder.create(input_data=["relmerge"])
    except Exception as error:
        where = shown(settings.base_url or "https://api.openai.com/v1")
        raise ProviderError(
            f"the graph's embeddings at {where} (model {settings.model or 'default'}) "
            f"failed: {_reason(_without_key(error, embedder))}",
            retryable=False,
        ) from None
    if not vector:
        raise ProviderError("the graph's embeddings returned an empty vector", retryable=False)


def _without_key(error: BaseException, embedder: Any) -> str:
    text = str(error)
    key = getattr(getattr(embedder, "config", None), "api_key", None)
    if key and len(key) >= 4:
        text = text.replace(key, "<hidden>")
    return text


__all__ = [
    "GraphEmbedding",
    "check_embedder",
    "check_url",
    "graph_embedder",
    "opened",
    "shown",
    "telemetry_off",
]
