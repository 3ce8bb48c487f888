"""The warm-vs-cold canary: a worker that leaks state from one check into the next is caught."""

from __future__ import annotations

import hashlib

import pytest

from runner.check.checker import Checker, canary_selects
from runner.core.models import CheckRequest, Outcome, Verdict
from runner.provers.base import ResolvedRequest, Sandboxes
from runner.provers.common.server import ServerSpec
from tests.helpers import register_test_prover

# A deliberately leaking worker: it counts the checks it served, and only its first says "pass".
LEAKY_SERVER = b"""
import sys
print("READY", flush=True)
served = 0
for line in sys.stdin:
    served += 1
    print(served, flush=True)
"""
SPEC = ServerSpec(
    name="leaky worker",
    argv=["python3", "-u", "leaky.py"],
    ready=b"READY",
    boot_timeout_s=30,
    files={"leaky.py": LEAKY_SERVER},
)


def check_with_leaky_worker(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    reply = sandboxes.server(SPEC).exchange(b"check\n", b"\n", 10)
    return Outcome(verdict=Verdict.PASS if reply == b"1\n" else Verdict.FAIL)


@pytest.fixture
def leaky_prover(monkeypatch):
    return register_test_prover(monkeypatch, "leaky", check=check_with_leaky_worker)


def requests(count: int) -> list[CheckRequest]:
    return [
        CheckRequest(prover="leaky", name=f"a{i}.v", content=f"(* {i} *)") for i in range(count)
    ]


def test_without_the_canary_the_leak_goes_unseen(leaky_prover, settings):
    with Checker(settings.model_copy(update={"cache": False})) as checker:
        results = list(checker.map(requests(3)))
    assert [r.verdict for r in results] == [Verdict.PASS, Verdict.FAIL, Verdict.FAIL]
    assert checker.canary_disagreements == []


def test_the_canary_lists_every_disagreement_and_records_the_fresh_result(leaky_prover, settings):
    with Checker(settings.model_copy(update={"cache": False, "canary": 100})) as checker:
        results = list(checker.map(requests(3)))
    assert [r.verdict for r in results] == [Verdict.PASS] * 3  # the fresh worker's results
    assert [d.artifact for d in checker.canary_disagreements] == ["a1.v", "a2.v"]
    assert [r.provenance.extra["canary"]["agrees"] for r in results] == [True, False, False]
    assert results[1].provenance.extra["canary"]["warm_verdict"] == "fail"


def test_the_canary_chooses_by_digest_so_the_same_requests_every_time():
    digests = [hashlib.sha256(str(n).encode()).hexdigest() for n in range(2000)]
    chosen = [d for d in digests if canary_selects(d, 10)]
    assert chosen == [d for d in digests if canary_selects(d, 10)]
    assert 0.05 < len(chosen) / len(digests) < 0.15
    assert not any(canary_selects(d, 0) for d in digests)
