"""Local backend: each command is a fresh host process in a fresh temp dir, in its own session.

For development and for machines without Docker. It limits time and address space and kills the
whole process group afterwards, but it is not a security boundary: use the docker backend for
untrusted artifacts.
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from runner.backends.base import BackendInfo, BackendUnavailable, Completed, Limits, checked_relpath
from runner.backends.stream import StreamBuffer, pump

# How runtimes word a failed allocation (OCaml, C, Python, C++).
OUT_OF_MEMORY_SIGNS = (b"out of memory", b"not enough memory", b"cannot allocate memory", b"memoryerror", b"bad_alloc")
BASE_ENV = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC"}


def safe_join(root: Path, relpath: str) -> Path:
    return root / checked_relpath(relpath)


def _limit_address_space(memory_mb: int) -> None:
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    memory_mb: int,
    stdin: bytes | None = None,
) -> Completed:
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # own process group: a timeout kills everything it started
            preexec_fn=lambda: _limit_address_space(memory_mb),
        )
    except FileNotFoundError as exc:
        raise BackendUnavailable(f"{argv[0]} is not installed (not found on PATH)") from exc
    out, err = StreamBuffer(), StreamBuffer()
    readers = [pump(proc.stdout.read1, out), pump(proc.stderr.read1, err)]
    if stdin is not None:
        threading.Thread(target=_feed, args=(proc, stdin), daemon=True).start()
    status: dict[str, object] = {}

    def reap() -> None:
        _, wait_status, usage = os.wait4(proc.pid, 0)
        status.update(wait_status=wait_status, usage=usage)

    waiter = threading.Thread(target=reap, daemon=True)
    waiter.start()
    waiter.join(timeout_s)
    timed_out = waiter.is_alive()
    _kill_group(proc.pid)  # on timeout the command itself; otherwise whatever it left behind
    waiter.join()
    for reader in readers:
        reader.join(5)
    wait_status = int(status["wait_status"])  # type: ignore[arg-type]
    proc.returncode = os.waitstatus_to_exitcode(wait_status)
    usage = status["usage"]
    cpu_ms = int((usage.ru_utime + usage.ru_stime) * 1000)  # type: ignore[attr-defined]
    stdout, stderr = out.take(), err.take()
    killed_by = -proc.returncode if proc.returncode < 0 else None
    # Under RLIMIT_AS an allocation fails; runtimes report it in words rather than by a signal.
    tail = (stdout[-4096:] + stderr[-4096:]).lower()
    out_of_memory = not timed_out and any(sign in tail for sign in OUT_OF_MEMORY_SIGNS)
    return Completed(
        argv=list(argv),
        exit_code=None if timed_out else proc.returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        out_of_memory=out_of_memory,
        signal=killed_by,
        wall_ms=int((time.monotonic() - started) * 1000),
        cpu_ms=cpu_ms,
    )


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, OSError):
        proc.stdin.write(data)
        proc.stdin.close()


class LocalChannel:
    """A long-lived local process, spoken to over its stdin and stdout."""

    def __init__(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], memory_mb: int):
        try:
            self._proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=lambda: _limit_address_space(memory_mb),
            )
        except FileNotFoundError as exc:
            raise BackendUnavailable(f"{argv[0]} is not installed (not found on PATH)") from exc
        self._buffer = StreamBuffer()
        pump(self._proc.stdout.read1, self._buffer)  # type: ignore[union-attr]

    def send(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise EOFError("worker process has exited") from exc

    def read_until(self, marker: bytes, timeout_s: float) -> bytes:
        return self._buffer.read_until(marker, timeout_s)

    def alive(self) -> bool:
        return self._proc.poll() is None

    def close(self) -> None:
        _kill_group(self._proc.pid)
        with contextlib.suppress(Exception):
            self._proc.wait(5)


class LocalSandbox:
    backend = "local"
    isolation = "process"

    def __init__(self, root: Path, limits: Limits):
        self.root = root
        self.limits = limits
        self.env = {**BASE_ENV, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root)}

    def write_file(self, relpath: str, data: bytes) -> None:
        path = safe_join(self.root, relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def read_file(self, relpath: str) -> bytes:
        return safe_join(self.root, relpath).read_bytes()

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> Completed:
        return run_process(
            argv,
            cwd=self.root,
            env={**self.env, **(env or {})},
            timeout_s=timeout_s,
            memory_mb=self.limits.memory_mb,
            stdin=stdin,
        )

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> LocalChannel:
        return LocalChannel(
            argv, cwd=self.root, env={**self.env, **(env or {})}, memory_mb=self.limits.memory_mb
        )


class LocalBackend:
    def __init__(self) -> None:
        self.info = BackendInfo(name="local", isolation="process", tools={"os": platform.platform()})

    def environment(self, image: str, probe: Mapping[str, Sequence[str]]) -> dict[str, object]:
        facts: dict[str, object] = {"kind": "local"}
        with self.sandbox(image, Limits(timeout_s=60, memory_mb=4096)) as box:
            for name, argv in sorted(probe.items()):
                done = box.run(argv, timeout_s=60)
                if done.exit_code != 0:
                    raise BackendUnavailable(
                        f"cannot identify the local {image} install: `{' '.join(argv)}` "
                        f"exited {done.exit_code}: {done.text.strip()[:200]}"
                    )
                facts[name] = done.stdout.decode("utf-8", errors="replace").strip()
        return facts

    @contextlib.contextmanager
    def sandbox(self, image: str, limits: Limits) -> Iterator[LocalSandbox]:
        root = Path(tempfile.mkdtemp(prefix=f"prooflock-{image}-"))
        try:
            yield LocalSandbox(root, limits)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def close(self) -> None:
        pass
