"""Cheats and escapes against the Rocq adapter: none passes, none reaches outside the check.

Each file below tries to get a `pass` it has not earned (a proof of `1 = 2` through an axiom,
an admitted lemma, an unchecked fixpoint, ...) while hiding that from the kit's report, or to
touch the host (write a file, load code, change directory). Every one runs on the local backend
and in the locked container, warm (through the worker) and cold, and on the other line (8.20,
cold only), and must end with the verdict named, never `pass`, with nothing changed outside the
work directory.
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


@pytest.fixture(scope="module")
def checkers(tmp_path_factory):
    """One Checker per backend for the whole module: every cheat runs on the warm worker the
    cheats before it ran on (pytest would otherwise make a Checker, and boot a worker, per test)."""
    made: dict[str, Checker] = {}

    def on(backend: str) -> Checker:
        if backend not in made:
            made[backend] = Checker(_settings(tmp_path_factory.mktemp("kit"), backend))
        return made[backend]

    yield on
    for checker in made.values():
        checker.close()


@pytest.fixture(
    scope="module",
    params=["local", pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow])],
)
def checker(request, checkers):
    return checkers(request.param)


# (backend, cheat) → the other path's result: warm and cold must agree on every cheat too.
OTHER_PATH: dict[tuple[str, str], CheckResult] = {}


def _host_litter() -> set[str]:
    """Names in the places a misdirected write would land: the kit's cwd and the temp dir."""
    return set(os.listdir(os.getcwd())) | set(os.listdir(tempfile.gettempdir()))


# Both paths on both backends (warm and cold are compared on each), and the other line, whose
# every check is the cold path in its container (`--line rocq-8.20`, and `--memory` under 1 GB
# on any line, where a proof of False once passed).
OTHER_LINE = "rocq-8.20"
PATHS = [
    pytest.param("local", "warm", id="local-warm"),
    pytest.param("local", "cold", id="local-cold"),
    pytest.param("docker", "warm", id="docker-warm", marks=[pytest.mark.docker]),
    pytest.param("docker", "cold", id="docker-cold", marks=[pytest.mark.docker]),
    pytest.param("docker", OTHER_LINE, id="docker-8.20", marks=[pytest.mark.docker]),
]


@pytest.mark.slow
@pytest.mark.parametrize(("backend", "path"), PATHS)
@pytest.mark.parametrize("name", sorted(CHEATS))
def test_no_cheat_passes_and_nothing_escapes(name, backend, path, checkers, outside):
    checker = checkers(backend)
    text, verdicts, fields = CHEATS[name]
    line = OTHER_LINE if path == OTHER_LINE else None
    request = CheckRequest(
        prover="rocq",
        name=f"{name}.v",
        content=text.replace(OUT, str(outside)),
        line=line,
        **fields,
    )
    before = _host_litter()
    result = checker.check_one(request, cold=path == "cold")
    assert result.verdict is not Verdict.PASS
    if line is not None:  # 8.20's coqc refuses what 8.16's warns of (Variable outside a section)
        verdicts = verdicts | {Verdict.FAIL}
    assert result.verdict in verdicts, (result.verdict, result.diagnostics)
    assert not any(outside.iterdir()), sorted(outside.iterdir())
    assert not {"redirected", "extracted.ml", "nat.ml", "escape", "profile", "out.out"} & (
        _host_litter() - before
    )
    if line is not None:
        assert result.provenance.extra["rocq_path"] in ("cold", "refused")
        return
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
