"""`prooflock audit`: check a published result's integrity and environment without re-running it.

In seconds: the chain is intact and its head and count are the statement's; every record's
environment key and result digest recompute from its content; every artifact blob has the bytes
its name says; every image is in the lock (shown with its pins) and present on this machine (with
`rebuild`, rebuilt to the same ID); and the prover adapters and the kit here are the versions the
results were made with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from runner import provers
from runner.core import home
from runner.core.errors import InfraFailure, UserError
from runner.core.models import CheckResult
from runner.core.provenance import kit_version
from runner.images.lock import ImageEntry, ImagesLock, load_lock
from runner.records.bundles import Source
from runner.records.checkpoint import ChainReport, inspect_chain, recorded_runs
from runner.records.layout import BLOBS, BUNDLE_LOCK, STATEMENT
from runner.records.publish import PROVENANCE_TYPE, STATEMENT_TYPE

SCHEMA = "prooflock.audit/1"
OK, PROBLEM, NOTE = "ok", "problem", "note"


@dataclass
class Finding:
    check: str
    status: str  # ok, problem (drift or mismatch: exit 1), note (said, not counted)
    detail: str


@dataclass
class ImageAudit:
    tag: str
    image_id: str
    records: int
    locked: bool  # this installation's lock has this tag with this ID
    in_bundle_lock: bool | None  # None: not a bundle
    pins: dict[str, str] = field(default_factory=dict)
    present_here: bool | None = None  # None: no Docker daemon to ask
    rebuilt_id: str | None = None


@dataclass
class AuditReport:
    source: str
    findings: list[Finding] = field(default_factory=list)
    images: list[ImageAudit] = field(default_factory=list)
    records: int = 0
    results: int = 0
    head: str = ""

    def add(self, check: str, ok: bool, detail: str) -> None:
        self.findings.append(Finding(check, OK if ok else PROBLEM, detail))

    def note(self, check: str, detail: str) -> None:
        self.findings.append(Finding(check, NOTE, detail))

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.status == PROBLEM]

    def exit_code(self) -> int:
        return 1 if self.problems else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "source": self.source,
            "records": self.records,
            "results": self.results,
            "head": self.head,
            "clean": not self.problems,
            "exit_code": self.exit_code(),
            "findings": [vars(f) for f in self.findings],
            "images": [vars(i) for i in self.images],
        }


def audit(source: Source, *, rebuild: Callable[[str], str] | None = None) -> AuditReport:
    """Audit the log (and bundle) of `source`; `rebuild(image name) -> rebuilt image ID`."""
    report = AuditReport(source.origin)
    chain = inspect_chain(source.log)
    report.records, report.head = len(chain.records), chain.head
    if not chain.records:
        raise UserError(f"{source.log}: an empty file is not a checkpoint log")
    report.add("chain", chain.ok, chain.describe())
    if not chain.ok:
        return report
    report.add("complete", chain.complete, _completeness(chain))
    try:
        runs = list(recorded_runs(chain.records))
    except UserError as exc:
        report.add("records", False, str(exc))
        return report
    report.results = len(runs)
    results = [result for _, result in runs]
    _audit_digests(report, runs)
    if source.bundle is not None:
        _audit_statement(report, source, chain, runs)
        _audit_blobs(report, source.bundle, runs)
    else:
        report.note(
            "statement",
            "a bare log has no statement: only its header's request count guards against a cut "
            "log (publish it to anchor its head digest)",
        )
    _audit_images(report, source, results, rebuild)
    _audit_versions(report, chain, results)
    return report


def _completeness(chain: ChainReport) -> str:
    answered, infra = chain.answered()
    expected = chain.expected
    text = f"{answered} of {expected if expected is not None else '?'} requests have results"
    return text + (f", {infra} of them infra errors" if infra else "")


def _audit_digests(report: AuditReport, runs: list) -> None:
    bad = [
        f"#{index} {result.artifact!r}"
        for index, (request, result) in enumerate(runs)
        if not result.self_consistent() or request.digest() != result.request_digest
    ]
    detail = (
        f"every record's environment key, request and result digests recompute ({len(runs)})"
        if not bad
        else f"{len(bad)} records do not match their own digests: {', '.join(bad[:5])}"
    )
    report.add("digests", not bad, detail)


def _read_json(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError) as exc:
        return exc


def statement_problems(bundle: Path, log: Path, chain: ChainReport, runs: list) -> list[str]:
    """Why the bundle's statement does not anchor this log and these artifacts (empty: it does)."""
    made = _read_json(bundle / STATEMENT)
    if made is None:
        return [f"the bundle has no {STATEMENT}"]
    if isinstance(made, Exception) or not isinstance(made, dict):
        return [f"{STATEMENT} is not JSON: {made}"]
    problems = []
    if made.get("_type") != STATEMENT_TYPE or made.get("predicateType") != PROVENANCE_TYPE:
        problems.append("not an in-toto Statement v1 with an SLSA Provenance v1 predicate")
    subjects = [s for s in made.get("subject") or [] if isinstance(s, dict)]
    log_subject = next((s for s in subjects if s.get("name") == "log.jsonl"), None)
    log_sha = hashlib.sha256(log.read_bytes()).hexdigest()
    if log_subject is None:
        problems.append("no subject for log.jsonl")
    else:
        notes = log_subject.get("annotations") or {}
        if (log_subject.get("digest") or {}).get("sha256") != log_sha:
            problems.append("log.jsonl is not the log the statement names (its sha256 differs)")
        if notes.get("head") != chain.head:
            problems.append("the log's head digest is not the statement's (cut or re-hashed)")
        if notes.get("records") != len(chain.records):
            problems.append(
                f"the log has {len(chain.records)} records, the statement says {notes.get('records')}"
            )
    artifacts = [s for s in subjects if str(s.get("name", "")).startswith("artifact/")]
    if len(artifacts) != len(runs):
        problems.append(f"{len(artifacts)} artifact subjects for {len(runs)} results")
    for index, (request, _) in enumerate(runs):
        want = hashlib.sha256(request.content.encode()).hexdigest()
        subject = artifacts[index] if index < len(artifacts) else {}
        if (subject.get("digest") or {}).get("sha256") != want:
            problems.append(f"artifact #{index} {request.name!r} is not the statement's subject")
            break
    return problems


def _audit_statement(report: AuditReport, source: Source, chain: ChainReport, runs: list) -> None:
    assert source.bundle is not None
    problems = statement_problems(source.bundle, source.log, chain, runs)
    log_sha = hashlib.sha256(source.log.read_bytes()).hexdigest()
    detail = "; ".join(problems) or (
        f"statement names this log (sha256 {log_sha[:16]}, {len(chain.records)} records, head "
        f"{chain.head[:16]}) and its {len(runs)} artifacts"
    )
    report.add("statement", not problems, detail)


def _audit_blobs(report: AuditReport, bundle: Path, runs: list) -> None:
    problems = []
    for index, (request, _) in enumerate(runs):
        want = hashlib.sha256(request.content.encode()).hexdigest()
        if not (bundle / BLOBS / want).is_file():
            problems.append(f"artifact #{index} {request.name!r}: blob {want[:16]} missing")
    blob_dir = bundle / BLOBS
    for blob in sorted(blob_dir.iterdir()) if blob_dir.is_dir() else []:
        if hashlib.sha256(blob.read_bytes()).hexdigest() != blob.name:
            problems.append(f"blob {blob.name[:16]}: its bytes do not match its name")
    detail = (
        "; ".join(problems[:5]) or "every artifact blob is present and has the bytes its name says"
    )
    report.add("blobs", not problems, detail)


def _images_of(results: list[CheckResult]) -> dict[tuple[str, str], int]:
    used: dict[tuple[str, str], int] = {}
    for result in results:
        install = result.environment.get("install")
        if isinstance(install, dict) and install.get("kind") == "docker":
            key = (str(install.get("image")), str(install.get("image_id")))
            used[key] = used.get(key, 0) + 1
    return used


def _bundle_lock(source: Source) -> ImagesLock | None:
    if source.bundle is None or not (source.bundle / BUNDLE_LOCK).is_file():
        return None
    try:
        return ImagesLock.model_validate_json((source.bundle / BUNDLE_LOCK).read_bytes())
    except ValidationError:
        return None


def _present_here() -> Callable[[str], bool | None]:
    try:
        from runner.images.policy import connect  # noqa: PLC0415

        client = connect(timeout=10)
    except Exception:  # noqa: BLE001 - no daemon: presence is unknown, not a problem
        return lambda image_id: None

    def present(image_id: str) -> bool | None:
        try:
            client.images.get(image_id)
        except Exception:  # noqa: BLE001
            return False
        return True

    return present


def _audit_images(
    report: AuditReport,
    source: Source,
    results: list[CheckResult],
    rebuild: Callable[[str], str] | None,
) -> None:
    used = _images_of(results)
    local = sum(1 for r in results if (r.environment.get("install") or {}).get("kind") == "local")
    if local:
        report.note(
            "backend",
            f"{local} records were checked on the local backend: their environment is this "
            "host's packages, not a pinned image",
        )
    if not used:
        return
    try:
        lock = load_lock(home.lock_path())
    except (UserError, InfraFailure) as exc:
        report.add("images", False, f"no images lock to audit against: {exc}")
        return
    bundle_lock = _bundle_lock(source)
    by_tag: dict[str, tuple[str, ImageEntry]] = {e.tag: (n, e) for n, e in lock.images.items()}
    present = _present_here()
    for (tag, image_id), count in sorted(used.items()):
        name, entry = by_tag.get(tag, ("", None))
        in_bundle = None
        if source.bundle is not None:
            in_bundle = bundle_lock is not None and any(
                e.tag == tag and e.image_id == image_id for e in bundle_lock.images.values()
            )
        audited = ImageAudit(
            tag=tag,
            image_id=image_id,
            records=count,
            locked=entry is not None and entry.image_id == image_id,
            in_bundle_lock=in_bundle,
            pins=dict(entry.inputs) if entry is not None else {},
            present_here=present(image_id),
        )
        if rebuild is not None and name:
            audited.rebuilt_id = rebuild(name)
        report.images.append(audited)
        problems = []
        if not audited.locked:
            problems.append(
                "not the ID this installation's lock has" if entry else "not in the lock"
            )
        if in_bundle is False:
            problems.append("not in the bundle's lock")
        if audited.rebuilt_id is not None and audited.rebuilt_id != image_id:
            problems.append(f"rebuilt here to {audited.rebuilt_id[:19]}")
        presence = {
            True: "present here",
            False: "absent here",
            None: "presence unknown (no daemon)",
        }
        detail = f"{tag} {image_id[:19]} ({count} records): " + (
            "; ".join(problems) or f"locked, {presence[audited.present_here]}"
        )
        report.add(f"image {tag}", not problems, detail)


def _audit_versions(report: AuditReport, chain: ChainReport, results: list[CheckResult]) -> None:
    drift = []
    for prover, version in sorted(
        {(r.prover, str(r.environment.get("adapter_version"))) for r in results}
    ):
        try:
            here = provers.get(prover).version
        except provers.UnknownProver:
            drift.append(f"{prover}: no such prover in this installation")
            continue
        if here != version:
            drift.append(f"{prover} adapter {version} recorded, {here} here")
    report.add(
        "adapters",
        not drift,
        "; ".join(drift) or "every prover adapter here is the version the results were made with",
    )
    made_with = str((chain.header or {}).get("prooflock"))
    same = made_with.split("+")[0] == kit_version().split("+")[0]
    drifted = "" if same else " (another release: the adapters above decide whether it matters)"
    report.note("kit", f"made with prooflock {made_with}; this is {kit_version()}{drifted}")
