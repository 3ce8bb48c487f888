"""Where the kit's own files are: the image definitions (`images/`) and the images lock.

In order of precedence:
- `PROOFLOCK_HOME`, a checkout whose lock you want to use;
- the checkout this package runs from;
- the copy installed with the package, which a wheel carries as package data.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from runner.core.errors import InfraFailure

LOCK = Path("manifests") / "images.lock.json"
PACKAGED = Path(__file__).resolve().parents[1] / "kit"  # in a wheel only: runner/images/wheel.py


def _is_home(path: Path) -> bool:
    return (path / LOCK).is_file() and (path / "images").is_dir()


def kit_home() -> Path:
    return _kit_home(os.environ.get("PROOFLOCK_HOME"), PACKAGED)


@functools.lru_cache(maxsize=8)  # asked per record; only a found home is kept, not errors
def _kit_home(configured: str | None, packaged: Path) -> Path:
    if configured:
        home = Path(configured).expanduser().resolve()
        if not _is_home(home):
            raise InfraFailure(
                f"PROOFLOCK_HOME={configured} holds no {LOCK} and images/: point it at a "
                "prooflock checkout, or unset it to use the installed copy"
            )
        return home
    checkout = Path(__file__).resolve().parents[2]
    if _is_home(checkout):
        return checkout
    if _is_home(packaged):
        return packaged
    raise InfraFailure(
        "this prooflock install carries no images lock: reinstall it, or set PROOFLOCK_HOME to a "
        "prooflock checkout"
    )


def lock_path() -> Path:
    return kit_home() / LOCK


def images_root() -> Path:
    return kit_home() / "images"


def writable_home() -> bool:
    """Whether builds may be recorded in the lock: in a checkout, not an installed copy."""
    return kit_home() != PACKAGED
