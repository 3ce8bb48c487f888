"""`prooflock run`: resumable runs that survive SIGKILL without losing or duplicating a record."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.core.models import CheckRequest
from runner.records.checkpoint import inspect_chain, latest_results
from tests.helpers import artifact, write_requests

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


@pytest.mark.slow
def test_sigkill_at_random_points_resumes_to_a_complete_valid_log(tmp_path):
    requests, checkpoint = tmp_path / "requests.jsonl", tmp_path / "ck.jsonl"
    total = write_copies(requests)
    env = {**os.environ, "PROOFLOCK_BACKEND": "local", "PROOFLOCK_CACHE": "false"}
    rng = random.Random(20261129)
    kills = 0
    for _ in range(20):
        proc = subprocess.Popen(
            run_command(requests, checkpoint),
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(rng.uniform(0.2, 2.0))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            kills += 1
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
