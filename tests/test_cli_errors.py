"""Bad input gets one line naming the problem and exit code 2, never a traceback."""

from __future__ import annotations

import json

import pytest

from tests.helpers import ARTIFACTS


def assert_user_error(done, *fragments: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_missing_file(cli):
    assert_user_error(cli("check", "--prover", "rocq", "nope.v"), "nope.v", "no such file")


def test_unknown_prover_and_mode(cli, tmp_path):
    (tmp_path / "a.v").write_text("Lemma a : True. exact I. Qed.")
    assert_user_error(cli("check", "--prover", "coq9", "a.v"), "unknown prover 'coq9'")
    assert_user_error(
        cli("check", "--prover", "rocq", "--mode", "sketch", "a.v"), "no mode 'sketch'"
    )


def test_malformed_jsonl_line_is_named(cli, tmp_path):
    good = json.dumps({"prover": "rocq", "name": "a.v", "content": "Lemma a : True. exact I. Qed."})
    (tmp_path / "r.jsonl").write_text(good + "\n" + '{"prover": "rocq", "name": \n')
    assert_user_error(cli("run", "r.jsonl"), "r.jsonl line 2", "not valid JSON")
    (tmp_path / "r.jsonl").write_text(
        good + "\n" + json.dumps({"prover": "rocq", "name": "b.v"}) + "\n"
    )
    assert_user_error(cli("run", "r.jsonl"), "line 2", "content")
    (tmp_path / "r.jsonl").write_text(
        json.dumps({"prover": "rocq", "name": "b", "content": "", "timeout": -1}) + "\n"
    )
    assert_user_error(cli("run", "r.jsonl"), "line 1", "timeout")
    (tmp_path / "r.jsonl").write_text(
        json.dumps({"prover": "lean9", "name": "b", "content": ""}) + "\n"
    )
    assert_user_error(cli("run", "r.jsonl"), "request 1", "unknown prover")


def test_a_directory_is_bad_input(cli, tmp_path):
    (tmp_path / "dir.v").mkdir()
    assert_user_error(cli("check", "--prover", "rocq", "dir.v"), "is a directory")


def test_a_non_utf8_artifact_is_refused_and_the_others_are_checked(cli, tmp_path):
    # The artifact's own trouble, not bad input: its record says why, the next file is checked.
    (tmp_path / "bin.v").write_bytes(b"\xff\xfe\x00junk")
    (tmp_path / "a.v").write_text("Lemma a : True. exact I. Qed.")
    done = cli("check", "--prover", "rocq", "bin.v", "a.v", check=1)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(line["artifact"], line["verdict"]) for line in lines] == [
        ("bin.v", "refused"),
        ("a.v", "pass"),
    ]
    assert lines[0]["trust"] == "kit" and lines[0]["backend"] == "none"
    assert "not UTF-8 text (byte 0: invalid start byte)" in lines[0]["diagnostics"][0]["message"]
    assert "bin.v: refused: artifact bin.v is not UTF-8 text" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("setting", ["PROOFLOCK_TIMEOUT=abc", "PROOFLOCK_BACKEND=cloud"])
def test_bad_setting(cli, tmp_path, setting):
    (tmp_path / "a.v").write_text("Lemma a : True. exact I. Qed.")
    key, value = setting.split("=")
    assert_user_error(
        cli("check", "--prover", "rocq", "a.v", env={key: value}),
        key.removeprefix("PROOFLOCK_").lower(),
    )


def test_checkpoint_from_other_requests_is_refused(cli, tmp_path):
    content = (ARTIFACTS / "rocq" / "pass_arith.v").read_text()
    (tmp_path / "r.jsonl").write_text(
        json.dumps({"prover": "rocq", "name": "a.v", "content": content}) + "\n"
    )
    cli("run", "r.jsonl", "--checkpoint", "ck.jsonl", check=True)
    (tmp_path / "r.jsonl").write_text(
        json.dumps({"prover": "rocq", "name": "b.v", "content": content}) + "\n"
    )
    assert_user_error(cli("run", "r.jsonl", "--checkpoint", "ck.jsonl"), "other requests")


def test_check_prints_the_json_contract(cli, tmp_path):
    (tmp_path / "a.v").write_text((ARTIFACTS / "rocq" / "fail_tactic.v").read_text())
    done = cli("check", "--prover", "rocq", "a.v")
    assert done.returncode == 1  # ran fine, the artifact did not pass
    [line] = [json.loads(text) for text in done.stdout.splitlines()]
    for key in (
        "artifact",
        "verdict",
        "diagnostics",
        "assumptions",
        "env_key",
        "request_digest",
        "result_digest",
    ):
        assert key in line
    assert line["artifact"] == "a.v" and line["verdict"] == "fail"


# -- what a newcomer sees ----------------------------------------------------------------------


def test_version_and_python_dash_m(cli):
    done = cli("--version")
    assert done.returncode == 0 and done.stdout.startswith("prooflock ")


def test_one_prefix_per_error_and_did_you_mean(cli, tmp_path):
    (tmp_path / "a.v").write_text("Lemma a : True. exact I. Qed.")
    done = cli("check", "--prover", "coq", "a.v")
    assert_user_error(done, "did you mean 'rocq'")
    assert done.stderr.count("error:") == 1 and done.stderr.startswith("prooflock: error:")
    usage = cli("check", "a.v")  # --prover missing: argparse, named by its subcommand, once
    assert_user_error(usage, "prooflock check: error:", "--prover")
    assert_user_error(
        cli("check", "--prover", "rocq", "--mode", "proff", "a.v"), "did you mean 'proof'"
    )


def test_dash_reads_the_artifact_from_stdin(tmp_path):
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "runner", "check", "--prover", "rocq", "--backend", "local", "-"],
        input="Lemma a : True. exact I. Qed.\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PROOFLOCK_CACHE_DIR": str(tmp_path / "cache"), "XDG_RUNTIME_DIR": ""},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    [line] = [json.loads(text) for text in done.stdout.splitlines()]
    assert (line["artifact"], line["verdict"], line["schema"]) == (
        "stdin",
        "pass",
        "prooflock.check/1",
    )


def test_every_flag_has_help_and_commands_have_examples(cli):
    for command in (
        "check",
        "run",
        "replay",
        "verify-log",
        "publish",
        "audit",
        "report",
        "upload",
        "download",
        "serve",
    ):
        done = cli(command, "--help")
        assert done.returncode == 0
        assert "example" in done.stdout, command
        assert "OPT_" not in done.stdout and "thin commands" not in done.stdout
    top = cli("--help").stdout
    assert "start here" in top and "exit codes" in top


def test_a_request_that_is_not_unicode_text_is_refused_where_it_is_made():
    # A str from Python code can hold a lone surrogate (or come from surrogateescape): it has no
    # UTF-8 form to hash, store or hand a prover, so the request is invalid, not a crash later.
    from pydantic import ValidationError

    from runner.core.models import CheckRequest

    for fields in (
        {"content": "Lemma a : True.\ud800"},
        {"content": "", "name": "a\udcff.v"},
        {"content": "", "options": {"note": "\ud800"}},
    ):
        request = {"prover": "rocq", "name": "a.v", **fields}
        with pytest.raises(ValidationError, match="(?i)unicode"):
            CheckRequest(**request)
    assert CheckRequest(prover="rocq", name="a.v", content="Lemma α : True.").digest()


def _tar_of_a_log(size: int) -> bytes:
    import io  # noqa: PLC0415
    import random  # noqa: PLC0415
    import tarfile  # noqa: PLC0415

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        member = tarfile.TarInfo("log.jsonl")
        member.size = size
        tar.addfile(member, io.BytesIO(random.Random(0).randbytes(size)))  # gzip cannot shrink it
    return buffer.getvalue()


@pytest.mark.parametrize("command", ["audit", "replay", "verify-log", "report"])
def test_what_is_not_a_bundle_or_log_is_named_in_one_line(cli, tmp_path, command):
    import gzip  # noqa: PLC0415

    extra = ["--out", "report"] if command == "report" else []
    cases = {
        "random.tar": (bytes(range(256)) * 40, "not a whole tar file"),
        "cut.tar": (_tar_of_a_log(100_000)[:20_000], "unexpected end of data"),
        "cut-gz.tar": (gzip.compress(_tar_of_a_log(100_000))[:50_000], "not a whole tar file"),
        "notes.log": (b"hello\n", "is not a prooflock checkpoint log"),
    }
    if command != "report":  # a report on an empty log is an empty report (test_report.py)
        cases["empty.log"] = (b"", "empty")
    for name, (data, says) in cases.items():
        (tmp_path / name).write_bytes(data)
        assert_user_error(cli(command, name, *extra), name, says)
