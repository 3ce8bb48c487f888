"""A real Rocq run on the local backend, finished (`finished_run`: its log), once per module."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.check.checker import Checker
from runner.core.settings import Settings
from runner.runs.resumable import run_requests
from tests.helpers import request_for

NAMES = ["pass_arith.v", "fail_tactic.v", "admitted.v", "user_axiom.v"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("run")
    settings = Settings(backend="local", cache_dir=root / "cache", timeout=60, retries=0)
    with Checker(settings) as checker:
        run_requests(
            [request_for("rocq", n) for n in NAMES], root / "run.jsonl", checker, source="t"
        )
    return root / "run.jsonl"
