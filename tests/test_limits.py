"""Limits that hold for everything the kit does: the size limit, one budget per check, boots
that are not a check's time."""

from __future__ import annotations

import time

import orjson
import pytest

from runner.check.checker import Checker
from runner.check.pool import KIT_GRACE_S
from runner.core import deadline
from runner.core.models import CheckRequest, Outcome, Verdict
from runner.provers.base import ResolvedRequest, Sandboxes
from runner.provers.common.server import ServerSpec
from tests.helpers import register_test_prover

SLOW_BOOT = ServerSpec(
    name="slow-booting test server",
    argv=["sh", "-c", "sleep 3; echo READY; exec cat"],
    ready=b"READY",
    boot_timeout_s=30,
)


def dawdle(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    """Kit-side work that ignores the timeout (as parsing a huge output would)."""
    time.sleep(float(request.content))
    return Outcome(verdict=Verdict.PASS)


def read_slowly(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    """A reader of the artifact as the adapters' lexers are: steps of work, and a look at the
    clock between them."""
    while True:
        time.sleep(0.01)
        deadline.checkpoint("read 0 of 1 characters")


def echo_once(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    server = sandboxes.server(SLOW_BOOT)
    reply = server.exchange(request.content.encode() + b"\n", b"\n", 10)
    return Outcome(
        verdict=Verdict.PASS if reply.strip() == request.content.encode() else Verdict.FAIL
    )


def test_an_artifact_over_the_size_limit_is_refused_before_any_work(cli, tmp_path):
    big = tmp_path / "big.v"
    big.write_text("(* padding *)\n" * 80_000)  # about 1.1 MB (a 50 MB file once took 138 s)
    done = cli(
        "check", "--prover", "rocq", "big.v", check=1, env={"PROOFLOCK_MAX_ARTIFACT_MB": "1"}
    )
    assert "over the 1 MB limit" in done.stderr and "PROOFLOCK_MAX_ARTIFACT_MB" in done.stderr
    assert "Traceback" not in done.stderr
    line = orjson.loads(done.stdout)  # the artifact's own record, not bad input
    assert line["verdict"] == "refused" and line["trust"] == "kit"
    assert "starting Rocq worker" not in done.stderr  # refused, not checked
    raised = cli("check", "--prover", "rocq", "big.v", env={"PROOFLOCK_MAX_ARTIFACT_MB": "2"})
    assert "over the" not in raised.stderr


def test_a_check_past_its_whole_budget_is_a_timeout_whatever_it_concluded(settings, monkeypatch):
    register_test_prover(monkeypatch, "dawdler", check=dawdle)
    with Checker(settings.model_copy(update={"timeout": 1})) as checker:
        slow = checker.check_one(CheckRequest(prover="dawdler", name="slow", content="7"))
        quick = checker.check_one(CheckRequest(prover="dawdler", name="quick", content="0"))
    assert slow.verdict is Verdict.TIMEOUT
    assert "covers everything done for the artifact" in slow.diagnostics[0].message
    assert quick.verdict is Verdict.PASS


def test_the_kits_reading_of_an_artifact_stops_at_the_checks_deadline(settings, monkeypatch):
    register_test_prover(monkeypatch, "slow-reader", check=read_slowly)
    with Checker(settings.model_copy(update={"timeout": 1})) as checker:
        result = checker.check_one(CheckRequest(prover="slow-reader", name="big", content="x"))
    assert result.verdict is Verdict.TIMEOUT
    message = result.diagnostics[0].message
    assert "ran out while the kit read the artifact (read 0 of 1 characters)" in message
    assert result.provenance.wall_ms < (1 + KIT_GRACE_S) * 1000 + 2000


def test_a_server_boot_is_reported_once_and_is_not_the_checks_time(settings, monkeypatch):
    register_test_prover(monkeypatch, "echoer", check=echo_once)
    with Checker(settings.model_copy(update={"timeout": 2})) as checker:
        first = checker.check_one(CheckRequest(prover="echoer", name="a", content="hello"))
        second = checker.check_one(CheckRequest(prover="echoer", name="b", content="again"))
    # The 3 s boot is longer than the 2 s limit, yet it is no part of the check's budget or time.
    assert first.verdict is Verdict.PASS and second.verdict is Verdict.PASS
    assert first.provenance.extra["booted_in_check_ms"] >= 3000
    assert first.provenance.wall_ms < 3000
    assert "booted_in_check_ms" not in second.provenance.extra  # the warm server: no boot


@pytest.mark.parametrize("workers", [1, 2])
def test_from_python_an_over_size_artifact_is_its_refused_result_in_its_place(settings, workers):
    good = "Lemma a : True. exact I. Qed.\n"
    big = good + "(* " + "x" * (2 << 20) + " *)\n"
    names = ["big-first.v", "good.v", "big-middle.v", "good-too.v", "big-last.v"]
    requests = [
        CheckRequest(prover="rocq", name=name, content=big if name.startswith("big") else good)
        for name in names
    ]
    limited = settings.model_copy(update={"max_artifact_mb": 1, "workers": workers})
    with Checker(limited) as checker:
        results = list(checker.map(requests))
        alone = checker.check_one(requests[0])
    assert [(r.artifact, r.verdict) for r in results] == [
        ("big-first.v", Verdict.REFUSED),
        ("good.v", Verdict.PASS),
        ("big-middle.v", Verdict.REFUSED),
        ("good-too.v", Verdict.PASS),
        ("big-last.v", Verdict.REFUSED),
    ]
    assert alone.verdict is Verdict.REFUSED and alone.result_digest == results[0].result_digest
    assert alone.provenance.backend == "none"  # nothing ran
