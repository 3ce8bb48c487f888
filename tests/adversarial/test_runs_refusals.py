"""Hostile request lines: an artifact the kit will not take is its own `refused` record.

Each story is a requests file a model or a careless script could write: content that is not
text (a stray byte, a lone surrogate escape), a name that is not text, content sized by bytes
rather than characters, a request that claims to be withheld yet carries content, a limit
raised between a run and its resume. None may stop the other artifacts, leak a traceback, or
slip a megabyte into the log; what the requester chose (prover, fields) stays bad input.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from runner.records.checkpoint import inspect_chain

GOOD = {"prover": "rocq", "name": "good.v", "content": "Lemma a : True. exact I. Qed.\n"}


def write_lines(path: Path, *lines: bytes) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def good_line() -> bytes:
    return json.dumps(GOOD).encode()


def recorded(log: Path) -> dict[str, dict]:
    bodies = [r["body"] for r in inspect_chain(log).records if r["kind"] == "result"]
    return {body["result"]["artifact"]: body for body in bodies}


@pytest.mark.parametrize(
    ("line", "artifact", "why"),
    [
        (
            b'{"prover": "rocq", "name": "byte.v", "content": "Lemma a : True. (* \xc3 *)"}',
            "byte.v",
            "its content is not UTF-8 text (character 19)",
        ),
        (
            b'{"prover": "rocq", "name": "lone.v", "content": "Lemma a : True. (* \\ud800 *)"}',
            "lone.v",
            "its content is not UTF-8 text (character 19)",
        ),
        (
            b'{"prover": "rocq", "name": "na\xffme.v", "content": "Lemma a : True. exact I. Qed."}',
            "na\\udcffme.v",  # shown escaped: the record holds only text
            "its name is not UTF-8 text (character 2)",
        ),
    ],
)
def test_an_artifact_that_is_not_text_is_refused_and_the_rest_is_checked(
    cli, tmp_path, line, artifact, why
):
    write_lines(tmp_path / "r.jsonl", line, good_line())
    done = cli("run", "r.jsonl", "--checkpoint", "ck.jsonl", check=1)
    assert "Traceback" not in done.stderr
    records = recorded(tmp_path / "ck.jsonl")
    assert records["good.v"]["result"]["verdict"] == "pass"
    refused = records[artifact]
    assert refused["result"]["verdict"] == "refused" and refused["result"]["trust"] == "kit"
    assert why in refused["result"]["diagnostics"][0]["message"]
    assert refused["request"]["content"] == ""
    cli("verify-log", "ck.jsonl", check=0)


def test_size_is_counted_in_bytes_not_characters(cli, tmp_path):
    # 600,000 two-byte letters: 0.57 M characters, 1.14 MB; a limit of 1 MB refuses it.
    wide = {**GOOD, "name": "wide.v", "content": "(* " + "é" * 600_000 + " *)"}
    narrow = {
        **GOOD,
        "name": "narrow.v",
        "content": GOOD["content"] + "(* " + "e" * 600_000 + " *)",
    }
    write_lines(tmp_path / "r.jsonl", json.dumps(wide).encode(), json.dumps(narrow).encode())
    env = {"PROOFLOCK_MAX_ARTIFACT_MB": "1"}
    cli("run", "r.jsonl", "--checkpoint", "ck.jsonl", env=env, check=1)
    records = recorded(tmp_path / "ck.jsonl")
    assert records["wide.v"]["result"]["verdict"] == "refused"
    assert (
        "is 1.1 MB, over the 1 MB limit" in records["wide.v"]["result"]["diagnostics"][0]["message"]
    )
    assert records["narrow.v"]["result"]["verdict"] == "pass"


def test_a_request_claiming_to_be_withheld_yet_carrying_content_is_bad_input(cli, tmp_path):
    forged = {
        **GOOD,
        "withheld": {"sha256": "0" * 64, "size": 1, "reason": "trust me"},
    }
    write_lines(tmp_path / "r.jsonl", good_line(), json.dumps(forged).encode())
    done = cli("run", "r.jsonl", "--checkpoint", "ck.jsonl", check=2)
    assert "line 2" in done.stderr and "withheld" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "ck.jsonl").exists()  # bad input: refused before anything ran


def test_what_the_requester_chose_stays_bad_input_before_any_check(cli, tmp_path):
    # A prover field that is not text is the requester's, not the artifact's: exit 2, named.
    write_lines(
        tmp_path / "r.jsonl",
        good_line(),
        b'{"prover": "ro\xffcq", "name": "b.v", "content": "x"}',
    )
    done = cli("run", "r.jsonl", "--checkpoint", "ck.jsonl", check=2)
    assert "line 2" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "ck.jsonl").exists()


def test_a_refused_record_cannot_be_resumed_under_another_limit(cli, tmp_path):
    big = {**GOOD, "name": "big.v", "content": GOOD["content"] + "(* " + "x" * (2 << 20) + " *)"}
    write_lines(tmp_path / "r.jsonl", good_line(), json.dumps(big).encode())
    first = cli("run", "r.jsonl", "--checkpoint", "ck.jsonl", "--json",
                env={"PROOFLOCK_MAX_ARTIFACT_MB": "1"}, check=1)  # fmt: skip
    assert orjson.loads(first.stdout)["verdicts"] == {"pass": 1, "refused": 1}
    raised = cli(
        "run", "r.jsonl", "--checkpoint", "ck.jsonl", env={"PROOFLOCK_MAX_ARTIFACT_MB": "5"}
    )
    # The refusal is part of the request as recorded: another limit is another run.
    assert raised.returncode == 2 and "made from other requests (or other limits)" in raised.stderr
    again = cli("run", "r.jsonl", "--checkpoint", "other.jsonl", "--json",
                env={"PROOFLOCK_MAX_ARTIFACT_MB": "5"}, check=0)  # fmt: skip
    assert orjson.loads(again.stdout)["verdicts"] == {"pass": 2}


def test_a_replayed_refusal_reads_only_the_record_never_the_missing_bytes(cli, tmp_path):
    big = {**GOOD, "name": "big.v", "content": "Lemma b : True. exact I. Qed.\n" * 80_000}
    write_lines(tmp_path / "r.jsonl", json.dumps(big).encode(), good_line())
    env = {"PROOFLOCK_MAX_ARTIFACT_MB": "1"}
    cli("run", "r.jsonl", "--checkpoint", "ck.jsonl", env=env, check=1)
    # Replayed where the limit is higher: the content is not in the log, so it stays refused.
    done = cli("replay", "ck.jsonl", "--json", env={"PROOFLOCK_MAX_ARTIFACT_MB": "100"}, check=0)
    rows = {row["artifact"]: row for row in orjson.loads(done.stdout)["rows"]}
    assert rows["big.v"]["replayed"] == "refused" and rows["big.v"]["status"] == "match"
