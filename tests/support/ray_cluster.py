"""A real two-node Ray cluster on this machine, on loopback, stopped by process group.

Each node is a ``ray start --block`` process in its own process group, with its own
``--temp-dir`` and ports chosen free here, so it neither meets nor stops any other Ray on
the machine (``ray stop`` would stop them all): stopping signals our two groups, then
any process still naming one of our temp dirs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import closing, suppress
from pathlib import Path

HOST = "127.0.0.2"  # loopback, but not a name Ray swaps for the outward address
LOOPBACK_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",  # a test cluster on loopback, gone with the test
}
_PROBE = (
    "import json, ray, sys; ray.init(address=sys.argv[1], log_to_driver=False); "
    "print(json.dumps([n['NodeID'] for n in ray.nodes() if n['Alive']]))"
)


_GIVEN: set[int] = set()  # ports handed out in this process: never given twice


def free_port() -> int:
    """A port free now and not handed out before by this process (the kernel may give a
    port just released again, and two of one node's components on one port stop it)."""
    while True:
        with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
            sock.bind((HOST, 0))
            port: int = sock.getsockname()[1]
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def _ports() -> list[str]:
    """Every port a node would otherwise take a fixed default for, all different."""
    return [
        "--node-manager-port",
        str(free_port()),
        "--object-manager-port",
        str(free_port()),
        "--dashboard-agent-listen-port",
        str(free_port()),
        "--dashboard-agent-grpc-port",
        str(free_port()),
        "--runtime-env-agent-port",
        str(free_port()),
        "--metrics-export-port",
        str(free_port()),
        "--worker-port-list",
        ",".join(str(free_port()) for _ in range(12)),
    ]


class RayCluster:
    """``ray start`` a head and a worker node of ``cpus`` CPUs each; ``address`` joins it."""

    def __init__(self, cpus: int = 1) -> None:
        self.cpus = cpus
        self.root = Path(tempfile.mkdtemp(prefix="rm-ray-", dir="/tmp"))  # short: socket paths
        self.port = free_port()
        self.address = f"{HOST}:{self.port}"
        self.nodes: list[subprocess.Popen[bytes]] = []
        ray_bin = Path(sys.executable).with_name("ray")
        self._ray = str(ray_bin) if ray_bin.exists() else "ray"

    def _start(self, name: str, *args: str) -> None:
        temp = self.root / name
        temp.mkdir()
        log = (self.root / f"{name}.log").open("wb")
        env = self.env()
        command = [self._ray, "start", "--block", "--num-cpus", str(self.cpus)]
        command += ["--node-ip-address", HOST, "--temp-dir", str(temp), "--disable-usage-stats"]
        command += [*args, *_ports()]
        self.nodes.append(
            subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        )

    def start(self, timeout: float = 120.0) -> RayCluster:
        self._start("head", "--head", "--port", str(self.port), "--include-dashboard", "false")
        self._wait(1, timeout)
        self._start("worker", "--address", self.address)
        self._wait(2, timeout)
        return self

    @staticmethod
    def env() -> dict[str, str]:
        """The environment of the cluster's processes and of a driver joining it."""
        return {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | LOOPBACK_ENV

    def node_ids(self, timeout: float = 60.0) -> list[str]:
        """The ids of the live nodes (asked from a short-lived driver process)."""
        try:
            done = subprocess.run(
                [sys.executable, "-c", _PROBE, self.address],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=self.env(),
            )
        except subprocess.TimeoutExpired:
            return []
        if done.returncode != 0:
            return []
        ids: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
        return ids

    def _wait(self, nodes: int, timeout: float) -> None:
        """Until the cluster has ``nodes`` live nodes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(node.poll() is not None for node in self.nodes):
                raise RuntimeError(f"a Ray node stopped: see {self.root}/*.log")
            if len(self.node_ids(min(30.0, timeout))) == nodes:
                return
            time.sleep(1)
        raise RuntimeError(f"the Ray cluster did not come up with {nodes} nodes in {timeout} s")

    def _ours(self) -> list[int]:
        """Processes still running that name one of this cluster's temp dirs."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(self.root).encode() in command:
                found.append(int(entry.name))
        return found

    def stop(self) -> None:
        for node in reversed(self.nodes):
            if node.poll() is None:
                os.killpg(node.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for node in self.nodes:
            try:
                node.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        for pid in self._ours():  # any straggler of ours, by its id
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for _ in range(10):  # a process that was just stopped may still be closing its logs
            shutil.rmtree(self.root, ignore_errors=True)
            if not self.root.exists():
                break
            time.sleep(0.5)

    def __enter__(self) -> RayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
