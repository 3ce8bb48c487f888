"""Whether the run shown can be trusted, in the words `audit` uses.

It shows who signed the run, if anyone, the audit's verdict and attached reproduction reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.core.errors import UserError
from runner.records.audit import audit
from runner.records.bundles import Source
from runner.records.signing import UNSIGNED
from runner.records.verify import TrustPolicy
from runner.report.load import LoadedRun
from runner.report.text import visible


@dataclass
class IntegrityView:
    trust: str  # "signed by K", "unsigned: integrity only, ...", or why it is not trusted
    level: str  # signed, integrity-only or not-trusted (the section's colour)
    verdict: str  # the audit's one line
    problems: list[str] = field(default_factory=list)
    reproductions: list[tuple[str, str]] = field(default_factory=list)  # (level, sentence)


def integrity_view(loaded: LoadedRun, trust: TrustPolicy) -> IntegrityView:
    bundle = loaded.source if loaded.kind == "bundle" else None
    try:
        found = audit(Source(loaded.log, bundle), trust=trust)
    except UserError as exc:  # an empty log still gets its empty report
        return IntegrityView(trust=UNSIGNED, level="integrity-only", verdict=f"not audited: {exc}")
    check = found.verification.signature
    if found.problems and any(f.check == "signature" for f in found.problems):
        level = "not-trusted"
    else:
        level = "signed" if check is not None and check.trusted else "integrity-only"
    verdict = (
        f"clean: {found.results} results, {found.records} records, every check passed"
        if not found.problems
        else f"{len(found.problems)} problems: this run does not verify"
    )
    reproductions = []
    for report in found.verification.reports:
        signed = report.signature is not None and report.signature.trusted
        kind = "damaged" if report.damaged else ("signed" if signed else "integrity-only")
        reproductions.append((kind, visible(report.sentence())))
    return IntegrityView(
        trust=visible(found.verification.trust),
        level=level,
        verdict=verdict,
        problems=[visible(f"{f.check}: {f.detail}") for f in found.problems],
        reproductions=reproductions,
    )
