"""The LightRAG instance the command line opens on a working folder, configured the way
LightRAG's own server reads its environment.

A storage config is a dotenv file (``.env``, as the server reads): the storages
(``LIGHTRAG_KV_STORAGE``, ``LIGHTRAG_VECTOR_STORAGE``, ``LIGHTRAG_GRAPH_STORAGE``,
``LIGHTRAG_DOC_STATUS_STORAGE``), ``WORKSPACE``, the storages' own settings (``POSTGRES_*``,
``REDIS_URI``, ``NEO4J_*``, ``MONGO_*``…, which LightRAG's storage classes read from the
environment: they are put there, the real environment winning, as the server's
``load_dotenv(override=False)`` does) and the embedding LightRAG uses, so that a changed edge
is re-embedded in the same vector space:

- ``EMBEDDING_BINDING_HOST`` (an OpenAI-compatible base URL), ``EMBEDDING_MODEL``,
  ``EMBEDDING_DIM``, and the key in ``EMBEDDING_BINDING_API_KEY`` (never shown);
- or ``RELMERGE_EMBEDDING_FUNC=package.module:name``: a LightRAG ``EmbeddingFunc``, or an
  async function of a list of texts returning a numpy array (with ``EMBEDDING_DIM``).

Without an embedding the instance can still be read and its graph written: its vectors
are not rebuilt (the pass lists them as stale). The instance never asks its own LLM.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from relmerge.errors import ConfigError, InputError, ProviderError
from relmerge.integrations.lightrag.tokenizer import offline_tokenizer

# Storage kind (LightRAG's name for it) -> the server's environment variable, default.
STORAGES = {
    "KV_STORAGE": ("LIGHTRAG_KV_STORAGE", "JsonKVStorage"),
    "VECTOR_STORAGE": ("LIGHTRAG_VECTOR_STORAGE", "NanoVectorDBStorage"),
    "GRAPH_STORAGE": ("LIGHTRAG_GRAPH_STORAGE", "NetworkXStorage"),
    "DOC_STATUS_STORAGE": ("LIGHTRAG_DOC_STATUS_STORAGE", "JsonDocStatusStorage"),
}
# Storages that keep their data in the working folder itself.
_FILE_STORAGES = {
    "JsonKVStorage",
    "NanoVectorDBStorage",
    "FaissVectorDBStorage",
    "NetworkXStorage",
    "JsonDocStatusStorage",
}
EMBEDDING_FUNC_ENV = "RELMERGE_EMBEDDING_FUNC"
_TOKEN_LIMIT = 8192  # LightRAG's default for an OpenAI-compatible embedding model
_DIM_IN_HEAD = re.compile(rb'"embedding_dim"\s*:\s*(\d+)')


def require_lightrag() -> None:
    """A :class:`ConfigError` saying how to install LightRAG when it is not installed."""
    try:
        import lightrag  # noqa: F401
    except ImportError:
        raise ConfigError(
            "LightRAG is not installed: pip install relmerge[lightrag] (lightrag-hku)"
        ) from None


def read_storage_config(path: Path) -> dict[str, str]:
    """The settings of a dotenv file (keys without a value left out)."""
    from dotenv import dotenv_values

    if not path.is_file():
        raise InputError(f"storage config {path}: no such file")
    try:
        values = dotenv_values(path, encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"storage config {path}: cannot be read ({error})") from None
    return {key: value for key, value in values.items() if value is not None}


def apply_environment(values: dict[str, str]) -> None:
    """Put the settings into ``os.environ`` (LightRAG's storages read them there); a
    variable already set in the environment keeps its value."""
    for key, value in values.items():
        os.environ.setdefault(key, value)


def storage_names(where: str) -> dict[str, str]:
    """Each storage kind's class name, from the environment; an unknown name is a
    :class:`ConfigError` naming the variable and the known classes."""
    from lightrag.kg import STORAGE_IMPLEMENTATIONS

    chosen: dict[str, str] = {}
    problems = []
    for kind, (variable, default) in STORAGES.items():
        name = os.environ.get(variable) or default
        known = STORAGE_IMPLEMENTATIONS[kind]["implementations"]
        if name not in known:
            what = kind.lower().replace("_", " ").replace("kv", "KV")
            problems.append(
                f"{variable}={name} is not a LightRAG {what} (one of {', '.join(known)})"
            )
        chosen[kind] = name
    if problems:
        raise ConfigError(f"{where}: {'; '.join(problems)}")
    return chosen


def _dim(where: str) -> int | None:
    value = os.environ.get("EMBEDDING_DIM", "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) <= 0:
        raise ConfigError(f"{where}: EMBEDDING_DIM must be a positive integer, not {value!r}")
    return int(value)


def _token_limit() -> int:
    value = os.environ.get("EMBEDDING_TOKEN_LIMIT", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else _TOKEN_LIMIT


def folder_dim(working_dir: Path, workspace: str) -> int | None:
    """The dimension of the vectors a file vector storage already holds
    (``vdb_relationships.json``: its ``embedding_dim``), or None."""
    path = working_dir / workspace / "vdb_relationships.json" if workspace else None
    path = path or working_dir / "vdb_relationships.json"
    try:
        with path.open("rb") as file:
            head = file.read(4096)
    except OSError:
        return None
    found = _DIM_IN_HEAD.search(head)
    if found is not None:
        return int(found.group(1))
    try:  # the key further down: read it whole
        import orjson

        value = orjson.loads(path.read_bytes()).get("embedding_dim")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value > 0 else None


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def openai_embedding(base_url: str, model: str, api_key: str | None, dimensions: int | None) -> Any:
    """An async function embedding texts with an OpenAI-compatible ``/embeddings``
    endpoint (the key stays inside it: never in a repr or a log)."""
    import numpy as np

    clients: list[Any] = []

    async def embed(texts: list[str], **_: Any) -> Any:
        if not clients:
            from openai import AsyncOpenAI

            clients.append(AsyncOpenAI(base_url=base_url, api_key=api_key or "not-needed"))
        from openai import APIConnectionError, APIError

        extra = {"dimensions": dimensions} if dimensions is not None else {}
        try:
            response = await clients[0].embeddings.create(
                model=model, input=texts, encoding_format="float", **extra
            )
        except APIError as error:
            status = getattr(error, "status_code", None) or 0
            transport = isinstance(error, APIConnectionError)
            raise ProviderError(
                f"the embedding endpoint {base_url} (EMBEDDING_BINDING_HOST, model {model}) "
                f"failed: {error}",
                retryable=transport or status == 429 or status >= 500,
                transport=transport,
            ) from None
        return np.array([row.embedding for row in response.data], dtype=np.float32)

    return embed


def imported_function(target: str, where: str) -> Any:
    """``package.module:name`` imported (the current directory on the path, as
    ``python -m`` has it)."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"{where}: {EMBEDDING_FUNC_ENV}={target!r} must be package.module:name")
    added = os.getcwd() not in sys.path
    if added:
        sys.path.append(os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as error:
        raise ConfigError(
            f"{where}: {EMBEDDING_FUNC_ENV}={target}: cannot be imported ({error})"
        ) from None
    finally:
        if added:
            sys.path.remove(os.getcwd())
    if not callable(value):
        raise ConfigError(f"{where}: {EMBEDDING_FUNC_ENV}={target} is not callable")
    return value


async def _no_embedding(texts: list[str], **_: Any) -> Any:
    raise ConfigError(
        "no embedding is configured for this LightRAG instance: give --storage-config a "
        f"file with EMBEDDING_BINDING_HOST, EMBEDDING_MODEL and EMBEDDING_DIM, or "
        f"{EMBEDDING_FUNC_ENV}"
    )


async def _no_llm(*_: Any, **__: Any) -> str:
    raise ConfigError(
        "relmerge opened this LightRAG instance to edit its edges: it never asks LightRAG's LLM"
    )


def embedding_func(
    working_dir: Path, workspace: str, where: str, files_hold_vectors: bool = False
) -> tuple[Any, bool]:
    """The instance's ``EmbeddingFunc`` and whether it can embed (False: a stand-in of
    the right dimension whose call raises). ``files_hold_vectors``: the vector storage
    keeps its vectors in the working folder (whose file, if any, says their dimension)."""
    from lightrag.utils import EmbeddingFunc

    model = os.environ.get("EMBEDDING_MODEL") or None
    target = os.environ.get(EMBEDDING_FUNC_ENV, "").strip()
    if target:
        found = imported_function(target, where)
        if isinstance(found, EmbeddingFunc):
            return found, True
        dim = _dim(where)
        if dim is None:
            raise ConfigError(f"{where}: {EMBEDDING_FUNC_ENV} needs EMBEDDING_DIM")
        return EmbeddingFunc(
            embedding_dim=dim, func=found, max_token_size=_token_limit(), model_name=model
        ), True
    host = os.environ.get("EMBEDDING_BINDING_HOST", "").strip()
    if host:
        binding = os.environ.get("EMBEDDING_BINDING", "openai").strip() or "openai"
        if binding != "openai":
            raise ConfigError(
                f"{where}: EMBEDDING_BINDING={binding}: relmerge re-embeds through an "
                f"OpenAI-compatible endpoint only (EMBEDDING_BINDING=openai), or "
                f"{EMBEDDING_FUNC_ENV}=package.module:name"
            )
        dim = _dim(where)
        if model is None or dim is None:
            missing = [n for n, v in (("EMBEDDING_MODEL", model), ("EMBEDDING_DIM", dim)) if not v]
            raise ConfigError(f"{where}: EMBEDDING_BINDING_HOST needs {' and '.join(missing)}")
        send = dim if _true(os.environ.get("EMBEDDING_SEND_DIM")) else None
        key = os.environ.get("EMBEDDING_BINDING_API_KEY") or os.environ.get("OPENAI_API_KEY")
        func = openai_embedding(host, model, key, send)
        return EmbeddingFunc(
            embedding_dim=dim, func=func, max_token_size=_token_limit(), model_name=model
        ), True
    dim = _dim(where) or folder_dim(working_dir, workspace)
    if dim is None and not files_hold_vectors:
        raise ConfigError(
            f"{where}: no EMBEDDING_DIM, and {working_dir} holds no vdb_relationships.json "
            "to read it from: set EMBEDDING_DIM (the dimension of the instance's vectors)"
        )
    # A file vector storage with no file holds no vector to agree with, and a pass that
    # cannot embed writes none: any dimension serves.
    return EmbeddingFunc(embedding_dim=dim or 1, func=_no_embedding, model_name=model), False


def open_lightrag(working_dir: Path, storage_config: Path | None) -> tuple[Any, bool]:
    """A ``LightRAG`` on ``working_dir`` with the storages and embedding the storage
    config (and the environment) name; whether it can re-embed. Its storages are not
    initialised yet (:func:`opened` does that)."""
    require_lightrag()
    where = f"storage config {storage_config}" if storage_config else "environment"
    if storage_config is not None:
        apply_environment(read_storage_config(storage_config))
    names = storage_names(where)
    workspace = os.environ.get("WORKSPACE", "").strip()
    if set(names.values()) & _FILE_STORAGES and not working_dir.is_dir():
        raise InputError(f"{working_dir}: no such LightRAG working folder")
    in_files = names["VECTOR_STORAGE"] in _FILE_STORAGES
    func, can_embed = embedding_func(working_dir, workspace, where, in_files)
    from lightrag import LightRAG

    try:
        rag = LightRAG(
            working_dir=str(working_dir),
            workspace=workspace,
            kv_storage=names["KV_STORAGE"],
            vector_storage=names["VECTOR_STORAGE"],
            graph_storage=names["GRAPH_STORAGE"],
            doc_status_storage=names["DOC_STATUS_STORAGE"],
            embedding_func=func,
            llm_model_func=_no_llm,
            tokenizer=offline_tokenizer(),
            enable_llm_cache=False,
        )
    except ValueError as error:  # a storage's required variable missing, a bad workspace
        raise ConfigError(f"{where}: {' '.join(str(error).split())}") from None
    return rag, can_embed


async def check_embedding(rag: Any) -> None:
    """One text embedded before any work: an embedding that fails, or gives vectors of
    another dimension than the instance's, stops here with one line (nothing written)."""
    func = rag.embedding_func
    log = logging.getLogger("lightrag")  # it logs the failure too: the error says it once
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        vectors = await func(["relmerge checks the embedding"])
        width = int(vectors.shape[-1])
    except ProviderError:
        raise
    except Exception as error:
        raise ProviderError(
            f"the embedding of this LightRAG instance failed: {type(error).__name__}: {error}",
            retryable=False,
        ) from None
    finally:
        log.setLevel(level)
    if width != func.embedding_dim:
        raise ConfigError(
            f"the embedding gives vectors of {width} dimensions, the instance's have "
            f"{func.embedding_dim} (EMBEDDING_DIM)"
        )


@contextlib.asynccontextmanager
async def opened(working_dir: Path, storage_config: Path | None) -> AsyncIterator[tuple[Any, bool]]:
    """:func:`open_lightrag` with its storages initialised, and finalised (flushed to
    disk or their servers) on the way out."""
    rag, can_embed = open_lightrag(working_dir, storage_config)
    await rag.initialize_storages()
    try:
        yield rag, can_embed
    except BaseException:
        # The error that stopped the work is the one to tell; a storage that cannot flush
        # after it (a vector storage whose embedding failed) adds nothing to it.
        with contextlib.suppress(Exception):
            await rag.finalize_storages()
        raise
    await rag.finalize_storages()


__all__ = [
    "check_embedding",
    "open_lightrag",
    "opened",
    "read_storage_config",
    "require_lightrag",
]
