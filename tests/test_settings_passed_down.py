"""Settings are read once, at the edge, and passed down: no lower module reads its own."""

from __future__ import annotations

from runner.check.checker import Checker
from runner.core.models import CheckRequest, Verdict
from runner.core.settings import Settings

LEMMA = "Lemma two : 1 + 1 = 2.\nProof. reflexivity. Qed.\n"


def test_the_rocq_worker_a_check_builds_is_kept_in_that_checkers_cache_dir(tmp_path, monkeypatch):
    # What a module building its own Settings() would read instead of the Checker's cache_dir.
    monkeypatch.setenv("PROOFLOCK_CACHE_DIR", str(tmp_path / "environment"))
    settings = Settings(backend="local", cache_dir=tmp_path / "given", cache=False, daemon="off")
    with Checker(settings) as checker:
        result = checker.check_one(CheckRequest(prover="rocq", name="two.v", content=LEMMA))
    assert result.verdict is Verdict.PASS, result.diagnostics
    assert result.provenance.worker == "server"
    kept = list((tmp_path / "given").glob("rocq-worker/*/*/build.id"))
    assert len(kept) == 1
    assert not (tmp_path / "environment").exists()
