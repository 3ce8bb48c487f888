"""The Rocq audit memo kept per install (runner/provers/rocq/memo.py): what trusted audits found
is reused by later workers and runs, a line a crash tore is never used, and only the standard
library's objects are kept on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner import Checker
from runner.core.models import CheckRequest, Verdict
from runner.core.settings import Settings
from runner.provers.rocq import memo

USES_MAX_COMM = (
    "Require Import Arith.\n"
    "Theorem swap : forall n m : nat, Nat.max n m = Nat.max m n.\n"
    "Proof. intros n m. apply Nat.max_comm. Qed.\n"
)
MAX_COMM = b"MEMO CCoq.Arith.PeanoNat.Nat.max_comm"
# An axiom the Prelude declares (coqchk lists it), forged onto a lemma that reaches none.
FORGED_AXIOM = "Coq.ssr.ssrunder.Under_rel.Under_rel"
FORGED = MAX_COMM + b"\tAXIOM " + FORGED_AXIOM.encode()


def stored(line: bytes) -> bytes:
    return memo._digest(line) + b" " + line + b"\n"


def test_learned_lines_reach_disk_with_a_digest_and_only_for_the_standard_library(tmp_path):
    path = tmp_path / "audit.memo"
    kept = memo.AuditMemo(path)
    kept.learned(
        b"MEMO CCoq.Init.Nat.add\nMEMO CMylib.lemma\tAXIOM Mylib.ax\nMEMO ICoq.Init.Datatypes.nat\n",
        "w1",
    )
    rows = path.read_bytes().splitlines()
    assert [row.split(b" ", 1)[1] for row in rows] == [
        b"MEMO CCoq.Init.Nat.add",
        b"MEMO ICoq.Init.Datatypes.nat",
    ]
    again = memo.AuditMemo(path)
    assert again.boot_file() == b"MEMO CCoq.Init.Nat.add\nMEMO ICoq.Init.Datatypes.nat\n"


def test_a_torn_or_edited_line_is_dropped_and_the_rest_kept(tmp_path):
    path = tmp_path / "audit.memo"
    good = b"MEMO CCoq.Init.Nat.add"
    edited = stored(FORGED).replace(b"Under_rel\n", b"Under_rel2\n")
    torn = stored(b"MEMO CCoq.Init.Nat.mul\tAXIOM Coq.A.b")[:-12]
    path.write_bytes(stored(good) + edited + torn)
    assert memo.AuditMemo(path).boot_file() == good + b"\n"


def test_a_memo_beyond_its_size_limit_is_not_read(tmp_path, monkeypatch):
    path = tmp_path / "audit.memo"
    path.write_bytes(stored(b"MEMO CCoq.Init.Nat.add") * 10)
    monkeypatch.setattr(memo, "MAX_BYTES", 100)
    assert memo.AuditMemo(path).boot_file() == b""


def test_what_one_worker_learned_is_news_for_the_others_only(tmp_path):
    kept = memo.AuditMemo(tmp_path / "audit.memo")
    kept.started("a", 0)
    kept.started("b", 0)
    kept.learned(b"MEMO CCoq.One\n", "a")
    assert kept.news_for("a") == b""
    assert kept.news_for("b") == b"MEMO CCoq.One\n"
    assert kept.news_for("b") == b""  # once
    lines = kept.boot_file()
    kept.started("c", lines.count(b"\n"))  # booted with every line: nothing is news
    assert lines == b"MEMO CCoq.One\n"
    assert kept.news_for("c") == b""


def test_an_unwritable_memo_only_costs_its_recomputation(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    kept = memo.AuditMemo(blocker / "audit.memo")  # its directory cannot be made
    kept.learned(b"MEMO CCoq.One\n", "a")
    assert kept.boot_file() == b"MEMO CCoq.One\n"


def _checker(cache: Path) -> Checker:
    return Checker(Settings(backend="local", cache=False, retries=0, timeout=120, cache_dir=cache))


def _memo_files(cache: Path) -> list[Path]:
    return sorted(cache.glob("installs/*/rocq-audit-*.memo"))


@pytest.mark.slow
def test_a_later_run_on_the_install_uses_what_earlier_audits_found(tmp_path):
    """The memo travels to the next run's worker: shown with a forged line (a well-formed one,
    as only the user's own cache could hold) that the audit then believes, while a line whose
    digest does not match is ignored and the file passes on its own audit."""
    cache = tmp_path / "cache"
    request = CheckRequest(prover="rocq", name="swap.v", content=USES_MAX_COMM)
    with _checker(cache) as first:
        assert first.check_one(request).verdict is Verdict.PASS
    [path] = _memo_files(cache)
    rows = path.read_bytes().splitlines()
    assert rows and all(row.split(b" ", 1)[1].startswith(memo.STANDARD_LIBRARY) for row in rows)
    assert any(row.split(b" ", 1)[1].split(b"\t")[0] == MAX_COMM for row in rows)

    honest = path.read_bytes()
    path.write_bytes(honest + stored(FORGED).replace(b"Under_rel\n", b"Under_rel2\n"))
    memo._memos.clear()  # as a new process would read it
    with _checker(cache) as second:
        result = second.check_one(request)
    assert result.verdict is Verdict.PASS, result.assumptions

    path.write_bytes(honest + stored(FORGED))
    memo._memos.clear()
    with _checker(cache) as third:
        believed = third.check_one(request)
        cold = third.check_one(request, cold=True)
    assert believed.verdict is Verdict.AXIOM
    assert believed.assumptions == [FORGED_AXIOM]
    assert cold.verdict is Verdict.PASS  # a cold check (a canary's) uses no memo


@pytest.mark.slow
def test_a_worker_started_ahead_gets_the_memo_with_its_first_check(tmp_path):
    """A batch's first worker boots while the install is probed, before the memo is known: it
    gets the memo's lines with its first check (shown with a forged line the audit believes),
    and that check takes it rather than boot another."""
    cache = tmp_path / "cache"
    request = CheckRequest(prover="rocq", name="swap.v", content=USES_MAX_COMM)
    with _checker(cache) as first:
        assert first.check_one(request).verdict is Verdict.PASS
    [path] = _memo_files(cache)
    path.write_bytes(path.read_bytes() + stored(FORGED))
    memo._memos.clear()
    with _checker(cache) as second:
        [result] = list(second.map([request]))
    assert result.verdict is Verdict.AXIOM, result.diagnostics
    assert result.assumptions == [FORGED_AXIOM]
    assert "booted_in_check_ms" not in result.provenance.extra  # the one started ahead
