"""The audit memo kept across workers and runs: which axioms each standard-library object reaches.

A worker's audit (server.ml `audit`) walks everything a file's theorems reach, down to the axioms.
Each worker memoizes what it walked. But the first file on each Require prefix pays for the whole
closure, in every worker and every run: Arith's about 0.2 s, Lia's about 0.5 s.

What an object of the installed standard library reaches is fixed by that install. So the kit keeps
what trusted audits reported, per install; a worker's reply carries them as MEMO lines. The kit
hands them to the workers it starts (srv/memo). Within a run it hands them to the other workers too
(the request's `memo` field).

Only `Coq.*` objects are kept on disk. The install key (package versions, or the image ID) fixes
their contents, while a user's own libraries can change under the same key. Each line on disk
carries its digest, so a line a crash tore is dropped. An entry cut short would have lost axioms. A
canary's fresh worker gets none of this: cold checks use no state of earlier checks.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from pathlib import Path

HEAD = b"MEMO "
STANDARD_LIBRARY = (b"MEMO CCoq.", b"MEMO ICoq.")  # constants and inductives under Coq.*
MAX_BYTES = 64 * 1024 * 1024  # a memo beyond this is not read (the stdlib's whole is a few MB)
DIGEST_CHARS = 16


def _digest(line: bytes) -> bytes:
    return hashlib.blake2b(line, digest_size=DIGEST_CHARS // 2).hexdigest().encode()


class AuditMemo:
    """The MEMO lines known for one install: from disk, and learned during this run."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._lines: list[bytes] = []
        self._origins: list[str] = []  # the worker each line came from ("" for disk)
        self._known: set[bytes] = set()
        self._cursors: dict[str, int] = {}  # worker → lines it has (shipped or its own)
        self._joined: bytes | None = b""
        for line in self._read():
            self._add(line, "")

    def _read(self) -> list[bytes]:
        try:
            with self.path.open("rb") as handle:
                data = handle.read(MAX_BYTES + 1)
        except OSError:
            return []
        if len(data) > MAX_BYTES:
            return []
        found = []
        for row in data.split(b"\n"):
            digest, _, line = row.partition(b" ")
            if line.startswith(STANDARD_LIBRARY) and digest == _digest(line):
                found.append(line)
        return found

    def _add(self, line: bytes, origin: str) -> bool:
        if line in self._known:
            return False
        self._known.add(line)
        self._lines.append(line)
        self._origins.append(origin)
        self._joined = None
        return True

    def boot_file(self) -> bytes:
        """Every line, for a worker's srv/memo (a worker's cursor is how many it booted with)."""
        with self._lock:
            if self._joined is None:
                self._joined = b"".join(line + b"\n" for line in self._lines)
            return self._joined

    def started(self, worker: str, cursor: int) -> None:
        """`worker` booted with the first `cursor` lines."""
        with self._lock:
            self._cursors.setdefault(worker, cursor)

    def news_for(self, worker: str) -> bytes:
        """The lines `worker` has not seen (others' findings since it booted or last asked)."""
        with self._lock:
            start = self._cursors.get(worker, len(self._lines))
            self._cursors[worker] = len(self._lines)
            return b"".join(
                line + b"\n"
                for line, origin in zip(self._lines[start:], self._origins[start:], strict=True)
                if origin != worker
            )

    def learned(self, memo: bytes, worker: str) -> None:
        """Keep a reply's MEMO lines (trusted audits' findings).

        The standard library's lines are appended to disk in one write, each with its digest.
        """
        if not memo:
            return
        with self._lock:
            fresh = [
                line
                for line in memo.split(b"\n")
                if line.startswith(HEAD) and self._add(line, worker)
            ]
        stored = b"".join(
            _digest(line) + b" " + line + b"\n"
            for line in fresh
            if line.startswith(STANDARD_LIBRARY)
        )
        if stored:
            _append(self.path, stored)


def _append(path: Path, data: bytes) -> None:
    """One O_APPEND write, so concurrent runs never interleave within it.

    A memo that cannot be written only costs its recomputation.
    """
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


_memos: dict[Path, AuditMemo] = {}
_memos_lock = threading.Lock()


def for_install(install_dir: Path, worker_sources: str) -> AuditMemo:
    """The memo of one install (its directory in the kit's cache).

    It is keyed as this worker's audit computes it: by its sources' digest.
    """
    path = install_dir / f"rocq-audit-{worker_sources[:12]}.memo"
    with _memos_lock:
        if path not in _memos:
            _memos[path] = AuditMemo(path)
        return _memos[path]
