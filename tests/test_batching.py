"""Batches with adaptive bisection: one worker call for many requests, the same records."""

from __future__ import annotations

import pytest

from runner import provers
from runner.check import batching
from runner.check.checker import Checker
from runner.core.models import CheckRequest, Outcome, Verdict
from runner.provers.base import ResolvedRequest, Sandboxes
from tests.helpers import register_test_prover

CALLS: list[int] = []  # batch sizes the adapter was called with


def verdict_of(request: ResolvedRequest) -> Outcome:
    return Outcome(verdict=Verdict.PASS if "good" in request.content else Verdict.FAIL)


def check_one(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    if "poison" in request.content:  # alone, the poison is just a failing artifact
        return Outcome(verdict=Verdict.FAIL)
    return verdict_of(request)


def check_batch(requests: list[ResolvedRequest], sandboxes: Sandboxes) -> list[Outcome | None]:
    """A worker that dies on the poison and takes the undecided rest of its batch with it."""
    CALLS.append(len(requests))
    outcomes: list[Outcome | None] = []
    for index, request in enumerate(requests):
        if "poison" in request.content:
            return outcomes + [None] * (len(requests) - index)
        outcomes.append(verdict_of(request))
    return outcomes


@pytest.fixture
def batchable(monkeypatch):
    register_test_prover(monkeypatch, "batchable", check=check_one, check_batch=check_batch)
    CALLS.clear()


def requests(contents: list[str]) -> list[CheckRequest]:
    return [
        CheckRequest(prover="batchable", name=f"a{i}.v", content=f"{text} {i}")
        for i, text in enumerate(contents)
    ]


def test_a_clean_batch_is_one_call_with_the_records_of_single_checks(batchable, settings):
    work = requests(["good", "bad", "good", "good"])
    with Checker(settings.model_copy(update={"cache": False, "batch": 8})) as checker:
        batched = [r for _, r in sorted(checker.map_unordered(enumerate(work)))]
        alone = [checker.check_one(request) for request in work]
    assert CALLS == [4]
    assert [r.result_digest for r in batched] == [r.result_digest for r in alone]
    assert [r.provenance.extra["batch"] for r in batched] == [{"size": 4, "splits": 0}] * 4


def test_a_batch_that_breaks_is_split_until_every_request_has_its_own_verdict(batchable, settings):
    work = requests(["good", "good", "good", "poison", "good", "bad", "good", "good"])
    with Checker(settings.model_copy(update={"cache": False, "batch": 8})) as checker:
        batched = [r for _, r in sorted(checker.map_unordered(enumerate(work)))]
        alone = [checker.check_one(request) for request in work]
    assert [r.verdict for r in batched] == [r.verdict for r in alone]
    assert [r.result_digest for r in batched] == [r.result_digest for r in alone]
    assert CALLS[0] == 8 and len(CALLS) > 1  # the first call broke, smaller ones followed
    poison = batched[3].provenance.extra["batch"]
    assert poison["size"] == 1 and poison["splits"] >= 1
    assert batched[0].provenance.extra["batch"] == {"size": 8, "splits": 0}  # decided at once


def test_units_group_consecutive_requests_of_one_adapter_and_image():
    class Fake:
        def __init__(self, name: str, batches: bool):
            self.adapter = provers.get("rocq") if not batches else provers.get("hol-light")
            self.image = self.adapter.images[0]
            from runner.core.models import Limits

            self.limits = Limits(timeout_s=60, memory_mb=4096)

    work = [(0, Fake("h", True)), (1, Fake("h", True)), (2, Fake("r", False)), (3, Fake("h", True))]
    grouped = [[key for key, _ in unit] for unit in batching.units(work, 8)]  # type: ignore[arg-type]
    assert grouped == [[0, 1], [2], [3]]
    assert [[k for k, _ in u] for u in batching.units(work, 1)] == [[0], [1], [2], [3]]  # type: ignore[arg-type]
