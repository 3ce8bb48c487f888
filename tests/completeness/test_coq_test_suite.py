"""Completeness: Coq's own test-suite, through the kit, agrees with bare coqc file by file.

The files are test-suite/success/, failure/ and bugs/ of Debian's coq source package, the one
the rocq image pins for coqchk's sources (read from the kit's store, where `prooflock images
build rocq` or images/rocq/checker-sources put it). A file that needs what a single-file check
does not give is left out: a `coq-prog-args` header, the test-suite's prerequisite library
(`TestSuite`), `Load`, a load path or a plugin (tests/support/corpora.py's COQ_NEEDS_MORE).

Both lines have theirs: 8.16.1 (the `rocq` image's, and the host's) and 8.20.1 (the
`rocq-8.20` image's, from Debian trixie's source package on this machine's mirror, checked
against the sha256 its signed Sources index gives). Each file is labelled by bare `coqc` of
the same line on the file alone (8.20's in its image): accepted (exit 0) or rejected (Coq's
failure/ files are meant to be rejected). The kit must accept (pass, or axiom/placeholder for a
file that declares or admits one) exactly what coqc accepts, and fail what it rejects; a file
the kit refuses before coqc runs is a design refusal and must carry one of REFUSED_BY_DESIGN's
reasons. CI checks a fixed sample of 40 files of each line chosen by hash (tests/support/
corpora.py's coq_ci_sample, less the few bare coqc takes minutes on): 8.16's on the local
backend, a quarter of each line's on docker. `nox -s bench` runs each line's whole filtered
suite (`python -m benchmarks.corpora coq coq-8.20`) and prints agreement and time beside coqc.
"""

from __future__ import annotations

import contextlib
import functools

import pytest

from benchmarks.corpora import COQ_TIMEOUT_S
from runner import Checker
from runner.core.models import CheckRequest, Trust
from runner.core.settings import Settings
from tests.support.corpora import (
    Agreement,
    Bare,
    agreement,
    bare_coqc,
    bare_coqc_in_image,
    coq_ci_sample,
    coq_suite_files,
    coq_test_suite,
)
from tests.support.docker_daemon import docker_skip_reason

# Each line's own test-suite: 8.16.1 (the default line, also on the host) and 8.20.1 (trixie's,
# docker only, labelled by the coqc in its image).
LINES = ("rocq", "rocq-8.20")
ROOTS = {line: coq_test_suite(line) for line in LINES}
FILES = {line: coq_suite_files(root) if root else {} for line, root in ROOTS.items()}
SAMPLES = {line: coq_ci_sample(files) for line, files in FILES.items()}
DOCKER_SAMPLES = {line: sample[::4] for line, sample in SAMPLES.items()}
# The kit's refusals of real Coq (runner/provers/rocq/source.py says why for each).
REFUSED_BY_DESIGN = (
    "`Primitive` is not allowed",
    "`Set Definitional UIP` is not allowed",
    "`Set Cumulative StrictProp` is not allowed",
    "`Register ... as kernel.*` is not allowed",
)
CASES = [
    (line, backend, name)
    for line in LINES
    for backend in (("local", "docker") if line == "rocq" else ("docker",))
    for name in (SAMPLES[line] if backend == "local" else DOCKER_SAMPLES[line])
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checkers(tmp_path_factory):
    """One kit Checker per backend, opened on first use."""
    with contextlib.ExitStack() as stack:
        opened: dict[str, Checker] = {}

        def get(backend: str) -> Checker:
            if backend not in opened:
                settings = Settings(
                    backend=backend,
                    cache_dir=tmp_path_factory.mktemp("cache"),
                    timeout=COQ_TIMEOUT_S,
                    retries=0,
                    cache=False,
                )
                opened[backend] = stack.enter_context(Checker(settings))
            return opened[backend]

        yield get


@functools.cache
def image_labels(line: str) -> dict[str, Bare]:
    """Bare coqc's labels of a line's docker sample, in the line's image (one container)."""
    names = DOCKER_SAMPLES[line]
    return bare_coqc_in_image({n: FILES[line][n] for n in names}, line, COQ_TIMEOUT_S)


def _marks(line: str, backend: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.docker] if backend == "docker" else []


@pytest.mark.parametrize(
    ("line", "backend", "name"),
    [pytest.param(*case, marks=_marks(*case[:2]), id="-".join(case)) for case in CASES]
    or [pytest.param("rocq", "local", "-", id="no-coq-sources")],
)
def test_a_test_suite_file_gets_bare_coqcs_verdict(line, backend, name, checkers):
    if ROOTS[line] is None:
        pytest.skip(
            f"Coq's source package of {line} is neither in the kit's store nor on the mirror"
        )
    if backend == "docker" and (reason := docker_skip_reason(line)):
        pytest.skip(reason)
    path = FILES[line][name]
    bare = bare_coqc(path, COQ_TIMEOUT_S) if line == "rocq" else image_labels(line)[name]
    request = CheckRequest(
        prover="rocq",
        name=path.name,
        content=path.read_text(),
        line=None if line == "rocq" else line,
    )
    result = checkers(backend).check_one(request)
    said = [d.message for d in result.diagnostics]
    outcome = agreement(bare, result)
    if outcome is Agreement.DESIGN_REFUSAL:
        assert any(reason in m for m in said for reason in REFUSED_BY_DESIGN), said
        return
    assert outcome is Agreement.AGREE, (bare, result.verdict, said)
    if bare.accepted:
        assert result.trust is Trust.REPLAYED, "coqchk re-checked what coqc accepted"
