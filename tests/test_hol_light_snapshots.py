"""HOL Light's first check from snapshots (docker): its worker (HOL Light loaded with the recording
kernel) and its replayer are kept as CRIU snapshots of their boots, and a machine's first check
restores them in about a second instead of booting for minutes. The verdicts must be the ones a
cold boot gives: the whole corpus (passes, failures, axioms, placeholders, forgeries) is checked
on freshly booted servers with snapshots off, then on restored ones, and every result must be
the same, digest for digest.

The comparison uses the machine's snapshots (Settings.snapshot_dir), keeping them itself when
they are not there yet; that `prooflock images build` keeps them is shown in a snapshot
directory of its own, which starts without them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runner.check.checker import check
from runner.core.models import CheckRequest, CheckResult, JsonValue, Verdict
from runner.core.settings import Settings
from tests.helpers import ARTIFACTS

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.xdist_group("hol-light-docker")]

SLOW = {"diverge.ml"}  # a timeout costs the whole timeout, whoever booted
TIMEOUT = 60
BOOTS_S = 3600  # stops a hung boot only: one took over 10 minutes on a loaded 2-core machine
LINE = "hol-light-3.0"  # the second line: its worker boots in a third of the default's time


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


def kept_snapshots(directory: Path) -> dict[str, str]:
    """The snapshots kept in `directory` (not the CRIU bundle): key → server name."""
    kept = {}
    for meta in directory.glob("*/meta.json"):
        said = json.loads(meta.read_text())
        kept[said["key"]] = said["family"].split(" ", 1)[1]
    return kept


def test_images_build_keeps_the_snapshots_a_first_check_restores(cli, tmp_path):
    """On a machine with none of HOL Light's snapshots (its own snapshot directory, which holds
    only the CRIU bundle copied from this machine's, or none), `images build` boots the servers
    once and keeps them there; the first check then restores exactly those. The second line's
    image: the same warm-up, a boot of a third of the default line's."""
    snapshots = tmp_path / "snapshots"
    bundle = Settings().snapshot_dir / "criu"
    if bundle.is_dir():  # made once per directory, and tested in tests/test_snapshots.py
        shutil.copytree(bundle, snapshots / "criu", symlinks=True)
    env = {"PROOFLOCK_SNAPSHOT_DIR": str(snapshots)}

    built = cli("images", "build", LINE, "--allow-drift", env=env, check=True, timeout=BOOTS_S)

    kept = kept_snapshots(snapshots)  # the directory had none: these are the build's
    assert sorted(kept.values()) == ["HOL Light replayer", "HOL Light worker"], built.stderr
    assert f"{LINE}: its servers' snapshots are kept (ready in" in built.stderr
    request = CheckRequest(
        prover="hol-light", name="x.ml", content="let X = ARITH_RULE `2 + 3 = 5`;;\n", line=LINE
    )
    settings = Settings(
        backend="docker",
        snapshot_dir=snapshots,
        cache=False,
        cache_dir=tmp_path / "cache",
        checkpoint_dir=tmp_path / "checkpoints",
    )
    [result] = check([request], settings)
    assert result.verdict is Verdict.PASS, result.diagnostics
    restored = {snapshot["key"] for snapshot in restored_from(result) if isinstance(snapshot, dict)}
    assert restored == set(kept), "the first check restores what images build kept, nothing else"
    assert kept_snapshots(snapshots) == kept  # the check kept nothing new
