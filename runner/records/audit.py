"""`prooflock audit`: check a result's integrity, signature and environment without a re-run.

It takes seconds. It runs everything `runner.records.verify` checks:
- the chain, each record's digests and the requests digest;
- every claim of the statement, recomputed;
- the signature against `--trust` keys, and attached reproduction reports.

Then it checks that:
- every artifact blob has the bytes its name says;
- every image archive the statement lists has the bytes it lists;
- every image is in the lock, shown with its pins, and present on this machine;
- the prover adapters and the kit here are the versions that made the results.

With `rebuild`, a missing image first loads from the bundle's archive.
Then it is rebuilt to the same ID.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runner import provers
from runner.core import home
from runner.core.errors import InfraFailure, UserError
from runner.core.models import CheckResult
from runner.core.provenance import kit_version
from runner.images.lock import ImageEntry, ImagesLock, load_lock
from runner.records.bundles import Source, load_missing_images
from runner.records.checkpoint import ChainReport
from runner.records.layout import BLOBS, BUNDLE_LOCK, STATEMENT, image_archive
from runner.records.statement import Statement, listed_archives
from runner.records.verify import INTEGRITY_ONLY, Finding, TrustPolicy, Verification, verify_source

SCHEMA = "prooflock.audit/1"


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
    verification: Verification
    images: list[ImageAudit] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return self.verification.findings

    @property
    def records(self) -> int:
        return len(self.verification.chain.records)

    @property
    def results(self) -> int:
        return len(self.verification.runs or [])

    @property
    def head(self) -> str:
        return self.verification.chain.head

    def add(self, check: str, ok: bool, detail: str) -> None:
        self.verification.add(check, ok, detail)

    def note(self, check: str, detail: str) -> None:
        self.verification.note(check, detail)

    @property
    def problems(self) -> list[Finding]:
        return self.verification.problems

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
            **self.verification.to_json(),
            "findings": [vars(f) for f in self.findings],
            "images": [vars(i) for i in self.images],
        }


def audit(
    source: Source,
    *,
    rebuild: Callable[[str], str] | None = None,
    trust: TrustPolicy = INTEGRITY_ONLY,
) -> AuditReport:
    """Audit the log and bundle of `source`; `rebuild(image name)` returns the rebuilt ID."""
    verified = verify_source(source.log, source.bundle, trust, source.origin)
    report = AuditReport(source.origin, verified)
    if verified.runs is None:
        return report
    results = [result for _, result in verified.runs]
    if source.bundle is not None:
        _audit_blobs(report, source.bundle, verified.runs)
        _audit_archives(report, source.bundle)
    if rebuild is not None:
        load_missing_images(
            results, source.stores, lambda line: report.note("image archives", line), source.s3
        )
    _audit_images(report, source, results, rebuild)
    _audit_versions(report, verified.chain, results)
    return report


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


def _audit_archives(report: AuditReport, bundle: Path) -> None:
    """Each image archive the statement lists is in the bundle with the bytes it lists."""
    try:
        listed = listed_archives(Statement.from_json((bundle / STATEMENT).read_bytes()))
    except (OSError, ValueError):
        return  # no readable statement; its own finding says so
    problems = []
    for image_id, expected in sorted(listed.items()):
        name = image_archive(image_id)
        path = bundle / name
        if not path.is_file():
            problems.append(f"{name}: listed in the statement, missing from the bundle")
            continue
        with path.open("rb") as data:
            found = hashlib.file_digest(data, "sha256").hexdigest()
        if (found, path.stat().st_size) != (expected.sha256, expected.size):
            problems.append(
                f"{name}: its bytes are not the ones the statement lists (sha256 {found[:16]}, "
                f"listed {expected.sha256[:16]}): damaged or replaced"
            )
    if listed:
        report.add(
            "image archives",
            not problems,
            "; ".join(problems[:5])
            or f"{len(listed)} listed, each present with the bytes the statement lists",
        )


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
        from runner.backends.policy import connect  # noqa: PLC0415

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
