"""The result cache: a hit for the same request and environment, a miss when either changes."""

from __future__ import annotations

from dataclasses import replace

from runner import Checker, CheckRequest, provers
from tests.helpers import artifact, registered_only_for_this_test


def request(timeout: int = 30) -> CheckRequest:
    return CheckRequest(
        prover="rocq",
        name="pass_arith.v",
        content=artifact("rocq", "pass_arith.v"),
        timeout=timeout,
    )


def test_identical_request_and_environment_hit_the_cache(settings):
    with Checker(settings) as checker:
        first = checker.check_one(request())
        second = checker.check_one(request())
    assert not first.provenance.cached and second.provenance.cached
    assert second.result_digest == first.result_digest and second.env_key == first.env_key


def test_a_cache_hit_survives_a_new_process(settings):
    with Checker(settings) as checker:
        checker.check_one(request())
    with Checker(settings) as checker:
        assert checker.check_one(request()).provenance.cached


def test_changing_an_environment_input_misses(settings, monkeypatch):
    with Checker(settings) as checker:
        original = checker.check_one(request())
        other_limit = checker.check_one(request(timeout=31))
    assert not other_limit.provenance.cached and other_limit.env_key != original.env_key
    rocq = provers.get("rocq")
    registered_only_for_this_test(monkeypatch, replace(rocq, version=rocq.version + "-changed"))
    with Checker(settings) as checker:
        new_adapter = checker.check_one(request())
    assert not new_adapter.provenance.cached
    assert new_adapter.environment["adapter_version"].endswith("-changed")


def test_a_verdict_judged_by_older_rules_is_not_served_though_the_environment_is_the_same(
    settings, monkeypatch
):
    with Checker(settings) as checker:
        before = checker.check_one(request())
    rocq = provers.get("rocq")
    registered_only_for_this_test(monkeypatch, replace(rocq, rules=rocq.rules + "-fixed"))
    with Checker(settings) as checker:
        after = checker.check_one(request())
        again = checker.check_one(request())
    assert not after.provenance.cached and after.env_key == before.env_key
    assert again.provenance.cached
