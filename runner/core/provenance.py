"""How a result came to be: host, tools, worker, times; recorded beside results, never hashed."""

from __future__ import annotations

import platform
import socket
import subprocess
from datetime import UTC, datetime
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@cache
def source_commit() -> str | None:
    """The git commit of the checkout this package runs from, if it runs from one."""
    checkout = Path(__file__).resolve().parents[2]
    if not (checkout / ".git").exists():
        return None
    commit = head_commit(checkout)
    if commit is not None:
        return commit[:12]
    try:
        done = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def head_commit(checkout: Path) -> str | None:
    """HEAD's commit, read from the checkout's files.

    Every command asks for the kit's version, and a `git` process costs a check call 70 ms.
    It reads a worktree's HEAD, a loose or packed ref, and a detached HEAD.
    Any other layout gives None, and the caller asks git.
    """
    try:
        gitdir = checkout / ".git"
        if gitdir.is_file():  # a worktree or submodule: `gitdir: <path>`
            pointer = gitdir.read_text().strip()
            if not pointer.startswith("gitdir:"):
                return None
            gitdir = (checkout / pointer.removeprefix("gitdir:").strip()).resolve()
        common = gitdir
        if (gitdir / "commondir").is_file():
            common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
        head = (gitdir / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head if _is_commit(head) else None
        ref = head.removeprefix("ref: ")
        for base in (gitdir, common):
            if (base / ref).is_file():
                found = (base / ref).read_text().strip()
                return found if _is_commit(found) else None
        for line in (common / "packed-refs").read_text().splitlines():
            commit, _, name = line.partition(" ")
            if name == ref and _is_commit(commit):
                return commit
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _is_commit(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


@cache
def kit_version() -> str:
    """`0.2.0`, or `0.2.0+g1a2b3c4d5e6f` when running from a git checkout."""
    try:
        release = version("prooflock")
    except PackageNotFoundError:
        release = "0+unknown"
    commit = source_commit()
    return f"{release}+g{commit}" if commit else release


@cache
def host() -> str:
    return socket.gethostname()


def base_tools() -> dict[str, str]:
    return {"prooflock": kit_version(), "python": platform.python_version()}
