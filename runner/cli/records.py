"""Commands on records: `verify-log`, `report`, `upload`, `download` (thin layers)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from runner.cli.common import EXIT_FAILED, EXIT_OK, console, load_settings, note, plain, print_json
from runner.core.errors import UserError
from runner.records.bundles import open_source
from runner.records.checkpoint import inspect_chain

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
        description="Verify a checkpoint log's hash chain without changing it, and say how many "
        "of its requests have results. Exit 0 intact and complete, 1 intact but incomplete, "
        "2 tampered or not a log.",
        epilog="example:\n  prooflock verify-log checkpoints/requests.jsonl --json",
    )
    verify.add_argument("log", metavar="LOG|BUNDLE")
    verify.add_argument("--json", action="store_true", help="print the result as JSON")

    publish = commands.add_parser(
        "publish",
        help="write a finished run as a self-contained, content-addressed bundle",
        description="Write LOG as a bundle: the log, every artifact under its sha256, the lock\n"
        "entries of the images used, and statement.intoto.json (an in-toto Statement v1 with an\n"
        "SLSA Provenance v1 predicate). OUT ending in .tar writes one reproducible tar file.",
        epilog="example:\n  prooflock publish checkpoints/requests.jsonl --out results/run-1\n"
        "  prooflock audit results/run-1",
    )
    publish.add_argument("log", type=Path, metavar="LOG")
    publish.add_argument("--out", type=Path, required=True, metavar="DIR|FILE.tar")
    publish.add_argument("--json", action="store_true", help="print what was written as JSON")

    audit = commands.add_parser(
        "audit",
        help="check a published result's integrity and environment without re-running it",
        description="Check, in seconds and without re-running any check: the chain and its\n"
        "statement, every record's digests, the artifact blobs, every image against the lock and\n"
        "this machine, and version drift. Exit 0 clean, 1 drift or mismatch, 2 bad input.",
        epilog="example:\n  prooflock audit results/run-1 --json\n"
        "  prooflock audit s3://results/run-1 --rebuild",
    )
    audit.add_argument("source", metavar="BUNDLE|LOG|s3://...")
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
    report.add_argument("--json", action="store_true", help="print what was written as JSON")

    upload = commands.add_parser(
        "upload",
        help="upload a bundle to S3-compatible storage (content-addressed, write-once)",
        description="Upload a published bundle: every file under its sha256, then an index. "
        "Re-running a killed upload completes it. Credentials: boto3's chain or PROOFLOCK_S3_*.",
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
        "against its sha256, and nothing is left behind when one does not match.",
        epilog="example:\n  prooflock download s3://results/run-1 bundle/",
    )
    download.add_argument("url", metavar="s3://BUCKET/PREFIX")
    download.add_argument("dest", type=Path, metavar="DIR")
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


def cmd_verify_log(args: argparse.Namespace) -> int:
    with open_source(args.log) as source:
        report = inspect_chain(source.log)
    if not report.ok:
        if args.json:
            print_json({"schema": VERIFY_SCHEMA, **report.summary()})
        raise UserError(report.describe())
    if not report.records:
        raise UserError(f"{source.log}: an empty file is not a checkpoint log")
    code = EXIT_OK if report.complete else EXIT_FAILED
    if args.json:
        print_json({"schema": VERIFY_SCHEMA, **report.summary(), "exit_code": code})
    else:
        print(plain(report.describe()))
    return code


def cmd_publish(args: argparse.Namespace) -> int:
    from runner.records.publish import publish  # noqa: PLC0415

    bundle = publish(args.log, args.out)
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
            }
        )
    else:
        print(
            f"published {bundle.path}: {bundle.records} records (head {bundle.head[:16]}), "
            f"{bundle.subjects} subjects, {bundle.blobs} blobs, images: "
            f"{', '.join(bundle.images) or 'none (local backend)'}"
        )
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    from runner.records.audit import audit  # noqa: PLC0415

    rebuild = None
    if args.rebuild:
        from runner.images.api import rebuilt_id  # noqa: PLC0415

        rebuild = rebuilt_id
    with open_source(args.source) as source:
        found = audit(source, rebuild=rebuild)
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
    out.print(f"{found.results} results, {found.records} records: {verdict}")
    return found.exit_code()


def cmd_report(args: argparse.Namespace) -> int:
    from runner.report import write_report  # noqa: PLC0415 - jinja2 and matplotlib on demand

    with open_source(args.source) as source:
        summary = write_report(source.bundle or source.log, args.out, replay=args.replay)
    if args.json:
        print_json({"schema": REPORT_SCHEMA, **summary.as_json()})
    else:
        print(f"wrote {summary.index} ({summary.records} records)")
        for sentence in summary.not_shown:
            note(f"not shown: {sentence}")
    return EXIT_OK


def _s3_settings(args: argparse.Namespace):  # noqa: ANN202 - S3Settings imported lazily
    from runner.storage import S3Settings  # noqa: PLC0415

    settings = S3Settings()
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
    from runner.storage import download_bundle  # noqa: PLC0415

    dest = download_bundle(args.url, args.dest, settings=_s3_settings(args), progress=note)
    if args.json:
        print_json({"schema": STORAGE_SCHEMA, "url": args.url, "dest": str(dest)})
    else:
        print(f"downloaded {args.url} into {dest}")
    return EXIT_OK
