"""A real Ray cluster on loopback for tests: a head node and worker nodes on this machine.

Each node is a `ray start --block` process started in a session of its own; every process Ray
starts for that node (raylet, agents, workers, actors) stays in that session. So killing a node
(a machine failure) or stopping the cluster is `ray stop --force` scoped to this test's nodes:
SIGKILL to every process of their sessions, and a check that none is left. A plain `ray stop`
would also stop any other Ray on this machine.

Ray 2.x turns a node address of 127.0.0.1 into the machine's outward address; other loopback
addresses are kept, so the head listens on 127.0.0.2 and worker nodes on 127.0.0.3 and up.
Import the fixture into a test module: `from tests.support.ray_cluster import ray_cluster`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

HEAD_IP = "127.0.0.2"
OBJECT_STORE_BYTES = 100 * 1024 * 1024  # the machine is shared: keep each node's store small
START_TIMEOUT_S = 180
START_ATTEMPTS = 3


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def session_processes(session: int) -> list[int]:
    """Live (non-zombie) processes of a session."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        if fields[0] != "Z" and int(fields[3]) == session:
            found.append(int(entry))
    return found


def kill_session(session: int, timeout_s: float = 20) -> None:
    """SIGKILL every process of `session` until none is left."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = session_processes(session)
        if not left:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"processes {left} of Ray session {session} survive SIGKILL")
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


@dataclass
class RayNode:
    name: str
    ip: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def session(self) -> int:
        return self.process.pid  # started with start_new_session: it leads its own session

    def alive(self) -> bool:
        return self.process.poll() is None


class LocalRayCluster:
    def __init__(self, root: Path):
        self.root = root
        self.temp_dir = root / "ray"  # Ray's sockets live here: the path must stay short
        self.port = free_port()
        self.client_port = free_port()  # Ray Client: `ray://{HEAD_IP}:{client_port}`
        self.nodes: dict[str, RayNode] = {}

    @property
    def address(self) -> str:
        return f"{HEAD_IP}:{self.port}"

    def _start(self, name: str, ip: str, args: list[str], cpus: int) -> RayNode:
        """Start a node; again (twice at most) if Ray gives up, as it does on a loaded machine
        when its raylet takes more than Ray's fixed 30 s to register."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return self._start_once(name, ip, args, cpus)
            except RuntimeError:
                if attempt == START_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    def _start_once(self, name: str, ip: str, args: list[str], cpus: int) -> RayNode:
        log = self.root / f"{name}.log"
        command = [
            sys.executable,  # the `ray` of this environment (a nox venv's, say)
            "-m",
            "ray.scripts.scripts",
            "start",
            *args,
            f"--node-ip-address={ip}",
            f"--num-cpus={cpus}",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            f"--dashboard-agent-listen-port={free_port()}",
            "--disable-usage-stats",
            "--block",
        ]
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        node = RayNode(name, ip, process, log)
        self.nodes[name] = node
        deadline = time.monotonic() + START_TIMEOUT_S
        while b"Ray runtime started" not in log.read_bytes():
            if not node.alive() or time.monotonic() > deadline:
                self.kill(name)
                raise RuntimeError(f"Ray node {name} did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        return node

    def start_head(self, cpus: int = 1) -> RayNode:
        return self._start(
            "head",
            HEAD_IP,
            [
                "--head",
                f"--port={self.port}",
                f"--temp-dir={self.temp_dir}",
                "--include-dashboard=false",
                f"--dashboard-port={free_port()}",
                f"--ray-client-server-port={self.client_port}",
            ],
            cpus,
        )

    def add_node(self, name: str, cpus: int = 1) -> RayNode:
        """A worker node with a custom resource named after it (`{"node2": 1}`)."""
        ip = f"127.0.0.{len(self.nodes) + 2}"
        args = [f"--address={self.address}", f'--resources={{"{name}": 1}}']
        return self._start(name, ip, args, cpus)

    def ensure_node(self, name: str) -> RayNode:
        """The named worker node, started again if it was killed."""
        node = self.nodes.get(name)
        if node is not None and node.alive():
            return node
        return self.add_node(name)

    def kill(self, name: str) -> None:
        """The node fails as a machine would: SIGKILL to all of its processes at once."""
        node = self.nodes.pop(name)
        kill_session(node.session)
        node.process.wait(timeout=10)

    def wait_for_nodes(self, count: int, timeout_s: float = 120) -> None:
        """Until the head reports `count` live nodes (asked from a separate Ray driver)."""
        script = (
            "import sys, time, ray\n"
            "ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False)\n"
            f"deadline = time.monotonic() + {timeout_s}\n"
            "while sum(n['Alive'] for n in ray.nodes()) < int(sys.argv[2]):\n"
            "    assert time.monotonic() < deadline, ray.nodes()\n"
            "    time.sleep(0.5)\n"
        )
        subprocess.run(
            [sys.executable, "-c", script, self.address, str(count)],
            check=True,
            capture_output=True,
            timeout=timeout_s + 60,
        )

    def stop(self) -> None:
        """Worker nodes first, then the head; then nothing of this cluster may be running."""
        for name in [name for name in self.nodes if name != "head"] + ["head"]:
            if name in self.nodes:
                self.kill(name)


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[LocalRayCluster]:
    """A head and one worker node (`node2`), one CPU each, stopped after the module's tests."""
    root = Path(tempfile.mkdtemp(prefix="pl-ray-"))
    cluster = LocalRayCluster(root)
    try:
        cluster.start_head()
        cluster.add_node("node2")
        cluster.wait_for_nodes(2)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
