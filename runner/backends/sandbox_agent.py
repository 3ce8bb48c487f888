"""The in-container agent: serves one sandbox's file, run and reset operations as frames.

It uses the standard library only. It is shipped as `python3 -I -S -c <this source>` and runs as the
container's main process (PID 1), as the check user. So a check costs a few frames over the attach
stream, not a `docker exec` per operation.

Frame: a 4-byte big-endian length, then a 4-byte header length, a JSON header, and the blobs. The
blobs are file data, stdin, stdout, stderr; the header lists their sizes. The host sends requests.
The agent answers each with one reply carrying the request's `seq`.

Soundness:
- checked programs run as the same uid as the agent. So the agent makes itself non-dumpable (no
  ptrace, no /proc/1/fd, /proc/1/mem). It hands children fresh pipes with every other fd closed,
  so only the agent can write to its stdout.
- as PID 1 it receives no signal from inside the container that it has no handler for (SIGKILL
  and SIGSTOP included). It handles only SIGCHLD.
- paths are opened component by component without following symlinks. So a planted link cannot
  turn a file write into a write to the agent's own stdout.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import signal
import stat
import struct
import subprocess
import sys
import time
from typing import Any

PROTOCOL = 1
WORKDIR = "/work"
WIPED = (WORKDIR, "/tmp", "/dev/shm", "/dev/mqueue")
OOM_COUNTERS = ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events")
PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3
IPC_RMID = 0
SYSV_KINDS = ("shm", "msg", "sem")
DRAIN_S = 2.0  # after the command exits (its group killed), how long its pipes may stay open
MAX_REQUEST = 1 << 30
HEAD = struct.Struct(">II")

Header = dict[str, Any]


def pack(header: Header, *blobs: bytes) -> bytes:
    head = json.dumps({**header, "sizes": [len(b) for b in blobs]}, separators=(",", ":")).encode()
    return b"".join([HEAD.pack(4 + len(head) + sum(map(len, blobs)), len(head)), head, *blobs])


def unpack(body: bytes) -> tuple[Header, list[bytes]]:
    """A frame's header and blobs, from the bytes after its length prefix."""
    (head_len,) = struct.unpack_from(">I", body)
    header = json.loads(body[4 : 4 + head_len])
    if not isinstance(header, dict) or not isinstance(header.get("sizes"), list):
        raise ValueError("malformed frame header")
    blobs, at = [], 4 + head_len
    for size in header["sizes"]:
        if not isinstance(size, int) or size < 0 or at + size > len(body):
            raise ValueError("malformed frame sizes")
        blobs.append(body[at : at + size])
        at += size
    if at != len(body):
        raise ValueError("frame has trailing bytes")
    return header, blobs


# -- process hygiene ---------------------------------------------------------------------------


def make_undumpable() -> None:
    """No ptrace attach, no /proc/<pid>/fd or mem for processes of the same uid."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError("cannot make the agent non-dumpable")


def oom_kills() -> int:
    """The container's OOM-kill count (cgroup v1 memory.oom_control, or v2 memory.events)."""
    for path in OOM_COUNTERS:
        try:
            with open(path, "rb") as counters:
                for line in counters:
                    name, _, value = line.partition(b" ")
                    if name == b"oom_kill":
                        return int(value)
        except OSError:
            continue
    return 0


def reap() -> dict[int, tuple[int, Any]]:
    """Wait for every exited child (ours, and orphans handed to PID 1): pid -> (status, rusage)."""
    done: dict[int, tuple[int, Any]] = {}
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done[pid] = (status, usage)


def reap_one(pid: int) -> tuple[int, Any] | None:
    """(status, rusage) of child `pid` once it has exited.

    Orphans handed to PID 1 meanwhile stay zombies until the command ends. They hold their pids, so
    a fork bomb runs out of them.
    """
    found, status, usage = os.wait4(pid, os.WNOHANG)
    return (status, usage) if found == pid else None


def bury_group(pgid: int) -> None:
    """Kill what the command left in its group, and reap it.

    SIGKILL lands asynchronously. A member that dies a moment after a plain reap would stay a zombie
    the next command could see.
    """
    deadline = time.monotonic() + DRAIN_S
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL)  # zombies count as members until reaped
        except OSError:
            return
        reap()
        if time.monotonic() > deadline:
            return  # a member stuck in the kernel: reset() still clears it before the next check
        time.sleep(0.002)


def others() -> list[int]:
    """Processes of our uid other than ourselves, zombies included.

    A process killed a moment ago is a zombie until we reap it. It must not be left for the next
    check to see.
    """
    me, uid, found = os.getpid(), os.getuid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as status:
                fields = dict(line.split(b":", 1) for line in status if b":" in line)
        except OSError:
            continue
        if int(fields.get(b"Uid", b"-1").split()[0]) == uid:
            found.append(int(name))
    return found


# -- files ---------------------------------------------------------------------------------------


def _parts(relpath: str) -> list[str]:
    parts = relpath.split("/")
    if not relpath or relpath.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"unsafe file name {relpath!r}")
    return parts


def _open_dir(parts: list[str], create: bool) -> int:
    """An fd of WORKDIR/parts..., never following a symlink."""
    fd = os.open(WORKDIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_regular(name: str, dir_fd: int, flags: int) -> int:
    fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666, dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{name} is not a regular file")
    os.set_blocking(fd, True)
    return fd


def write_file(relpath: str, data: bytes) -> None:
    *dirs, name = _parts(relpath)
    dir_fd = _open_dir(dirs, create=True)
    try:
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISREG(os.lstat(name, dir_fd=dir_fd).st_mode):
                os.unlink(name, dir_fd=dir_fd)  # a link or fifo left in its place is replaced
        fd = _open_regular(name, dir_fd, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    finally:
        os.close(dir_fd)
    with open(fd, "wb") as out:
        out.write(data)


def read_file(relpath: str) -> bytes:
    *dirs, name = _parts(relpath)
    dir_fd = _open_dir(dirs, create=False)
    try:
        fd = _open_regular(name, dir_fd, os.O_RDONLY)
    finally:
        os.close(dir_fd)
    with open(fd, "rb") as source:
        return source.read()


def _remove(path: str) -> None:
    info = os.lstat(path)
    if stat.S_ISDIR(info.st_mode):
        os.chmod(path, 0o700)  # a check may have made its directory unreadable
        for name in os.listdir(path):
            _remove(os.path.join(path, name))
        os.rmdir(path)
    else:
        os.unlink(path)


def _sysv_ids(kind: str) -> list[int]:
    """Ids of the IPC namespace's SysV objects of one kind (its /proc table's second column)."""
    try:
        with open(f"/proc/sysvipc/{kind}", "rb") as table:
            return [int(line.split()[1]) for line in table.readlines()[1:]]
    except OSError:
        return []


def _remove_ipc() -> list[str]:
    """Remove SysV shared memory, queues and semaphores; return the kinds some object of is left.

    They outlive their processes, and shared memory stays charged to the container.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    removers = {"shm": libc.shmctl, "msg": libc.msgctl, "sem": libc.semctl}
    for kind in SYSV_KINDS:
        for ident in _sysv_ids(kind):
            if kind == "sem":
                removers[kind](ident, 0, IPC_RMID, None)
            else:
                removers[kind](ident, IPC_RMID, None)
    return [f"SysV {kind}" for kind in SYSV_KINDS if _sysv_ids(kind)]


# -- operations ----------------------------------------------------------------------------------


class Agent:
    def __init__(self) -> None:
        self.env = dict(os.environ)  # the container's environment, as `docker exec` would give
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # as PID 1: not deliverable from inside

    def drain_wakeups(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self.wake_r, 4096):
                pass

    def run(self, header: Header, blobs: list[bytes]) -> tuple[Header, list[bytes]]:
        argv, cap = [str(a) for a in header["argv"]], int(header["cap"])
        stdin = blobs[0] if header.get("stdin") else None
        before = oom_kills()
        started = time.monotonic()
        deadline = started + float(header["timeout_s"])
        try:
            proc = subprocess.Popen(
                argv,
                cwd=WORKDIR,
                env={**self.env, **{str(k): str(v) for k, v in header["env"].items()}},
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                close_fds=True,  # the agent's own stdin and stdout stay out of reach
                start_new_session=True,  # its own group: killed whole once it exits
            )
        except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
            code = 126 if isinstance(exc, PermissionError) else 127  # as a shell reports them
            failed = {"exit_code": code, "signal": None, "timed_out": False, "oom": False}
            message = f"{argv[0]}: {exc.strerror or exc}\n".encode()
            return {**failed, "cpu_ms": 0, "wall_ms": 0, "truncated": False}, [b"", message]
        assert proc.stdout is not None and proc.stderr is not None
        outputs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
        selector = selectors.DefaultSelector()
        for fd in outputs:
            selector.register(fd, selectors.EVENT_READ)
        selector.register(self.wake_r, selectors.EVENT_READ)
        pending = memoryview(stdin or b"")
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            if pending:
                selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        exited: tuple[int, Any] | None = None
        truncated = timed_out = False
        drain_until = 0.0
        while True:
            if exited is None and (exited := reap_one(proc.pid)) is not None:
                bury_group(proc.pid)
                drain_until = time.monotonic() + DRAIN_S
            now = time.monotonic()
            if exited is None and not timed_out and now >= deadline:
                timed_out = True
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
            reading = [fd for fd in outputs if fd in selector.get_map()]
            if exited is not None and (not reading or now >= drain_until):
                break
            # SIGCHLD (through the wakeup fd) ends the wait as soon as the command exits.
            until = drain_until if exited is not None else now + 0.1 if timed_out else deadline
            for key, _ in selector.select(max(0.0, min(until - now, 1.0))):
                fd = int(key.fd)
                if fd == self.wake_r:
                    self.drain_wakeups()
                elif fd in outputs:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        selector.unregister(fd)
                    room = cap - len(outputs[fd])
                    truncated = truncated or len(chunk) > room
                    outputs[fd] += chunk[: max(room, 0)]
                elif proc.stdin is not None:
                    try:
                        pending = pending[os.write(fd, pending[:65536]) :]
                    except OSError:  # it closed its stdin: the rest is dropped
                        pending = memoryview(b"")
                    if not pending:
                        selector.unregister(fd)
                        proc.stdin.close()
        selector.close()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        status, usage = exited
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code  # reaped here: Popen must not wait for it again
        killed_by = -code if code < 0 else None
        abnormal = killed_by is not None or code >= 128
        stdout, stderr = outputs.values()
        return {
            "exit_code": None if timed_out else code,
            "signal": killed_by,
            "timed_out": timed_out,
            "oom": not timed_out and abnormal and oom_kills() > before,
            "cpu_ms": int((usage.ru_utime + usage.ru_stime) * 1000),
            "wall_ms": int((time.monotonic() - started) * 1000),
            "truncated": truncated,
        }, [bytes(stdout), bytes(stderr)]

    def reset(self) -> Header:
        """Kill every other process of our uid and empty the writable dirs."""
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)  # every process we may signal, but not ourselves
            reap()
            left = others()
            if not left:
                break
            if time.monotonic() > deadline:
                return {"ok": False, "error": f"processes {left} survived SIGKILL"}
            time.sleep(0.005)
        self.drain_wakeups()
        ipc_left = _remove_ipc()
        with contextlib.suppress(OSError):
            os.chmod(WORKDIR, 0o700)
        for root in WIPED:
            if not os.path.isdir(root):
                continue
            for name in os.listdir(root):
                with contextlib.suppress(OSError):
                    _remove(os.path.join(root, name))
        litter = ipc_left + [root for root in WIPED if os.path.isdir(root) and os.listdir(root)]
        return {"ok": not litter, "error": f"cannot empty {litter}" if litter else None}

    def handle(self, header: Header, blobs: list[bytes]) -> tuple[Header, list[bytes]]:
        op = header.get("op")
        try:
            if op == "write":
                write_file(str(header["path"]), blobs[0])
                return {"ok": True}, []
            if op == "read":
                return {"ok": True}, [read_file(str(header["path"]))]
            if op == "run":
                return self.run(header, blobs)
            if op == "reset":
                return self.reset(), []
            return {"error": f"unknown operation {op!r}"}, []
        except Exception as exc:  # noqa: BLE001 - the host decides what a failed operation means
            return {"error": f"{type(exc).__name__}: {exc}"}, []


class Wire:
    """Frames over fds 0 and 1, waking for SIGCHLD while idle to reap orphans."""

    def __init__(self, agent: Agent):
        self.agent = agent
        self.buffer = bytearray()

    def send(self, header: Header, blobs: list[bytes]) -> None:
        view = memoryview(pack(header, *blobs))
        while view:
            view = view[os.write(1, view) :]

    def receive(self) -> tuple[Header, list[bytes]] | None:
        selector = selectors.DefaultSelector()
        selector.register(0, selectors.EVENT_READ)
        selector.register(self.agent.wake_r, selectors.EVENT_READ)
        try:
            while True:
                if len(self.buffer) >= 4:
                    (size,) = struct.unpack_from(">I", self.buffer)
                    if size > MAX_REQUEST:
                        raise ValueError("request too large")
                    if len(self.buffer) >= 4 + size:
                        body = bytes(self.buffer[4 : 4 + size])
                        del self.buffer[: 4 + size]
                        return unpack(body)
                for key, _ in selector.select():
                    if key.fd == 0:
                        chunk = os.read(0, 1 << 20)
                        if not chunk:
                            return None
                        self.buffer += chunk
                    else:
                        self.agent.drain_wakeups()
                        reap()
        finally:
            selector.close()


def main() -> int:
    try:
        make_undumpable()
        os.chdir(WORKDIR)
    except OSError as exc:
        print(f"prooflock agent cannot start: {exc}", file=sys.stderr)
        return 3
    agent = Agent()
    wire = Wire(agent)
    wire.send({"agent": "prooflock", "protocol": PROTOCOL, "pid": os.getpid()}, [])
    while (request := wire.receive()) is not None:
        header, blobs = request
        reply, out = agent.handle(header, blobs)
        wire.send({**reply, "seq": header.get("seq")}, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
