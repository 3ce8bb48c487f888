"""Memory cgroups for local commands: the kernel enforces the limit and says when it OOM-killed.

Each command (and each long-lived server) gets its own cgroup below the kit's own one. It uses the
v1 memory controller (as root), or a delegated v2 subtree. The cgroup has the request's memory limit
and no swap. Whether it ran out of memory is read from the cgroup's OOM-kill counter, never from
what the program printed.

Cgroups are named `prooflock-<kit pid>-<n>`. So ones left by a kit that crashed are recognised:
their pid is gone. The next kit removes them when it starts.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PREFIX = "prooflock"
OURS = re.compile(rf"^{PREFIX}-(\d+)-\w+$")
# How long a cgroup may take to empty after its processes were killed (exiting, being reaped).
DRAIN_S = 5.0
# Where a container sees its own cgroup's OOM-kill count (v1, v2): a sandbox sees it there too.
INSIDE_COUNTER = {1: "/sys/fs/cgroup/memory/memory.oom_control", 2: "/sys/fs/cgroup/memory.events"}
# And its memory limit, so a worker can pace its own garbage collection under it.
LIMIT_FILE = {1: "memory.limit_in_bytes", 2: "memory.max"}
INSIDE_LIMIT = {1: "/sys/fs/cgroup/memory/memory.limit_in_bytes", 2: "/sys/fs/cgroup/memory.max"}


@dataclass(frozen=True)
class MemoryCgroup:
    """One command's cgroup. `join` runs in the child between fork and exec."""

    path: Path
    version: int

    def join(self) -> None:
        fd = os.open(self.path / "cgroup.procs", os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)

    @property
    def counter(self) -> Path:
        """The file holding the OOM-kill count."""
        return self.path / ("memory.events" if self.version == 2 else "memory.oom_control")

    def counters(self) -> list[tuple[Path, str]]:
        """(host file, path inside) of the OOM-kill count and the limit, for read-only binds."""
        limit = self.path / LIMIT_FILE[self.version]
        return [(self.counter, INSIDE_COUNTER[self.version]), (limit, INSIDE_LIMIT[self.version])]

    def oom_kills(self) -> int | None:
        """How many processes the kernel OOM-killed here; None on old v1 kernels (no count)."""
        match = re.search(r"^oom_kill (\d+)$", _read(self.counter), re.MULTILINE)
        return int(match[1]) if match else None

    def out_of_memory(self, *, killed: bool) -> bool:
        """Whether the kernel OOM-killed a process here.

        `killed`: the command died of SIGKILL. It is used only on old v1 kernels without an oom_kill
        count, together with the limit's hit count.
        """
        kills = self.oom_kills()
        if kills is not None:
            return kills > 0
        return killed and int(_read(self.path / "memory.failcnt") or 0) > 0

    def pids(self) -> list[int]:
        return [int(line) for line in _read(self.path / "cgroup.procs").split()]

    def kill_all(self) -> None:
        """SIGKILL every process in the cgroup (a check's leftovers, a server), until it is empty."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                (self.path / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + DRAIN_S
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> None:
        _live.discard(self)
        self.kill_all()
        deadline = time.monotonic() + DRAIN_S
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:  # EBUSY while killed processes finish exiting
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    return  # left for the stale sweep of a later kit
                time.sleep(0.01)


@dataclass(frozen=True)
class Hierarchy:
    """Where this kit makes its cgroups: its own cgroup, in the v1 memory or the v2 hierarchy."""

    version: int
    base: Path

    @property
    def label(self) -> str:
        return f"cgroup v{self.version}"

    def create(self, memory_mb: int) -> MemoryCgroup:
        """A fresh cgroup limited to `memory_mb` with no swap; raises OSError if that fails."""
        path = self.base / f"{PREFIX}-{os.getpid()}-{next(_serial)}"
        path.mkdir()
        group = MemoryCgroup(path, self.version)
        _live.add(group)
        limit = str(memory_mb * 1024 * 1024)
        try:
            if self.version == 2:
                (path / "memory.max").write_text(limit)
                _write_if_present(path / "memory.swap.max", "0")
            else:
                (path / "memory.limit_in_bytes").write_text(limit)
                # memsw (memory + swap) exists only with swap accounting; else keep out of swap.
                if not _write_if_present(path / "memory.memsw.limit_in_bytes", limit):
                    _write_if_present(path / "memory.swappiness", "0")
        except OSError:
            group.remove()
            raise
        return group

    def remove_stale(self) -> None:
        """Remove cgroups left by kits whose process is gone (killed before they could clean up)."""
        with contextlib.suppress(OSError):
            for entry in self.base.iterdir():
                match = OURS.match(entry.name)
                if match and int(match[1]) != os.getpid() and not _pid_alive(int(match[1])):
                    MemoryCgroup(entry, self.version).remove()


_serial = itertools.count(1)
_live: set[MemoryCgroup] = set()  # made by this process and not removed yet


def remove_leftovers() -> None:
    """Remove what this process made and did not remove (at exit: servers nobody closed)."""
    for group in list(_live):
        if group.path.name.startswith(f"{PREFIX}-{os.getpid()}-"):  # not in a forked child
            group.remove()


def find_hierarchy() -> tuple[Hierarchy | None, str]:
    """The hierarchy this kit may make memory cgroups in, or None and why not."""
    try:
        memberships = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError as exc:
        return None, f"cannot read this process's cgroups: {exc}"
    v1_path = v2_path = None
    for line in memberships:
        number, controllers, path = line.split(":", 2)
        if number == "0" and not controllers:
            v2_path = path
        elif "memory" in controllers.split(","):
            v1_path = path
    reasons = []
    if v2_path is not None and (mount := _mount(mounts, "cgroup2", None)) is not None:
        base = _inside(mount, v2_path)
        if "memory" in _read(base / "cgroup.controllers").split():
            hierarchy, reason = _delegated_v2(base)
            if hierarchy is not None:
                return _usable(hierarchy)
            reasons.append(reason)
    if v1_path is not None and (mount := _mount(mounts, "cgroup", "memory")) is not None:
        return _usable(Hierarchy(1, _inside(mount, v1_path)))
    return None, "; ".join(reasons) or "no cgroup memory controller is available"


def _usable(hierarchy: Hierarchy) -> tuple[Hierarchy | None, str]:
    """`hierarchy` if a cgroup can be made, limited and removed there, else None and why."""
    hierarchy.remove_stale()
    try:
        hierarchy.create(64).remove()
    except OSError as exc:
        return None, f"cannot create a memory cgroup in {hierarchy.base}: {exc.strerror or exc}"
    return hierarchy, ""


def _delegated_v2(base: Path) -> tuple[Hierarchy | None, str]:
    """`base` with the memory controller enabled for its children.

    v2 lets a cgroup hand controllers to its children only while it holds no processes itself. So
    when this kit is alone in its (delegated) cgroup, it first moves itself into a leaf.
    """
    control = base / "cgroup.subtree_control"
    if "memory" in _read(control).split():
        return Hierarchy(2, base), ""
    try:
        control.write_text("+memory")
        return Hierarchy(2, base), ""
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            return None, f"cannot enable the memory controller in {base}: {exc.strerror}"
    if _read(base / "cgroup.procs").split() != [str(os.getpid())]:
        return None, f"{base} holds other processes, so its children cannot get a memory limit"
    leaf = base / f"{PREFIX}-{os.getpid()}-kit"
    try:
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(os.getpid()))
        control.write_text("+memory")
    except OSError as exc:
        return None, f"cannot enable the memory controller in {base}: {exc.strerror}"
    return Hierarchy(2, base), ""


def _mount(mounts: list[str], fstype: str, option: str | None) -> tuple[str, Path] | None:
    """(root inside the hierarchy, mount point) of the first mount of `fstype` with `option`."""
    for line in mounts:
        fields, _, tail = line.partition(" - ")
        parts, super_parts = fields.split(), tail.split()
        if len(parts) < 5 or len(super_parts) < 3 or super_parts[0] != fstype:
            continue
        if option is None or option in super_parts[2].split(","):
            return parts[3], Path(parts[4])
    return None


def _inside(mount: tuple[str, Path], cgroup_path: str) -> Path:
    root, point = mount
    relative = cgroup_path[len(root) :] if cgroup_path.startswith(root) else cgroup_path
    return point / relative.lstrip("/")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write_if_present(path: Path, value: str) -> bool:
    if not path.exists():
        return False
    path.write_text(value)
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
