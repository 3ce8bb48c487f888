"""AlphaGeometry's problem sets, found beside the repository, for the AlphaGeometry tests."""

from __future__ import annotations

import os
from pathlib import Path

PROBLEM_SET = "jgex_ag_231.txt"  # the file whose presence marks the data directory


def shared_data() -> Path | None:
    """AlphaGeometry's problem sets live in shared/ beside the repository, not in it."""
    candidates = [
        os.environ.get("PROOFLOCK_ALPHAGEOMETRY_DATA"),
        Path(__file__).resolve().parents[3] / "shared" / "data" / "alphageometry",
        "/work/shared/data/alphageometry",
    ]
    for candidate in candidates:
        if candidate and (Path(candidate) / PROBLEM_SET).exists():
            return Path(candidate)
    return None
