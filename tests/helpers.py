"""Shared test helpers: the artifact corpus, requests files, resolved requests, a one-sandbox runner."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from runner.backends.base import Sandbox
from runner.check.checker import Checker
from runner.check.resolve import resolve
from runner.core.models import CheckRequest, CheckResult, Verdict
from runner.core.settings import Settings
from runner.provers.base import ResolvedRequest
from runner.provers.common.server import SandboxServer, ServerSpec
from runner.records.checkpoint import record_digest

ARTIFACTS = Path(__file__).parent / "artifacts"
# What each Rocq corpus file gets in proof mode.
ROCQ_EXPECTED = {
    "pass_arith.v": Verdict.PASS,
    "pass_induction.v": Verdict.PASS,
    "fail_tactic.v": Verdict.FAIL,
    "fail_syntax.v": Verdict.FAIL,
    "open_proof.v": Verdict.FAIL,
    "admitted.v": Verdict.PLACEHOLDER,
    "admit_tactic.v": Verdict.PLACEHOLDER,
    "user_axiom.v": Verdict.AXIOM,
    "classical.v": Verdict.AXIOM,
    "unsafe_guard.v": Verdict.AXIOM,
    "hidden_axiom.v": Verdict.AXIOM,
    "universe_unchecked.v": Verdict.AXIOM,
    "uses_mathcomp.v": Verdict.PASS,
}


def artifact(prover: str, name: str) -> str:
    return (ARTIFACTS / prover / name).read_text()


def request_for(prover: str, name: str, **fields: Any) -> CheckRequest:
    """A request for one file of the test corpus."""
    return CheckRequest(prover=prover, name=name, content=artifact(prover, name), **fields)


def write_requests(path: Path, requests: list[CheckRequest]) -> Path:
    """A requests file (`prooflock run` input), one JSON request per line."""
    path.write_bytes(b"".join(orjson.dumps(r.record()) + b"\n" for r in requests))
    return path


def resolved(request: CheckRequest, settings: Settings | None = None) -> ResolvedRequest:
    return resolve(request, settings or Settings(backend="local"))


class OneSandbox:
    """A Sandboxes over sandboxes the test holds open, to look inside them after a check: `check`
    is the one given; other purposes (e.g. `reference`) are given in `others`."""

    cold = True

    def __init__(self, sandbox: Sandbox, **others: Sandbox):
        self._sandboxes = {"check": sandbox, **others}

    def sandbox(self, purpose: str = "check") -> Sandbox:
        assert purpose in self._sandboxes, f"the test gave no {purpose!r} sandbox"
        return self._sandboxes[purpose]

    def server(self, spec: ServerSpec) -> SandboxServer:
        raise AssertionError(f"this test runner has no servers (asked for {spec.name})")


def rewrite(path: Path, edit) -> None:
    """Edit records and re-seal the chain, as a forger (or a replay test) would."""
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    edit(records)
    prev = "0" * 64
    for seq, record in enumerate(records):
        record["seq"], record["prev"] = seq, prev
        record["digest"] = prev = record_digest(record)
    path.write_bytes(
        b"".join(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) + b"\n" for r in records)
    )


# -- HOL Light: one worker per backend for the whole session (a boot takes minutes) ----------


class HolLight:
    """The session's checker, with the request a user would write for each corpus file."""

    def __init__(self, checker: Checker, timeout: int = 60):
        self.checker = checker
        self.timeout = timeout

    def check(self, name: str, *, content: str | None = None, **fields) -> CheckResult:
        request = CheckRequest(
            prover="hol-light",
            name=name,
            content=artifact("hol-light", name) if content is None else content,
            **{"timeout": self.timeout, **fields},
        )
        return self.checker.check_one(request)


_SESSION_CHECKERS: dict[str, Checker] = {}
# Modules that check on the session's HOL Light workers (minutes per boot) carry this mark, so
# `pytest -n` runs them all in one process, which boots each backend's worker once.
SHARES_HOL_LIGHT_BOOTS = pytest.mark.xdist_group("hol-light")
# A fresh local boot of HOL Light with its recording kernel costs minutes (~4.5 CPU-min): CI runs
# tests that need more than the session's one local boot on docker where they have a docker case
# (fresh servers are restored from the machine's snapshots). PROOFLOCK_HOL_LIGHT_FULL=1 runs their
# local case too.
FRESH_LOCAL_HOL_LIGHT_BOOTS = pytest.mark.skipif(
    os.environ.get("PROOFLOCK_HOL_LIGHT_FULL") != "1",
    reason="fresh local boots of HOL Light (minutes each): set PROOFLOCK_HOL_LIGHT_FULL=1",
)
HOL_LIGHT_BACKENDS = [
    pytest.param("docker", marks=pytest.mark.docker),
    pytest.param("local", marks=FRESH_LOCAL_HOL_LIGHT_BOOTS),
]


def session_checker(request: pytest.FixtureRequest, backend: str, timeout: int = 60) -> Checker:
    """The session's one checker on `backend` (so one HOL Light boot), closed when pytest ends."""
    if backend not in _SESSION_CHECKERS:
        factory = request.getfixturevalue("tmp_path_factory")
        settings = Settings(
            backend=backend,
            cache=False,
            checkpoint_dir=factory.mktemp("checkpoints"),
            cache_dir=factory.mktemp("cache"),
            retries=1,
            workers=2,  # checks at once share the one HOL Light worker (never a second boot)
        )
        checker = _SESSION_CHECKERS[backend] = Checker(settings)
        request.config.add_cleanup(checker.close)
    return _SESSION_CHECKERS[backend]


def register_test_prover(monkeypatch, name: str, **fields: Any):
    """A prover that exists only for one test, checked in the rocq image (its probe too)."""
    from runner import provers
    from runner.provers.base import ProverAdapter

    adapter = ProverAdapter(
        name=name,
        version="1",
        modes=("proof",),
        images=("rocq",),
        probe=provers.get("rocq").probe,
        **fields,
    )
    registered_only_for_this_test(monkeypatch, adapter)
    return adapter


def registered_only_for_this_test(monkeypatch, adapter) -> None:
    """Register `adapter` (runner.provers.register); the registry is restored after the test."""
    from runner import provers

    monkeypatch.setattr(provers, "_registered", dict(provers._registered))
    provers.register(adapter)
