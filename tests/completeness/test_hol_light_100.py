"""Completeness: HOL Light's own "Formalizing 100 theorems" files that need only its core pass.

Debian's hol-light ships them in /usr/share/hol-light/100/. Those below load nothing beyond HOL
Light itself, or one library file of HOL Light's own with `loadt`; several rebind names HOL
Light binds (birthday.ml: HAS_SIZE_FUNSPACE, konigsberg.ml: graph, ramsey.ml: SKOLEM_CONV). Each
must pass on both backends, its theorems re-derived by the replayer. CI checks a quick subset;
PROOFLOCK_HOL_LIGHT_100_FULL=1 checks them all (`nox -s bench` measures them too).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.core.models import Trust, Verdict
from tests.helpers import SHARES_HOL_LIGHT_BOOTS, HolLight, session_checker

HUNDRED = Path("/usr/share/hol-light/100")
CORE_ONLY = [
    "arithmetic.ml",
    "birthday.ml",
    "cantor.ml",
    "euler.ml",  # loadt "Library/binary.ml"
    "konigsberg.ml",
    "lagrange.ml",  # loadt "Library/prime.ml"
    "quartic.ml",
    "ramsey.ml",
    "subsequence.ml",
]
QUICK = ["cantor.ml", "birthday.ml", "euler.ml"]  # a rebinding and a loadt among them
FULL = os.environ.get("PROOFLOCK_HOL_LIGHT_100_FULL") == "1"

pytestmark = [
    pytest.mark.slow,
    SHARES_HOL_LIGHT_BOOTS,
    pytest.mark.skipif(not HUNDRED.is_dir(), reason="needs Debian's hol-light (its 100/ files)"),
]


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def hol(request) -> HolLight:
    return HolLight(session_checker(request, request.param))


@pytest.mark.parametrize("name", CORE_ONLY if FULL else QUICK)
def test_a_100_theorems_file_passes_on_its_replayed_proofs(hol, name):
    result = hol.check(name, content=(HUNDRED / name).read_text())
    assert result.verdict is Verdict.PASS, result.diagnostics
    # No target: which theorems the file bound is its own process's word, replayed all the same.
    assert result.trust is Trust.SELF_REPORTED
    assert "theorems" in result.details["self_reported"]
    assert result.details["theorems"], "a pass says which theorems it replayed"
