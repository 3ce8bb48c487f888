"""The checkpoint log: hash chain, torn tails, tampering, one writer, a full disk."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runner.records.checkpoint import CheckpointError, CheckpointLog, inspect_chain


def write_records(path: Path, count: int) -> None:
    with CheckpointLog(path) as log:
        for i in range(count):
            log.append("result", {"index": i, "note": f"record {i}"})


def test_appended_records_form_a_verified_chain(tmp_path):
    path = tmp_path / "log.jsonl"
    write_records(path, 5)
    report = inspect_chain(path)
    assert report.ok and len(report.records) == 5
    assert [r["seq"] for r in report.records] == list(range(5))
    with CheckpointLog(path) as log:  # reopening continues the chain
        log.append("result", {"index": 5})
    assert inspect_chain(path).ok and len(inspect_chain(path).records) == 6


@pytest.mark.parametrize("tail", [b'{"seq":5,"prev":"ab', b"\x00" * 40 + b"\n"])
def test_torn_last_line_is_cut_on_open(tmp_path, tail):
    path = tmp_path / "log.jsonl"
    write_records(path, 5)
    intact = path.read_bytes()
    with path.open("ab") as handle:
        handle.write(tail)
    assert inspect_chain(path).torn_tail  # seen, not yet changed
    with CheckpointLog(path) as log:
        assert log.repaired_bytes == len(tail)
        assert len(log.records) == 5
    assert path.read_bytes() == intact


def test_edited_record_is_reported_with_its_line(tmp_path, cli):
    path = tmp_path / "log.jsonl"
    write_records(path, 5)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b"record 2", b"record X")
    path.write_bytes(b"".join(lines))
    done = cli("verify-log", str(path))
    assert done.returncode == 1  # damage, as `audit` says it (2 is for what is not a log at all)
    assert "line 3" in done.stdout and "edited" in done.stdout
    assert "Traceback" not in done.stderr
    with pytest.raises(CheckpointError, match="line 3"):
        CheckpointLog(path)


def test_removed_record_breaks_the_chain(tmp_path):
    path = tmp_path / "log.jsonl"
    write_records(path, 5)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2] + lines[3:]))
    report = inspect_chain(path)
    assert not report.ok and report.broken_at == 3


def test_a_second_writer_is_refused(tmp_path):
    path = tmp_path / "log.jsonl"
    with CheckpointLog(path), pytest.raises(CheckpointError, match="another prooflock run"):
        CheckpointLog(path)


def test_full_disk_leaves_whole_records_only(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mount)]).returncode:
        pytest.skip("needs root to mount a tiny tmpfs")
    try:
        path = mount / "log.jsonl"
        with CheckpointLog(path) as log, pytest.raises(CheckpointError, match="No space left"):
            for i in range(10_000):
                log.append("result", {"index": i, "padding": "x" * 500})
        report = inspect_chain(path)
        assert report.ok and not report.torn_tail
        assert len(report.records) == i  # every record before the refused one is intact
    finally:
        subprocess.run(["umount", str(mount)])


def test_unreadable_checkpoint_is_a_clear_error(tmp_path, cli):
    done = cli("verify-log", str(tmp_path))  # a directory: only a bundle's is accepted
    assert done.returncode == 2 and "is not a prooflock bundle" in done.stderr
    os.makedirs(tmp_path / "missing", exist_ok=True)
    done = cli("verify-log", str(tmp_path / "nope.jsonl"))
    assert done.returncode == 2 and "no such log" in done.stderr
