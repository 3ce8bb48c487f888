"""The one verification path for published results: claims are recomputed, never believed.

`verify-log`, `audit`, `download`, `replay` and the report all share it.

For a log it checks:
- the hash chain;
- that every request has a result;
- that every record's digests recompute from its content;
- that the header's requests digest recomputes from the recorded requests.

For a bundle it also checks:
- the statement, rebuilt from the log and the bundle's lock and compared field by field;
- the DSSE envelope: its payload is the statement file, byte for byte;
- the envelope's signature, against the `--trust` keys;
- that attached reproduction reports are about this log, and who signed them.

Each disagreement is named.
Without a trusted signature a bundle has integrity only.
Anyone who can write it can re-hash the chain and rewrite the statement to match.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from runner.core.canonical import digest
from runner.core.errors import NotTrusted, UserError, explain
from runner.images.lock import ImagesLock
from runner.records.attest import ReproductionReport, read_reports
from runner.records.checkpoint import ChainReport, inspect_log, latest_results, recorded_runs
from runner.records.layout import BUNDLE_LOCK, BUNDLE_LOG, SIGNATURE, STATEMENT
from runner.records.signing import (
    UNSIGNED,
    UNVERIFIED,
    PublicKey,
    SignatureCheck,
    check_signatures,
    read_envelope,
    signature_json,
)
from runner.records.statement import (
    BUILD_TYPE_V1,
    BUILD_TYPES,
    Evidence,
    Run,
    Statement,
    build_statement,
    listed_archives,
)

OK, PROBLEM, NOTE = "ok", "problem", "note"


@dataclass
class Finding:
    check: str  # what was checked: a log property, or the statement field that disagrees
    status: str  # ok; problem (damage, forgery, no trust: exit 1); note (said, not counted)
    detail: str


class BundleNotVerified(NotTrusted):
    """A log or bundle that does not verify; the message names the first failing field."""

    def __init__(self, origin: str, finding: Finding):
        super().__init__(f"{origin} does not verify: {finding.check}: {finding.detail}")
        self.check = finding.check


@dataclass(frozen=True)
class TrustPolicy:
    """The reader's `--trust` keys, and whether a result they did not sign fails."""

    keys: tuple[PublicKey, ...] = ()
    require_signature: bool = False

    def __post_init__(self) -> None:
        # Without a key to verify with, a signature is only a label: nothing can satisfy it.
        if self.require_signature and not self.keys:
            raise UserError(
                "--require-signature needs --trust KEY.pub: without a key no signer can be verified"
            )


INTEGRITY_ONLY = TrustPolicy()  # no keys: checks what recomputes; nobody vouches for it


@dataclass
class Verification:
    origin: str
    chain: ChainReport
    runs: list[Run] | None  # None: unreadable records (a broken chain, a bad body)
    findings: list[Finding] = field(default_factory=list)
    signature: SignatureCheck | None = None  # None: no envelope
    reports: list[ReproductionReport] = field(default_factory=list)

    def add(self, check: str, ok: bool, detail: str) -> None:
        self.findings.append(Finding(check, OK if ok else PROBLEM, detail))

    def note(self, check: str, detail: str, *, problem: bool = False) -> None:
        self.findings.append(Finding(check, PROBLEM if problem else NOTE, detail))

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.status == PROBLEM]

    def require(self) -> None:
        """Raise BundleNotVerified naming the first problem, if there is one."""
        if self.problems:
            raise BundleNotVerified(self.origin, self.problems[0])

    @property
    def trust(self) -> str:
        """One phrase: "signed by K", "integrity only", or why the signature is not trusted."""
        check = self.signature
        refused = [f.detail for f in self.problems if f.check == "signature"]
        if refused:
            return f"not trusted: {refused[0]}"
        if check is None:
            return UNSIGNED
        if check.trusted:
            return f"signed by {check.signers()}"
        return UNVERIFIED

    def to_json(self) -> dict[str, Any]:
        return {
            "trust": self.trust,
            **signature_json(self.signature),
            "reproductions": [report.to_json() for report in self.reports],
        }


# -- the log ----------------------------------------------------------------------------------


def verify_log(log: Path, origin: str | None = None) -> Verification:
    """A log's own checks: chain, completeness, each record's digests, the requests digest."""
    chain = inspect_log(log)
    if not chain.records and chain.ok:
        if chain.torn_tail:
            raise UserError(f"{log}: its only record was cut short by a crash: nothing to verify")
        raise UserError(f"{log} is empty: a checkpoint log holds at least its header")
    found = Verification(origin or str(log), chain, None)
    found.add("chain", chain.ok, chain.describe())
    if not chain.ok:
        return found
    found.add("complete", chain.complete, _completeness(chain))
    try:
        runs = list(recorded_runs(chain.records))
    except UserError as exc:
        found.add("records", False, str(exc))
        return found
    found.runs = runs
    bad = [
        f"#{index} {result.artifact!r}"
        for index, (request, result) in enumerate(runs)
        if not result.self_consistent() or request.digest() != result.request_digest
    ]
    found.add(
        "digests",
        not bad,
        f"every record's environment key, request and result digests recompute ({len(runs)})"
        if not bad
        else f"{len(bad)} records do not match their own digests: {', '.join(bad[:5])}",
    )
    if chain.complete:
        _requests_digest(found, chain, runs)
    return found


def _completeness(chain: ChainReport) -> str:
    answered, infra = chain.answered()
    expected = chain.expected
    text = f"{answered} of {expected if expected is not None else '?'} requests have results"
    return text + (f", {infra} of them infra errors" if infra else "")


def _requests_digest(found: Verification, chain: ChainReport, runs: list[Run]) -> None:
    """Check the header's requests digest: the digest of the requests' digests, in order.

    It changes when a result is dropped (with the count lowered), added, or swapped in.
    """
    claimed = (chain.header or {}).get("requests")
    if claimed is None:
        return
    count = chain.expected or 0
    indexes = sorted(latest_results(r["body"] for r in chain.records if r["kind"] == "result"))
    if indexes != list(range(count)):
        found.add("requests digest", False, f"results are not for requests 0 to {count - 1}")
        return
    again = digest([request.digest() for request, _ in runs])  # runs are in request order
    found.add(
        "requests digest",
        again == claimed,
        f"the header's requests digest recomputes from the {count} recorded requests"
        if again == claimed
        else f"the header says {claimed[:16]}, the {count} recorded requests make {again[:16]} "
        "(a request was dropped, added or swapped)",
    )


# -- the bundle -------------------------------------------------------------------------------


def verify_bundle(
    bundle: Path, trust: TrustPolicy = INTEGRITY_ONLY, origin: str | None = None
) -> Verification:
    """Everything `bundle` claims, recomputed; its signature against `trust`; its reports."""
    log = bundle / BUNDLE_LOG
    found = verify_log(log, origin or str(bundle))
    statement = _read(bundle / STATEMENT)
    if found.runs is not None:
        evidence = _evidence(bundle, log, found.chain, found.runs, found)
        found.findings += statement_findings(statement, evidence)
    _signature(found, bundle, statement, trust)
    found.reports = read_reports(
        bundle, _sha256(log.read_bytes()), found.signature, list(trust.keys)
    )
    for report in found.reports:
        found.note(f"reproduction {report.name}", report.sentence(), problem=report.damaged)
    return found


def verify_source(log: Path, bundle: Path | None, trust: TrustPolicy, origin: str) -> Verification:
    """A bundle, or a bare log, which has no statement and no signature."""
    if bundle is not None:
        return verify_bundle(bundle, trust, origin)
    found = verify_log(log, origin)
    found.note(
        "statement",
        "a bare log has no statement: only its header's request count and requests digest guard "
        "against a cut log (publish it to anchor its head digest)",
    )
    found.note("signature", "a bare log is never signed", problem=trust.require_signature)
    return found


def statement_problems(bundle: Path, log: Path, chain: ChainReport, runs: list[Run]) -> list[str]:
    """Why the bundle's statement does not hold for this log; empty when every claim holds."""
    scratch = Verification(str(bundle), chain, runs)
    evidence = _evidence(bundle, log, chain, runs, scratch)
    findings = statement_findings(_read(bundle / STATEMENT), evidence) + scratch.findings
    return [f"{f.check}: {f.detail}" for f in findings if f.status == PROBLEM]


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _evidence(
    bundle: Path, log: Path, chain: ChainReport, runs: list[Run], found: Verification
) -> Evidence:
    lock_bytes = _read(bundle / BUNDLE_LOCK)
    lock = None
    if lock_bytes is not None:
        try:
            lock = ImagesLock.model_validate_json(lock_bytes)
        except ValidationError as exc:
            found.add("image lock entries", False, f"{BUNDLE_LOCK} is not a lock: {explain(exc)}")
    return Evidence(
        chain=chain,
        log_sha256=_sha256(log.read_bytes()),
        runs=runs,
        lock=lock,
        lock_sha256=_sha256(lock_bytes) if lock_bytes is not None else None,
    )


def statement_findings(data: bytes | None, evidence: Evidence) -> list[Finding]:
    """Compare the statement with one rebuilt from `evidence`: a finding per differing field."""
    if data is None:
        return [Finding("statement", PROBLEM, f"the bundle has no {STATEMENT}")]
    try:
        claimed = Statement.from_json(data)
    except orjson.JSONDecodeError:
        return [Finding("statement", PROBLEM, f"{STATEMENT} is not JSON")]
    except ValidationError as exc:
        return [
            Finding(
                "statement",
                PROBLEM,
                "not an in-toto Statement v1 with an SLSA Provenance v1 predicate "
                f"({explain(exc)})",
            )
        ]
    if claimed.build_type not in BUILD_TYPES:
        return [Finding("build type", PROBLEM, f"{claimed.build_type!r} is not a prooflock run")]
    # `audit` checks a bundle's archives against their files; they are not recomputed.
    evidence = replace(evidence, archives=listed_archives(claimed))
    expected = build_statement(evidence, claimed.build_type)
    found: dict[str, list[str]] = {}
    for path, said, made in differences(claimed.as_dict(), expected.as_dict()):
        label, rest = field_label(path)
        where = f"{rest}: " if rest else ""
        found.setdefault(label, []).append(
            f"{where}the statement says {_shown(said)}, the log and lock say {_shown(made)}"
        )
    if found:
        return [Finding(label, PROBLEM, _listed(parts)) for label, parts in found.items()]
    legacy = claimed.build_type == BUILD_TYPE_V1
    result = [
        Finding(
            "statement",
            OK,
            f"every claim recomputes from the log and lock: log sha256 "
            f"{evidence.log_sha256[:16]}, {len(evidence.chain.records)} records, head "
            f"{evidence.chain.head[:16]}, {len(evidence.runs)} artifacts, requests digest, "
            f"{'' if legacy else 'verdict counts, '}images, kit, backends and hosts",
        )
    ]
    if legacy:
        result.append(
            Finding(
                "statement format",
                NOTE,
                "published by prooflock 0.2 (check-run/v1): it names no image archives and "
                "claims no verdict counts",
            )
        )
    return result


def _signature(
    found: Verification, bundle: Path, statement: bytes | None, trust: TrustPolicy
) -> None:
    data = _read(bundle / SIGNATURE)
    if data is None:
        found.note("signature", UNSIGNED, problem=trust.require_signature)
        return
    envelope = read_envelope(data, str(bundle / SIGNATURE))
    if envelope.payload != statement:
        found.add(
            "signature",
            False,
            f"the signed payload is not {STATEMENT}: the statement was changed after signing",
        )
    check = found.signature = check_signatures(envelope, list(trust.keys))
    if check.failure:
        found.add("signature", False, check.failure)
    elif check.trusted:
        found.add("signature", True, f"signed by {check.signers()}")
    else:
        found.note(
            "signature",
            f"{UNVERIFIED} (give --trust KEY.pub to verify who signed it)",
            problem=trust.require_signature,
        )


# -- naming what differs ----------------------------------------------------------------------

Path_ = tuple[str, ...]
LOG_NOTES = ("subject", BUNDLE_LOG, "annotations")
DEFINITION = ("predicate", "buildDefinition")
DEPENDENCIES = (*DEFINITION, "resolvedDependencies")
RUN = ("predicate", "runDetails")
# The most specific prefix wins; what matches none is named by its own path.
LABELS: dict[Path_, str] = {
    ("_type",): "statement type",
    ("predicateType",): "statement type",
    ("subject",): "artifacts",
    ("subject", BUNDLE_LOG, "digest"): "log sha256",
    (*LOG_NOTES, "head"): "head",
    (*LOG_NOTES, "records"): "record count",
    (*LOG_NOTES, "results"): "result count",
    (*LOG_NOTES, "requests"): "request count",
    (*LOG_NOTES, "verdicts"): "verdict counts",
    (*DEFINITION, "buildType"): "build type",
    (*DEFINITION, "externalParameters", "requests"): "requests",
    (*DEFINITION, "externalParameters", "requests", "digest"): "requests digest",
    (*DEFINITION, "externalParameters", "checks"): "checks",
    (*DEFINITION, "internalParameters", "backends"): "backends",
    (*DEFINITION, "internalParameters", "isolation"): "isolation",
    DEPENDENCIES: "images",
    (*DEPENDENCIES, BUNDLE_LOCK): "image lock entries",
    (*DEPENDENCIES, "prooflock"): "kit version",
    (*RUN, "builder", "id"): "builder",
    (*RUN, "builder", "version"): "kit version",
    (*RUN, "metadata"): "run times",
    (*RUN, "metadata", "invocationId"): "invocation",
    (*RUN, "byproducts", "hosts"): "hosts",
}


def field_label(path: Path_) -> tuple[str, str]:
    """The field's name for people, and the rest of the path below it, such as a verdict."""
    for length in range(len(path), 0, -1):
        if path[:length] in LABELS:
            return LABELS[path[:length]], ".".join(path[length:])
    return ".".join(path), ""


def _listed(parts: list[str], shown: int = 3) -> str:
    more = f" (+{len(parts) - shown} more)" if len(parts) > shown else ""
    return "; ".join(parts[:shown]) + more


def differences(said: Any, made: Any, path: Path_ = ()) -> list[tuple[Path_, Any, Any]]:
    """(path, claimed, recomputed) wherever two JSON values differ.

    Lists of named entries are compared by name.
    So one changed entry is named, not every entry after it.
    """
    if isinstance(said, dict) and isinstance(made, dict):
        return [
            found
            for key in sorted(said.keys() | made.keys())
            for found in differences(said.get(key), made.get(key), (*path, key))
        ]
    named_said, named_made = _by_name(said), _by_name(made)
    if named_said is not None and named_made is not None:
        return differences(named_said, named_made, path)
    return [] if said == made else [(path, said, made)]


def _by_name(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, list) or not all(
        isinstance(item, dict) and isinstance(item.get("name"), str) for item in value
    ):
        return None
    named = {item["name"]: item for item in value}
    return named if len(named) == len(value) else None


def _shown(value: Any) -> str:
    if value is None:
        return "nothing"
    text = orjson.dumps(value).decode()
    return text if len(text) <= 100 else text[:97] + "..."


# -- download ---------------------------------------------------------------------------------


def download_verified(url: str, dest: Path, trust: TrustPolicy, **options: Any) -> Verification:
    """Download the bundle at `url` into `dest` and verify it; keep nothing on any problem."""
    from runner.storage import download_bundle  # noqa: PLC0415 - boto3 only when needed

    download_bundle(url, dest, **options)
    try:
        found = verify_bundle(dest, trust, url)
        found.require()
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return found
