"""HOL Light's first check from snapshots (docker): its worker (HOL Light loaded with the recording
kernel) and its replayer are kept as CRIU snapshots of their boots, and a machine's first check
restores them in about a second instead of booting for minutes. The verdicts must be the ones a
cold boot gives: the whole corpus (passes, failures, axioms, placeholders, forgeries) is checked
on freshly booted servers with snapshots off, then on restored ones, and every result must be
the same, digest for digest.

The snapshots are the machine's (Settings.snapshot_dir): `prooflock images build` keeps them,
and this test keeps them itself when they are not there yet.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.check.checker import check
from runner.core.models import CheckRequest, CheckResult, JsonValue
from runner.core.settings import Settings
from tests.helpers import ARTIFACTS

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.xdist_group("hol-light-docker")]

SLOW = {"diverge.ml"}  # a timeout costs the whole timeout, whoever booted
TIMEOUT = 60


def corpus() -> list[CheckRequest]:
    files = sorted(path for path in (ARTIFACTS / "hol-light").glob("*.ml") if path.name not in SLOW)
    requests = [
        CheckRequest(prover="hol-light", name=path.name, content=path.read_text(), timeout=TIMEOUT)
        for path in files
    ]
    target = {"name": "ADD_SYM_AGAIN", "statement": "!m n. m + n = n + m"}
    content = "let ADD_SYM_AGAIN = prove(`!a b. a + b = b + a`, ARITH_TAC);;\n"
    requests.append(
        CheckRequest(prover="hol-light", name="target.ml", content=content, target=target)
    )
    return requests


def run(tmp_path: Path, snapshots: str) -> list[CheckResult]:
    settings = Settings(
        backend="docker",
        snapshots=snapshots,
        cache=False,
        cache_dir=tmp_path / snapshots / "cache",
        checkpoint_dir=tmp_path / snapshots / "checkpoints",
        retries=0,
        timeout=TIMEOUT,
    )
    return list(check(corpus(), settings))


def restored_from(result: CheckResult) -> list[JsonValue]:
    extra = result.provenance.extra
    servers = extra.get("servers", [extra])
    assert isinstance(servers, list)
    return [server.get("restored_from") for server in servers if isinstance(server, dict)]


def test_restored_servers_give_every_verdict_a_cold_boot_gives(tmp_path):
    cold = run(tmp_path, "off")
    restored = run(tmp_path, "auto")
    assert [r.verdict for r in restored] == [r.verdict for r in cold]
    for before, after in zip(cold, restored, strict=True):
        assert after.result_digest == before.result_digest, after.artifact
        assert after.details == before.details
    verdicts = {r.verdict.value for r in cold}
    assert {"pass", "fail", "axiom", "placeholder"} <= verdicts  # the corpus tells them apart
    assert all(not any(restored_from(r)) for r in cold)
    assert all(any(restored_from(r)) for r in restored)  # none of them booted


def test_images_build_keeps_the_snapshots_a_first_check_restores(cli, tmp_path):
    built = cli("images", "build", "hol-light", "--allow-drift", check=True)
    assert "hol-light: booting its servers once, to keep their snapshots" in built.stderr
    assert "hol-light: its servers' snapshots are kept" in built.stderr, built.stderr
    (tmp_path / "x.ml").write_text("let X = ARITH_RULE `2 + 3 = 5`;;\n")
    checked = cli("check", "--prover", "hol-light", "--backend", "docker", "x.ml", check=True)
    assert "HOL Light worker restored from its snapshot" in checked.stderr, checked.stderr
    assert "HOL Light replayer restored from its snapshot" in checked.stderr
    assert '"verdict":"pass"' in checked.stdout
