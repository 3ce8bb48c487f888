"""`replay --attest OUT.json [--sign KEY]`: what a replay found, for the report builder.

The signing libraries load only when a report is asked for. Every command builds the parser that
holds these flags.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from runner.cli.common import note
from runner.core.errors import UserError
from runner.core.provenance import host
from runner.core.settings import Settings
from runner.records.bundles import Source
from runner.records.checkpoint import recorded_runs
from runner.records.layout import STATEMENT

if TYPE_CHECKING:
    from runner.records.signing import SigningSettings
    from runner.runs.replay import ReplayReport


def attest_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("reproduction report")
    group.add_argument(
        "--attest",
        type=Path,
        metavar="OUT.json",
        help="write an in-toto SLSA verification summary of this replay (who, where, which "
        "records matched); attach it to the bundle with `prooflock attach`",
    )
    group.add_argument(
        "--sign",
        type=Path,
        metavar="KEY",
        help="sign the report with this Ed25519 key (default: PROOFLOCK_SIGNING_KEY)",
    )


def check_attest_flags(args: argparse.Namespace) -> SigningSettings | None:
    """Refuse a useless flag or a bad key before any replaying.

    Returns the signing settings for the report, or None when no report is asked for.
    """
    if args.sign is not None and args.attest is None:
        raise UserError("--sign signs the reproduction report: give --attest OUT.json too")
    if args.attest is not None and getattr(args, "on", None):
        raise UserError("--attest reports a reproduction; a replay --on another line is not one")
    if args.attest is None:
        return None
    from runner.records.signing import load_signer, load_signing_settings  # noqa: PLC0415

    signing = load_signing_settings()
    load_signer(args.sign, signing)
    return signing


def write_attestation(
    args: argparse.Namespace,
    settings: Settings,
    signing: SigningSettings | None,
    source: Source,
    report: ReplayReport,
) -> None:
    if args.attest is None or signing is None:
        return
    from runner.records.attest import (  # noqa: PLC0415
        RecordOutcome,
        ReproductionSummary,
        write_reproduction,
    )
    from runner.records.signing import load_signer  # noqa: PLC0415
    from runner.records.statement import images_used  # noqa: PLC0415

    statement = source.bundle / STATEMENT if source.bundle is not None else None
    results = [result for _, result in recorded_runs(report.chain.records)]
    summary = ReproductionSummary(
        verifier=signing.verifier(),
        resource=args.log,
        log_sha256=_sha256(source.log),
        head=report.chain.head,
        records=len(report.chain.records),
        statement_sha256=_sha256(statement) if statement and statement.is_file() else None,
        environment={
            "backend": settings.backend,
            "host": host(),
            "images": images_used(results),
            "drift": report.changed_inputs(),
        },
        outcomes=[
            RecordOutcome(row.index, row.artifact, row.recorded, row.replayed, row.label)
            for row in report.rows
        ],
        incomplete=report.incomplete,
    )
    signer = load_signer(args.sign, signing)
    write_reproduction(summary, args.attest, signer)
    signed = f"signed by key id {signer.public_key.keyid}" if signer else "unsigned"
    note(f"wrote the reproduction report {args.attest} ({signed})")


def _sha256(path: Path) -> str:
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()
