"""Reproduction reports: who replayed a published log, where, and which records matched.

A report is an in-toto Statement v1.
Its subject is the log: sha256, head and record count.
Its predicate is an SLSA Verification Summary (VSA v1). It holds:
- the verifier and the time;
- the policy: every record re-checked, verdict, result digest and environment key compared;
- the bundle's statement, as input attestation;
- PASSED or FAILED, the records that matched, and the environment.

A signed report is a DSSE envelope, like the bundle's own.
A bundle keeps attached reports under `attestations/<sha256>.json`.
`audit` then says who reproduced the result, and whether the reader trusts that signature.

The replay side hands over a `ReproductionSummary` of plain data.
Nothing here re-runs anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import orjson
from pydantic import Field, ValidationError

from runner.core.errors import UserError, explain
from runner.core.provenance import kit_version
from runner.records.layout import ATTESTATIONS, BUNDLE_LOG, STATEMENT
from runner.records.replay_file import ENVIRONMENT_DIFFERS, MATCH
from runner.records.signing import (
    UNVERIFIED,
    PublicKey,
    SignatureCheck,
    check_signatures,
    is_envelope,
    read_envelope,
    sign,
    signature_json,
)
from runner.records.statement import STATEMENT_TYPE, OpenModel, ResourceDescriptor, sha256

if TYPE_CHECKING:
    from securesystemslib.signer import CryptoSigner

VSA_TYPE: Final = "https://slsa.dev/verification_summary/v1"
POLICY = "https://prooflock.dev/policies/replay/v1"
# Custom SLSA results; the VSA spec reserves the SLSA_ prefix for its own levels.
REPRODUCED = "PROOFLOCK_REPLAY_MATCH"  # every record: same verdict, result and environment key
DRIFTED = "PROOFLOCK_REPLAY_SAME_RESULTS"  # same verdicts and results, another environment
SHOWN = 3  # differing records named in one sentence


@dataclass(frozen=True)
class RecordOutcome:
    index: int
    artifact: str
    recorded: str  # verdict in the log
    replayed: str  # verdict on replay
    status: str  # "match", or what differs: "verdict differs", "environment differs", ...


@dataclass(frozen=True)
class ReproductionSummary:
    """What one replay found, as plain data."""

    verifier: str  # who replayed: PROOFLOCK_VERIFIER_ID, or user@host
    resource: str  # what was replayed, as the verifier named it: a path or s3:// URL
    log_sha256: str
    head: str
    records: int
    statement_sha256: str | None  # the bundle's statement, when a bundle was replayed
    environment: dict[str, Any]  # backend, host, images (tag → ID), drift (changed inputs)
    outcomes: list[RecordOutcome]
    incomplete: str | None = None  # why the log does not hold every request's result

    @property
    def matched(self) -> int:
        return sum(outcome.status == MATCH for outcome in self.outcomes)

    @property
    def level(self) -> str:
        """REPRODUCED, DRIFTED (only environments differ), or FAILED."""
        statuses = {outcome.status for outcome in self.outcomes}
        if self.incomplete is not None or statuses - {MATCH, ENVIRONMENT_DIFFERS}:
            return "FAILED"
        return DRIFTED if ENVIRONMENT_DIFFERS in statuses else REPRODUCED

    @property
    def passed(self) -> bool:
        return self.level != "FAILED"


# -- the typed report ---------------------------------------------------------------------------


class Verifier(OpenModel):
    id: str
    version: dict[str, str] = Field(default_factory=dict)


class ReplayDetails(OpenModel):
    records: int
    matched: int
    differing: list[dict[str, Any]] = Field(default_factory=list)
    environment: dict[str, Any] = Field(default_factory=dict)
    incomplete: str | None = None


class VerificationSummary(OpenModel):
    verifier: Verifier
    timeVerified: str  # noqa: N815 - SLSA's field names
    resourceUri: str  # noqa: N815
    policy: ResourceDescriptor
    inputAttestations: list[ResourceDescriptor] = Field(default_factory=list)  # noqa: N815
    verificationResult: Literal["PASSED", "FAILED"]  # noqa: N815
    verifiedLevels: list[str]  # noqa: N815
    slsaVersion: str = "1.0"  # noqa: N815
    prooflockReplay: ReplayDetails  # noqa: N815 - an extension field; consumers ignore it


class ReproductionStatement(OpenModel):
    type: Literal["https://in-toto.io/Statement/v1"] = Field(default=STATEMENT_TYPE, alias="_type")
    subject: list[ResourceDescriptor] = Field(min_length=1)
    predicateType: Literal["https://slsa.dev/verification_summary/v1"] = VSA_TYPE  # noqa: N815
    predicate: VerificationSummary

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def log_digest(self) -> str | None:
        log = next((s for s in self.subject if s.name == BUNDLE_LOG), None)
        return (log.digest or {}).get("sha256") if log is not None else None


def reproduction_statement(
    summary: ReproductionSummary, when: datetime | None = None
) -> ReproductionStatement:
    passed = summary.passed
    inputs = []
    if summary.statement_sha256 is not None:
        inputs.append(
            ResourceDescriptor(uri=STATEMENT, digest={"sha256": summary.statement_sha256})
        )
    stamp = (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return ReproductionStatement(
        subject=[
            ResourceDescriptor(
                name=BUNDLE_LOG,
                digest={"sha256": summary.log_sha256},
                annotations={"head": summary.head, "records": summary.records},
            )
        ],
        predicate=VerificationSummary(
            verifier=Verifier(id=summary.verifier, version={"prooflock": kit_version()}),
            timeVerified=stamp,
            resourceUri=summary.resource,
            policy=ResourceDescriptor(uri=POLICY),
            inputAttestations=inputs,
            verificationResult="PASSED" if passed else "FAILED",
            verifiedLevels=[summary.level],
            prooflockReplay=ReplayDetails(
                records=len(summary.outcomes),
                matched=summary.matched,
                differing=[vars(o) for o in summary.outcomes if o.status != MATCH],
                environment=summary.environment,
                incomplete=summary.incomplete,
            ),
        ),
    )


def write_reproduction(
    summary: ReproductionSummary, out: Path, signer: CryptoSigner | None = None
) -> Path:
    """Write the report to `out`: a DSSE envelope when signed, else the bare statement."""
    made = reproduction_statement(summary).as_dict()
    data = orjson.dumps(made, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    if signer is not None:
        data = sign(data, signer)
    _write_new(out, data)
    return out


def _write_new(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole, through a temporary file renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# -- reading reports back -----------------------------------------------------------------------


@dataclass
class ReproductionReport:
    """One attached report, as the reader's keys see it."""

    name: str
    verifier: str = ""
    passed: bool = False
    drifted: bool = False  # passed with the same results on another environment
    matched: int = 0
    total: int = 0
    differing: list[str] = field(default_factory=list)
    environment: str = ""
    signature: SignatureCheck | None = None  # None: an unsigned report
    problem: str | None = None  # not a report, or a report about another log
    publisher_keys: frozenset[str] = frozenset()  # ids of the keys verified on the bundle

    @property
    def independent_signers(self) -> list[PublicKey]:
        """Trusted keys that verify this report and did not verify the bundle."""
        check = self.signature
        signers = check.signed_by if check is not None else []
        return [key for key in signers if key.keyid not in self.publisher_keys]

    @property
    def publisher_key(self) -> bool:
        """Verified only by the key that signed the bundle, so not independent."""
        return bool(self.signature and self.signature.trusted) and not self.independent_signers

    @property
    def damaged(self) -> bool:
        return self.problem is not None or (self.signature is not None and self.signature.forged)

    def outcome(self) -> str:
        if self.drifted:
            text = f"{self.total}/{self.total} verdicts and results match on {self.environment}"
        else:
            text = f"{self.matched}/{self.total} records match on {self.environment}"
        if self.differing:
            more = f" (+{len(self.differing) - SHOWN} more)" if len(self.differing) > SHOWN else ""
            text += f"; differ: {', '.join(self.differing[:SHOWN])}{more}"
        return text

    def sentence(self) -> str:
        """'independently reproduced by K', 'integrity only', or why the report is not trusted."""
        if self.problem is not None:
            return f"damaged: {self.problem}"
        check, who = self.signature, f"verifier {self.verifier!r}"
        if check is None:
            return f"unsigned report by {who}: integrity only, anyone could have written it; " + (
                self.outcome()
            )
        if check.failure:
            return f"report by {who}, not trusted: {check.failure}; {self.outcome()}"
        if not check.trusted:
            return f"report by {who}, {UNVERIFIED}; {self.outcome()}"
        if self.publisher_key:
            return (
                f"reproduced by the publisher's own key {check.signers()} ({who}), not "
                f"independently; {self.outcome()}"
            )
        signers = check.signers(self.independent_signers)
        if self.passed:
            drifted = " on a drifted environment" if self.drifted else ""
            return f"independently reproduced{drifted} by {signers} ({who}): {self.outcome()}"
        return f"{signers} ({who}) could not reproduce it: {self.outcome()}"

    def to_json(self) -> dict[str, Any]:
        check = self.signature
        return {
            "name": self.name,
            "verifier": self.verifier,
            "passed": self.passed,
            "matched": self.matched,
            "total": self.total,
            **signature_json(check),
            "independent": bool(self.independent_signers),
            "damaged": self.damaged,
            "summary": self.sentence(),
        }


def read_reports(
    bundle: Path, log_sha256: str, publisher: SignatureCheck | None, trust: list[PublicKey]
) -> list[ReproductionReport]:
    """Every report under `bundle/attestations/`, checked against this log and the keys."""
    folder = bundle / ATTESTATIONS
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        report = read_report(path.read_bytes(), path.name, log_sha256, trust)
        # Keys are compared by what they verified, never by the ids the envelopes claim.
        if publisher is not None:
            report.publisher_keys = frozenset(key.keyid for key in publisher.signed_by)
        found.append(report)
    return found


def read_report(
    data: bytes, name: str, log_sha256: str | None, trust: list[PublicKey]
) -> ReproductionReport:
    report = ReproductionReport(name)
    try:
        raw = orjson.loads(data)
        if is_envelope(raw):
            envelope = read_envelope(data, name)
            report.signature = check_signatures(envelope, trust)
            data = envelope.payload
        made = ReproductionStatement.model_validate(orjson.loads(data))
    except (orjson.JSONDecodeError, UserError) as exc:
        report.problem = f"not JSON or not a DSSE envelope ({exc})"
        return report
    except ValidationError as exc:
        report.problem = f"not a reproduction report (in-toto VSA v1): {explain(exc)}"
        return report
    predicate, details = made.predicate, made.predicate.prooflockReplay
    report.verifier = predicate.verifier.id
    report.passed = predicate.verificationResult == "PASSED"
    report.drifted = DRIFTED in predicate.verifiedLevels
    report.matched, report.total = details.matched, details.records
    report.differing = [
        f"#{d.get('index')} {d.get('artifact')} ({d.get('status')})"
        for d in details.differing
        if d.get("status") != ENVIRONMENT_DIFFERS  # the environment phrase says what drifted
    ]
    report.environment = environment_phrase(details.environment)
    if log_sha256 is not None and made.log_digest() != log_sha256:
        report.problem = "it reports on another log (its subject's sha256 is not this log's)"
    return report


def environment_phrase(environment: dict[str, Any]) -> str:
    where = f"{environment.get('backend', '?')} on {environment.get('host', '?')}"
    drift = environment.get("drift") or []
    if drift:
        return f"{where}, environment differs ({'; '.join(map(str, drift[:2]))})"
    images = environment.get("images") or {}
    if images:
        shown = ", ".join(f"{tag} {str(image)[:19]}" for tag, image in sorted(images.items()))
        return f"{where}, the recorded images ({shown})"
    return f"{where}, the recorded environment"


def attach(bundle: Path, report_path: Path) -> Path:
    """Copy a report about this log into `bundle/attestations/<sha256>.json`."""
    if not (bundle / BUNDLE_LOG).is_file():
        raise UserError(f"{bundle}: not a bundle directory (no {BUNDLE_LOG})")
    try:
        data = report_path.read_bytes()
    except OSError as exc:
        raise UserError(f"{report_path}: {exc.strerror}") from None
    log_sha = sha256((bundle / BUNDLE_LOG).read_bytes())
    report = read_report(data, str(report_path), log_sha, [])
    if report.problem is not None:
        raise UserError(f"{report_path}: {report.problem}")
    target = bundle / ATTESTATIONS / f"{sha256(data)}.json"
    if not target.exists():
        _write_new(target, data)
    return target
