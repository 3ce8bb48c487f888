"""Cheats and escapes against the Rocq adapter: none passes, none reaches outside the check.

Each file below tries to get a `pass` it has not earned (a proof of `1 = 2` through an axiom,
an admitted lemma, an unchecked fixpoint, ...) while hiding that from the kit's report, or to
touch the host (write a file, load code, change directory). Every one runs on the local backend
and in the locked container, warm (through the worker) and cold, and must end with the verdict
named, never `pass`, with nothing changed outside the work directory.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from runner import Checker
from runner.core.models import CheckRequest, CheckResult, Verdict
from runner.core.settings import Settings
from tests.support.rocq_cheats import CHEATS, OUT


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    """A host directory the cheats aim at; it must stay empty."""
    return tmp_path_factory.mktemp("outside")


def _settings(base: Path, backend: str) -> Settings:
    return Settings(
        backend=backend,
        cache_dir=base / "cache",
        checkpoint_dir=base / "checkpoints",
        timeout=60,
        retries=0,
        cache=False,
    )


@pytest.fixture(
    scope="module",
    params=["local", pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow])],
)
def checker(request, tmp_path_factory):
    with Checker(_settings(tmp_path_factory.mktemp("kit"), request.param)) as checker:
        yield checker


# (backend, cheat) → the other path's result: warm and cold must agree on every cheat too.
OTHER_PATH: dict[tuple[str, str], CheckResult] = {}


def _host_litter() -> set[str]:
    """Names in the places a misdirected write would land: the kit's cwd and the temp dir."""
    return set(os.listdir(os.getcwd())) | set(os.listdir(tempfile.gettempdir()))


# Both paths locally (where warm and cold are also compared); in a container the warm worker,
# the path a run takes (the cold path in containers: tests/completeness/test_rocq_corpora.py).
PATHS = [
    pytest.param("local", True, id="local-warm"),
    pytest.param("local", False, id="local-cold"),
    pytest.param("docker", True, id="docker-warm", marks=[pytest.mark.docker]),
]


@pytest.mark.slow
@pytest.mark.parametrize(("checker", "warm"), PATHS, indirect=["checker"])
@pytest.mark.parametrize("name", sorted(CHEATS))
def test_no_cheat_passes_and_nothing_escapes(name, warm, checker, outside):
    text, verdicts, fields = CHEATS[name]
    request = CheckRequest(
        prover="rocq", name=f"{name}.v", content=text.replace(OUT, str(outside)), **fields
    )
    before = _host_litter()
    result = checker.check_one(request, cold=not warm)
    assert result.verdict is not Verdict.PASS
    assert result.verdict in verdicts, (result.verdict, result.diagnostics)
    assert not any(outside.iterdir()), sorted(outside.iterdir())
    assert not {"redirected", "extracted.ml", "nat.ml", "escape", "profile", "out.out"} & (
        _host_litter() - before
    )
    other = OTHER_PATH.setdefault((checker.settings.backend, name), result)
    if other is not result:  # the warm worker and a cold coqc judge a cheat alike
        assert (other.verdict, other.result_digest) == (result.verdict, result.result_digest), (
            other.diagnostics,
            result.diagnostics,
        )


def test_refusals_point_at_the_refused_sentence(checker, outside):
    text = "Inductive flipped := F | T.\nLemma t : True.\nProof. exact I. Qed.\n"
    text += "#[local] Register flipped as kernel.ind_bool.\n"
    result = checker.check_one(CheckRequest(prover="rocq", name="r.v", content=text))
    [diagnostic] = result.diagnostics
    assert (result.verdict, diagnostic.line) == (Verdict.FAIL, 4)
    assert "`Register ... as kernel.*` is not allowed" in diagnostic.message
