"""HOL Light's second line (`hol-light-3.0`: Debian trixie's HOL Light 3.0.0 on OCaml 5.3) on the
docker backend: the same worker and replayer as the default line (20230128 on OCaml 4.13), so a
verdict there rests on a replay by 3.0.0's own kernel too.

The module boots one 3.0 worker, in an xdist group of its own, so `nox -s tests` boots it beside
the default line's workers rather than after them. Its counterpart on the default line (a file
using what only 3.0 has fails there) is in tests/test_hol_light.py, on that line's warm worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.check.checker import Checker
from runner.core.models import CheckRequest, CheckResult, Target, Trust, Verdict
from runner.core.settings import Settings
from runner.images.lock import load_lock
from tests.support.exploits import check as check_exploit
from tests.support.exploits import exploit_cases, judge

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.xdist_group("hol-light-3.0")]

LINE = "hol-light-3.0"
TIMEOUT = 60  # seconds: one for every check, since the core pools workers by their limits
SMALL = "let T1 = ARITH_RULE `1 + 1 = 2`;;\n"
FORGED = "let FALSE_THM : thm = Obj.magic ([], `F`, 0);;\n"
# DIV_ADD_EQ is one of the theorems 3.0.0's arith.ml added: 20230128 has no such name.
USES_3_0 = "let T2 = SPECL [`5`; `7`; `8`] DIV_ADD_EQ;;\n"


@pytest.fixture(scope="module")
def newer(tmp_path_factory) -> Iterator[Checker]:
    """This module's checker: its one 3.0 worker is gone when the module is."""
    settings = Settings(
        backend="docker",
        cache=False,
        checkpoint_dir=tmp_path_factory.mktemp("checkpoints"),
        cache_dir=tmp_path_factory.mktemp("cache"),
        retries=1,
    )
    with Checker(settings) as checker:
        yield checker


def check(checker: Checker, content: str, **fields) -> CheckResult:
    request = CheckRequest(
        prover="hol-light", name="a.ml", content=content, timeout=TIMEOUT, line=LINE, **fields
    )
    return checker.check_one(request)


def test_a_small_proof_passes_on_3_0_as_its_kernel_replayed_it(newer):
    result = check(newer, SMALL)
    assert result.verdict is Verdict.PASS, result.diagnostics
    assert result.trust is Trust.SELF_REPORTED
    assert [(t["name"], t["statement"]) for t in result.details["theorems"]] == [
        ("T1", "|- 1 + 1 = 2")
    ]
    assert result.environment["install"]["image"] == load_lock().tag(LINE)


def test_a_forged_theorem_is_not_a_pass_on_3_0(newer):
    result = check(newer, FORGED, target=Target(name="FALSE_THM", statement="F"))
    # Its child dies reading the forged proof (a crash), or the export fails: never a pass.
    assert result.verdict in (Verdict.FAIL, Verdict.CRASH), result.diagnostics


def test_a_theorem_only_3_0_has_passes_there(newer):
    result = check(newer, USES_3_0)
    assert result.verdict is Verdict.PASS, result.diagnostics
    assert result.trust is Trust.SELF_REPORTED


@pytest.mark.parametrize("path", exploit_cases("hol-light"), ids=lambda p: p.stem)
def test_hol_light_exploits_never_pass_on_3_0_without_their_advisory(newer, path: Path):
    """The standing exploit suite on this line: OCaml 5.3 fixed #7241's match (the forge raises
    Match_failure), so it must not pass here, and no advisory is claimed."""
    result = check_exploit(newer, path, "hol-light", LINE)
    assert result.environment["install"]["image"] == load_lock().tag(LINE)
    judge("hol-light", path, result)
