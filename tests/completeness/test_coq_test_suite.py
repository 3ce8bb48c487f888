"""Completeness: Coq's own test-suite, through the kit, agrees with bare coqc file by file.

The files are test-suite/success/, failure/ and bugs/ of Debian's coq source package, the one
the rocq image pins for coqchk's sources (read from the kit's store, where `prooflock images
build rocq` or images/rocq/checker-sources put it). A file that needs what a single-file check
does not give is left out: a `coq-prog-args` header, the test-suite's prerequisite library
(`TestSuite`), `Load`, a load path or a plugin (tests/support/corpora.py's COQ_NEEDS_MORE).

Each file is labelled by bare `coqc` on the file alone: accepted (exit 0) or rejected (Coq's
failure/ files are meant to be rejected). The kit must accept (pass, or axiom/placeholder for a
file that declares or admits one) exactly what coqc accepts, and fail what it rejects; a file
the kit refuses before coqc runs is a design refusal and must carry one of REFUSED_BY_DESIGN's
reasons. CI checks a fixed sample of 40 files chosen by hash (tests/support/corpora.py's
coq_ci_sample, less the few bare coqc takes minutes on) on the local backend, a quarter of them on docker; `nox -s bench` runs the whole
filtered suite (`python -m benchmarks.corpora coq`) and prints agreement and time beside coqc.
"""

from __future__ import annotations

import pytest

from benchmarks.corpora import COQ_TIMEOUT_S
from runner import Checker
from runner.core.models import CheckRequest, Trust
from runner.core.settings import Settings
from tests.support.corpora import (
    Agreement,
    agreement,
    bare_coqc,
    coq_ci_sample,
    coq_suite_files,
    coq_test_suite,
)
from tests.support.docker_daemon import docker_skip_reason

ROOT = coq_test_suite()
FILES = coq_suite_files(ROOT) if ROOT else {}
SAMPLE = coq_ci_sample(FILES)
DOCKER_SAMPLE = SAMPLE[::4]
# The kit's refusals of real Coq (runner/provers/rocq/source.py says why for each).
REFUSED_BY_DESIGN = (
    "`Primitive` is not allowed",
    "`Set Definitional UIP` is not allowed",
    "`Set Cumulative StrictProp` is not allowed",
    "`Register ... as kernel.*` is not allowed",
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        ROOT is None,
        reason="Coq's source package is not in the kit's store (prooflock images build rocq)",
    ),
]


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def checker(request, tmp_path_factory):
    if request.param == "docker" and (reason := docker_skip_reason("rocq")):
        pytest.skip(reason)
    settings = Settings(
        backend=request.param,
        cache_dir=tmp_path_factory.mktemp("cache"),
        timeout=COQ_TIMEOUT_S,
        retries=0,
        cache=False,
    )
    with Checker(settings) as checker:
        yield request.param, checker


@pytest.mark.parametrize("name", SAMPLE or ["(no coq sources)"])
def test_a_test_suite_file_gets_bare_coqcs_verdict(name, checker):
    backend, kit = checker
    if backend == "docker" and name not in DOCKER_SAMPLE:
        pytest.skip("docker checks a quarter of the sample")
    path = FILES[name]
    bare = bare_coqc(path, COQ_TIMEOUT_S)
    result = kit.check_one(CheckRequest(prover="rocq", name=path.name, content=path.read_text()))
    said = [d.message for d in result.diagnostics]
    outcome = agreement(bare, result)
    if outcome is Agreement.DESIGN_REFUSAL:
        assert any(reason in m for m in said for reason in REFUSED_BY_DESIGN), said
        return
    assert outcome is Agreement.AGREE, (bare, result.verdict, said)
    if bare.accepted:
        assert result.trust is Trust.REPLAYED, "coqchk re-checked what coqc accepted"
