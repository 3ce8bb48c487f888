"""The warm Rocq worker gives exactly the cold path's results, and never what another file left.

Cold is Debian's coqc, coqchk and two drivers in a fresh sandbox; warm is the worker that forks
per check from a parent holding the file's `Require`s. Both must give the same verdict and the
same result digest on every corpus: the checked-in files and the generated small files shaped
like model output (the cheats are compared warm against cold in tests/adversarial).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner import Checker
from runner.core.models import CheckRequest, Verdict
from runner.provers.rocq import source, worker
from tests.helpers import ARTIFACTS
from tests.support.pool_servers import PoolServers

CORPUS = sorted((ARTIFACTS / "rocq").glob("*.v"))
# Files that run until they are stopped: a short limit decides them as well as a long one.
NEVER_ENDS = {"diverge.v": 10}
SMALL = sorted((ARTIFACTS / "rocq-small").glob("*.v"))


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    from runner.core.settings import Settings

    base = tmp_path_factory.mktemp("kit")
    settings = Settings(
        backend="local",
        cache=False,
        retries=0,
        timeout=120,
        cache_dir=base / "cache",
        checkpoint_dir=base / "checkpoints",
    )
    with Checker(settings) as checker:
        yield checker


def same_warm_and_cold(checker: Checker, request: CheckRequest) -> None:
    cold = checker.check_one(request, cold=True)
    warm = checker.check_one(request)
    again = checker.check_one(request)
    if cold.provenance.extra["rocq_path"] != "refused":  # refused before either path ran
        assert cold.provenance.extra["rocq_path"] == "cold"
        for result in (warm, again):
            assert result.provenance.extra["rocq_path"].startswith("worker:"), (
                result.provenance.extra
            )
    assert warm.verdict is cold.verdict, (request.name, warm.diagnostics, cold.diagnostics)
    assert warm.result_digest == cold.result_digest == again.result_digest, (
        request.name,
        warm.diagnostics,
        cold.diagnostics,
        warm.assumptions,
        cold.assumptions,
    )


@pytest.mark.slow
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_the_corpus_gets_the_same_results_warm_and_cold(path: Path, checker):
    limit = {"timeout": NEVER_ENDS[path.name]} if path.name in NEVER_ENDS else {}
    same_warm_and_cold(
        checker, CheckRequest(prover="rocq", name=path.name, content=path.read_text(), **limit)
    )


@pytest.mark.slow
@pytest.mark.parametrize("path", SMALL, ids=lambda p: p.name)
def test_small_model_output_gets_the_same_results_warm_and_cold(path: Path, checker):
    same_warm_and_cold(
        checker, CheckRequest(prover="rocq", name=path.name, content=path.read_text())
    )


@pytest.mark.slow
def test_targets_get_the_same_results_warm_and_cold(checker):
    text = "Require Import Arith.\nTheorem t : forall n : nat, n + 0 = n.\nProof. intros. apply Nat.add_0_r. Qed.\n"
    for statement in (
        "forall m, m + 0 = m",
        "forall n, 0 + n = n",
        "forall n, n = n + 0",
        "nope x",
    ):
        target = {"name": "t", "statement": statement}
        same_warm_and_cold(
            checker, CheckRequest(prover="rocq", name="t.v", content=text, target=target)
        )


def test_one_base_worker_serves_every_header(checker):
    texts = [
        "Require Import Bool.\nLemma t : negb true = false.\nProof. reflexivity. Qed.\n",
        "Require Import Arith.\nLemma a : 1 + 1 = 2.\nProof. reflexivity. Qed.\n",
    ]
    for text in texts * 2:
        result = checker.check_one(CheckRequest(prover="rocq", name="t.v", content=text))
        assert result.verdict is Verdict.PASS
        assert result.provenance.extra["rocq_path"] == "worker:base"


def test_checks_at_once_each_have_a_worker_booted_once_and_give_the_same_results(checker, tmp_path):
    """Two workers (`--workers 2`): results in input order, each worker booted once
    and kept warm (never closed and booted again), every result the same as one at a time."""
    from runner.core.settings import Settings

    settings = Settings(
        backend="local", cache=False, retries=0, workers=2, cache_dir=tmp_path / "cache"
    )
    requests = [CheckRequest(prover="rocq", name=p.name, content=p.read_text()) for p in SMALL[:16]]
    with Checker(settings) as two:
        results = list(two.map(requests))
    assert [r.artifact for r in results] == [r.name for r in requests]
    assert len({r.provenance.extra["worker_id"] for r in results}) == 2
    for request, result in zip(requests, results, strict=True):
        assert result.result_digest == checker.check_one(request).result_digest, request.name


def test_checks_at_once_split_the_headers_between_the_workers(checker, tmp_path):
    """With `--workers 2` each worker loads the headers its thread keeps to, not every header
    (first come, first served, both workers would load both), and results stay the same."""
    from runner.core.settings import Settings

    headers = ["Require Import Arith.", "Require Import List.\nImport ListNotations."]
    lemmas = [f"Lemma l{i} : {i} + 0 = {i}.\nProof. reflexivity. Qed.\n" for i in range(6)]
    requests = [
        CheckRequest(prover="rocq", name=f"h{h}_{i}.v", content=f"{header}\n{lemma}")
        for i, lemma in enumerate(lemmas)
        for h, header in enumerate(headers)  # alternating: h0_0, h1_0, h0_1, ...
    ]
    settings = Settings(
        backend="local", cache=False, retries=0, workers=2, cache_dir=tmp_path / "cache"
    )
    with Checker(settings) as two:
        results = dict(two.map_unordered((r.name, r) for r in requests))
    loads = {(r.provenance.extra["worker_id"], name[:2]) for name, r in results.items()}
    assert len(loads) <= 3, sorted(loads)  # 2, or 3 when one worker helps at the very end
    for request in requests:
        alone = checker.check_one(request)
        assert results[request.name].result_digest == alone.result_digest, request.name
        assert alone.verdict is Verdict.PASS


@pytest.mark.slow
def test_the_base_worker_serves_mixed_headers_as_coqc_would(checker):
    """Every header goes to the base worker's sub-parents, one per prefix;
    a prefix that does not load fails there exactly as it fails under coqc."""
    files = {
        "arith.v": "Require Import Arith.\nLemma a : 1 + 1 = 2.\nProof. reflexivity. Qed.\n",
        "bool.v": "Require Import Bool.\nLemma b : negb true = false.\nProof. reflexivity. Qed.\n",
        "list.v": "Require Import List.\nLemma l : length (@nil nat) = 0.\nProof. reflexivity. Qed.\n",
        "missing.v": "Require Import NoSuchLibrary.\nLemma c : True.\nProof. exact I. Qed.\n",
    }
    for _ in range(2):
        for name, text in files.items():
            same_warm_and_cold(checker, CheckRequest(prover="rocq", name=name, content=text))


def test_a_worker_refuses_a_file_whose_prefix_is_not_its_own(checker):
    """Even if the pool handed it over, a prefix worker answers MISMATCH for another prefix."""
    arith = "Require Import Arith.\nLemma a : 1 + 1 = 2.\nProof. reflexivity. Qed.\n"
    bools = "Require Import Bool.\nLemma b : negb true = false.\nProof. reflexivity. Qed.\n"
    for _ in range(2):
        checker.check_one(CheckRequest(prover="rocq", name="a.v", content=arith))
    runner = PoolServers(checker)
    server = worker.start(runner, source.prefix(arith))
    request = checker.resolve(CheckRequest(prover="rocq", name="b.v", content=bools))
    with pytest.raises(worker.CannotServe):
        worker.evidence(worker.exchange(server, request, source.prefix(bools)), request)
    server.close()


def test_what_one_file_defines_is_gone_for_the_next(checker):
    defines = (ARTIFACTS / "rocq" / "defines_things.v").read_text()
    uses = (ARTIFACTS / "rocq" / "uses_definition.v").read_text()
    assert (
        checker.check_one(CheckRequest(prover="rocq", name="d.v", content=defines)).verdict
        is Verdict.PASS
    )
    later = checker.check_one(CheckRequest(prover="rocq", name="u.v", content=uses))
    assert later.verdict is Verdict.FAIL and later.provenance.extra["rocq_path"].startswith(
        "worker:"
    )


@pytest.mark.parametrize("first_has_axiom", [True, False], ids=["axiom-first", "clean-first"])
def test_no_audit_sees_the_library_another_file_compiled(checker, first_has_axiom):
    """Every file is compiled as library `Artifact` with the same names: each audit must read
    its own file's library, never one an earlier audit loaded."""
    with_axiom = "Axiom ax : True.\nTheorem main : True. exact ax. Qed.\n"
    clean = "Definition ax : True := I.\nTheorem main : True. exact ax. Qed.\n"
    files = [with_axiom, clean] if first_has_axiom else [clean, with_axiom]
    expected = [Verdict.AXIOM, Verdict.PASS] if first_has_axiom else [Verdict.PASS, Verdict.AXIOM]
    for round_ in range(2):  # and again, once the worker has audited both
        for index, (content, verdict) in enumerate(zip(files, expected, strict=True)):
            name = f"same_names_{round_}_{index}.v"
            result = checker.check_one(CheckRequest(prover="rocq", name=name, content=content))
            assert result.provenance.extra["rocq_path"].startswith("worker:")
            assert result.verdict is verdict, (name, result.diagnostics, result.assumptions)
