"""Where snapshots live: one directory per key under the snapshot dir.

A snapshot is complete once its `meta.json` exists. That file is written last, then the directory is
renamed into place. So a dump cut short by a crash or a full disk is never restored. One snapshot
per family (image and server) is kept: a newer one replaces the rest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from runner.backends.base import SnapshotFailed

META = "meta.json"
STAGING = ".staging-"
STALE_S = 86_400


def key_of(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Snapshot:
    path: Path
    meta: dict[str, object]

    @property
    def key(self) -> str:
        return self.path.name


class Store:
    def __init__(self, root: Path):
        self.root = root

    def find(self, key: str) -> Snapshot | None:
        path = self.root / key
        try:
            meta = json.loads((path / META).read_text())
        except (OSError, ValueError):
            return None
        return Snapshot(path, meta) if isinstance(meta, dict) and meta.get("key") == key else None

    def staging(self, key: str) -> Path:
        """A fresh private directory a dump writes into.

        Staging dirs a killed process left a day ago or more are removed: a dump takes seconds.
        """
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        for stale in self.root.glob(f"{STAGING}*"):
            with contextlib.suppress(OSError):
                if time.time() - stale.stat().st_mtime > STALE_S:
                    shutil.rmtree(stale, ignore_errors=True)
        path = self.root / f"{STAGING}{key}-{secrets.token_hex(4)}"
        path.mkdir(mode=0o700)
        return path

    def commit(self, staging: Path, key: str, meta: dict[str, object]) -> Snapshot:
        """The staged dump, complete, under its key; the family's older snapshots removed."""
        meta = {**meta, "key": key, "bytes": _size(staging)}
        (staging / META).write_text(json.dumps(meta, indent=1, sort_keys=True))
        if self.find(key) is None:
            shutil.rmtree(self.root / key, ignore_errors=True)  # a dump without its meta
            with contextlib.suppress(OSError):  # another process kept the same one meanwhile
                staging.replace(self.root / key)
        shutil.rmtree(staging, ignore_errors=True)
        for other in self.root.iterdir():
            kept = self.find(other.name)
            if kept and other.name != key and kept.meta.get("family") == meta.get("family"):
                self.discard(other.name)
        found = self.find(key)
        if found is None:
            raise SnapshotFailed(f"the dump could not be put in place under {self.root}")
        return found

    def discard(self, key: str) -> None:
        shutil.rmtree(self.root / key, ignore_errors=True)

    def abandon(self, staging: Path) -> None:
        shutil.rmtree(staging, ignore_errors=True)


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
