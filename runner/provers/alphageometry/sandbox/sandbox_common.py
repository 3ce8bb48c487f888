"""Runs INSIDE the sandbox, beside an engine driver: the job, the report line, the bounded sampling.

The adapter writes it into the sandbox; `sandbox_newclid.py` and `sandbox_ag4masses.py` import it.
It uses the standard library only, so it loads before the engine does.

The job (job.json) says what to check and how. Whatever happens, the driver prints exactly one
report line on stdout: `PROOFLOCK-AG-REPORT {json}`. Engine output goes to stderr.
"""

import json
import os
import random
import sys
import time
from collections import Counter

REPORT_MARK = "PROOFLOCK-AG-REPORT "
# The exception classes the engine's resampling loop swallows (the same names in AlphaGeometry and
# newclid). A diagram that failed is drawn again, so they are never syntax errors.
RESAMPLED = (
    "InvalidLineIntersectError",
    "InvalidQuadSolveError",
    "DepCheckFailError",
    "PointTooCloseError",
    "PointTooFarError",
)


class StageError(Exception):
    """An exception the engine raised at a front-end step, with the clause it was working on."""

    def __init__(self, stage, index, error):
        super().__init__(stage, index, error)
        self.stage = stage
        self.index = index
        self.error = error


def main(load_engine, solve):
    """A cold run: `python3 sandbox_ENGINE.py job.json` checks one problem and reports."""
    job = read_job(sys.argv[1] if len(sys.argv) > 1 else "job.json")
    try:
        engine = load_engine()
    except ImportError as error:
        report(status="engine_missing", message=str(error))
        return
    run_job(job, engine, solve)


def run_job(job, engine, solve):
    """Check one problem with an imported engine and print its report line."""
    seeds = seed_everything(job["seed"])
    try:
        result = solve(job, engine)
    except StageError as failed:
        result = {
            "status": "syntax_error",
            "stage": failed.stage,
            "index": failed.index,
            "exception": type(failed.error).__name__,
            "exception_text": exception_text(failed.error),
        }
    report(seeds=seeds, engine_version=engine["version"], **result)


def data_file(job, name):
    """defs.txt and rules.txt: in the work dir for a cold run, shared by a forkserver's jobs."""
    return os.path.join(job.get("data_dir", "."), name)


def read_job(path="job.json"):
    with open(path, encoding="utf-8") as handle:
        job = json.load(handle)
    job["started"] = time.monotonic()
    return job


def seed_everything(seed):
    """Seed Python's and numpy's global generators, which sampling uses (newclid seeds its own)."""
    random.seed(seed)
    import numpy

    numpy.random.seed(seed)
    return {
        "numpy": seed,
        "python_random": seed,
        "pythonhashseed": os.environ.get("PYTHONHASHSEED"),
    }


def report(**fields):
    sys.stdout.write(REPORT_MARK + json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def remaining(job):
    return job["deadline_s"] - (time.monotonic() - job["started"])


def at_stage(stage, index, action):
    """Run one front-end step; an exception from it becomes a StageError naming the clause."""
    try:
        return action()
    except MemoryError:
        raise
    except Exception as error:  # noqa: BLE001 - any exception here is the engine's verdict
        raise StageError(stage, index, error) from error


def split_problem(line):
    """AlphaGeometry's own split (problem.py): `clauses ? goal`, clauses joined by `; `."""
    clauses, goal = line.split(" ? ")
    return clauses.split("; "), goal


def exception_text(error):
    """`KeyError: 'e'`: the class and message, deterministic (renamed point names, no addresses)."""
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def solve_failure(error, facts):
    """The report when DD+AR itself fails on a problem that was built."""
    return {
        "status": "engine_error",
        "stage": "solve",
        "exception_text": exception_text(error),
        **facts,
    }


def sample_diagrams(job, draw_once, goal_index):
    """The engine's resampling loop, bounded so that a false goal ends as a logic error.

    `draw_once()` returns ("ok", state), ("failed", clause_index, error) or ("goal_false",).

    Fast policy: job["max_samples"] diagrams, however long they take. The request's own time limit
    still ends an undecided run. No clock decides the outcome, since that would make it depend on
    the machine's speed. The sampler draws the same diagrams in the same order (seeded). A late
    degenerate one can decide `goal_false` or `construction_impossible`. The policy's key keeps
    job["logic_budget_s"], so recorded results keep their key. It decides nothing.

    Paper policy (NL2AGBench): unbounded samples. The engine prints nothing while it resamples, so a
    problem with no output for job["logic_window_s"] seconds is a logic error. That rule is in time
    by its definition.
    """
    started = time.monotonic()
    failures = Counter()  # clause index -> failed diagrams
    errors = Counter()  # (clause index, exception class) -> failed diagrams
    goal_false = 0
    samples = 0
    paper = job["logic_errors"] == "paper"
    while True:
        samples += 1
        drawn = draw_once()
        if drawn[0] == "ok":
            return {"state": drawn[1], "samples": samples, "build_ms": _ms(started)}
        if drawn[0] == "goal_false":
            goal_false += 1
        else:
            failures[drawn[1]] += 1
            errors[drawn[1], drawn[2]] += 1
        if remaining(job) <= 0:  # the request's own time limit, not the policy's: undecided
            return {"deadline": True, "samples": samples, "build_ms": _ms(started)}
        if not paper and samples >= job["max_samples"]:
            exhausted = "samples"
            break
        if paper and time.monotonic() - started > job["logic_window_s"]:
            exhausted = "time"
            break
    error = None
    if goal_false:
        kind, index = "goal_false", goal_index
    else:  # no diagram got past some clause: the clause that failed most often is impossible
        kind, index = "construction_impossible", min(failures, key=lambda i: (-failures[i], i))
        error = min((n for i, n in errors if i == index), key=lambda n: (-errors[index, n], n))
    return {
        "logic": {
            "kind": kind,
            "index": index,
            "error": error,
            "policy": job["logic_errors"],
            "silence_s": job["logic_window_s"] if paper else None,
            "budget_exhausted": exhausted,
        },
        "samples": samples,
        "build_ms": _ms(started),
    }


def _ms(since):
    return int((time.monotonic() - since) * 1000)
