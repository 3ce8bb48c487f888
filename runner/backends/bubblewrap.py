"""The local backend's sandbox: each command under bubblewrap (`bwrap`), like a tiny container.

Read-only inside:
- the system: /usr, /etc, /opt, /var/lib, /var/cache and the top-level links to them;
- the dirs the kit's PATH and Python need (a pyenv root, say);
- the kernel's transparent-huge-page settings. Of a system dir holding mounts or private dirs, only
  its other children show.

Read-write: the work dir at /work (also HOME), a private /tmp and /dev/shm. There is also a fresh
/proc, a minimal /dev, and the command's cgroup OOM-kill count where a container has it.

Nothing else of the host shows: no /home, /root, /tmp, /run, /srv or /mnt. The kit's home and cache
dirs are hidden too: an empty read-only tmpfs covers them inside a visible dir. The command gets new
pid, network (loopback only), ipc, uts and cgroup namespaces, and a new session. All of it dies with
the kit.

Who runs it: a normal user gets a user namespace (uid 1000 inside, no capabilities, no nested user
namespaces). Root drops to nobody (65534) through util-linux `setpriv`, with no capabilities and
no_new_privs, so root-only host files stay unreadable. The work dir is then owned by nobody.
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

WORKDIR = "/work"
INSIDE_UID = 1000  # as a normal user: the uid commands see (mapped to the user's own)
NOBODY = 65534  # as root: the uid commands run as, on the host too
SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/var/lib", "/var/cache", "/nix", "/gnu")
# Read-only, as a container sees it. glibc's malloc reads it to use transparent huge pages when a
# program asks. A warm worker forking per check faults half as often with them.
HUGE_PAGES = "/sys/kernel/mm/transparent_hugepage"
TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # links into /usr (merged)
NAMESPACES = (
    "--unshare-pid",
    "--unshare-net",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--hostname",
    "prooflock",
    "--new-session",
    "--die-with-parent",
)
AS_USER = (
    "--unshare-user",
    "--uid",
    str(INSIDE_UID),
    "--gid",
    str(INSIDE_UID),
    "--cap-drop",
    "ALL",
)
OLDEST = (0, 5, 0)  # --perms for a tmpfs, --json-status-fd
SIZED_TMPFS = (0, 7, 0)  # --size (older: a tmpfs /tmp is bounded by the memory cgroup only)
NO_NESTED_USERNS = (0, 8, 0)  # --disable-userns
DROP_TO_NOBODY = (
    f"--reuid={NOBODY}",
    f"--regid={NOBODY}",
    "--clear-groups",
    "--inh-caps=-all",
    "--bounding-set=-all",
    "--no-new-privs",
    "--",
)
PROBE_TIMEOUT_S = 30


@dataclass(frozen=True)
class Bubblewrap:
    """How to wrap one command; `system` and `tools` are the parts every command shares."""

    executable: str
    version: str
    system: tuple[str, ...]  # identity, namespaces, the system dirs, /proc, /dev
    tools: tuple[str, ...]  # PATH's and Python's dirs (after /tmp: some may lie in it)
    drop: tuple[str, ...]  # as root: the setpriv command that drops to nobody, else empty
    sized_tmpfs: bool = True

    @property
    def owner(self) -> int | None:
        """The host uid that must own the work dir, when it is not the kit's own."""
        return NOBODY if self.drop else None

    def command(
        self,
        argv: Sequence[str],
        *,
        work_dir: Path,
        tmpfs_mb: int,
        status_fd: int,
        counters: Iterable[tuple[Path, str]] = (),
    ) -> list[str]:
        """`counters`: (host file, path inside) pairs shown read-only, e.g. an OOM-kill count."""
        size = ["--size", str(tmpfs_mb * 1024 * 1024)] if self.sized_tmpfs else []
        shown: list[str] = []
        for host, inside in counters:
            shown += [*_made_dirs(Path(inside).parent), "--ro-bind", str(host), inside]
        return [
            self.executable,
            *self.system,
            *size,
            "--perms",
            "1777",
            "--tmpfs",
            "/tmp",
            *size,
            "--perms",
            "1777",
            "--tmpfs",
            "/dev/shm",
            *self.tools,
            *shown,
            "--bind",
            str(work_dir),
            WORKDIR,
            "--remount-ro",
            "/",  # last: the empty root itself stays read-only
            "--chdir",
            WORKDIR,
            "--json-status-fd",
            str(status_fd),
            "--",
            *self.drop,
            *argv,
        ]


def locate(hidden: Iterable[Path]) -> tuple[Bubblewrap | None, str]:
    """The wrapper for this machine, or None and why there is none.

    `hidden`: host paths that must not be visible inside, even in a visible directory (the kit's
    home, cache).
    """
    executable = shutil.which("bwrap")
    if executable is None:
        return None, "bubblewrap (bwrap) is not installed"
    drop: tuple[str, ...] = ()
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None or not _under(Path(setpriv).resolve(), map(Path, SYSTEM_DIRS)):
            return None, "running as root, and util-linux `setpriv` (to drop to nobody) is missing"
        drop = (setpriv, *DROP_TO_NOBODY)
    try:
        version = subprocess.run(
            [executable, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{executable} does not run: {exc}"
    number = _version(version)
    if number < OLDEST:
        return None, f"{version or 'this bubblewrap'} is too old (0.5 or later is needed)"
    identity: tuple[str, ...] = ()
    if not drop:
        identity = (*AS_USER, *(("--disable-userns",) if number >= NO_NESTED_USERNS else ()))
    system, tools = _mounts(hidden)
    wrapper = Bubblewrap(
        executable,
        version,
        (*identity, *NAMESPACES, *system),
        tuple(tools),
        drop,
        sized_tmpfs=number >= SIZED_TMPFS,
    )
    failure = _probe(wrapper)
    return (None, failure) if failure else (wrapper, "")


def _version(text: str) -> tuple[int, ...]:
    """(0, 8, 0) from `bubblewrap 0.8.0`; () when unreadable."""
    word = text.split()[-1] if text.split() else ""
    try:
        return tuple(int(part) for part in word.split("."))
    except ValueError:
        return ()


def _mounts(private: Iterable[Path]) -> tuple[list[str], list[str]]:
    """(the system's mounts, the tools' mounts): the second go after the private /tmp."""
    hidden = list(private)
    system = [Path(d) for d in SYSTEM_DIRS if Path(d).is_dir() and not Path(d).is_symlink()]
    tools = _tool_roots(system, hidden)
    covered = [h for h in hidden if h.is_dir() and _under(h, [*system, *tools])]
    made = {Path(p) for p in ("/tmp", "/dev", "/dev/shm", "/proc", WORKDIR)}  # mounted anyway
    read_only = [*system, *tools]

    def parents(path: Path) -> list[str]:
        """`--dir` for each missing ancestor, world-searchable (bwrap would make them 0700)."""
        out: list[str] = []
        for parent in reversed(path.parents):
            if parent == Path("/") or parent in made or _under(parent, read_only, strict=True):
                continue
            if parent in covered or parent in read_only:
                continue
            made.add(parent)
            out += ["--perms", "0755", "--dir", str(parent)]
        return out

    base: list[str] = []
    for link in TOP_LEVEL:
        if os.path.islink(link):
            base += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            base += ["--ro-bind", link, link]
    mounted = _mount_points()
    for directory in system:
        shown = _shown_children(directory, mounted)
        if shown is None:
            base += [*parents(directory), "--ro-bind", str(directory), str(directory)]
            continue
        base += [*parents(directory), "--perms", "0755", "--dir", str(directory)]
        for child in shown:
            if child.is_symlink():
                base += ["--symlink", os.readlink(child), str(child)]
            else:
                base += ["--ro-bind", str(child), str(child)]
    # The IPC namespace's own mqueue fs, so a server can see (and clear) the queues a check left.
    base += ["--proc", "/proc", "--dev", "/dev", "--mqueue", "/dev/mqueue"]
    if os.path.isdir(HUGE_PAGES):
        base += [*parents(Path(HUGE_PAGES)), "--ro-bind", HUGE_PAGES, HUGE_PAGES]
    extra: list[str] = []
    for path in covered:  # an empty, read-only directory over the kit's home or cache
        extra += ["--perms", "0755", "--tmpfs", str(path)]
    for root in tools:
        extra += [*parents(root), "--ro-bind", str(root), str(root)]
    for path in covered:
        extra += ["--remount-ro", str(path)]
    return base, extra


def _made_dirs(path: Path) -> list[str]:
    """`--dir` for `path` and its ancestors, world-searchable (bwrap would make them 0700)."""
    out: list[str] = []
    for directory in [*reversed(path.parents), path]:
        if directory != Path("/"):
            out += ["--perms", "0755", "--dir", str(directory)]
    return out


def _mount_points() -> list[Path]:
    """Where this machine has mounts at this moment (empty when /proc cannot tell)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    points = []
    for line in lines:
        fields = line.split()
        if len(fields) > 4:  # field 5 is the mount point, octal-escaped
            points.append(Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])))
    return points


def _shown_children(directory: Path, mounted: list[Path]) -> list[Path] | None:
    """None when `directory` can be bound whole; else the children to bind one by one.

    A whole bind takes every mount beneath along and remounts each read-only. A mount that a
    container runtime adds or drops meanwhile then makes the sandbox fail to start (docker's
    overlays under /var/lib/docker). So children holding mounts are left out. So are children only
    their owner (or group) may enter: the sandbox's user could not enter them anyway.
    """
    try:
        children = sorted(directory.iterdir())
    except OSError:
        return None
    holding = _children_holding(directory, mounted)
    left_out = []
    for child in children:
        holds_mount = child.name in holding
        try:
            closed = child.is_dir() and not child.is_symlink() and not child.stat().st_mode & 0o001
        except OSError:
            closed = True
        if holds_mount or closed:
            left_out.append(child)
    if not left_out:
        return None
    return [child for child in children if child not in left_out]


def _children_holding(directory: Path, mounted: list[Path]) -> set[str]:
    """Names of the children of `directory` that are, or lie above, a mount point.

    Matched by string: a machine running containers has thousands of mounts, each read once.
    """
    inside = str(directory).rstrip("/") + "/"
    return {
        str(point)[len(inside) :].split("/", 1)[0]
        for point in mounted
        if str(point).startswith(inside)
    }


def _tool_roots(system: list[Path], hidden: list[Path]) -> list[Path]:
    """Directories outside the system ones that PATH and Python need.

    They are the PATH entries and the whole of a venv or pyenv root on PATH. Add the kit's Python:
    prefix, base prefix, user site.
    """
    entries = [Path(p) for p in os.environ.get("PATH", "").split(":") if p.startswith("/")]
    found = [
        *entries,
        *(entry.parent for entry in entries if entry.name == "shims"),
        *(entry.parent for entry in entries if (entry.parent / "pyvenv.cfg").is_file()),
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(site.getuserbase()) / "lib",
    ]
    if os.environ.get("PYENV_ROOT", "").startswith("/"):
        found.append(Path(os.environ["PYENV_ROOT"]))
    roots: list[Path] = []
    for path in found:
        if path == Path("/") or not path.is_dir() or _under(path.resolve(), system):
            continue  # (also /bin and the like: links into /usr)
        if _under(path, [Path(p) for p in (WORKDIR, "/proc", "/dev")]):
            continue  # these are the sandbox's own
        if any(_under(secret, [path]) for secret in hidden):
            continue  # never a directory holding the kit's home or cache
        roots.append(path)
    return sorted(r for r in set(roots) if not _under(r, [o for o in roots if o != r]))


def _under(path: Path, roots: Iterable[Path], *, strict: bool = False) -> bool:
    return any(path.is_relative_to(root) and not (strict and path == root) for root in roots)


def _probe(wrapper: Bubblewrap) -> str:
    """Why `true` does not run in this sandbox, or '' when it does."""
    work = Path(tempfile.mkdtemp(prefix="prooflock-probe-"))
    read_status, write_status = os.pipe()
    try:
        if wrapper.owner is not None:
            os.chown(work, wrapper.owner, wrapper.owner)
        argv = wrapper.command(["true"], work_dir=work, tmpfs_mb=16, status_fd=write_status)
        done = subprocess.run(
            argv,
            capture_output=True,
            pass_fds=(write_status,),
            timeout=PROBE_TIMEOUT_S,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
        os.close(write_status)
        write_status = -1
        status = os.read(read_status, 65536)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap cannot run: {exc}"
    finally:
        for fd in (read_status, write_status):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(work, ignore_errors=True)
    if done.returncode != 0 or b'"exit-code": 0' not in status:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bubblewrap cannot run here: {said[-1] if said else f'exit {done.returncode}'}"
    return ""


def started(status: bytes) -> bool:
    """Whether bwrap's JSON status says the command ran (it reports an exit code only then)."""
    return b'"exit-code"' in status
