"""One-line messages to the user while work goes on: progress, fallbacks, boots."""

from __future__ import annotations

import sys
from collections.abc import Callable

Notify = Callable[[str], None]


def notify_stderr(message: str) -> None:
    print(f"prooflock: {message}", file=sys.stderr, flush=True)
