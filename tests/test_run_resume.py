"""`prooflock run`: resumable runs that survive SIGKILL without losing or duplicating a record."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from runner.check.checker import Checker
from runner.core.models import CheckRequest, Outcome, Verdict
from runner.provers.base import ResolvedRequest, Sandboxes
from runner.records.checkpoint import CheckpointError, inspect_chain, latest_results
from runner.runs.resumable import run_requests
from tests.helpers import artifact, register_test_prover, rewrite, write_requests

CORPUS = [
    "pass_arith.v",
    "fail_tactic.v",
    "admitted.v",
    "user_axiom.v",
    "fail_syntax.v",
    "open_proof.v",
]


def write_copies(path: Path, copies: int = 2) -> int:
    requests = [
        CheckRequest(
            prover="rocq",
            mode="proof",
            name=name,
            content=artifact("rocq", name) + f"\n(* copy {copy} *)\n",
        )
        for copy in range(copies)
        for name in CORPUS
    ]
    write_requests(path, requests)
    return len(requests)


def run_command(requests: Path, checkpoint: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "runner.cli",
        "run",
        str(requests),
        "--checkpoint",
        str(checkpoint),
    ]


def result_indices(checkpoint: Path) -> list[int]:
    return [r["body"]["index"] for r in inspect_chain(checkpoint).records if r["kind"] == "result"]


def test_run_records_every_request_and_a_rerun_checks_nothing(cli, tmp_path):
    total = write_copies(tmp_path / "requests.jsonl", copies=1)
    first = cli("run", "requests.jsonl", "--checkpoint", "ck.jsonl", check=1)  # some fail
    assert f"checked {total} now" in first.stdout
    again = cli("run", "requests.jsonl", "--checkpoint", "ck.jsonl", check=1)
    assert f"resumed with {total} already recorded; checked 0 now" in again.stdout
    assert sorted(result_indices(tmp_path / "ck.jsonl")) == list(range(total))


def results_so_far(checkpoint: Path) -> int:
    return len(result_indices(checkpoint)) if checkpoint.exists() else 0


def kill_at_a_random_point(proc: subprocess.Popen, checkpoint: Path, rng: random.Random) -> bool:
    """Kill the run after 0 or 1 more records plus a random pause: a point set by the run's own
    progress, so a faster or slower machine still kills runs mid-work (a fixed sleep let fast
    runs finish first). Returns whether the run was still going when killed."""
    target = results_so_far(checkpoint) + rng.randint(0, 1)
    deadline = time.monotonic() + 60
    while proc.poll() is None and results_so_far(checkpoint) < target:
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    time.sleep(rng.uniform(0.0, 0.05))
    if proc.poll() is not None:
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    return True


@pytest.mark.slow
def test_sigkill_at_random_points_resumes_to_a_complete_valid_log(tmp_path):
    requests, checkpoint = tmp_path / "requests.jsonl", tmp_path / "ck.jsonl"
    total = write_copies(requests, copies=6)
    env = {**os.environ, "PROOFLOCK_BACKEND": "local", "PROOFLOCK_CACHE": "false"}
    rng = random.Random(20261129)
    kills = 0
    for _ in range(40):
        if kills >= 12 or results_so_far(checkpoint) == total:
            break
        proc = subprocess.Popen(
            run_command(requests, checkpoint),
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        kills += kill_at_a_random_point(proc, checkpoint, rng)
        proc.wait()
        if checkpoint.exists():
            report = inspect_chain(checkpoint)
            assert report.ok, report.describe()  # a torn tail may exist; nothing else may
    assert kills >= 10, "the trials should interrupt most runs"
    final = subprocess.run(
        run_command(requests, checkpoint), env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert final.returncode == 1, final.stderr  # done; some artifacts do not pass
    report = inspect_chain(checkpoint)
    assert report.ok and not report.torn_tail
    indices = result_indices(checkpoint)
    assert sorted(indices) == list(range(total)), "every request exactly once"
    latest = latest_results(r["body"] for r in report.records if r["kind"] == "result")
    assert all(body["result"]["verdict"] != "infra_error" for body in latest.values())


def quick_pass(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    return Outcome(verdict=Verdict.PASS)


def quick_requests() -> list[CheckRequest]:
    return [CheckRequest(prover="quick", name=f"a{i}", content=str(i)) for i in range(4)]


def test_a_log_is_resumed_only_on_the_backend_it_was_started_with(settings, tmp_path, monkeypatch):
    register_test_prover(monkeypatch, "quick", check=quick_pass)
    log = tmp_path / "run.jsonl"
    with Checker(settings) as checker:  # --backend local
        run_requests(quick_requests(), log, checker, source="test")
    elsewhere = settings.model_copy(update={"backend": "docker"})
    with Checker(elsewhere) as checker, pytest.raises(CheckpointError, match="--backend local"):
        run_requests(quick_requests(), log, checker, source="test")
    with Checker(elsewhere) as checker:  # asked for explicitly: allowed (nothing left to check)
        run_requests(quick_requests(), log, checker, source="test", mixed_backends=True)


def test_auto_choosing_another_backend_for_an_image_on_resume_is_refused(
    settings, tmp_path, monkeypatch
):
    """The log's first checks of the image ran on docker; today `auto` would check it locally."""
    register_test_prover(monkeypatch, "quick", check=quick_pass)
    log = tmp_path / "run.jsonl"
    with Checker(settings) as checker:
        run_requests(quick_requests(), log, checker, source="test")

    def first_two_on_docker_and_the_rest_unchecked(records):
        for record in records[1:3]:
            record["body"]["result"]["provenance"]["backend"] = "docker"
        del records[3:]

    rewrite(log, first_two_on_docker_and_the_rest_unchecked)
    with (
        Checker(settings) as checker,
        pytest.raises(CheckpointError, match="on the docker backend"),
    ):
        run_requests(quick_requests(), log, checker, source="test")
    assert (
        len(latest_results(r["body"] for r in inspect_chain(log).records if r["kind"] == "result"))
        == 2
    )
    with Checker(settings) as checker:
        summary = run_requests(quick_requests(), log, checker, source="test", mixed_backends=True)
    assert (summary.resumed, summary.checked) == (2, 2)


def test_a_resumed_run_counts_what_was_recorded_and_checks_only_the_rest(
    prooflock, tmp_path, monkeypatch
):
    """`prooflock run` cut short after two of four records: run again, its progress starts at
    2/4 and names each of the two it checks now, never one it had."""
    register_test_prover(monkeypatch, "quick", check=quick_pass)
    write_requests(tmp_path / "requests.jsonl", quick_requests())
    assert prooflock("run", "requests.jsonl", "--checkpoint", "ck.jsonl").returncode == 0

    def cut_after_two_results(records):
        first = [i for i, r in enumerate(records) if r["kind"] == "result"][2]
        del records[first:]

    rewrite(tmp_path / "ck.jsonl", cut_after_two_results)
    again = prooflock("run", "requests.jsonl", "--checkpoint", "ck.jsonl")

    assert again.returncode == 0, again.stderr
    progress = [line for line in again.stderr.splitlines() if line.startswith("[")]
    assert progress[0] == "[2/4] already recorded", again.stderr
    now = [line.split(" (")[0].split(" ", 1) for line in progress[1:]]  # in any order
    assert [count for count, _ in now] == ["[3/4]", "[4/4]"]
    assert sorted(label for _, label in now) == ["a2: pass", "a3: pass"]
    assert "resumed with 2 already recorded; checked 2 now" in again.stdout
    assert sorted(result_indices(tmp_path / "ck.jsonl")) == [0, 1, 2, 3]


# -- one artifact the kit will not take ---------------------------------------------------------


def big_but_valid_rocq(megabytes: int) -> str:
    """A real Rocq file of `megabytes` MB: lemmas that would check, were it not so large."""
    lemmas, size, index = [], 0, 0
    while size < megabytes * 2**20:
        lemmas.append(f"Lemma l{index} : True. Proof. exact I. Qed.\n")
        size += len(lemmas[-1])
        index += 1
    return "".join(lemmas)


def test_a_run_holding_a_19_mb_artifact_records_every_other_artifact(cli, tmp_path):
    requests = [
        CheckRequest(prover="rocq", name=name, content=artifact("rocq", name)) for name in CORPUS
    ]
    big = big_but_valid_rocq(19)
    requests.insert(3, CheckRequest(prover="rocq", name="big_20mb.v", content=big))
    lines = write_requests(tmp_path / "requests.jsonl", requests).read_bytes().splitlines()
    # A model's output that is not UTF-8 text: one byte of Latin-1 in an otherwise good request.
    lines.append(b'{"prover": "rocq", "name": "latin1.v", "content": "(* caf\xe9 *)"}')
    (tmp_path / "requests.jsonl").write_bytes(b"\n".join(lines) + b"\n")

    first = cli("run", "requests.jsonl", "--checkpoint", "ck.jsonl", "--json", check=1)
    summary = orjson.loads(first.stdout)
    assert summary["requests"] == summary["checked"] == len(CORPUS) + 2
    recorded = {
        r["body"]["result"]["artifact"]: r["body"]
        for r in inspect_chain(tmp_path / "ck.jsonl").records
        if r["kind"] == "result"
    }
    verdicts = {name: body["result"]["verdict"] for name, body in recorded.items()}
    assert verdicts == {
        "pass_arith.v": "pass",
        "fail_tactic.v": "fail",
        "admitted.v": "placeholder",
        "user_axiom.v": "axiom",
        "fail_syntax.v": "fail",
        "open_proof.v": "fail",
        "big_20mb.v": "refused",
        "latin1.v": "refused",
    }
    refused = recorded["big_20mb.v"]
    assert refused["result"]["trust"] == "kit"
    message = refused["result"]["diagnostics"][0]["message"]
    assert "is 19.0 MB, over the 10 MB limit" in message, message
    withheld = refused["request"]["withheld"]  # the log names the bytes it does not hold
    assert withheld["sha256"] == hashlib.sha256(big.encode()).hexdigest()
    assert refused["request"]["content"] == ""
    assert (tmp_path / "ck.jsonl").stat().st_size < 1 << 20
    latin1 = recorded["latin1.v"]["result"]["diagnostics"][0]["message"]
    assert "not UTF-8 text" in latin1

    assert "8 of 8 requests have results" in cli("verify-log", "ck.jsonl", check=0).stdout
    again = cli("run", "requests.jsonl", "--checkpoint", "ck.jsonl", "--json", check=1)
    assert orjson.loads(again.stdout)["checked"] == 0  # refusals are done, like any record
    replayed = orjson.loads(cli("replay", "ck.jsonl", "--json", check=0).stdout)
    rows = {row["artifact"]: row for row in replayed["rows"]}
    assert rows["big_20mb.v"]["status"] == "match" and rows["big_20mb.v"]["replayed"] == "refused"
    assert replayed["outcome"] == "reproduced bit-for-bit"
