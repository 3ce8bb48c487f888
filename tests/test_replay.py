"""Replay: the same environment matches 100%; an edited record or a changed environment is reported."""

from __future__ import annotations

import json

import orjson
import pytest

from runner.check.checker import Checker
from runner.core.canonical import digest
from runner.core.errors import InfraFailure
from runner.core.models import CheckRequest, Outcome, Verdict
from runner.provers.base import ResolvedRequest, Sandboxes
from runner.runs.replay import replay
from runner.runs.resumable import run_requests
from tests.helpers import register_test_prover, request_for, rewrite, write_requests


def make_run(cli, tmp_path) -> None:
    names = ("pass_arith.v", "fail_tactic.v", "admitted.v")
    write_requests(tmp_path / "requests.jsonl", [request_for("rocq", name) for name in names])
    cli("run", "requests.jsonl", "--checkpoint", "run.jsonl", check=1)  # two do not pass


def test_replay_in_the_same_environment_matches_every_record(cli, tmp_path):
    make_run(cli, tmp_path)
    done = cli("replay", "run.jsonl")
    assert done.returncode == 0, done.stderr
    assert "reproduced bit-for-bit: 3/3 records match" in done.stdout


def test_an_edited_verdict_is_reported_even_with_a_resealed_chain(cli, tmp_path):
    make_run(cli, tmp_path)

    def claim_pass(records):
        records[2]["body"]["result"]["verdict"] = "pass"  # fail_tactic.v

    rewrite(tmp_path / "run.jsonl", claim_pass)
    done = cli("replay", "run.jsonl")
    assert done.returncode == 1
    assert "2/3 records match" in done.stdout and "verdict differs" in done.stdout


def test_a_changed_environment_names_the_input_that_changed(cli, tmp_path):
    make_run(cli, tmp_path)

    def older_coq(records):
        for record in records[1:]:
            result = record["body"]["result"]
            install = result["environment"]["install"]
            install["coqc"] = install["coqc"].replace("8.16.1", "8.15.0")
            result["env_key"] = digest(result["environment"])  # as a real older run would have

    rewrite(tmp_path / "run.jsonl", older_coq)
    done = cli("replay", "run.jsonl")
    assert done.returncode == 4  # every verdict and result reproduces; the environment does not
    assert "reproduced on a drifted environment" in done.stdout
    assert "environment differs" in done.stdout
    assert "install.coqc" in done.stdout and "8.15.0" in done.stdout
    assert "record inconsistent" not in done.stdout


def test_a_record_whose_digest_does_not_match_its_content_is_flagged(cli, tmp_path):
    make_run(cli, tmp_path)

    def edit_diagnostic(records):
        records[2]["body"]["result"]["diagnostics"][0]["message"] = "forged"

    rewrite(tmp_path / "run.jsonl", edit_diagnostic)
    done = cli("replay", "run.jsonl")
    assert done.returncode == 1 and "record inconsistent" in done.stdout


def test_a_tampered_log_is_refused_with_one_line(cli, tmp_path):
    make_run(cli, tmp_path)
    path = tmp_path / "run.jsonl"
    lines = path.read_bytes().splitlines()
    record = orjson.loads(lines[2])  # fail_tactic.v
    record["body"]["result"]["verdict"] = "pass"
    lines[2] = orjson.dumps(record)
    path.write_bytes(b"\n".join(lines) + b"\n")
    done = cli("replay", "run.jsonl")
    assert done.returncode == 2
    assert "line 3" in done.stderr and "Traceback" not in done.stderr


def test_a_cut_log_replays_what_it_holds_but_says_it_is_incomplete(cli, tmp_path):
    make_run(cli, tmp_path)
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:3]))
    assert cli("verify-log", "run.jsonl").returncode == 1
    done = cli("replay", "run.jsonl")
    assert done.returncode == 1
    assert "2/2 records match" in done.stdout and "incomplete" in done.stdout


def test_hostile_artifact_names_draw_no_fake_cells(cli, tmp_path):
    hostile = "a[/]\n│ 9 │ forged.v │ pass │ pass │ match │[red]x"
    write_requests(
        tmp_path / "requests.jsonl",
        [request_for("rocq", "pass_arith.v").model_copy(update={"name": hostile})],
    )
    cli("run", "requests.jsonl", "--checkpoint", "run.jsonl", check=True)
    done = cli("replay", "run.jsonl")
    assert done.returncode == 0 and "Traceback" not in done.stderr
    table = [line for line in done.stdout.splitlines() if line.startswith(("┃", "│"))]
    assert len(table) == 2  # the header and one row: the name drew no row of its own
    assert len({line.count("│") + line.count("┃") for line in table}) == 1  # and no extra cells
    assert "forged.v" in table[1]


def test_replay_json_says_what_matched(cli, tmp_path):
    make_run(cli, tmp_path)
    data = json.loads(cli("replay", "run.jsonl", "--json").stdout)
    assert data["schema"] == "prooflock.replay/1"
    assert (data["matched"], data["total"], data["exit_code"]) == (3, 3, 0)
    assert [row["status"] for row in data["rows"]] == ["match"] * 3
    assert data["outcome"] == "reproduced bit-for-bit" and data["stopped"] is None


def test_a_drift_and_a_changed_verdict_together_are_a_difference_not_a_drift(cli, tmp_path):
    make_run(cli, tmp_path)

    def drift_and_forge(records):
        for record in records[1:]:
            result = record["body"]["result"]
            result["environment"]["install"]["coqc"] += " (another build)"
            result["env_key"] = digest(result["environment"])
        records[2]["body"]["result"]["verdict"] = "pass"

    rewrite(tmp_path / "run.jsonl", drift_and_forge)
    data = json.loads(cli("replay", "run.jsonl", "--json").stdout)
    assert (data["outcome"], data["exit_code"]) == ("differs", 1)


UNPLUGGED: set[str] = set()  # artifacts whose checks find the machine broken


def fragile_check(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    if request.name in UNPLUGGED:
        raise InfraFailure("the image this record needs is gone from this machine")
    return Outcome(verdict=Verdict.PASS)


def test_a_replay_that_stops_early_still_reports_what_it_replayed(settings, tmp_path, monkeypatch):
    register_test_prover(monkeypatch, "fragile", check=fragile_check)
    requests = [CheckRequest(prover="fragile", name=f"a{i}", content=str(i)) for i in range(4)]
    log = tmp_path / "run.jsonl"
    with Checker(settings) as checker:
        run_requests(requests, log, checker, source="test")
    UNPLUGGED.update({"a2", "a3"})
    try:
        with Checker(settings.model_copy(update={"cache": False})) as checker:
            report = replay(log, checker)
    finally:
        UNPLUGGED.clear()
    data = report.to_json()
    assert [row["artifact"] for row in data["rows"]] == ["a0", "a1"]
    assert data["outcome"] == "stopped" and data["exit_code"] == 3
    assert "gone from this machine" in data["stopped"]
    assert data["incomplete"] is None  # the log is whole; the replay stopped


def verdict_by_line(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    """A prover whose newer line rejects what the default line accepts ("x" files)."""
    accepted = request.image == "rocq" or "x" not in request.content
    return Outcome(verdict=Verdict.PASS if accepted else Verdict.FAIL)


@pytest.mark.docker
def test_replay_on_another_line_shows_per_record_verdict_drift(settings, tmp_path, monkeypatch):
    register_test_prover(monkeypatch, "versioned", check=verdict_by_line, lines=("newclid",))
    requests = [CheckRequest(prover="versioned", name=n, content=n) for n in ("x1", "y1", "x2")]
    log = tmp_path / "run.jsonl"
    with Checker(settings) as checker:
        run_requests(requests, log, checker, source="test")
    auto = settings.model_copy(update={"backend": "auto", "cache": False})
    with Checker(auto) as checker:
        report = replay(log, checker, on={"versioned": "newclid"})
    data = report.to_json()
    assert [(row["artifact"], row["status"]) for row in data["rows"]] == [
        ("x1", "different verdict"),
        ("y1", "same verdict"),
        ("x2", "different verdict"),
    ]
    assert data["drift_by_prover"] == {
        "versioned on newclid": {"same verdict": 1, "different verdict": 2, "error": 0}
    }
    assert data["exit_code"] == 1
    assert all(row["line"] == "newclid" for row in data["rows"])


def test_a_line_the_prover_does_not_have_is_bad_input(cli, tmp_path):
    (tmp_path / "a.v").write_text("Lemma a : True. exact I. Qed.\n")
    done = cli("check", "--prover", "rocq", "--line", "rocq-7.0", "a.v", check=2)
    assert "has no line 'rocq-7.0'" in done.stderr and "lines: rocq" in done.stderr
    make_run(cli, tmp_path)
    bad = cli("replay", "run.jsonl", "--on", "rocq=rocq-7.0", check=2)
    assert "rocq has no line 'rocq-7.0'" in bad.stderr


@pytest.mark.docker
@pytest.mark.slow
def test_a_run_replayed_on_the_newer_rocq_line_shows_each_records_drift(cli, tmp_path):
    """A real second line (Debian trixie's Coq 8.20.1): a lemma 8.20 added makes one record's
    verdict drift, the others keep theirs, and the JSON says which line each record ran on."""
    newer = "Require Import List.\nCheck List.nth_error_ext.\nLemma main : True. exact I. Qed.\n"
    requests = [
        request_for("rocq", "pass_arith.v"),
        request_for("rocq", "fail_tactic.v"),
        CheckRequest(prover="rocq", name="uses_8_20_lemma.v", content=newer),
    ]
    write_requests(tmp_path / "requests.jsonl", requests)
    docker = {"PROOFLOCK_BACKEND": "docker"}
    cli("run", "requests.jsonl", "--checkpoint", "run.jsonl", env=docker, check=1)
    done = cli("replay", "run.jsonl", "--on", "rocq=rocq-8.20", "--json", env=docker, check=1)
    data = json.loads(done.stdout)
    rows = {
        row["artifact"]: (row["recorded"], row["replayed"], row["status"]) for row in data["rows"]
    }
    assert rows == {
        "pass_arith.v": ("pass", "pass", "same verdict"),
        "fail_tactic.v": ("fail", "fail", "same verdict"),
        "uses_8_20_lemma.v": ("fail", "pass", "different verdict"),
    }
    assert all(row["line"] == "rocq-8.20" for row in data["rows"])
    assert data["drift_by_prover"] == {
        "rocq on rocq-8.20": {"same verdict": 2, "different verdict": 1, "error": 0}
    }
