"""An image's build context: its directory under images/, the kit's shared scripts, the inputs.

Layout of the context docker receives:

    Dockerfile, other files of images/<name>/   (not selftest/: it runs after the build)
    build/apt-install, build/finish              (images/common/)
    build/ca.crt                                 (the extra CA bundle, or empty)
    build/files/<name>                           (downloads from the store, given files)
    build/wheels/<wheel>, build/wheels/simple/   (wheels from the store, as a pip index)
    build/repo/                                  (the closure's apt repository, if any)
    build/closure.list                           (the sources line apt reads instead of its own)
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
import tempfile
from pathlib import Path
from typing import IO

from runner.images.inputs import BuildInputs

COMMON = "common"
SELFTEST = "selftest"
BYTECODE = "__pycache__"  # pip compiles the .py files of an installed copy: not definitions
ARG_LINE = re.compile(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$")


def dockerfile_args(dockerfile: Path) -> dict[str, str | None]:
    """`ARG NAME=default` lines → {NAME: default} (None when there is no default)."""
    args: dict[str, str | None] = {}
    for line in dockerfile.read_text().splitlines():
        match = ARG_LINE.match(line)
        if match:
            value = match.group(2)
            if value is not None:
                value = value.strip()
                if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                    value = value[1:-1]
            args[match.group(1)] = value
    return args


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def kit_files(images_root: Path, name: str) -> dict[str, Path]:
    """Files the context takes from the kit's images/, by their lock key (`common/...` or own)."""
    own = images_root / name
    found = {}
    for path in sorted(own.rglob("*")):
        rel = path.relative_to(own)
        if rel.parts[0] == SELFTEST or BYTECODE in rel.parts or rel.as_posix() == "Dockerfile":
            continue
        if path.is_file():
            found[rel.as_posix()] = path
    for path in sorted((images_root / COMMON).iterdir()):
        if path.is_file():
            found[f"{COMMON}/{path.name}"] = path
    return found


def file_hashes(images_root: Path, name: str) -> dict[str, str]:
    return {key: sha256_of(path) for key, path in kit_files(images_root, name).items()}


def build_context(
    images_root: Path,
    name: str,
    inputs: BuildInputs,
    extra: dict[str, bytes] | None = None,
    stored: dict[str, Path] | None = None,
) -> IO[bytes]:
    """The context as a tar in a temporary file, read from its start.

    It holds the definitions and the `extra` files in `build/`. It also holds `stored` files from
    the store (a closure's `.deb`s, downloads), at their path in `build/`. Close it when the build
    has read it.
    """
    entries: dict[str, tuple[bytes, int]] = {
        "Dockerfile": ((images_root / name / "Dockerfile").read_bytes(), 0o644)
    }
    for key, path in kit_files(images_root, name).items():
        target = f"build/{path.name}" if key.startswith(f"{COMMON}/") else key
        entries[target] = (path.read_bytes(), 0o755 if path.stat().st_mode & 0o111 else 0o644)
    for rel, data in {**inputs.context_files(), **(extra or {})}.items():
        entries[f"build/{rel}"] = (data, 0o644)
    files = {f"build/{rel}": path for rel, path in (stored or {}).items()}
    out = tempfile.TemporaryFile(prefix="prooflock-context-")  # noqa: SIM115 - the caller's
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name_in_context in sorted({*entries, *files}):
            info = tarfile.TarInfo(name_in_context)
            info.mode, info.mtime = 0o644, 0
            if name_in_context in files:
                with files[name_in_context].open("rb") as stream:
                    info.size = os.fstat(stream.fileno()).st_size
                    tar.addfile(info, stream)
                continue
            data, info.mode = entries[name_in_context]
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out.seek(0)
    return out


def selftest_archive(images_root: Path, name: str) -> bytes:
    """images/<name>/selftest/ as a tar, to unpack in the container's /work."""
    root = images_root / name / SELFTEST
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(root.rglob("*")):
            if path.is_file() and BYTECODE not in path.relative_to(root).parts:
                info = tarfile.TarInfo(path.relative_to(root).as_posix())
                data = path.read_bytes()
                info.size, info.mtime = len(data), 0
                info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
