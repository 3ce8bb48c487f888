"""Commands on records: `verify-log`, `publish`, `keygen`, `audit`, `attach`, `report`, `upload`,
`download` (thin layers)."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from runner.cli.common import EXIT_FAILED, EXIT_OK, console, load_settings, note, plain, print_json
from runner.records.bundles import open_source
from runner.storage.s3_settings import S3Settings, load_s3_settings, s3_settings_for

if TYPE_CHECKING:
    from runner.records.verify import TrustPolicy

VERIFY_SCHEMA = "prooflock.verify-log/1"
PUBLISH_SCHEMA = "prooflock.publish/1"
REPORT_SCHEMA = "prooflock.report/1"
STORAGE_SCHEMA = "prooflock.storage/1"


def add_commands(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser(
        "serve",
        help="keep warm workers between commands (a per-user daemon on a Unix socket)",
        description="Start a per-user daemon that keeps warm workers (a booted HOL Light, an\n"
        "imported engine) between commands; check, run and replay use it when it answers, with\n"
        "the same records (their provenance says `daemon`). It stops after an idle timeout.",
        epilog="examples:\n  prooflock serve                  start it in the background\n"
        "  prooflock serve --status\n  prooflock serve --stop",
    )
    serve.add_argument("--stop", action="store_true", help="stop the running daemon")
    serve.add_argument("--status", action="store_true", help="say whether one answers")
    serve.add_argument("--foreground", action="store_true", help="serve in this process")
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=15 * 60,
        metavar="SECONDS",
        help="stop after this long without a request (default 900)",
    )

    verify = commands.add_parser(
        "verify-log",
        help="check a log's hash chain and whether every request has a result",
        description="Verify a checkpoint log without changing it: its hash chain, that every "
        "request has a result, that every record's digests and the header's requests digest "
        "recompute (in a bundle, also that its statement names this log). Exit 0 intact and "
        "complete, 1 damaged or incomplete (as `audit` says), 2 not a log.",
        epilog="example:\n  prooflock verify-log checkpoints/requests.jsonl --json",
    )
    verify.add_argument("log", metavar="LOG|BUNDLE")
    verify.add_argument("--json", action="store_true", help="print the result as JSON")

    publish = commands.add_parser(
        "publish",
        help="write a finished run as a self-contained, content-addressed bundle",
        description="Write LOG as a bundle: the log, every artifact under its sha256, the lock\n"
        "entries of the images used, and statement.intoto.json (an in-toto Statement v1 with an\n"
        "SLSA Provenance v1 predicate); with --sign (or PROOFLOCK_SIGNING_KEY), also\n"
        "statement.intoto.dsse.json, a DSSE envelope of it; with --with-images, the archive of\n"
        "every image used (images/sha256-<ID>.tar.gz, listed in the statement), from which\n"
        "`replay` and `audit --rebuild` load an image missing where they run. OUT ending in .tar\n"
        "writes one reproducible tar file.",
        epilog="example:\n  prooflock keygen --out publisher.key\n"
        "  prooflock publish checkpoints/requests.jsonl --out results/run-1 --sign publisher.key\n"
        "  prooflock audit results/run-1 --trust publisher.key.pub",
    )
    publish.add_argument("log", type=Path, metavar="LOG")
    publish.add_argument("--out", type=Path, required=True, metavar="DIR|FILE.tar")
    publish.add_argument(
        "--sign",
        type=Path,
        metavar="KEY",
        help="sign the statement with this Ed25519 private key (default: PROOFLOCK_SIGNING_KEY)",
    )
    publish.add_argument(
        "--with-images",
        action="store_true",
        help="also write the archive of every image the records used (they must be here)",
    )
    publish.add_argument("--json", action="store_true", help="print what was written as JSON")

    audit = commands.add_parser(
        "audit",
        help="check a published result's integrity and environment without re-running it",
        description="Check, in seconds and without re-running any check: the chain, every\n"
        "record's digests and the requests digest; every claim of the statement, recomputed from\n"
        "the log and lock (a disagreement names the field); the signature against --trust keys;\n"
        "attached reproduction reports; the artifact blobs; every image against the lock and this\n"
        "machine; and version drift. Without a trusted signature a bundle has integrity only:\n"
        "anyone can re-hash it, and without --trust no signer is named (a key id in an envelope\n"
        "is a label anyone can copy). Exit 0 clean, 1 damage, drift, mismatch or not trusted, 2 bad\n"
        "input.",
        epilog="example:\n  prooflock audit results/run-1 --trust publisher.key.pub --require-signature\n"
        "  prooflock audit s3://results/run-1 --rebuild --json",
    )
    audit.add_argument("source", metavar="BUNDLE|LOG|s3://...")
    trust_flags(audit)
    audit.add_argument(
        "--rebuild", action="store_true", help="also rebuild each image to check its locked ID"
    )
    audit.add_argument("--json", action="store_true", help="print the findings as JSON")

    report = commands.add_parser(
        "report",
        help="write a static HTML report of a log or bundle",
        description="Write an offline HTML report (summary, tables, time plots, renders, "
        "environment) of a log or bundle into DIR/index.html.",
        epilog="example:\n  prooflock replay run.jsonl --json > replay.json\n"
        "  prooflock report run.jsonl --replay replay.json --out report/",
    )
    report.add_argument("source", metavar="LOG|BUNDLE|s3://...")
    report.add_argument("--out", type=Path, required=True, metavar="DIR")
    report.add_argument("--replay", type=Path, metavar="REPLAY.json", help="from `replay --json`")
    trust_flags(report)
    report.add_argument("--json", action="store_true", help="print what was written as JSON")

    keygen = commands.add_parser(
        "keygen",
        help="make an Ed25519 key pair for signing bundles and reproduction reports",
        description="Write a new Ed25519 private key to KEY (mode 0600) and its public half to\n"
        "KEY.pub. Sign with `publish --sign KEY` or `replay --attest OUT --sign KEY`; readers\n"
        "pass KEY.pub to `audit --trust`. Neither file is ever overwritten.",
        epilog="example:\n  prooflock keygen --out ~/.config/prooflock/publisher.key",
    )
    keygen.add_argument("--out", type=Path, required=True, metavar="KEY")
    keygen.add_argument("--json", action="store_true", help="print the key id as JSON")

    attach = commands.add_parser(
        "attach",
        help="attach a reproduction report (`replay --attest`) to a bundle",
        description="Copy a reproduction report into BUNDLE/attestations/<sha256>.json, after\n"
        "checking it reports on this bundle's log. `audit` then lists it with who signed it.\n"
        "Attach before `upload`: a stored bundle's index is write-once.",
        epilog="example:\n  prooflock replay results/run-1 --attest repro.json --sign me.key\n"
        "  prooflock attach results/run-1 repro.json",
    )
    attach.add_argument("bundle", type=Path, metavar="BUNDLE")
    attach.add_argument("report", type=Path, metavar="REPORT.json")

    upload = commands.add_parser(
        "upload",
        help="upload a bundle to S3-compatible storage (content-addressed, write-once)",
        description="Upload a published bundle: every file under its sha256 (an image archive\n"
        "under its own name, images/sha256-<ID>.tar.gz, so the prefix is an image store too),\n"
        "then an index. Re-running a killed upload completes it. Credentials: boto3's chain or\n"
        "PROOFLOCK_S3_*.",
        epilog="example:\n  prooflock upload bundle/ s3://results/run-1 "
        "--endpoint-url http://127.0.0.1:9000",
    )
    upload.add_argument("bundle", type=Path, metavar="BUNDLE")
    upload.add_argument("url", metavar="s3://BUCKET/PREFIX")
    upload.add_argument("--endpoint-url", metavar="URL", help="an S3-compatible endpoint")
    upload.add_argument("--json", action="store_true", help="print what was sent as JSON")

    download = commands.add_parser(
        "download",
        help="download a bundle from S3-compatible storage, verifying every byte",
        description="Download a bundle into DIR (which must not exist); every object is checked "
        "against its sha256, then the bundle is verified as `audit` does (its statement, and "
        "its signature against --trust keys); nothing is left behind when any of it fails (exit "
        "1).",
        epilog="example:\n  prooflock download s3://results/run-1 bundle/ --trust publisher.key.pub",
    )
    download.add_argument("url", metavar="s3://BUCKET/PREFIX")
    download.add_argument("dest", type=Path, metavar="DIR")
    trust_flags(download)
    download.add_argument("--endpoint-url", metavar="URL", help="an S3-compatible endpoint")
    download.add_argument("--json", action="store_true", help="print what was received as JSON")


def cmd_serve(args: argparse.Namespace) -> int:
    from runner.runs import serve  # noqa: PLC0415

    settings = load_settings(args)
    if args.stop:
        stopped = serve.stop(settings)
        print("stopped the prooflock daemon" if stopped else "no prooflock daemon was running")
        return EXIT_OK
    running = serve.ping(settings)
    if args.status:
        print(
            f"running: pid {running['pid']}, {serve.socket_path(settings)}"
            if running
            else "not running"
        )
        return EXIT_OK if running else EXIT_FAILED
    if running:
        print(f"already running: pid {running['pid']}")
        return EXIT_OK
    if args.foreground:
        serve.serve_forever(settings, args.idle_timeout)
        return EXIT_OK
    log = settings.cache_dir / "serve.log"
    pid = serve.start_background(settings, args.idle_timeout, log)
    print(
        f"started the prooflock daemon: pid {pid}, socket {serve.socket_path(settings)}, log {log}"
    )
    return EXIT_OK


def trust_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("whose signature counts")
    group.add_argument(
        "--trust",
        type=Path,
        action="append",
        default=[],
        metavar="KEY.pub",
        help="a public key whose signature you trust (repeatable)",
    )
    group.add_argument(
        "--require-signature",
        action="store_true",
        help="fail (exit 1) unless a --trust key signed the bundle (needs --trust)",
    )


def trust_from(args: argparse.Namespace) -> TrustPolicy:
    from runner.records.signing import load_public  # noqa: PLC0415
    from runner.records.verify import TrustPolicy  # noqa: PLC0415

    return TrustPolicy(tuple(load_public(path) for path in args.trust), args.require_signature)


def cmd_verify_log(args: argparse.Namespace) -> int:
    from runner.records.verify import verify_bundle, verify_log  # noqa: PLC0415

    with open_source(args.log, s3=s3_settings_for(args.log)) as source:
        # A bundle's log is checked against its statement too: the same damage, the same answer
        # as `audit`.
        found = verify_bundle(source.bundle) if source.bundle else verify_log(source.log)
    code = EXIT_FAILED if found.problems else EXIT_OK
    if args.json:
        problems = [vars(f) for f in found.problems]
        print_json(
            {
                "schema": VERIFY_SCHEMA,
                **found.chain.summary(),
                "problems": problems,
                "exit_code": code,
            }
        )
        return code
    print(plain(found.chain.describe()))
    for finding in found.problems:
        if finding.check not in ("chain", "complete"):  # the line above says those
            print(plain(f"PROBLEM {finding.check}: {finding.detail}"))
    return code


def cmd_publish(args: argparse.Namespace) -> int:
    from runner.records.publish import publish  # noqa: PLC0415
    from runner.records.signing import UNSIGNED, load_signer, load_signing_settings  # noqa: PLC0415

    signer = load_signer(args.sign, load_signing_settings())
    bundle = publish(args.log, args.out, signer=signer, with_images=args.with_images)
    if args.with_images and not bundle.images:
        note("--with-images: no image to bundle (every record was checked on the local backend)")
    if args.json:
        print_json(
            {
                "schema": PUBLISH_SCHEMA,
                "bundle": str(bundle.path),
                "records": bundle.records,
                "head": bundle.head,
                "subjects": bundle.subjects,
                "blobs": bundle.blobs,
                "images": bundle.images,
                "archives": {name: found.as_json() for name, found in bundle.archives.items()},
                "signed_by": bundle.signed_by,
            }
        )
    else:
        signed = f"signed by key id {bundle.signed_by}" if bundle.signed_by else UNSIGNED
        print(
            f"published {bundle.path}: {bundle.records} records (head {bundle.head[:16]}), "
            f"{bundle.subjects} subjects, {bundle.blobs} blobs, images: "
            f"{', '.join(bundle.images) or 'none (local backend)'}; {signed}"
        )
        for name, found in bundle.archives.items():
            print(f"  {name}: {found.size / 2**20:.1f} MiB, sha256 {found.sha256[:16]}")
    return EXIT_OK


def cmd_keygen(args: argparse.Namespace) -> int:
    from runner.records.signing import generate_key, public_path  # noqa: PLC0415

    key = generate_key(args.out)
    if args.json:
        print_json(
            {"private": str(args.out), "public": str(public_path(args.out)), "keyid": key.keyid}
        )
    else:
        print(
            f"wrote {args.out} (private, mode 0600) and {public_path(args.out)}: key id {key.keyid}"
        )
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    from runner.records.audit import audit  # noqa: PLC0415

    trust = trust_from(args)
    rebuild = None
    if args.rebuild:
        from runner.images.api import rebuilt_id  # noqa: PLC0415

        settings = load_settings(args)
        s3 = s3_settings_for(settings.store, settings.deb_store)
        rebuild = functools.partial(rebuilt_id, settings=settings, s3=s3)
    with open_source(args.source, archives=True, s3=s3_settings_for(args.source)) as source:
        found = audit(source, rebuild=rebuild, trust=trust)
    if args.json:
        data = found.to_json()
        data["source"] = args.source
        print_json(data)
        return found.exit_code()
    out = console()
    table = Table(title=f"audit of {plain(args.source)}")
    for column in ("check", "", "detail"):
        table.add_column(column)
    marks = {"ok": "[green]ok[/]", "problem": "[red]PROBLEM[/]", "note": "note"}
    for finding in found.findings:
        table.add_row(plain(finding.check), marks[finding.status], plain(finding.detail))
    out.print(table)
    for image in found.images:
        pins = ", ".join(f"{k}={v}" for k, v in sorted(image.pins.items()))
        out.print(f"{plain(image.tag)} pins: {plain(pins) or '(none recorded)'}")
    verdict = "clean" if not found.problems else f"{len(found.problems)} problems"
    out.print(
        f"{found.results} results, {found.records} records: {verdict}; "
        f"{plain(found.verification.trust)}"
    )
    return found.exit_code()


def cmd_attach(args: argparse.Namespace) -> int:
    from runner.records.attest import attach  # noqa: PLC0415

    target = attach(args.bundle, args.report)
    print(f"attached {args.report} as {target.relative_to(args.bundle)}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from runner.report import write_report  # noqa: PLC0415 - jinja2 and matplotlib on demand

    trust = trust_from(args)
    with open_source(args.source, s3=s3_settings_for(args.source)) as source:
        summary = write_report(
            source.bundle or source.log, args.out, replay=args.replay, trust=trust
        )
    if args.json:
        print_json({"schema": REPORT_SCHEMA, **summary.as_json()})
    else:
        print(f"wrote {summary.index} ({summary.records} records)")
        for sentence in summary.not_shown:
            note(f"not shown: {sentence}")
    return EXIT_OK


def _s3_settings(args: argparse.Namespace) -> S3Settings:
    settings = load_s3_settings()
    if args.endpoint_url:
        settings = settings.model_copy(update={"endpoint_url": args.endpoint_url})
    return settings


def cmd_upload(args: argparse.Namespace) -> int:
    from runner.storage import upload_bundle  # noqa: PLC0415

    sent = upload_bundle(args.bundle, args.url, settings=_s3_settings(args), progress=note)
    if args.json:
        print_json(
            {
                "schema": STORAGE_SCHEMA,
                "url": sent.url,
                "uploaded": sent.uploaded,
                "skipped": sent.skipped,
                "bytes": sent.bytes_sent,
                "seconds": sent.seconds,
            }
        )
    else:
        print(f"{sent.url}: {sent.uploaded} uploaded, {sent.skipped} already there")
    return EXIT_OK


def cmd_download(args: argparse.Namespace) -> int:
    from runner.records.verify import download_verified  # noqa: PLC0415

    trust = trust_from(args)
    found = download_verified(
        args.url, args.dest, trust, settings=_s3_settings(args), progress=note
    )
    if args.json:
        print_json(
            {"schema": STORAGE_SCHEMA, "url": args.url, "dest": str(args.dest), **found.to_json()}
        )
    else:
        print(f"downloaded {args.url} into {args.dest}: verified, {found.trust}")
    return EXIT_OK
