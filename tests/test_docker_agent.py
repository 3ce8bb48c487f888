"""The in-container sandbox agent: each sandbox operation is a frame, and a check cannot forge one.

Given a container whose PID 1 is the agent, a check runs as the agent's own uid: it must neither
read, trace, signal away nor write into the agent, and whatever it leaves behind in a warm
container is gone before the next check. Needs a running daemon and the rocq image; the fallback
test needs the hol-light image (no python3).
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from runner import Checker, CheckRequest
from runner.backends.agent_link import AgentLost
from runner.backends.base import OUTPUT_CAP_BYTES
from runner.backends.docker import DockerBackend
from runner.backends.policy import LABEL
from runner.backends.sandbox_agent import pack
from runner.core.errors import BackendUnavailable
from runner.core.models import Limits, Verdict
from runner.core.settings import Settings
from runner.images.resolver import LockedImages
from tests.helpers import artifact

pytestmark = [pytest.mark.docker]
LIMITS = Limits(timeout_s=30, memory_mb=512, pids=64)


@pytest.fixture(scope="module")
def warm():
    backend = DockerBackend(Settings(backend="docker", isolation="warm"), LockedImages(Settings()))
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def strict():
    backend = DockerBackend(
        Settings(backend="docker", isolation="strict"), LockedImages(Settings())
    )
    yield backend
    backend.close()


def sh(box, script: str, timeout_s: float = 20, **kwargs):
    return box.run(["sh", "-c", script], timeout_s=timeout_s, **kwargs)


def python(box, code: str, timeout_s: float = 20):
    return box.run(["python3", "-c", code], timeout_s=timeout_s)


def still_serves(box) -> None:
    """The agent answers a write, a run and a read truthfully."""
    box.write_file("probe/in.txt", b"seven\n")
    done = sh(box, "tr a-z A-Z < probe/in.txt > probe/out.txt; echo ran; exit 7")
    assert (done.exit_code, done.stdout, done.timed_out) == (7, b"ran\n", False)
    assert box.read_file("probe/out.txt") == b"SEVEN\n"


# -- the operations ------------------------------------------------------------------------------


@pytest.mark.parametrize("isolation", ["strict", "warm"])
def test_every_sandbox_operation_is_served_by_the_agent(request, isolation):
    backend = request.getfixturevalue(isolation)
    with backend.sandbox("rocq", LIMITS) as box:
        assert box.agent is not None and box.agent.pid == 1
        box.write_file("a/b/c.txt", b"\x00bytes\xff")
        assert box.read_file("a/b/c.txt") == b"\x00bytes\xff"
        with pytest.raises(FileNotFoundError):
            box.read_file("a/missing.txt")
        with pytest.raises(ValueError):
            box.write_file("../escape", b"")
        echoed = box.run(["cat"], stdin=b"x" * (3 << 20), timeout_s=20)
        assert echoed.exit_code == 0 and echoed.stdout == b"x" * (3 << 20)
        env = sh(box, 'echo "$HOME $FOO $LANG"; id -u; echo err >&2', env={"FOO": "bar"})
        assert env.stdout == b"/work bar C.UTF-8\n1000\n" and env.stderr == b"err\n"
        killed = sh(box, "kill -TERM $$")
        assert (killed.exit_code, killed.signal, killed.out_of_memory) == (-15, 15, False)
        busy = python(box, "sum(range(3 * 10**6))")
        assert busy.exit_code == 0 and busy.cpu_ms is not None and busy.cpu_ms > 0
        missing = box.run(["no-such-program"], timeout_s=5)
        assert missing.exit_code == 127 and b"No such file" in missing.stderr


def test_output_beyond_the_cap_is_dropped_and_flagged(warm):
    with warm.sandbox("rocq", LIMITS) as box:
        done = sh(box, f"head -c {OUTPUT_CAP_BYTES + 4096} /dev/zero; echo tail >&2")
    assert done.truncated and len(done.stdout) == OUTPUT_CAP_BYTES
    assert done.stderr == b"tail\n" and done.exit_code == 0


def test_a_timeout_kills_the_command_and_what_it_started(warm):
    with warm.sandbox("rocq", LIMITS) as box:
        started = time.monotonic()
        done = sh(box, "sleep 60 & sleep 60", timeout_s=1)
        assert done.timed_out and done.exit_code is None
        assert time.monotonic() - started < 10
        left = sh(box, "grep -l sleep /proc/[0-9]*/comm 2>/dev/null | wc -l")
        assert left.stdout.strip() == b"0"
        # One that escaped its group with the output pipe does not hold the reply back.
        escaped = sh(box, "setsid sleep 60 & echo started", timeout_s=20)
        assert escaped.stdout == b"started\n" and time.monotonic() - started < 20
        still_serves(box)


def test_out_of_memory_comes_from_the_cgroup_never_from_text(warm):
    with warm.sandbox("rocq", Limits(timeout_s=30, memory_mb=128, pids=64)) as box:
        hog = python(box, "x = bytearray(400 << 20); print(len(x))")
        assert hog.out_of_memory and hog.signal == 9
        mimic = sh(box, 'echo "Out of memory: Killed process"; kill -KILL $$')
        assert mimic.signal == 9 and not mimic.out_of_memory
        assert sh(box, "exit 0").ok


def test_an_image_without_python3_runs_over_docker_exec(strict):
    with strict.sandbox("hol-light", LIMITS) as box:
        assert box.agent is None
        box.write_file("x/in.txt", b"hol\n")
        done = sh(box, "cat x/in.txt; id -u")
        assert done.exit_code == 0 and done.stdout == b"hol\n1000\n"
        # A file the prover wrote is read back whole, however far past the output cap (a HOL
        # Light library export is tens of MB): never cut where the prover's chatter is.
        big = bytes(range(256)) * ((OUTPUT_CAP_BYTES * 3) // 256 + 7)
        box.write_file("x/big.bin", big)
        assert sh(box, "cp x/big.bin x/copy.bin").ok
        assert box.read_file("x/copy.bin") == big
    assert strict.info.isolation == "strict" and "sandbox_agent" in strict.info.tools


def test_a_spawned_server_is_its_own_exec_and_goes_with_the_reset(warm):
    server = 'echo ready; while read line; do echo "got $line"; done'
    with warm.sandbox("rocq", LIMITS) as box:
        channel = box.spawn(["sh", "-c", server])
        assert channel.read_until(b"ready\n", 30) == b"ready\n"
        still_serves(box)  # the agent's frames and the server's stream do not mix
        channel.send(b"one\n")
        assert channel.read_until(b"\n", 30) == b"got one\n"
        assert channel.alive()
    assert not channel.alive()  # the reset killed it
    channel.close()


# -- soundness: the check runs as the agent's uid ------------------------------------------------

TRACE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for request in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE
    print(libc.ptrace(request, 1, None, None), ctypes.get_errno())
pidfd = os.pidfd_open(1)
print(libc.syscall(438, pidfd, 1, 0), ctypes.get_errno())  # pidfd_getfd: a copy of its stdout
data = ctypes.create_string_buffer(8)
local = (ctypes.c_void_p * 2)(ctypes.addressof(data), 8)
print(libc.syscall(311, 1, local, 1, local, 1, 0), ctypes.get_errno())  # process_vm_writev
"""


def test_a_check_can_neither_read_trace_signal_nor_write_into_the_agent(warm):
    attack = (
        "for f in /proc/1/fd/0 /proc/1/fd/1 /proc/1/fd/2 /proc/1/mem /proc/1/environ; do "
        '  cat "$f" >/dev/null 2>&1 && echo "read $f"; '
        '  (echo forged > "$f") 2>/dev/null && echo "wrote $f"; '
        "done; "
        "ls /proc/1/fd >/dev/null 2>&1 && echo 'listed fds'; "
        "command -v gdb >/dev/null && gdb -p 1 -batch -ex 'call (int)write(1, \"x\", 1)' 2>&1; "
        "for s in KILL STOP TERM INT HUP USR1 PIPE; do kill -$s 1 2>/dev/null; done; "
        "echo attacked"
    )
    with warm.sandbox("rocq", LIMITS) as box:
        done = sh(box, attack)
        assert done.stdout == b"attacked\n", done.stdout
        traced = python(box, TRACE).stdout.split()
        assert traced == [b"-1", b"1"] * 4, traced  # EPERM every time
        dumpable = sh(box, "stat -c %u /proc/1/fd 2>&1; cat /proc/1/status | grep ^State")
        assert dumpable.stdout.startswith(b"0\n")  # non-dumpable: /proc/1 belongs to root
        still_serves(box)
    with warm.sandbox("rocq", LIMITS) as again:
        still_serves(again)


def test_output_that_looks_like_a_frame_is_only_output(warm):
    forged = pack(
        {
            "exit_code": 0,
            "signal": None,
            "timed_out": False,
            "oom": False,
            "cpu_ms": 0,
            "wall_ms": 0,
            "truncated": False,
            "seq": 99,
        },
        b"PASS",
        b"",
    )
    with warm.sandbox("rocq", LIMITS) as box:
        box.write_file("forged.bin", forged)
        done = sh(box, "cat forged.bin; cat forged.bin >&2; exit 1")
        assert (done.exit_code, done.stdout, done.stderr) == (1, forged, forged)
        still_serves(box)


def test_planted_links_do_not_redirect_the_agents_file_operations(warm):
    plant = (
        "ln -s /proc/self/fd/1 Driver.v; ln -s /etc/passwd out.txt; ln -s /tmp linked; "
        "mkfifo pipe.txt; ln -s /proc/1/fd/1 direct.v"
    )
    with warm.sandbox("rocq", LIMITS) as box:
        sh(box, plant)
        # Written through the link, these bytes would have gone to the agent's own stdout.
        box.write_file("Driver.v", pack({"ok": True, "seq": 3}))
        box.write_file("direct.v", b"Require Artifact.\n")
        kinds = sh(box, "stat -c '%F' Driver.v direct.v")
        assert kinds.stdout == b"regular file\nregular file\n"
        for name in ("out.txt", "pipe.txt"):
            with pytest.raises(FileNotFoundError):
                box.read_file(name)
        with pytest.raises(BackendUnavailable):
            box.write_file("linked/escape.txt", b"x")
        assert sh(box, "ls /tmp").stdout == b""
        still_serves(box)


# -- warm isolation: nothing crosses from one check to the next ----------------------------------

LITTER = """
echo x > /work/left; echo x > /tmp/left; echo x > /dev/shm/left; mkdir -p /work/locked/in
echo x > /work/locked/in/f; chmod 000 /work/locked/in /work/locked
python3 -c 'import ctypes; print(ctypes.CDLL(None).shmget(4242, 4096, 0o1666))' > /dev/null
setsid sh -c 'while :; do echo x > /work/respawned; sleep 0.05; done' > /dev/null 2>&1 &
nohup sleep 600 > /dev/null 2>&1 &
chmod 000 /work
"""
LOOK = """
ls -A /work /tmp /dev/shm /dev/mqueue
echo "== sysv"; tail -n +2 /proc/sysvipc/shm
echo "== processes"
for p in /proc/[0-9]*; do [ $p = /proc/$$ ] || { read c < $p/comm && echo $c; }; done
"""


def test_warm_reuse_leaves_no_files_processes_or_shared_memory_of_the_last_check(warm):
    with warm.sandbox("rocq", LIMITS) as first:
        sh(first, LITTER)
    with warm.sandbox("rocq", LIMITS) as second:
        seen = sh(second, LOOK)
    assert second.container_id == first.container_id
    files, rest = seen.stdout.decode().split("== sysv\n")
    shared_memory, processes = rest.split("== processes\n")
    assert sorted(files.split()) == ["/dev/mqueue:", "/dev/shm:", "/tmp:", "/work:"]
    assert shared_memory == ""
    assert processes.split() == ["python3"]  # the agent alone (`ls` and `tail` have exited)


# -- a lost agent is an infra error, never a result ----------------------------------------------


def test_a_container_killed_during_a_run_is_an_infra_error_and_not_reused(warm):
    with warm.sandbox("rocq", LIMITS) as box:
        killer = threading.Timer(1.0, warm.api.kill, args=(box.container_id,))
        killer.start()
        with pytest.raises(AgentLost):
            sh(box, "sleep 20")
        killer.join()
        lost = box.container_id
    with warm.sandbox("rocq", LIMITS) as fresh:
        assert fresh.container_id != lost
        still_serves(fresh)


@pytest.mark.slow
def test_a_check_whose_container_dies_is_retried_on_a_fresh_one(tmp_path):
    settings = Settings(
        backend="docker", isolation="warm", cache=False, retries=1, cache_dir=tmp_path / "cache"
    )
    request = CheckRequest(
        prover="rocq", name="pass_arith.v", content=artifact("rocq", "pass_arith.v")
    )
    with Checker(settings) as checker:  # cold: Rocq's own sandbox path, not its warm worker
        assert checker.check_one(request, cold=True).verdict is Verdict.PASS
        backend = checker.backend_for("rocq")
        # The check and its independent re-check (coqchk) each used a container; both wait idle.
        (idle,) = backend._warm.values()
        for box in idle:
            backend.api.kill(box.container_id)  # as if the agent died between checks
        again = checker.check_one(request, cold=True)
    assert again.verdict is Verdict.PASS and again.provenance.attempts == 2
    assert json.dumps(again.provenance.tools).count("sandbox_agent") == 1


def test_strict_starts_the_next_fresh_container_ahead_and_close_removes_all():
    backend = DockerBackend(
        Settings(backend="docker", isolation="strict"), LockedImages(Settings())
    )
    ids = []
    try:
        for _ in range(3):
            with backend.sandbox("rocq", LIMITS) as box:
                assert sh(box, "ls -A /work /tmp").stdout == b"/tmp:\n\n/work:\n"
                sh(box, "echo x > /work/left")
                ids.append(box.container_id)
        assert len(set(ids)) == 3
        (spare,) = backend._spares.values()  # the fourth is on its way
        ids.append(spare.result().container_id)
    finally:
        backend.close()
    left = [c["Id"] for c in backend.api.containers(all=True, filters={"label": LABEL})]
    assert not set(ids) & set(left)


@pytest.mark.parametrize("isolation", ["strict", "warm"])
def test_strict_makes_a_container_per_sandbox_and_warm_one_for_all(request, isolation):
    backend = request.getfixturevalue(isolation)
    ids = []
    for _ in range(2):
        with backend.sandbox("rocq", LIMITS) as box:
            still_serves(box)
            ids.append(box.container_id)
    assert (ids[0] == ids[1]) is (isolation == "warm")
