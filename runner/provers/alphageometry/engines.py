"""The engine drivers that run in the sandbox: their files, the job they read, the report they print."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib.resources import files

from runner.backends.base import Completed
from runner.provers.alphageometry import definitions
from runner.provers.alphageometry.source import Problem

ENGINES = ("newclid", "ag4masses")
REPORT_MARK = b"PROOFLOCK-AG-REPORT "
COMMON = "sandbox_common.py"
SERVER = "sandbox_server.py"
SCRIPTS = files(__package__).joinpath("sandbox")  # the scripts that run inside the sandbox
# Fixed so that diagram sampling (numpy's generators) and set iteration order repeat exactly.
SEED = 0
PYTHONHASHSEED = "0"
# One BLAS/OpenMP thread: a forkserver must not fork a threaded BLAS, and a fixed thread count keeps
# floating-point reductions in one order.
ENV = {
    "PYTHONHASHSEED": PYTHONHASHSEED,
    "MPLBACKEND": "Agg",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}
# Seconds kept back from the request's timeout so the driver reports before it is killed.
REPORT_MARGIN_S = 3


@dataclass(frozen=True)
class Policy:
    """How logic errors are decided: `fast` (bounded sampling) or `paper` (NL2AGBench's rule)."""

    logic_errors: str = "fast"
    max_samples: int = 5000
    budget_s: int = 20
    window_s: int = 300

    def key(self) -> dict[str, object]:
        if self.logic_errors == "paper":
            return {"logic_errors": "paper", "silence_s": self.window_s}
        return {"logic_errors": "fast", "max_samples": self.max_samples, "budget_s": self.budget_s}


@dataclass
class Run:
    """What one driver run said, or how it failed to say anything."""

    report: dict[str, object] | None
    completed: Completed
    wall_ms: int = 0
    stderr_tail: str = field(default="")


def driver_name(engine: str) -> str:
    return f"sandbox_{engine}.py"


def sandbox_files(engine: str) -> dict[str, bytes]:
    """The server, its engine driver, and AlphaGeometry's defs.txt and rules.txt."""
    scripts = [COMMON, SERVER, driver_name(engine)]
    found = {name: SCRIPTS.joinpath(name).read_bytes() for name in scripts}
    for name in (definitions.DEFS_FILE, definitions.RULES_FILE):
        found[name] = definitions.data_bytes(name)
    return found


def job(problem: Problem, policy: Policy, timeout_s: float) -> dict[str, object]:
    return {
        "title": problem.title,
        "line": problem.line,
        "seed": SEED,
        "deadline_s": max(1.0, timeout_s - REPORT_MARGIN_S),
        "hard_timeout_s": timeout_s,
        "logic_errors": policy.logic_errors,
        "max_samples": policy.max_samples,
        "logic_budget_s": policy.budget_s,
        "logic_window_s": policy.window_s,
    }


def report_in(stdout: bytes) -> dict[str, object] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(REPORT_MARK):
            try:
                report = json.loads(line[len(REPORT_MARK) :])
            except json.JSONDecodeError:
                return None
            return report if isinstance(report, dict) else None
    return None


def tail(stderr: bytes, lines: int = 20) -> str:
    return "\n".join(stderr.decode("utf-8", errors="replace").splitlines()[-lines:])
