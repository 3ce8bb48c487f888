"""Shims that make the doubles look like `lean-mathlib`, `lean` and `isabelle` on PATH."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

DOUBLES = Path(__file__).resolve().parent


def write_shims(
    directory: Path, doubles: Path, log: Path | None = None, *, conceal: bool = False
) -> None:
    """The three commands, in `directory`, running the doubles found in `doubles`.

    `conceal`: the doubles do not announce themselves, as the real provers would not; only for
    the tests that the kit tells the two apart from that announcement alone.
    """
    # The base interpreter, not a virtualenv's (the doubles need only the standard library): a
    # venv inside the checkout sits under /work, which the local sandbox replaces with its own.
    python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    logging = (f' --log "{log}"' if log is not None else "") + (" --conceal" if conceal else "")
    scripts = {
        "lean-mathlib": (
            f'if [ "$1" = repl ]; then shift; exec "{python}" -B "{doubles / "lean_repl_double.py"}"'
            f'{logging} "$@"; fi\n'
            f'if [ "$1" = recheck ]; then shift; exec "{python}" -B '
            f'"{doubles / "lean_repl_double.py"}"{" --conceal" if conceal else ""} --recheck "$@"; fi\n'
            'echo "Lean (version 4.34.0, commit double, x86_64-unknown-linux-gnu, Release)"\n'
        ),
        "lean": 'echo "Lean (version 4.34.0, commit double, x86_64-unknown-linux-gnu, Release)"\n',
        "isabelle": (
            f'if [ "$1" = server ]; then exec "{python}" -B '
            f'"{doubles / "isabelle_server_double.py"}" "$@"{logging}; fi\n'
            'echo "Isabelle2025-2"\n'
        ),
    }
    directory.mkdir(parents=True, exist_ok=True)
    for name, body in scripts.items():
        path = directory / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)


@contextlib.contextmanager
def sandboxed_shims() -> Iterator[Path]:
    """A world-readable directory under /var/tmp holding the doubles and their shims, for PATH.

    The local backend's bubblewrap sandbox shows only system directories and PATH entries (and
    drops root to nobody), so everything the shims run must sit in that one directory.
    """
    root = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="prooflock-doubles-"))
    try:
        for item in ("lean_repl_double.py", "isabelle_server_double.py", "transcripts"):
            source = DOUBLES / item
            if source.is_dir():
                shutil.copytree(source, root / item)
            else:
                shutil.copy2(source, root / item)
        write_shims(root, root)
        for path in [root, *root.rglob("*")]:
            mode = 0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644
            path.chmod(mode)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
