"""Each check is observationally equivalent to checking the file alone."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.helpers import ARTIFACTS

LATER_FILES = ["uses_definition.v", "uses_notation.v", "uses_require.v"]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_state_made_by_an_earlier_file_is_invisible_to_later_ones(cli, tmp_path, workers):
    for name in ["defines_things.v", *LATER_FILES]:
        shutil.copy(ARTIFACTS / "rocq" / name, tmp_path / name)
    together = cli(
        "check",
        "--prover",
        "rocq",
        "--no-cache",
        "--workers",
        workers,
        "defines_things.v",
        *LATER_FILES,
    )
    results = [json.loads(line) for line in together.stdout.splitlines()]
    assert [r["artifact"] for r in results] == ["defines_things.v", *LATER_FILES]
    assert results[0]["verdict"] == "pass"
    for later in results[1:]:
        alone = cli("check", "--prover", "rocq", "--no-cache", later["artifact"])
        [alone_result] = [json.loads(line) for line in alone.stdout.splitlines()]
        assert later["verdict"] == "fail"
        assert later["result_digest"] == alone_result["result_digest"], later["artifact"]
