"""A real S3-compatible server for the store tests: moto's server mode on 127.0.0.1.

The server is started once per session; each test gets its own bucket and its own AWS
environment (fake credentials, the endpoint, no profile or instance metadata), set with
``monkeypatch`` so nothing outlives the test.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from relmerge.stores import FsspecStore


@dataclass(frozen=True)
class Bucket:
    endpoint: str
    name: str

    def url(self, path: str = "") -> str:
        return f"s3://{self.name}/{path}".rstrip("/")


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a moto S3 server (a free port), for the whole session."""
    pytest.importorskip("s3fs")
    server_module = pytest.importorskip("moto.server")
    werkzeug = logging.getLogger("werkzeug")
    level = werkzeug.level
    werkzeug.setLevel(logging.ERROR)  # one access-log line per request otherwise
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        werkzeug.setLevel(level)


@pytest.fixture
def s3_env(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """AWS settings that reach the moto server and nothing else, for this test only."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # A remote OUT keeps its cache in the user's cache directory: keep it in tmp_path.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    return moto_endpoint


@pytest.fixture
def s3_bucket(s3_env: str) -> Bucket:
    """A new, empty bucket on the moto server."""
    name = f"relmerge-{uuid.uuid4().hex[:12]}"
    FsspecStore(f"s3://{name}").fs.mkdir(name)
    return Bucket(s3_env, name)
