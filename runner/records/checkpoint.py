"""Append-only, hash-chained, crash-safe run records (JSON lines).

Each line is one record `{seq, prev, kind, body, digest}`.
`prev` is the previous record's digest, and `digest` covers the record itself.
So an edited, removed or reordered record breaks the chain.
A record is one `write` to an O_APPEND file.
An fsync follows every `fsync_every` records (group commit).
A crash can leave only a torn last line, which opening for writing cuts off.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from runner.core.canonical import NotCanonical, canonical_bytes, digest
from runner.core.errors import UserError
from runner.core.models import CheckRequest, CheckResult

GENESIS = "0" * 64
RECORD_KEYS = {"seq", "prev", "kind", "body", "digest"}
FORMAT = "prooflock-checkpoint/1"


class CheckpointError(UserError):
    """The checkpoint is unusable: unreadable, tampered, locked, or a write was refused."""


@dataclass
class ChainReport:
    path: Path
    records: list[dict[str, Any]] = field(default_factory=list)
    torn_tail: bytes = b""  # bytes after the last complete record, from a crash mid-write
    valid_bytes: int = 0  # length of the prefix that holds whole, verified records
    broken_at: int | None = None  # 1-based line number where the chain breaks
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.broken_at is None

    @property
    def head(self) -> str:
        """The last record's digest: it commits to every record before it."""
        return self.records[-1]["digest"] if self.records else GENESIS

    @property
    def header(self) -> dict[str, Any] | None:
        first = self.records[0] if self.records else None
        return first["body"] if first is not None and first["kind"] == "header" else None

    @property
    def expected(self) -> int | None:
        """How many requests the run holds, from its header, if it has one."""
        header = self.header
        count = header.get("count") if header is not None else None
        return count if isinstance(count, int) else None

    def answered(self) -> tuple[int, int]:
        """(requests with a result, how many of them still end on an infra error to retry)."""
        latest: dict[int, str] = {}
        for record in self.records:
            body = record["body"]
            if record["kind"] == "result" and isinstance(body.get("index"), int):
                latest[body["index"]] = str(body.get("result", {}).get("verdict"))
        return len(latest), sum(verdict == "infra_error" for verdict in latest.values())

    @property
    def complete(self) -> bool:
        answered, infra = self.answered()
        return self.expected is not None and answered == self.expected and infra == 0

    def describe(self) -> str:
        if not self.ok:
            return f"{self.path}: chain broken at line {self.broken_at}: {self.problem}"
        tail = (
            f"; a torn last line of {len(self.torn_tail)} bytes will be cut"
            if self.torn_tail
            else ""
        )
        text = (
            f"{self.path}: chain intact, {len(self.records)} records, head {self.head[:16]}{tail}"
        )
        if self.expected is not None:
            answered, infra = self.answered()
            text += f"; {answered} of {self.expected} requests have results"
            if infra:
                text += f" ({infra} infra errors to retry)"
            if not self.complete:
                text += ": incomplete (the run did not finish, or the log was cut)"
        return text

    def summary(self) -> dict[str, Any]:
        answered, infra = self.answered()
        return {
            "path": str(self.path),
            "intact": self.ok,
            "broken_at_line": self.broken_at,
            "problem": self.problem,
            "records": len(self.records),
            "head": self.head,
            "torn_tail_bytes": len(self.torn_tail),
            "requests": self.expected,
            "answered": answered,
            "infra_errors": infra,
            "complete": self.complete,
        }


def record_digest(record: dict[str, Any]) -> str:
    return digest({k: record[k] for k in ("seq", "prev", "kind", "body")})


def inspect_chain(path: Path) -> ChainReport:
    """Read and verify a checkpoint without changing it."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} does not exist") from None
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {path}: {exc.strerror}") from None
    return verify_bytes(path, data)


def inspect_log(path: Path) -> ChainReport:
    """inspect_chain for commands that read a finished or cut log.

    These are verify-log, audit, replay and report.
    A file of another kind is refused in one line that says so.
    The caller reports an empty log (a run killed before its header) or a tampered chain.
    """
    chain = inspect_chain(path)
    if chain.records or (chain.broken_at is None and not chain.torn_tail):
        return chain
    with path.open("rb") as handle:
        first = handle.readline(1 << 20).rstrip(b"\n")  # a line, or a MiB of a file with none
    if not _could_start_a_record(first):
        reason = f" (line 1: {chain.problem})" if chain.problem else ""
        raise CheckpointError(f"{path} is not a prooflock checkpoint log{reason}")
    return chain


def _could_start_a_record(line: bytes) -> bool:
    """Whether a log's first line is a record, or one a crash may have cut or zeroed."""
    if not line.strip(b"\x00"):
        return True
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return line.startswith(b'{"body":')  # a canonical record's first bytes (sorted keys)
    return isinstance(value, dict) and set(value) == RECORD_KEYS


def verify_bytes(path: Path, data: bytes) -> ChainReport:
    report = ChainReport(path)
    lines = data.split(b"\n")
    complete, tail = lines[:-1], lines[-1]  # after the final newline: "" or a torn write
    prev, offset = GENESIS, 0
    for number, raw in enumerate(complete, start=1):
        problem = _check_line(raw, number - 1, prev)
        if problem is not None:
            if number == len(complete) and not tail and not _is_json(raw):
                # A last line that is not JSON (zero-filled by a crash, say) is a torn write.
                # A whole JSON record whose digest is wrong is tampering, never "torn".
                report.torn_tail = raw + b"\n"
                report.valid_bytes = offset
                return report
            report.broken_at, report.problem = number, problem
            return report
        record = orjson.loads(raw)
        report.records.append(record)
        prev = record["digest"]
        offset += len(raw) + 1
    report.valid_bytes = offset
    report.torn_tail = tail
    return report


def _is_json(raw: bytes) -> bool:
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return True


def _check_line(raw: bytes, seq: int, prev: str) -> str | None:
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "not valid JSON"
    if not isinstance(record, dict) or set(record) != RECORD_KEYS:
        return "not a checkpoint record"
    if record["seq"] != seq:
        return f"sequence number {record['seq']!r}, expected {seq} (a record was removed or moved)"
    if record["prev"] != prev:
        return "does not follow the previous record (a record before it was changed or removed)"
    try:
        if record_digest(record) != record["digest"]:
            return "its content does not match its digest (the record was edited)"
    except NotCanonical:
        return "holds a value that cannot be hashed (the record was edited)"
    return None


class CheckpointLog:
    """The single writer of one checkpoint file; it holds an exclusive lock until closed."""

    def __init__(self, path: Path, *, fsync_every: int = 1):
        self.path = path
        self.fsync_every = fsync_every
        self._unsynced = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise CheckpointError(f"cannot open checkpoint {path}: {exc.strerror}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise CheckpointError(
                f"checkpoint {path} is being written by another prooflock run"
            ) from None
        try:
            self._load()
        except BaseException:
            os.close(self._fd)
            raise

    def _load(self) -> None:
        data = b""
        while chunk := os.pread(self._fd, 1 << 20, len(data)):
            data += chunk
        report = verify_bytes(self.path, data)
        if not report.ok:
            raise CheckpointError(report.describe())
        if report.torn_tail:
            os.ftruncate(self._fd, report.valid_bytes)  # the crash's half-written record
            os.fsync(self._fd)
        self.records = report.records
        self.repaired_bytes = len(report.torn_tail)
        self._size = report.valid_bytes

    @property
    def last_digest(self) -> str:
        return self.records[-1]["digest"] if self.records else GENESIS

    def append(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        record = {"seq": len(self.records), "prev": self.last_digest, "kind": kind, "body": body}
        record["digest"] = record_digest(record)
        line = canonical_bytes(record) + b"\n"
        try:
            written = os.write(self._fd, line)
            if written != len(line):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC) + " (short write)")
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)  # never leave half a record behind
            raise CheckpointError(
                f"could not append to checkpoint {self.path}: {exc.strerror}; "
                "the records written so far are intact, re-run the same command to resume"
            ) from None
        self._size += len(line)
        self.records.append(record)
        self._unsynced += 1
        if self._unsynced >= self.fsync_every:
            self.sync()
        return record

    def sync(self) -> None:
        if self._unsynced:
            os.fsync(self._fd)
            self._unsynced = 0

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                self.sync()
            os.close(self._fd)  # closing releases the lock
            self._fd = -1

    def __enter__(self) -> CheckpointLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def of_kind(self, kind: str) -> Iterator[dict[str, Any]]:
        return (r["body"] for r in self.records if r["kind"] == kind)


def latest_results(log: Iterable[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Result records by request index; a later record, such as a retry, supersedes."""
    return {body["index"]: body for body in log}


def recorded_runs(records: Iterable[dict[str, Any]]) -> Iterator[tuple[CheckRequest, CheckResult]]:
    """(request, result) pairs of a checkpoint's final results, in request order."""
    latest = latest_results(r["body"] for r in records if r["kind"] == "result")
    for index in sorted(latest):
        body = latest[index]
        try:
            yield (
                CheckRequest.model_validate(body["request"]),
                CheckResult.model_validate(body["result"]),
            )
        except (ValidationError, KeyError) as exc:
            raise UserError(f"checkpoint result {index} is not a valid record: {exc}") from None
