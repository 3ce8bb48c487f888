"""A second opinion: a flagged `pass` checked again on a line where its bug is fixed.

A user running `run --second-opinion LINE` learns, per record, whether a `pass` that rests on a
known kernel bug still holds where the bug is fixed: `disputed` (with both results) when the
fixed line rejects the proof itself, the `pass` with its advisory kept when the newer line only
fails on version drift or agrees. The pinned line is the real Rocq 8.16.1 of this machine.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from runner.check import second_opinion
from runner.check.checker import Checker
from runner.check.environment import Environment
from runner.core.canonical import digest
from runner.core.errors import UserError
from runner.core.models import CheckRequest, CheckResult, Diagnostic, Target, Verdict
from runner.core.settings import Settings
from runner.provers.base import ResolvedRequest
from runner.runs.resumable import run_requests

EXPLOITS = Path(__file__).parent / "exploits" / "rocq"
FIXED_LINE = "rocq-8.20"


class SecondLineDouble:
    """Stands in for the checker's `rocq-8.20` line, which needs its Docker image.

    Every other call goes to the real checker. The double answers checks on the second line
    with a scripted verdict and message, and says which Rocq that line is (`version`).
    """

    def __init__(
        self, real: Checker, verdict: Verdict, message: str, version: str, warning: str = ""
    ):
        self.real, self.verdict, self.message, self.version = real, verdict, message, version
        self.warning = warning
        self.asked: list[str] = []

    def resolve(self, request: CheckRequest) -> ResolvedRequest:
        return self.real.resolve(request)

    def environment(self, request: ResolvedRequest) -> Environment:
        if request.request.line != FIXED_LINE:
            return self.real.environment(request)
        image = f"prooflock/rocq-8.20:{self.version}"
        data = {"prover": "rocq", "install": {"kind": "docker", "image": image}}
        return Environment(data, digest(data))

    def check_one(self, request: ResolvedRequest) -> CheckResult:
        if request.request.line != FIXED_LINE:
            return self.real.check_one(request)
        self.asked.append(request.name)
        pinned = self.real.check_one(request.request.model_copy(update={"line": None}))
        diagnostics = [Diagnostic(severity="warning", message=self.warning)] if self.warning else []
        diagnostics += [Diagnostic(message=self.message)] if self.message else []
        environment = self.environment(request).data
        return pinned.model_copy(
            update={
                "verdict": self.verdict,
                "diagnostics": diagnostics,
                "environment": environment,
                "env_key": digest(environment),
            }
        )

    def map_unordered(self, work):
        return self.real.map_unordered(work)


def exploit_request(name: str) -> CheckRequest:
    path = EXPLOITS / name
    statement = "True" if name.startswith("control") else "False"
    return CheckRequest(
        prover="rocq",
        name=name,
        content=path.read_text(),
        timeout=60,
        target=Target(name="main", statement=statement),
    )


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    with Checker(Settings(backend="local", cache_dir=cache, retries=0)) as real:
        yield real


def run_with_second_opinion(checker, double, names, tmp_path, requests=(), line=FIXED_LINE):
    log = tmp_path / "log.jsonl"
    summary = run_requests(
        [*(exploit_request(name) for name in names), *requests],
        log,
        checker,
        source="requests.jsonl",
        executor=second_opinion.SecondOpinion(checker, double, line),
    )
    return {result.artifact: result for result in summary.results}, log


@pytest.mark.slow
def test_a_proof_of_false_the_fixed_line_rejects_is_disputed_with_both_results(checker, tmp_path):
    # As if 8.20 fixed rocq#20413: a line whose guard checker rejects the fixpoint.
    double = SecondLineDouble(
        checker, Verdict.FAIL, "Recursive definition of spiral is ill-formed.", "9.2.0"
    )
    results, log = run_with_second_opinion(
        checker, double, ["PL-ROCQ-20413.v", "control.v"], tmp_path
    )
    disputed = results["PL-ROCQ-20413.v"]
    assert disputed.verdict is Verdict.DISPUTED and disputed.advisories == ["PL-ROCQ-20413"]
    opinion = disputed.details["second_opinion"]
    assert opinion["line"] == FIXED_LINE and opinion["verdict"] == "fail"
    assert opinion["fixes"] == ["PL-ROCQ-20413"]
    assert disputed.details["pinned_verdict"] == "pass"
    assert disputed.self_consistent()  # its digest covers both results
    assert "rejected on rocq-8.20" in disputed.diagnostics[-1].message
    assert results["control.v"].verdict is Verdict.PASS  # carries no advisory: never asked
    assert double.asked == ["PL-ROCQ-20413.v"]
    assert '"verdict":"disputed"' in log.read_text()  # the log keeps the disputed record


@pytest.mark.slow
@pytest.mark.parametrize(
    "verdict, message",
    [
        (Verdict.FAIL, "The reference Nat.spiral_helper was not found in the current environment."),
        (Verdict.FAIL, "Syntax error: '.' expected after [vernac:gallina] (in [vernac_aux])."),
        (Verdict.PASS, ""),
        (Verdict.TIMEOUT, "the check took longer than 60 s"),
    ],
    ids=["renamed-lemma", "syntax-drift", "agrees", "no-verdict"],
)
def test_drift_or_agreement_on_the_fixed_line_keeps_the_pass_and_its_advisory(
    checker, tmp_path, verdict, message
):
    double = SecondLineDouble(checker, verdict, message, "9.2.0")
    results, _ = run_with_second_opinion(checker, double, ["PL-ROCQ-20413.v"], tmp_path)
    kept = results["PL-ROCQ-20413.v"]
    assert kept.verdict is Verdict.PASS and kept.advisories == ["PL-ROCQ-20413"]
    assert kept.provenance.extra["second_opinion"]["verdict"] == verdict.value
    assert kept.self_consistent()


@pytest.mark.slow
def test_a_warning_worded_like_drift_does_not_hide_a_dispute(checker, tmp_path):
    # The fixed line rejects the fixpoint; the file also provoked a warning that reads as drift.
    double = SecondLineDouble(
        checker,
        Verdict.FAIL,
        "Recursive definition of spiral is ill-formed.",
        "9.2.0",
        warning="Notation spiral_helper has been removed. [deprecated-notation]",
    )
    results, _ = run_with_second_opinion(checker, double, ["PL-ROCQ-20413.v"], tmp_path)
    assert results["PL-ROCQ-20413.v"].verdict is Verdict.DISPUTED


@pytest.mark.slow
def test_a_line_with_the_same_bug_is_not_asked(checker, tmp_path):
    # 8.20.1 still has rocq#20413 (fixed in 9.0.1): asking it would prove nothing.
    double = SecondLineDouble(checker, Verdict.FAIL, "ill-formed", "8.20.1")
    results, _ = run_with_second_opinion(checker, double, ["PL-ROCQ-20413.v"], tmp_path)
    assert results["PL-ROCQ-20413.v"].verdict is Verdict.PASS
    assert double.asked == []


def test_a_line_no_prover_pins_is_bad_input(checker):
    with pytest.raises(UserError, match="no prover pins a line"):
        second_opinion.SecondOpinion(checker, checker, "rocq-7.0")


@pytest.mark.slow
@pytest.mark.docker
def test_on_the_real_8_20_line_each_reproducer_keeps_its_advisory(tmp_path):
    """The pinned 8.16.1 and the real rocq-8.20 line: no listed bug our six clean proofs of
    False use is fixed by 8.20.1, so none is re-checked, and each keeps its advisory."""
    settings = Settings(backend="docker", cache_dir=tmp_path / "cache", retries=0)
    names = [f"PL-ROCQ-{n}.v" for n in (20413, 20455, 21051, 21685, 21839, 22387)]
    with Checker(settings) as real:
        results, _ = run_with_second_opinion(real, real, names, tmp_path)
    for name in names:
        assert results[name].verdict is Verdict.PASS and results[name].advisories, name
        assert "second_opinion" not in results[name].provenance.extra


# Sound, and flagged for rocq#16957 (a section, change_no_check, the VM: fixed in 8.17), and it
# uses `le_plus_l`, which 8.16.1 still has (deprecated) and 8.20.1 no longer does.
OLD_NAME_IN_A_SECTION = """Require Import Arith.
Section Cached.
  Let k : nat := 3.
  Lemma below : k <= k + 1.
  Proof. change_no_check (k <= k + 1). vm_compute. exact (le_plus_l 3 1). Qed.
End Cached.
Lemma main : True.
Proof. exact I. Qed.
"""


@pytest.mark.slow
@pytest.mark.docker
def test_on_the_real_8_20_line_a_renamed_lemma_is_drift_not_a_dispute(tmp_path):
    settings = Settings(backend="docker", cache_dir=tmp_path / "cache", retries=0)
    request = CheckRequest(
        prover="rocq",
        name="old_name.v",
        content=OLD_NAME_IN_A_SECTION,
        timeout=60,
        target=Target(name="main", statement="True"),
    )
    with Checker(settings) as real:
        results, _ = run_with_second_opinion(real, real, [], tmp_path, [request])
    kept = results["old_name.v"]
    assert kept.verdict is Verdict.PASS and "PL-ROCQ-16957" in kept.advisories
    opinion = kept.provenance.extra["second_opinion"]
    assert opinion["line"] == FIXED_LINE and opinion["verdict"] == "fail"
    assert "le_plus_l" in opinion["diagnostics"][0]["message"]  # 8.20.1 does not know it
    assert opinion["outcome"].startswith("says nothing")


@pytest.mark.slow
def test_run_records_its_second_opinion_and_a_resume_must_keep_it(cli, tmp_path):
    """`run --second-opinion LINE` is in the log's header: resuming with another choice (`none`
    included) is refused, the default resumes as the log started, and a line no prover pins is
    bad input before anything is written."""
    request = exploit_request("control.v").model_dump_json()
    (tmp_path / "requests.jsonl").write_text(request + "\n")
    args = ("run", "requests.jsonl", "--checkpoint", "run.jsonl", "--daemon", "off")
    bad = cli(*args, "--second-opinion", "rocq-7.0")
    assert bad.returncode == 2 and "no prover pins a line" in bad.stderr
    assert not (tmp_path / "run.jsonl").exists()
    cli(*args, "--second-opinion", FIXED_LINE, check=True)
    header = json.loads((tmp_path / "run.jsonl").read_text().splitlines()[0])
    assert header["body"]["second_opinion"] == FIXED_LINE
    dropped = cli(*args, "--second-opinion", "none")
    assert dropped.returncode == 2 and f"--second-opinion {FIXED_LINE}" in dropped.stderr
    cli(*args, "--second-opinion", FIXED_LINE, check=True)  # the same option resumes
    cli(*args, check=True)  # so does the default (`auto`): a resumed log keeps its header's
    resumed = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert [r["body"].get("second_opinion") for r in resumed if r["kind"] == "header"] == [
        FIXED_LINE
    ]


@pytest.mark.slow
def test_by_default_a_run_asks_each_provers_declared_line_and_says_when_it_cannot(cli, tmp_path):
    """`auto` (the default) records the declared line in the header; on the local backend, where
    that line cannot run, a flagged pass stays a pass with its advisory and says it was not asked."""
    flagged = CheckRequest(prover="rocq", name="flagged.v", content=FLAGGED_AND_SOUND, timeout=60)
    (tmp_path / "requests.jsonl").write_text(flagged.model_dump_json() + "\n")
    ran = cli(
        "run",
        "requests.jsonl",
        "--checkpoint",
        "run.jsonl",
        "--daemon",
        "off",
        "--backend",
        "local",
        "--json",
        check=True,
    )
    records = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert records[0]["body"]["second_opinion"] == NEWEST_LINE, ran.stderr
    (result,) = [r["body"]["result"] for r in records if r["kind"] == "result"]
    assert result["verdict"] == "pass" and result["advisories"], result
    opinion = result["provenance"]["extra"]["second_opinion"]
    assert opinion["line"] == NEWEST_LINE and opinion["outcome"].startswith("not asked:")
    assert "runs only in its image" in opinion["outcome"]
    off = cli(
        "run",
        "requests.jsonl",
        "--checkpoint",
        "off.jsonl",
        "--daemon",
        "off",
        "--backend",
        "local",
        "--second-opinion",
        "none",
        check=True,
    )
    header = json.loads((tmp_path / "off.jsonl").read_text().splitlines()[0])["body"]
    assert "second_opinion" not in header, off.stderr


# -- the real second opinion: Rocq 9.2.0, where four of our six clean proofs of False are fixed --

NEWEST_LINE = "rocq-9.2"

# Sound, and flagged for rocq#20455 (a fixpoint and a match on an `if`: fixed in 9.0.1). It
# computes with primitive integers, which Rocq 9 declares in Corelib rather than Coq.
FLAGGED_AND_SOUND = """From Coq Require Import Uint63.
Fixpoint count (n : nat) : int :=
  match n with O => 0%uint63 | S m => (count m + 1)%uint63 end.
Definition pick (b : bool) (n : nat) : nat :=
  match (if b then n else 0) with O => 1 | S k => k end.
Lemma count_three : count (pick true 4) = 3%uint63.
Proof. vm_compute. reflexivity. Qed.
Lemma main : True.
Proof. exact I. Qed.
"""


def line_request(name: str, content: str) -> CheckRequest:
    return CheckRequest(
        prover="rocq",
        name=name,
        content=content,
        timeout=60,
        target=Target(name="main", statement="True"),
    )


@pytest.mark.slow
@pytest.mark.docker
def test_run_with_a_second_opinion_from_rocq_9_2_disputes_only_the_proof_of_false(cli, tmp_path):
    """`run --second-opinion rocq-9.2` on the default line (8.16.1): the reproducer of
    rocq#20413 passes there and is `disputed` with both results; a sound flagged file 9.2
    accepts keeps its pass and advisory; a lemma 9.2 no longer has is drift, never a dispute."""
    requests = [
        exploit_request("PL-ROCQ-20413.v"),
        line_request("flagged.v", FLAGGED_AND_SOUND),
        line_request("old_name.v", OLD_NAME_IN_A_SECTION),
    ]
    lines = "".join(request.model_dump_json() + "\n" for request in requests)
    (tmp_path / "requests.jsonl").write_text(lines)
    args = ("run", "requests.jsonl", "--checkpoint", "run.jsonl", "--backend", "docker")
    done = cli(*args, "--second-opinion", NEWEST_LINE, "--daemon", "off", check=1)
    records = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert records[0]["body"]["second_opinion"] == NEWEST_LINE
    results = {r["body"]["result"]["artifact"]: r["body"]["result"] for r in records[1:]}

    disputed = results["PL-ROCQ-20413.v"]
    assert disputed["verdict"] == "disputed", done.stderr
    assert disputed["advisories"] == ["PL-ROCQ-20413"]
    assert disputed["details"]["pinned_verdict"] == "pass"
    opinion = disputed["details"]["second_opinion"]
    assert opinion["line"] == NEWEST_LINE and opinion["fixes"] == ["PL-ROCQ-20413"]
    assert opinion["verdict"] == "fail" and opinion["env_key"] != disputed["env_key"]
    assert "spiral is ill-formed" in opinion["diagnostics"][0]["message"]  # 9.2's own words
    assert CheckResult.model_validate(disputed).self_consistent()  # its digest covers both

    kept = results["flagged.v"]
    assert kept["verdict"] == "pass" and "PL-ROCQ-20455" in kept["advisories"]
    agrees = kept["provenance"]["extra"]["second_opinion"]
    assert agrees["line"] == NEWEST_LINE and agrees["outcome"] == "agrees"

    drift = results["old_name.v"]
    assert drift["verdict"] == "pass" and "PL-ROCQ-16957" in drift["advisories"]
    said = drift["provenance"]["extra"]["second_opinion"]
    assert said["verdict"] == "fail" and said["outcome"].startswith("says nothing (drift")
    assert any("le_plus_l" in d["message"] for d in said["diagnostics"])  # 9.2 lacks it


# The first release each bug is fixed in, as the upstream list says (rocq.toml holds the same).
FIRST_FIXED = {"PL-ROCQ-21839": (9, 3, 0), "PL-ROCQ-22387": (9, 2, 1)}


def rocq_version_in(client, image_id: str) -> tuple[int, ...]:
    """The Rocq the image really holds, from its package database (`coqc --version` says only
    "9.2"), not from the lock."""
    # Waited for, then read: a container this short-lived can lose its output to run(remove=True).
    container = client.containers.run(
        image_id, ["dpkg-query", "-W", "-f=${Version}", "coq"], network_disabled=True, detach=True
    )
    try:
        container.wait(timeout=120)
        said = container.logs(stdout=True, stderr=True)
    finally:
        container.remove(force=True)
    found = re.match(rb"(?:\d+:)?(\d+)\.(\d+)\.(\d+)", said)
    assert found, said
    return tuple(int(part) for part in found.groups())


@pytest.mark.slow
@pytest.mark.docker
def test_rocq_9_2_disputes_exactly_the_bugs_its_own_release_fixes(client, tmp_path):
    """rocq#21839 (fixed in 9.3) and #22387 (fixed in 9.2.1): on a line whose Rocq still has a
    bug, its reproducer keeps its `pass` and advisory and 9.2 is never asked about that bug; on
    a line that fixed it (if the line's Debian package moves on), the pass is `disputed`. The
    expectation follows the Rocq the image really runs, so a newer package cannot break it."""
    settings = Settings(backend="docker", cache_dir=tmp_path / "cache", retries=0)
    names = ["PL-ROCQ-21839.v", "PL-ROCQ-22387.v"]
    with Checker(settings) as real:
        probe = real.resolve(exploit_request(names[0]).model_copy(update={"line": NEWEST_LINE}))
        install = real.environment(probe).data["install"]
        version = rocq_version_in(client, install["image_id"])
        results, _ = run_with_second_opinion(real, real, names, tmp_path, line=NEWEST_LINE)
    for name in names:
        own = name.removesuffix(".v")
        opinion = results[name].details.get("second_opinion") or results[name].provenance.extra.get(
            "second_opinion", {}
        )
        if version < FIRST_FIXED[own]:
            assert results[name].verdict is Verdict.PASS and own in results[name].advisories, name
            assert own not in opinion.get("fixes", [])  # the line has this bug: never a reason
            assert opinion.get("outcome", "agrees") == "agrees"
        else:
            assert results[name].verdict is Verdict.DISPUTED, (name, version)
            assert own in opinion["fixes"]
