"""`python -m benchmarks`: a mistyped benchmark name is a one-line error, not a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_an_unknown_benchmark_name_is_refused_with_the_names_there_are() -> None:
    results = REPO / "benchmarks" / "results"
    before = sorted(results.iterdir())
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "rocq", "roqc"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "no benchmark named roqc" in done.stderr
    # the names offered are the benchmarks, not the package's own entry point or helpers
    offered = done.stderr.split("there are: ", 1)[1]
    assert "rocq" in offered and "hol_light" in offered
    assert "__main__" not in offered and "table" not in offered
    assert sorted(results.iterdir()) == before  # refused before anything ran or was written
