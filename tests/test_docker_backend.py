"""The docker backend: Rocq verdicts as locally, hardening observed from inside, daemon loss.

Needs a running daemon and the rocq image (`prooflock images build rocq`).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from pathlib import Path

import pytest

from runner import Checker, CheckRequest
from runner.backends.docker import DockerBackend
from runner.core.models import Limits, Verdict
from runner.core.settings import Settings
from runner.images.resolver import LockedImages
from runner.provers.common.server import SandboxServer, ServerFailed, ServerSpec
from tests.helpers import ARTIFACTS, artifact
from tests.helpers import ROCQ_EXPECTED as EXPECTED

pytestmark = [pytest.mark.docker, pytest.mark.slow]
HOSTILE_WRITE = (
    'Redirect "/etc/prooflock-escape" Print nat.\nRedirect "/tmp/prooflock-escape" Print nat.\n'
)


@pytest.fixture(scope="module")
def backend():
    settings = Settings(backend="docker", isolation="strict")
    docker_backend = DockerBackend(settings, LockedImages(settings))
    yield docker_backend
    docker_backend.close()


@pytest.fixture
def docker_settings(settings):
    return settings.model_copy(update={"backend": "docker"})


def sandbox_run(
    backend, script: str, *, memory_mb: int = 512, pids: int = 64, timeout_s: float = 20
):
    with backend.sandbox(
        "rocq", Limits(timeout_s=int(timeout_s), memory_mb=memory_mb, pids=pids)
    ) as box:
        return box.run(["sh", "-c", script], timeout_s=timeout_s)


@pytest.mark.parametrize("isolation", ["strict", "warm"])
def test_rocq_verdicts_in_a_container_match_the_local_ones(docker_settings, settings, isolation):
    requests = [
        CheckRequest(prover="rocq", name=n, content=artifact("rocq", n)) for n in sorted(EXPECTED)
    ]
    with Checker(docker_settings.model_copy(update={"isolation": isolation})) as in_docker:
        docker_results = list(in_docker.map(requests))
    with Checker(settings) as local:
        local_results = list(local.map(requests))
    for ours, theirs in zip(docker_results, local_results, strict=True):
        assert ours.verdict is EXPECTED[ours.artifact], (ours.artifact, ours.diagnostics)
        assert ours.result_digest == theirs.result_digest, ours.artifact
        assert ours.environment["install"]["kind"] == "docker"
        assert ours.provenance.backend == "docker" and ours.provenance.isolation == isolation
        assert "sandbox_agent" in ours.provenance.tools  # rocq's image runs the agent
        assert ours.env_key != theirs.env_key


def test_only_loopback_network(backend):
    done = sandbox_run(backend, "cat /proc/net/dev")
    interfaces = {line.split(":")[0].strip() for line in done.stdout.decode().splitlines()[2:]}
    assert interfaces == {"lo"}


def test_writes_outside_the_work_dir_fail_and_inside_succeed(backend):
    done = sandbox_run(
        backend, "touch /etc/x 2>&1; touch /usr/x 2>&1; touch /work/ok && echo work-ok; id -u"
    )
    text = done.stdout.decode()
    assert text.count("Read-only file system") == 2
    assert "work-ok" in text and text.strip().endswith("1000")


def test_capabilities_are_dropped_and_privileges_cannot_grow(backend):
    done = sandbox_run(backend, "grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status")
    fields = dict(line.split(":\t") for line in done.stdout.decode().splitlines())
    assert int(fields["CapEff"], 16) == 0 and int(fields["CapBnd"], 16) == 0
    assert fields["NoNewPrivs"].strip() == "1"


def test_a_fork_bomb_is_contained(backend):
    # Only shell builtins after the bomb: once the pid limit is reached nothing can fork. The
    # bomb starts from a subshell, so this shell's own last fork is done before pids run out.
    bomb = (
        "bomb() { bomb | bomb & }; (bomb) & i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; "
        "read max < /sys/fs/cgroup/pids/pids.max; read now < /sys/fs/cgroup/pids/pids.current; "
        'echo "max=$max now=$now"'
    )
    done = sandbox_run(backend, bomb, pids=64, timeout_s=60)  # a busy machine slows the loop
    report = done.stdout.decode().split("max=")[-1].split()
    assert report[0] == "64"
    assert int(report[1].removeprefix("now=")) <= 64
    after = sandbox_run(backend, "echo alive")  # the daemon and the machine carry on
    assert after.stdout.strip() == b"alive"


def test_memory_hog_ends_as_memory(docker_settings):
    hog = "Require Import NArith.\nDefinition big := Eval vm_compute in N.to_nat 50000000.\n"
    request = CheckRequest(prover="rocq", name="hog.v", content=hog, memory_mb=256, timeout=120)
    with Checker(docker_settings) as checker:
        assert checker.check_one(request).verdict is Verdict.MEMORY


def test_loop_ends_as_timeout(docker_settings):
    request = CheckRequest(
        prover="rocq", name="loop.v", content=artifact("rocq", "diverge.v"), timeout=3
    )
    with Checker(docker_settings) as checker:
        result = checker.check_one(request)
    assert result.verdict is Verdict.TIMEOUT


def test_warm_isolation_reuses_the_container_but_not_what_a_check_left():
    warm = DockerBackend(Settings(backend="docker", isolation="warm"), LockedImages(Settings()))
    limits = Limits(timeout_s=20, memory_mb=512, pids=64)
    litter = (
        "echo x > /work/left; echo x > /tmp/left; echo x > /dev/shm/left; "
        "nohup sleep 600 >/dev/null 2>&1 &"
    )
    look = "ls -A /work /tmp /dev/shm; for p in /proc/[0-9]*; do cat $p/comm; done"  # no ps here
    try:
        with warm.sandbox("rocq", limits) as first:
            first.run(["sh", "-c", litter], timeout_s=20)
        with warm.sandbox("rocq", limits) as second:
            seen = second.run(["sh", "-c", look], timeout_s=20).stdout.decode()
    finally:
        warm.close()
    assert second.container_id == first.container_id  # no new container per check
    assert "left" not in seen and "sleep" not in seen


# The container's CPU quota per 100 ms period, as its processes see it (cgroup v2, then v1).
CPU_QUOTA = "cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us"


@pytest.mark.parametrize("isolation", ["strict", "warm"])
def test_a_server_boots_with_its_boot_cpus_and_serves_with_the_checks(isolation):
    backend = DockerBackend(
        Settings(backend="docker", isolation=isolation), LockedImages(Settings())
    )
    limits = Limits(timeout_s=20, memory_mb=256, pids=64, cpus=1)
    spec = ServerSpec(
        name="quota server",
        argv=["sh", "-c", f'echo "READY $({CPU_QUOTA})"; exec cat'],
        ready=b"READY ",
        boot_timeout_s=30,
        boot_cpus=2,
    )
    quotas = []
    try:
        for _ in range(2):  # the second reuses the first's container when warm
            server = SandboxServer(backend, "rocq", limits, spec, lambda _: None)
            try:
                booted = server.start().decode().split()[0]
                assert server.sandbox is not None
                now = server.sandbox.run(["sh", "-c", CPU_QUOTA], timeout_s=20)
                quotas.append((booted, now.stdout.decode().split()[0]))
            finally:
                server.close()
    finally:
        backend.close()
    assert quotas == [("200000", "100000")] * 2


def test_hostile_writes_leave_the_host_untouched(docker_settings):
    escape = Path("/tmp/prooflock-escape")
    escape.unlink(missing_ok=True)
    request = CheckRequest(prover="rocq", name="escape.v", content=HOSTILE_WRITE, mode="statement")
    with Checker(docker_settings) as checker:
        result = checker.check_one(request)
    assert result.verdict is Verdict.FAIL  # /etc is read-only inside
    assert not escape.exists() and not Path("/etc/prooflock-escape").exists()


class DaemonProxy:
    """A unix-socket relay to the real daemon that the test can cut, as if dockerd stopped."""

    def __init__(self, path: Path, target: str = "/var/run/docker.sock"):
        self.path, self.target = path, target
        self.listener: socket.socket | None = None

    def start(self) -> None:
        self.path.unlink(missing_ok=True)
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(self.path))
        self.listener.listen(64)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:  # pass the half-close on: docker's exec stdin relies on it
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        self.path.unlink(missing_ok=True)


def test_a_stopped_daemon_is_an_infra_error_and_the_run_resumes_when_it_is_back(cli, tmp_path):
    proxy = DaemonProxy(tmp_path / "docker.sock")
    lines = [
        json.dumps(
            {"prover": "rocq", "name": name, "content": (ARTIFACTS / "rocq" / name).read_text()}
        )
        for name in ("pass_arith.v", "fail_tactic.v")
    ]
    (tmp_path / "r.jsonl").write_text("\n".join(lines) + "\n")
    env = {
        "DOCKER_HOST": f"unix://{tmp_path / 'docker.sock'}",
        "PROOFLOCK_BACKEND": "docker",
        "PROOFLOCK_RETRIES": "1",
    }
    stopped = cli("run", "r.jsonl", "--checkpoint", "ck.jsonl", env=env)
    assert stopped.returncode == 3
    assert "2 infra errors" in stopped.stdout
    (tmp_path / "a.v").write_text((ARTIFACTS / "rocq" / "pass_arith.v").read_text())
    check = cli("check", "--prover", "rocq", "--backend", "docker", "a.v", env=env)
    assert check.returncode == 3 and "no Docker daemon answers" in check.stderr
    assert "start it" in check.stderr
    proxy.start()
    try:
        resumed = cli("run", "r.jsonl", "--checkpoint", "ck.jsonl", env=env)
    finally:
        proxy.stop()
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr  # finished; one fails
    assert "checked 2 now" in resumed.stdout
    verdicts = [json.loads(line) for line in (tmp_path / "ck.jsonl").read_text().splitlines()]
    final = {
        r["body"]["index"]: r["body"]["result"]["verdict"]
        for r in verdicts
        if r["kind"] == "result"
    }
    assert final == {0: "pass", 1: "fail"}


def test_a_server_killed_for_memory_while_it_boots_says_so():
    # Its log would say only where it stopped (HOL Light's worker left progress dots, read once
    # as a missing library): the container's own OOM count names the cause.
    backend = DockerBackend(Settings(backend="docker"), LockedImages(Settings()))
    spec = ServerSpec(
        name="hungry server",
        argv=["sh", "-c", 'x=$(head -c 400000000 /dev/zero | tr "\\0" a); echo "READY"; exec cat'],
        ready=b"READY",
        boot_timeout_s=60,
        explain_failure=lambda sandbox: "a log that blames something else",
    )
    server = SandboxServer(
        backend, "rocq", Limits(timeout_s=20, memory_mb=128), spec, lambda _: None
    )
    try:
        with pytest.raises(ServerFailed) as failed:
            server.start()
    finally:
        server.close()
        backend.close()
    assert str(failed.value) == (
        "the hungry server was killed for memory while starting (limit 128 MB): "
        "give it more with --memory"
    )
