"""How a result came to be: host, tools, worker, times. Recorded beside results, never hashed."""

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
