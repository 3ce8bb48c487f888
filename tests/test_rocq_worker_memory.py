"""A heavy Rocq file is checked on the warm path within its memory limit.

The warm worker forks a child per compile and per re-check, and holds the child's major GC
off: a GC cycle there would copy the parent's whole heap for a check that is soon over. On a
heavy file that made the child's garbage grow without end. The first 100 lemmas of Coq's own
`success/Nia.v` grow a re-check child to 2.2 GB that way, where bare coqchk needs 765 MB, so
under a 2 GB limit the warm re-check was killed and the file was checked again cold, at twice
the cost. The child now collects again once it has used half of what its limit leaves.
"""

from __future__ import annotations

import pytest

from runner.check.checker import Checker
from runner.core.models import CheckRequest, Verdict
from runner.core.settings import Settings
from tests.support.corpora import coq_suite_files, coq_test_suite

LEMMAS = 100  # Nia.v's first 100 lemmas: a minute to check, 2.2 GB with the GC held off


def nia_prefix() -> str | None:
    root = coq_test_suite("rocq")
    if root is None:
        return None
    lines = coq_suite_files(root)["success/Nia.v"].read_text().splitlines(keepends=True)
    ends = [at for at, line in enumerate(lines) if line.strip().endswith("Qed.")]
    return "".join(lines[: ends[LEMMAS - 1] + 1])


# The local backend only, to keep CI short: the worker and its children are the same on docker,
# where this file failed the same way (cold) and now passes the same way (warm).
@pytest.mark.slow
def test_a_heavy_file_is_re_checked_warm_within_its_memory_limit(tmp_path):
    content = nia_prefix()
    if content is None:
        pytest.skip("Coq's source package is not in the kit's store: prooflock images build rocq")
    settings = Settings(
        backend="local", cache_dir=tmp_path, retries=0, memory_mb=2048, timeout=300, canary=0
    )
    request = CheckRequest(prover="rocq", name="NiaPrefix.v", content=content, timeout=300)
    with Checker(settings) as checker:
        result = checker.check_one(checker.resolve(request))
    assert result.verdict is Verdict.PASS, result.diagnostics
    assert str(result.provenance.extra["rocq_path"]).startswith("worker"), result.provenance
