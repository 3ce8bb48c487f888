"""The replay file (`prooflock replay --json`): its schema and the names of its row statuses.

`runs.replay` writes it and the report reads it.
A reproduction report counts its statuses.
All three use these models and names, so the file has one definition.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SCHEMA = "prooflock.replay/1"
# A row's status: one of these, or several of the "differs" ones joined by ", ".
MATCH = "match"  # same verdict, result digest and environment key
ENVIRONMENT_DIFFERS = "environment differs"  # the verdict and result reproduce elsewhere
VERDICT_DIFFERS = "verdict differs"
RESULT_DIFFERS = "result differs"  # same verdict, other diagnostics or details
NOT_RECHECKED = "not re-checked (infra error)"  # the machine failed, not the record
INCONSISTENT = "record inconsistent"  # its digests do not match its own content
# Re-checked on another line (`replay --on`): results differ by nature; verdicts should not.
SAME_VERDICT = "same verdict"
OTHER_VERDICT = "different verdict"
ERROR = "error"
SKIPPED_WHEN_EMPTY = frozenset({"line", "message"})


class ReplayFileRow(BaseModel):
    model_config = ConfigDict(extra="ignore")

    index: int
    artifact: str
    prover: str = ""
    line: str = ""  # the other line the record was re-checked on, if any
    recorded: str
    replayed: str
    status: str
    changed_inputs: list[str] = []
    message: str = ""  # the infra error, when the record could not be re-checked

    @property
    def matches(self) -> bool:
        """Whether the row reproduced; on another line, whether the verdict held."""
        return self.status == (SAME_VERDICT if self.line else MATCH)


class ReplayFile(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    schema_: str = Field(alias="schema")
    log: str = ""
    head: str | None = None
    total: int = 0
    matched: int = 0
    incomplete: str | None = None
    statement_problems: list[str] = []
    exit_code: int | None = None
    outcome: str = ""
    stopped: str | None = None
    summary: str = ""
    changed_inputs: list[str] = []
    on: dict[str, str] = {}
    # `replay --on`: per prover and line, how many records kept their verdict
    drift_by_prover: dict[str, dict[str, int]] = {}
    rows: list[ReplayFileRow]

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", by_alias=True)
        data["rows"] = [
            {k: v for k, v in row.items() if v or k not in SKIPPED_WHEN_EMPTY}
            for row in data["rows"]
        ]
        return data
