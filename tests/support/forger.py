"""What someone who can write a bundle, and holds no key, can do to it.

Edit records and re-seal the hash chain (`tests.helpers.rewrite`), patch the statement's log
subject to the new log (as measured in issue 21), or rebuild the whole statement from the forged
log with prooflock's own code: the perfect forgery that only a signature can tell apart.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson

from runner.core.models import CheckResult, Outcome, Trust, Verdict, result_digest
from runner.images.lock import ImagesLock
from runner.records.checkpoint import inspect_chain, recorded_runs
from runner.records.layout import BUNDLE_LOCK, BUNDLE_LOG, STATEMENT
from runner.records.statement import Evidence, build_statement

Records = list[dict[str, Any]]


def result_record(records: Records, index: int) -> dict[str, Any]:
    return next(r for r in records if r["kind"] == "result" and r["body"]["index"] == index)


def set_verdict(records: Records, index: int, verdict: Verdict) -> None:
    """Give request `index` another verdict, its result digest recomputed to match."""
    body = result_record(records, index)["body"]
    result = CheckResult.model_validate(body["result"])
    outcome = Outcome(
        verdict=verdict,
        trust=result.trust or Trust.KERNEL,
        details=result.details,
        outputs=result.outputs,
    )
    digest = result_digest(outcome, with_trust=result.trust is not None)
    forged = result.model_copy(
        update={"verdict": verdict, "diagnostics": [], "assumptions": [], "result_digest": digest}
    )
    body["result"] = forged.model_dump(mode="json")


def statement_of(bundle: Path) -> dict[str, Any]:
    return orjson.loads((bundle / STATEMENT).read_bytes())


def write_statement(bundle: Path, statement: dict[str, Any]) -> None:
    (bundle / STATEMENT).write_bytes(
        orjson.dumps(statement, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    )


def patch_log_subject(bundle: Path) -> None:
    """Rewrite the statement's log subject (sha256, head, record count) to the forged log."""
    log = bundle / BUNDLE_LOG
    chain = inspect_chain(log)
    statement = statement_of(bundle)
    subject = statement["subject"][0]
    subject["digest"]["sha256"] = hashlib.sha256(log.read_bytes()).hexdigest()
    subject["annotations"].update(head=chain.head, records=len(chain.records))
    write_statement(bundle, statement)


def rebuild_statement(bundle: Path) -> None:
    """The perfect forgery: every claim made again, by prooflock's own builder, from the forged
    log and lock. Only a signature tells it from the real one."""
    log = bundle / BUNDLE_LOG
    chain = inspect_chain(log)
    lock_bytes = (bundle / BUNDLE_LOCK).read_bytes() if (bundle / BUNDLE_LOCK).exists() else None
    evidence = Evidence(
        chain=chain,
        log_sha256=hashlib.sha256(log.read_bytes()).hexdigest(),
        runs=list(recorded_runs(chain.records)),
        lock=ImagesLock.model_validate_json(lock_bytes) if lock_bytes else None,
        lock_sha256=hashlib.sha256(lock_bytes).hexdigest() if lock_bytes else None,
    )
    (bundle / STATEMENT).write_bytes(build_statement(evidence).to_bytes())
