"""A `prooflock replay --json` file, read back and lined up with the log's records."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson
from pydantic import ValidationError

from runner.core.errors import UserError, explain
from runner.records.replay_file import SCHEMA, ReplayFile, ReplayFileRow
from runner.report.load import Run
from runner.report.text import visible

MAX_LISTED = 3  # examples named in one sentence


@dataclass
class ReplayView:
    path: Path
    log: str
    matched: int
    total: int
    rows: list[ReplayFileRow]
    by_index: dict[int, ReplayFileRow]
    drift: dict[str, dict[str, int]]  # across versions, per prover and line; may be empty


def load_replay(path: Path, runs: list[Run], problems: list[str]) -> ReplayView:
    try:
        raw = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise UserError(f"replay file {path} does not exist") from None
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UserError(f"cannot read replay file {path}: {exc}") from None
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        raise UserError(f'{path} is not a prooflock replay file (no "schema": "{SCHEMA}")')
    try:
        replay = ReplayFile.model_validate(raw)
    except ValidationError as exc:
        raise UserError(f"{path} is not a valid replay file: {explain(exc)}") from None
    view = ReplayView(
        path=path,
        log=replay.log,
        matched=sum(row.matches for row in replay.rows),
        total=len(replay.rows),
        rows=replay.rows,
        by_index={row.index: row for row in replay.rows},
        drift=replay.drift_by_prover,
    )
    _check_alignment(view, runs, problems)
    return view


def _check_alignment(view: ReplayView, runs: list[Run], problems: list[str]) -> None:
    """Say so when the replay came from another log, whose rows name other artifacts."""
    strays = []
    for row in view.rows:
        if not 0 <= row.index < len(runs):
            strays.append(f"row {row.index} has no record {row.index} in the log")
        elif runs[row.index][1].artifact != row.artifact:
            strays.append(
                f"row {row.index} is of {visible(row.artifact)!r}, record {row.index} of "
                f"{visible(runs[row.index][1].artifact)!r}"
            )
    if strays:
        more = f" (+{len(strays) - MAX_LISTED} more)" if len(strays) > MAX_LISTED else ""
        problems.append(
            f"{len(strays)} replay rows do not line up with the log, so it was made from another "
            f"log: {'; '.join(strays[:MAX_LISTED])}{more}"
        )
    replayed = {row.index for row in view.rows if 0 <= row.index < len(runs)}
    if len(replayed) < len(runs):
        problems.append(f"{len(runs) - len(replayed)} of {len(runs)} records were not replayed")
