"""The prover doubles on a real checker: what the Lean and Isabelle test modules share."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.check.checker import Checker
from runner.core.models import CheckRequest, CheckResult
from runner.core.settings import Settings

DOUBLES = Path(__file__).resolve().parents[1] / "doubles"
sys.path.insert(0, str(DOUBLES))
import lean_repl_double  # noqa: E402
import shims  # noqa: E402

__all__ = [
    "DOUBLES",
    "Lean",
    "checker_on_doubles",
    "lean_on_doubles",
    "lean_repl_double",
    "shims",
]


class Lean:
    """A checker whose PATH finds the double as `lean-mathlib` and `lean`."""

    def __init__(self, checker: Checker, log: Path):
        self.checker, self.log = checker, log

    def check(self, content: str, **fields) -> CheckResult:
        fields.setdefault("timeout", 10)
        request = CheckRequest(prover="lean", name="Artifact.lean", content=content, **fields)
        return self.checker.check_one(request)

    def commands(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def headers_elaborated(self) -> int:
        return sum(1 for c in self.commands() if "env" not in c)


def checker_on_doubles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log: Path, shim_options: dict[str, Any]
) -> Iterator[Checker]:
    """A local checker whose PATH finds the doubles' shims, which log to `log`."""
    shims.write_shims(tmp_path / "bin", DOUBLES, log, **shim_options)
    # The doubles and their logs live in this test's tmp dir, which the local backend's
    # bubblewrap sandbox hides (private /tmp and /work): run unsandboxed here, and see
    # test_the_server_runs_inside_the_local_sandbox for the sandboxed path.
    monkeypatch.setenv("PROOFLOCK_LOCAL_SANDBOX", "off")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    settings = Settings(
        backend="local",
        cache=False,
        checkpoint_dir=tmp_path / "checkpoints",
        cache_dir=tmp_path / "cache",
        retries=0,
    )
    with Checker(settings) as checker:
        yield checker


def lean_on_doubles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shim_options: dict[str, Any]
) -> Iterator[Lean]:
    """A local checker whose `lean-mathlib` is the double, logging to tmp_path/repl.log."""
    log = tmp_path / "repl.log"
    for checker in checker_on_doubles(tmp_path, monkeypatch, log, shim_options):
        yield Lean(checker, log)
