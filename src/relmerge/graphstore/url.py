"""Relation store URLs: which backend, where, and how a URL may be shown.

``sqlite:///relative/path.db`` and ``sqlite:////abs/path.db`` (SQLAlchemy's convention:
the path is what follows the third slash), ``postgresql://user:pass@host:port/db`` and
``postgresql:///db?host=/socket/dir`` (libpq's own URLs, given to psycopg as they are).
Anything printed shows :func:`redact_store_url`: the password is never shown.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from relmerge.errors import StoreError
from relmerge.graphstore.base import RelationStore

SCHEMES = ("sqlite", "postgresql")
_ALIASES = {"postgres": "postgresql"}
_QUERY_PASSWORD = re.compile(r"(?i)([?&])(password=)[^&#]*")
_USAGE = "sqlite:///PATH (a file) or postgresql://USER@HOST:PORT/DB (a server)"


def scheme_of(url: str) -> str:
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    return _ALIASES.get(scheme, scheme)


def redact_store_url(url: str) -> str:
    """``url`` with its password (in the user part or the query) replaced by ``***``.

    Done on the text, not by re-assembling parsed parts (which would turn
    ``sqlite:////abs`` into ``sqlite://abs``); an ``@`` further on than the user part
    hides more, never less.

    >>> redact_store_url("postgresql://ann:s3cret@db.example:5432/graph?sslmode=require")
    'postgresql://ann:***@db.example:5432/graph?sslmode=require'
    """
    scheme, separator, rest = url.partition("://")
    if separator:
        at = rest.rfind("@")
        user, colon, _ = rest[:at].partition(":") if at >= 0 else ("", "", "")
        if colon and "/" not in user:
            rest = f"{user}:***{rest[at:]}"
        url = f"{scheme}://{rest}"
    return _QUERY_PASSWORD.sub(r"\1\2***", url)


def url_secrets(url: str) -> list[str]:
    """The password of ``url`` as written and decoded, to hide it in drivers' messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = []
    if parts.password:
        found += [parts.password, unquote(parts.password)]
    for match in re.finditer(r"(?i)(?:^|&)password=([^&]*)", parts.query):
        found += [match.group(1), unquote(match.group(1))]
    return [secret for secret in found if secret]


def sqlite_path(url: str) -> Path:
    """The file of a ``sqlite:///`` URL (relative to the working directory after three
    slashes, absolute after four)."""
    shown = redact_store_url(url)
    rest = url.split("://", 1)[1]
    if not rest.startswith("/"):
        raise StoreError(
            f"a SQLite store URL names a file after three slashes, not a host: {shown} "
            "(sqlite:///relative/path.db or sqlite:////absolute/path.db)"
        )
    if "?" in rest or "#" in rest:
        raise StoreError(f"a SQLite store URL takes no query or fragment: {shown}")
    path = rest[1:]
    if not path or path.endswith("/") or path == ":memory:":
        raise StoreError(
            f"a SQLite store URL must name a file: {shown} "
            "(sqlite:///relative/path.db or sqlite:////absolute/path.db)"
        )
    return Path(path)


def open_graph_store(url: str) -> RelationStore:
    """The relation store at ``url``; nothing is opened until its first operation.

    >>> open_graph_store("sqlite:///graph.db").url
    'sqlite:///graph.db'
    """
    if not isinstance(url, str) or not url.strip():
        raise StoreError(f"a relation store URL is needed: {_USAGE}")
    url = url.strip()
    scheme = scheme_of(url)
    shown = redact_store_url(url)
    from relmerge.graphstore.engine import SqlRelationStore

    if scheme == "sqlite":
        from relmerge.graphstore.sqlite import SqliteDialect

        return SqlRelationStore(SqliteDialect(sqlite_path(url), shown))
    if scheme == "postgresql":
        from relmerge.graphstore.postgres import PostgresDialect  # needs the extra

        conninfo = url if url.lower().startswith("postgresql://") else _libpq_url(url)
        return SqlRelationStore(PostgresDialect(conninfo, shown, url_secrets(url)))
    supported = ", ".join(f"{name}://" for name in SCHEMES)
    raise StoreError(
        f"unsupported relation store URL {shown}: the schemes supported are {supported} ({_USAGE})"
    )


def _libpq_url(url: str) -> str:
    """``postgres://…`` as ``postgresql://…`` (libpq takes both; one form is kept)."""
    return "postgresql://" + url.split("://", 1)[1]
