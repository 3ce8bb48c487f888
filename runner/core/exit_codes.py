"""The exit codes every command shares, as the README lists them."""

from __future__ import annotations

EXIT_OK = 0  # all passed, reproduced bit-for-bit, clean
EXIT_FAILED = 1  # an artifact did not pass, a replay differs, damage or drift was found
EXIT_USAGE = 2  # bad input: one line on stderr
EXIT_INFRA = 3  # the machine failed: fix it and re-run the same command to resume
EXIT_DRIFTED = 4  # (replay) reproduced on a drifted environment
