"""Read what a report shows: a checkpoint log, or a bundle directory around one.

A tampered chain or a file that is not a log is refused.
Anything merely missing, such as a render, a blob or the lock file, becomes a sentence.
That sentence goes in `LoadedRun.problems`, and the report goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from runner.core.errors import UserError
from runner.core.models import CheckRequest, CheckResult
from runner.records.checkpoint import inspect_log, recorded_runs
from runner.records.layout import BUNDLE_LOG
from runner.report.blobs import BlobStore
from runner.report.text import visible

BUNDLE_BLOBS = Path("blobs") / "sha256"
BUNDLE_LOCK = "images.lock.json"
BUNDLE_STATEMENT = "statement.intoto.json"

Run = tuple[CheckRequest, CheckResult]


@dataclass
class LoadedRun:
    source: Path
    kind: Literal["log", "bundle"]
    log: Path
    header: dict[str, Any] | None
    runs: list[Run]
    renders: BlobStore
    artifacts: BlobStore | None = None  # bundles only: sources stored by their bytes' sha256
    lock: dict[str, Any] | None = None
    statement: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)


def load_run(source: Path) -> LoadedRun:
    if source.is_dir():
        return _load_bundle(source)
    renders = BlobStore(source.parent / f"{source.stem}.renders")
    return _load_log(source, source, "log", renders)


def _load_bundle(directory: Path) -> LoadedRun:
    log = directory / BUNDLE_LOG
    if not log.is_file():
        raise UserError(f"{directory} holds no {BUNDLE_LOG}: it is not a prooflock bundle")
    blobs = BlobStore(directory / BUNDLE_BLOBS)
    loaded = _load_log(directory, log, "bundle", blobs)
    loaded.artifacts = blobs
    if not blobs.directory.is_dir():
        loaded.problems.append(
            f"the bundle has no {BUNDLE_BLOBS}/ directory: no artifact source or render is in it"
        )
    loaded.lock = _optional_json(directory / BUNDLE_LOCK, "image pins are", loaded.problems)
    loaded.statement = _optional_json(
        directory / BUNDLE_STATEMENT, "the in-toto statement is", loaded.problems
    )
    return loaded


def _load_log(
    source: Path, log: Path, kind: Literal["log", "bundle"], renders: BlobStore
) -> LoadedRun:
    chain = inspect_log(log)  # a missing, unreadable, empty or foreign file: a UserError
    if not chain.ok:
        raise UserError(f"refusing to report on a tampered checkpoint: {chain.describe()}")
    problems: list[str] = []
    if chain.torn_tail:
        problems.append(
            f"the log ends in {len(chain.torn_tail)} bytes of a record cut short by a crash; "
            "they are not shown"
        )
    header = None
    if chain.records and chain.records[0]["kind"] == "header":
        header = chain.records[0]["body"] if isinstance(chain.records[0]["body"], dict) else None
    elif chain.records:
        problems.append("the log has no header record: its source and kit version are unknown")
    runs = _runs(chain.records, problems)
    expected = header.get("count") if header else None
    if isinstance(expected, int) and expected > len(runs):
        problems.append(
            f"{expected - len(runs)} of {expected} requests have no result in the log "
            "(the run did not finish)"
        )
    return LoadedRun(source, kind, log, header, runs, renders, problems=problems)


def _runs(records: list[dict[str, Any]], problems: list[str]) -> list[Run]:
    try:
        return list(recorded_runs(records))
    except (UserError, KeyError, TypeError):  # a body without an index fails before validation
        pass
    # One bad result body must not hide the others, so read them one at a time.
    # The last body per index wins.
    latest: dict[object, dict[str, Any]] = {}
    for record in records:
        if record["kind"] == "result":
            body = record["body"]
            latest[body.get("index") if isinstance(body, dict) else None] = record
    runs: list[Run] = []
    for key, record in sorted(latest.items(), key=lambda item: _index_order(item[0])):
        try:
            runs.extend(recorded_runs([record]))
        except (UserError, KeyError, TypeError) as exc:
            problems.append(f"result record {visible(key)} is not shown: {visible(exc)}")
    return runs


def _index_order(index: object) -> tuple[int, int, str]:
    return (0, index, "") if isinstance(index, int) else (1, 0, str(index))


def _optional_json(path: Path, what: str, problems: list[str]) -> dict[str, Any] | None:
    if not path.exists():
        problems.append(f"the bundle has no {path.name}: {what} not shown")
        return None
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        problems.append(f"{path.name} cannot be read ({exc}): {what} not shown")
        return None
    if not isinstance(value, dict):
        problems.append(f"{path.name} is not a JSON object: {what} not shown")
        return None
    return value
