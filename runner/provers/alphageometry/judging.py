"""Per-problem outcomes (NL2AGBench's categories) and how they map onto the core's verdicts.

`details["outcome"]` is one of OUTCOMES. With `syntax_class` it counts exactly the paper's
categories: solved, syntax error by exception class, logic error. Two outcomes are the kit's
additions:
- `unsolved`: DD+AR found no proof of a valid, numerically true problem;
- `format_error`: not one problem at all (empty, prose, code fence, no goal).

Everything in details and diagnostics is deterministic. Proof text, sample counts and timings go to
Outcome.worker.

The engine's outcome may rest on degenerate diagrams that AlphaGeometry's own drawing rejects. The
driver says so, and `details["alphageometry"]` then gives AlphaGeometry's outcome beside it, with a
warning. The engine's outcome stays the one recorded.
"""

from __future__ import annotations

import re

from runner.core.models import Diagnostic, JsonValue, Outcome, Trust, Verdict
from runner.provers.alphageometry.engines import Policy, Run
from runner.provers.alphageometry.source import FormatError, Problem
from runner.provers.alphageometry.validator import Fault

VERDICTS = {
    "solved": Verdict.PASS,
    "unsolved": Verdict.FAIL,
    "syntax_error": Verdict.FAIL,
    "logic_error": Verdict.FAIL,
    "format_error": Verdict.FAIL,
    "timeout": Verdict.TIMEOUT,
    "memory": Verdict.MEMORY,
    "engine_error": Verdict.CRASH,
}
OUTCOMES = tuple(VERDICTS)
STAGES = {
    "parse": "parsing the problem",
    "rename": "renaming the points",
    "setup": "building the setup string",
    "build": "building the diagram",
    "solve": "running DD+AR on the goal",
}
CONSTRUCTION_FAILURES = {
    "DepCheckFailError": "a precondition of its construction never holds",
    "InvalidLineIntersectError": "the lines it intersects are parallel or the same line",
    "InvalidQuadSolveError": "the lines and circles it intersects never meet",
    "PointTooCloseError": "the new point always lands on an existing one",
    "PointTooFarError": "the new point always lands too far away",
}
INSTALL_HINTS = {
    "newclid": "pip install newclid==2.0.2, or use the newclid image",
    "ag4masses": "use the alphageometry image, or point AG4MASSES_DIR at ag4masses' alphageometry/",
}
# Outcomes decided after every diagram was drawn: where AlphaGeometry's outcome may differ. After a
# timeout stopped the drawing, the driver's account of AlphaGeometry's would be partial.
SAMPLED = ("solved", "unsolved", "logic_error")
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
PATH = re.compile(r"(?<![\w.])/(?:[\w.-]+/)+([\w.-]+)")


def clauses_of(line: str) -> tuple[list[str], str]:
    """The clause texts and the goal text (`? goal`) as the user wrote them."""
    head, _, goal = line.partition(" ? ")
    return head.split("; "), "? " + goal


def clause_at(line: str, index: int | None) -> dict[str, JsonValue] | None:
    if index is None:
        return None
    texts, goal = clauses_of(line)
    text = texts[index] if 0 <= index < len(texts) else goal
    return {"index": index, "text": text}


def outcome(details: dict[str, JsonValue], message: str | None, **extra) -> Outcome:
    verdict = VERDICTS[str(details["outcome"])]
    diagnostics = []
    if message:
        clause = details.get("clause")
        context = clause["text"] if isinstance(clause, dict) else None
        severity = "info" if verdict is Verdict.PASS else "error"
        diagnostics.append(Diagnostic(severity=severity, message=message, context=context))
    # What it rests on: the engine's DD+AR (or the kit's reading of AlphaGeometry's front end). That
    # runs in the process that read the problem; there is no independent re-check.
    return Outcome(
        verdict=verdict, trust=Trust.KERNEL, diagnostics=diagnostics, details=details, **extra
    )


def format_error(name: str, error: FormatError) -> Outcome:
    return outcome(
        {"problem": name, "outcome": "format_error", "reason": error.reason}, error.reason
    )


def from_fault(problem: Problem, fault: Fault, engine: str) -> Outcome:
    """A syntax error decided by the kit's validator alone (the engine was not started)."""
    details = _base(problem, engine, "syntax_error")
    details.update(
        syntax_class=fault.syntax_class,
        clause=fault.clause(),
        stage=fault.stage,
        reason=fault.reason,
        decided_by="validator",
    )
    return outcome(details, f"{fault.syntax_class}: {fault.reason}")


def from_run(
    problem: Problem, run: Run, fault: Fault | None, engine: str, policy: Policy, timeout_s: int
) -> Outcome:
    """The outcome of one engine run, explained by the validator's finding where there is one."""
    worker = _worker(run)
    done, report = run.completed, run.report
    cpu = done.cpu_ms
    if report is None:
        return _no_report(problem, run, engine, timeout_s, worker)
    status = str(report.get("status"))
    if status == "engine_missing":
        missing = f"{report.get('message')} ({INSTALL_HINTS.get(engine, '')})"
        return Outcome(
            verdict=Verdict.INFRA_ERROR,
            trust=Trust.NONE,
            diagnostics=[Diagnostic(message=missing)],
            worker=worker,
        )
    details = _base(problem, engine, status if status in VERDICTS else "engine_error")
    message: str | None
    if status == "syntax_error":
        return _syntax_error(problem, report, fault, details, worker, cpu)
    if status == "logic_error":
        message = _logic_error(problem, report, details)
    elif status == "solved":
        message = None
    elif status == "unsolved":
        message = details["reason"] = (
            "DD+AR found no proof: the problem is valid and its goal holds numerically, "
            "but deduction and algebra saturated without reaching it"
        )
    elif status == "timeout":
        where = (
            "while sampling diagrams" if report.get("stage") == "build" else "before DD+AR finished"
        )
        message = details["reason"] = f"the {timeout_s} s time limit ran out {where}"
        if report.get("stage") == "build" and policy.logic_errors == "paper":
            message = details["reason"] = (
                f"{message}, before the {policy.window_s} s of silence that NL2AGBench counts as a "
                f"logic error: give a time limit above {policy.window_s} s"
            )
    else:
        failure = _clean(str(report.get("exception_text")))
        stage = "DD+AR failed" if report.get("stage") == "solve" else "the engine failed"
        message = details["reason"] = f"{stage}: {failure}"
    result = outcome(details, message, cpu_ms=cpu, worker=worker)
    if fault is not None:  # the engine accepted what the validator rejected: keep the engine's word
        _disagree(result, fault)
    if status in SAMPLED:
        _alphageometry_differs(result, problem, report.get("alphageometry"), engine)
    return result


def _base(problem: Problem, engine: str, status: str) -> dict[str, JsonValue]:
    details: dict[str, JsonValue] = {"problem": problem.title, "outcome": status, "engine": engine}
    if problem.note:
        details["lenient"] = problem.note
    return details


def _syntax_error(
    problem: Problem,
    report: dict,
    fault: Fault | None,
    details: dict,
    worker: dict,
    cpu: int | None,
) -> Outcome:
    index = report.get("index")
    index = int(index) if isinstance(index, int) else None
    if index is None:  # only the `clauses ? goal` split fails before any clause: it is the goal's
        index = len(clauses_of(problem.line)[0])
    stage = str(report.get("stage"))
    details.update(
        syntax_class=str(report.get("exception")),
        clause=clause_at(problem.line, index),
        stage=stage,
        exception=_clean(str(report.get("exception_text"))),
    )
    agrees = fault is not None and (fault.syntax_class, fault.index) == (
        details["syntax_class"],
        index,
    )
    if fault is not None and agrees:
        details["reason"] = fault.reason
    else:
        details["reason"] = (
            f"AlphaGeometry raised {details['exception']} while {STAGES.get(stage, stage)}"
        )
    result = outcome(
        details,
        f"{details['syntax_class']}: {details['reason']}",
        cpu_ms=cpu,
        worker=worker,
    )
    if not agrees:
        _disagree(result, fault)
    return result


def _logic_error(problem: Problem, report: dict, details: dict) -> str:
    logic = report.get("logic") or {}
    kind = str(logic.get("kind"))
    clause = clause_at(problem.line, logic.get("index"))
    details["logic"] = kind
    details["clause"] = clause
    text = clause["text"] if clause else "?"
    if kind == "goal_false":
        reason = (
            f"the goal `{text[2:]}` is numerically false: no sampled diagram satisfies it, "
            "so AlphaGeometry would resample forever"
        )
    else:
        why = CONSTRUCTION_FAILURES.get(str(logic.get("error")), "it fails in every diagram")
        reason = (
            f"construction impossible: clause {clause['index'] if clause else '?'} (`{text}`) "
            f"cannot be drawn in any sampled diagram: {why}"
        )
    if logic.get("policy") == "paper":
        reason = f"no output for {logic.get('silence_s')} s (NL2AGBench's rule); {reason}"
    details["reason"] = reason
    return reason


def _no_report(problem: Problem, run: Run, engine: str, timeout_s: int, worker: dict) -> Outcome:
    done = run.completed
    if done.timed_out:
        # Said as when the driver stops itself in DD+AR, so a replay compares equal either way.
        status, message = "timeout", f"the {timeout_s} s time limit ran out before DD+AR finished"
    elif done.out_of_memory:
        status, message = "memory", "the engine ran out of memory"
    else:
        status = "engine_error"
        last = next((ln for ln in reversed(run.stderr_tail.split("\n")) if ln.strip()), "")
        exit_how = f"signal {done.signal}" if done.signal else f"exit code {done.exit_code}"
        message = f"the {engine} driver ended without a report ({exit_how})" + (
            f": {_clean(last)}" if last else ""
        )
    details = _base(problem, engine, status)
    details["reason"] = message
    return outcome(details, message, cpu_ms=done.cpu_ms, worker=worker)


def _disagree(result: Outcome, fault: Fault | None) -> None:
    if fault is None:
        message = "the kit's validator found no syntax error here; the engine did"
    else:
        result.details["validator"] = {"syntax_class": fault.syntax_class, "clause": fault.clause()}
        message = (
            f"the kit's validator expected {fault.syntax_class} at clause {fault.index}; "
            "the engine's result is the one recorded"
        )
    result.diagnostics.append(Diagnostic(severity="warning", message=message))


def _alphageometry_differs(result: Outcome, problem: Problem, theirs: object, engine: str) -> None:
    """Say AlphaGeometry's outcome beside the engine's where the driver found they differ.

    They differ on a clause placed only in degenerate diagrams, which AlphaGeometry's own drawing
    rejects.
    """
    if not isinstance(theirs, dict) or not isinstance(theirs.get("index"), int):
        return
    clause = clause_at(problem.line, theirs["index"])
    details = result.details
    ours = details.get("clause")
    ours_index = ours.get("index") if isinstance(ours, dict) else None
    if (details.get("outcome"), details.get("logic"), ours_index) == (
        theirs.get("outcome"),
        theirs.get("logic"),
        theirs["index"],
    ):
        return
    why = CONSTRUCTION_FAILURES.get(str(theirs.get("error")), "it fails in every diagram")
    text = clause["text"] if clause else "?"
    reason = (
        f"construction impossible: clause {theirs['index']} (`{text}`) was placed only in "
        f"{theirs.get('diagrams')} degenerate diagram(s), each with a point on another, which "
        f"AlphaGeometry's too-close check lets through only there: {why}"
    )
    details["alphageometry"] = {
        "outcome": str(theirs.get("outcome")),
        "logic": str(theirs.get("logic")),
        "clause": clause,
        "reason": reason,
    }
    result.diagnostics.append(
        Diagnostic(
            severity="warning",
            message=f"AlphaGeometry's outcome differs: {reason}; {engine}'s is the one recorded",
            context=text,
        )
    )


def _worker(run: Run) -> dict[str, JsonValue]:
    """Provenance of one engine run: timings, samples, the proof text; never hashed."""
    report = run.report or {}
    worker: dict[str, JsonValue] = {"engine_wall_ms": run.wall_ms}
    for key in ("samples", "build_ms", "solve_ms", "steps", "engine_version", "seeds", "proof"):
        if report.get(key) is not None:
            worker[key] = report[key]
    logic = report.get("logic")
    if isinstance(logic, dict):
        worker["logic_budget_exhausted"] = logic.get("budget_exhausted")
    if report.get("status") not in ("solved", "unsolved") and run.stderr_tail:
        worker["stderr_tail"] = run.stderr_tail
    return worker


def _clean(text: str) -> str:
    """An exception text without memory addresses or host paths, so it replays byte-identically."""
    return PATH.sub(r"\1", ADDRESS.sub("", text)).strip()
