"""Local backend: each command is a fresh process on this machine, in the sandbox's work dir.

With bubblewrap (bubblewrap.py), every command and every long-lived server runs in its own small
sandbox (isolation `bubblewrap`). It has a read-only system, the work dir at /work, a private /tmp,
no network, no host home, and its own pid namespace.

Without it, commands are plain host processes in their own session. That happens when bwrap is
missing, user namespaces are forbidden, or PROOFLOCK_LOCAL_SANDBOX=off. It is no security boundary:
isolation `unsandboxed`, said once on stderr. PROOFLOCK_LOCAL_SANDBOX=require refuses to check
unsandboxed.

Memory: with a memory cgroup (cgroups.py) the limit is the cgroup's, with no swap. The kit reads the
cgroup's OOM-kill count from outside and reports such a death as `out_of_memory`. Inside, a warm
server reads the same count read-only where a container has it, as in docker. Without a cgroup the
limit is RLIMIT_AS, and a failed allocation is the program's own error. The stack's soft limit is
its hard limit either way. So memory bounds a deep recursion, not the shell's `ulimit -s`. The time
limit kills everything a command started.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import os
import platform
import resource
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from runner.backends import bubblewrap, cgroups
from runner.backends.base import BackendInfo, Completed, checked_relpath
from runner.backends.bubblewrap import Bubblewrap
from runner.backends.cgroups import Hierarchy, MemoryCgroup, find_hierarchy
from runner.backends.stream import StreamBuffer, pump
from runner.core.errors import BackendUnavailable, InfraFailure, UserError
from runner.core.messages import Notify, notify_stderr
from runner.core.models import Limits
from runner.core.settings import Settings

BASE_ENV = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC"}
SANDBOX_SETTING = "PROOFLOCK_LOCAL_SANDBOX"
SANDBOX_MODES = ("auto", "off", "require")
# bwrap's --die-with-parent follows the *thread* that started it (PR_SET_PDEATHSIG). So servers
# start from this one long-lived thread, and outlive the request thread that asked for them.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prooflock-spawn")
_warned: set[str] = set()
# A mount may appear or vanish while bwrap sets up its view (another runtime's container starting or
# stopping). That fails this start only. The command never ran, so it starts again.
MOUNT_FAILED = "Can't bind mount"
MOUNT_ATTEMPTS = 3


class _MountRace(BackendUnavailable):
    """bwrap could not set up its mounts; the command did not run."""


@dataclass(frozen=True)
class Confinement:
    """How this machine runs local commands: in a sandbox or not, and how memory is limited."""

    wrapper: Bubblewrap | None
    cgroups: Hierarchy | None

    @property
    def isolation(self) -> str:
        return "bubblewrap" if self.wrapper is not None else "unsandboxed"

    @property
    def memory_limit(self) -> str:
        return self.cgroups.label if self.cgroups is not None else "rlimit_as"

    @property
    def stack_limit(self) -> str:
        """The stack's limit inside: the hard one, the most the host lets a bare tool have."""
        hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
        return "unlimited" if hard == resource.RLIM_INFINITY else f"{hard // 1024} KiB"


def sandbox_mode(settings: Settings | None = None) -> str:
    """The environment variable when set, else the setting (which a daemon receives from its client).

    The variable is also read after the settings were made.
    """
    default = settings.local_sandbox if settings is not None else "auto"
    mode = os.environ.get(SANDBOX_SETTING, default).strip().lower() or "auto"
    if mode not in SANDBOX_MODES:
        raise UserError(f"{SANDBOX_SETTING}={mode} is not one of {', '.join(SANDBOX_MODES)}")
    return mode


def confine(settings: Settings, notify: Notify) -> Confinement:
    """This machine's confinement under the current setting; raises InfraFailure for `require`."""
    # Never visible inside, even below a directory that is (and never bound as a tool's).
    private = {Path.home(), settings.cache_dir.expanduser().absolute(), Path("/tmp")}
    hidden = tuple(sorted({*private, Path(tempfile.gettempdir())}))
    mode = sandbox_mode(settings)
    confinement, why = _detect(mode, hidden, os.environ.get("PATH", ""))
    why = " ".join(why.split())  # one line, whatever a failing probe printed
    if confinement.wrapper is None:
        if mode == "require":
            raise InfraFailure(f"{SANDBOX_SETTING}=require, but {why}")
        _warn_once(
            notify,
            f"local checks run unsandboxed: {why}; they can read and write this machine's files "
            "(install bubblewrap, or use the docker backend, for untrusted artifacts)",
        )
    return confinement


@functools.lru_cache(maxsize=8)
def _detect(mode: str, hidden: tuple[Path, ...], path: str) -> tuple[Confinement, str]:
    """The confinement and why, probed by starting a sandbox.

    It is probed once per process (per setting, hidden paths and PATH).
    """
    cgroups, _ = find_hierarchy()
    if mode == "off":
        return Confinement(None, cgroups), f"{SANDBOX_SETTING}=off"
    wrapper, why = bubblewrap.locate(hidden)
    return Confinement(wrapper, cgroups), why


def _warn_once(notify: Notify, message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        notify(message)


@dataclass
class Started:
    """A command that was started: its process, its cgroup, and bwrap's status pipe."""

    proc: subprocess.Popen[bytes]
    cgroup: MemoryCgroup | None
    status_fd: int | None  # read end of bwrap's --json-status-fd

    def status(self) -> bytes:
        """What bwrap reported (non-blocking: it writes before it exits); closes the pipe."""
        if self.status_fd is None:
            return b""
        fd, self.status_fd = self.status_fd, None
        os.set_blocking(fd, False)
        data = b""
        try:
            while chunk := os.read(fd, 65536):
                data += chunk
        except BlockingIOError:
            pass
        finally:
            os.close(fd)
        return data

    def cleanup(self) -> None:
        self.status()
        if self.cgroup is not None:
            self.cgroup.remove()


def start(
    argv: Sequence[str],
    confinement: Confinement,
    *,
    work: Path,
    env: Mapping[str, str],
    limits: Limits,
    stdin: bool,
    merge_stderr: bool = False,
) -> Started:
    """Start `argv` confined; raises BackendUnavailable when it cannot start at all."""
    if not _installed(argv[0], work, env.get("PATH")):
        raise BackendUnavailable(f"{argv[0]} is not installed (not found on PATH)")
    cgroup = None
    if confinement.cgroups is not None:
        try:
            cgroup = confinement.cgroups.create(limits.memory_mb)
        except OSError as exc:
            raise BackendUnavailable(f"cannot create a memory cgroup: {exc}") from None
    command, status = list(argv), None
    if confinement.wrapper is not None:
        status = os.pipe()
        command = confinement.wrapper.command(
            argv,
            work_dir=work,
            tmpfs_mb=limits.tmpfs_mb,
            status_fd=status[1],
            counters=cgroup.counters() if cgroup is not None else (),
        )

    def prepare() -> None:  # in the child, before exec
        if cgroup is not None:
            cgroup.join()
        else:
            limit = limits.memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        # A bare tool may take its hard limit (`ulimit -s unlimited`). Under a shell's 8 MB soft
        # limit, coqc calls a deep but legal proof a "Stack overflow.".
        hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
        resource.setrlimit(resource.RLIMIT_STACK, (hard, hard))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    try:
        proc = subprocess.Popen(
            command,
            cwd=work,
            env=dict(env),
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            start_new_session=True,  # own process group: a timeout kills everything it started
            preexec_fn=prepare,
            pass_fds=(status[1],) if status else (),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        if status is not None:
            os.close(status[0])
        if cgroup is not None:
            cgroup.remove()
        raise BackendUnavailable(f"cannot start {argv[0]}: {exc}") from exc
    finally:
        if status is not None:
            os.close(status[1])
    return Started(proc, cgroup, status[0] if status else None)


def _installed(program: str, work: Path, path: str | None) -> bool:
    """Whether `program` is installed.

    Checked here, since inside the sandbox a missing program looks like a failing one.
    """
    if "/" in program:
        return os.access(work / program, os.X_OK)  # (an absolute `program` replaces `work`)
    return shutil.which(program, path=path) is not None


def run_process(
    argv: Sequence[str],
    confinement: Confinement,
    *,
    work: Path,
    env: Mapping[str, str],
    timeout_s: float,
    limits: Limits,
    stdin: bytes | None = None,
) -> Completed:
    clock = time.monotonic()
    for attempt in range(1, MOUNT_ATTEMPTS + 1):
        started = start(
            argv, confinement, work=work, env=env, limits=limits, stdin=stdin is not None
        )
        try:
            return _wait(started, argv, confinement, timeout_s, stdin, clock)
        except _MountRace as exc:
            if attempt == MOUNT_ATTEMPTS:
                raise BackendUnavailable(str(exc)) from None
        finally:
            started.cleanup()
    raise AssertionError("unreachable")


def _wait(
    started: Started,
    argv: Sequence[str],
    confinement: Confinement,
    timeout_s: float,
    stdin: bytes | None,
    clock: float,
) -> Completed:
    proc = started.proc
    stdout, stderr = cast(io.BufferedReader, proc.stdout), cast(io.BufferedReader, proc.stderr)
    out, err = StreamBuffer(), StreamBuffer()
    readers = [pump(stdout.read1, out), pump(stderr.read1, err)]
    if stdin is not None:
        threading.Thread(target=_feed, args=(proc, stdin), daemon=True).start()
    reaped: list[tuple[int, resource.struct_rusage]] = []

    def reap() -> None:
        _, wait_status, usage = os.wait4(proc.pid, 0)
        reaped.append((wait_status, usage))

    waiter = threading.Thread(target=reap, daemon=True)
    waiter.start()
    waiter.join(timeout_s)
    timed_out = waiter.is_alive()
    _kill_group(proc.pid)  # on timeout the command itself; otherwise whatever it left behind
    waiter.join()
    if started.cgroup is not None:
        started.cgroup.kill_all()  # also what left the process group (setsid, double fork)
    for reader in readers:
        reader.join(5)
    wait_status, usage = reaped[0]
    proc.returncode = os.waitstatus_to_exitcode(wait_status)
    cpu_ms = int((usage.ru_utime + usage.ru_stime) * 1000)
    code = proc.returncode
    # bwrap passes on a signal death as 128 + signal, as a shell (and the docker backend) does.
    sandboxed = confinement.wrapper is not None and code >= 0
    killed_by = (code - 128 if code > 128 else None) if sandboxed else (-code if code < 0 else None)
    out_of_memory = (
        started.cgroup is not None
        and not timed_out
        and code != 0
        and started.cgroup.out_of_memory(killed=killed_by == signal.SIGKILL)
    )
    ran = bubblewrap.started(started.status()) if sandboxed else True
    if not ran and not timed_out and not out_of_memory:
        said = err.take().decode(errors="replace").strip().splitlines()
        failure = _MountRace if said and MOUNT_FAILED in said[-1] else BackendUnavailable
        raise failure(f"the sandbox did not start: {said[-1] if said else code}")
    return Completed(
        argv=list(argv),
        exit_code=None if timed_out else code,
        stdout=out.take(),
        stderr=err.take(),
        timed_out=timed_out,
        out_of_memory=out_of_memory,
        signal=killed_by,
        wall_ms=int((time.monotonic() - clock) * 1000),
        cpu_ms=cpu_ms,
    )


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, OSError):
        proc.stdin.write(data)
        proc.stdin.close()


class LocalChannel:
    """A long-lived local process (confined like a command), spoken to over stdin and stdout."""

    def __init__(self, started: Started):
        self._started = started
        self._proc = started.proc
        self._buffer = StreamBuffer()
        pump(cast(io.BufferedReader, self._proc.stdout).read1, self._buffer)

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

    def oom_kills(self) -> int | None:
        """The server cgroup's OOM-kill count, read by the kit from outside the sandbox.

        A forked check's death counts too. None without a cgroup.
        """
        cgroup = self._started.cgroup
        return cgroup.oom_kills() if cgroup is not None else None

    def close(self) -> None:
        _kill_group(self._proc.pid)
        with contextlib.suppress(Exception):
            self._proc.wait(5)
        self._started.cleanup()


class LocalSandbox:
    backend = "local"

    def __init__(self, root: Path, limits: Limits, confinement: Confinement):
        self.root = root
        self.limits = limits
        self.confinement = confinement
        self.isolation = confinement.isolation
        wrapper = confinement.wrapper
        self._owner = wrapper.owner if wrapper is not None else None
        home = bubblewrap.WORKDIR if wrapper is not None else str(root)
        self.env = {**BASE_ENV, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home}

    def write_file(self, relpath: str, data: bytes) -> None:
        """Write a file as the kit, never through a link the sandboxed commands left in the work dir."""
        *parents, name = checked_relpath(relpath).parts
        try:
            directory = _open_beneath(self.root, parents, create=True, owner=self._owner)
            try:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=directory)
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                fd = os.open(name, flags, 0o644, dir_fd=directory)
            finally:
                os.close(directory)
            with open(fd, "wb") as handle:
                if self._owner is not None:
                    os.fchown(fd, self._owner, self._owner)
                handle.write(data)
        except OSError as exc:
            raise BackendUnavailable(f"cannot write {relpath} in the sandbox: {exc}") from None

    def read_file(self, relpath: str) -> bytes:
        """A regular file of the work dir; FileNotFoundError for anything else (also a link)."""
        *parents, name = checked_relpath(relpath).parts
        try:
            directory = _open_beneath(self.root, parents, create=False, owner=None)
            try:
                # non-blocking: a fifo planted in the file's place would wait for a writer
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
                fd = os.open(name, flags, dir_fd=directory)
            finally:
                os.close(directory)
        except OSError:
            raise FileNotFoundError(relpath) from None
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise FileNotFoundError(relpath)
            os.set_blocking(fd, True)
            return handle.read()

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
            self.confinement,
            work=self.root,
            env={**self.env, **(env or {})},
            timeout_s=timeout_s,
            limits=self.limits,
            stdin=stdin,
        )

    def limit_cpus(self, cpus: int) -> None:
        """Nothing to hold: locally, limits are memory and processes, never CPUs."""

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> LocalChannel:
        launch = functools.partial(
            start,
            argv,
            self.confinement,
            work=self.root,
            env={**self.env, **(env or {})},
            limits=self.limits,
            stdin=True,
            merge_stderr=True,
        )
        return LocalChannel(_SPAWNER.submit(launch).result())


def _open_beneath(root: Path, parts: Sequence[str], *, create: bool, owner: int | None) -> int:
    """An fd of `root/parts...`, following no symbolic link; missing dirs made when `create`."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    for part in parts:
        made = False
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                    made = True
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        finally:
            os.close(fd)
        fd = child
        if made and owner is not None:
            os.fchown(fd, owner, owner)
    return fd


_live_roots: dict[Path, int] = {}  # open sandboxes' work dirs, with the pid that made them


@atexit.register
def _remove_leftovers() -> None:
    """At exit, remove what sandboxes nobody closed left behind (an unclosed server's).

    That is their processes and cgroup, then their work dir. After a kill -9, the next kit removes
    the cgroups.
    """
    cgroups.remove_leftovers()
    for root, pid in list(_live_roots.items()):
        if pid == os.getpid():
            _remove_tree(root)


def _remove_tree(root: Path) -> None:
    """Remove a work dir, even one whose commands left directories without write permission.

    Nothing outside `root` is ever touched, not even its parent (the shared temp dir).
    """

    def unlock(_func: object, path: str, _error: object) -> None:
        target = Path(path)
        if target == root or not target.is_relative_to(root) or target.parent.is_symlink():
            return
        with contextlib.suppress(OSError):
            os.chmod(target.parent, 0o700)  # root itself, or a directory inside it
            if target.is_dir() and not target.is_symlink():
                os.chmod(target, 0o700)
                shutil.rmtree(target, onerror=unlock)
            else:
                target.unlink()

    if root.is_dir() and not root.is_symlink():
        shutil.rmtree(root, onerror=unlock)


def _identify(box: LocalSandbox, image: str, argv: Sequence[str]) -> str:
    """What one probe command prints; raises InfraFailure when it cannot say."""
    try:
        done = box.run(argv, timeout_s=60)
    except BackendUnavailable as exc:
        raise InfraFailure(f"cannot identify the local {image} install: {exc}") from None
    if done.exit_code != 0:
        raise InfraFailure(
            f"cannot identify the local {image} install: `{' '.join(argv)}` "
            f"exited {done.exit_code}: {done.text.strip()[:200]}"
        )
    return done.stdout.decode("utf-8", errors="replace").strip()


class LocalBackend:
    def __init__(self, settings: Settings, notify: Notify | None = None):
        self.confinement = confinement = confine(settings, notify or notify_stderr)
        tools = {
            "os": platform.platform(),
            "memory_limit": confinement.memory_limit,
            "stack_limit": confinement.stack_limit,
        }
        if confinement.wrapper is not None:
            tools["sandbox"] = confinement.wrapper.version
        self.info = BackendInfo(
            name="local",
            isolation=confinement.isolation,
            tools=tools,
            private_scratch=confinement.wrapper is not None,
        )

    def environment(self, image: str, probe: Mapping[str, Sequence[str]]) -> dict[str, object]:
        names = sorted(probe)
        # At once: each starts its own sandbox, a third of a second of a kit's first check when
        # they ran one after another.
        with (
            self.sandbox(image, Limits(timeout_s=60, memory_mb=4096)) as box,
            ThreadPoolExecutor(max(1, len(names))) as at_once,
        ):
            said = list(at_once.map(lambda name: _identify(box, image, probe[name]), names))
        return {"kind": "local", **dict(zip(names, said, strict=True))}

    @contextlib.contextmanager
    def sandbox(self, image: str, limits: Limits) -> Iterator[LocalSandbox]:
        root = Path(tempfile.mkdtemp(prefix=f"prooflock-{image}-"))
        _live_roots[root] = os.getpid()
        try:
            wrapper = self.confinement.wrapper
            if wrapper is not None and wrapper.owner is not None:
                os.chown(root, wrapper.owner, wrapper.owner)
            yield LocalSandbox(root, limits, self.confinement)
        finally:
            _live_roots.pop(root, None)
            _remove_tree(root)

    def close(self) -> None:
        pass
