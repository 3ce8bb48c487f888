"""`check`, `run` and `replay`: each a thin layer over one library function."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from runner import provers
from runner.check.advisories import records_per_advisory
from runner.check.advisories import summary as advisory_summary
from runner.cli.attesting import attest_flags, check_attest_flags, write_attestation
from runner.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    backend_flags,
    canary_failed,
    console,
    load_settings,
    plain,
    print_json,
    read_artifact,
    read_text,
)
from runner.core import verdicts
from runner.core.errors import UserError, explain
from runner.core.messages import notify_stderr
from runner.core.models import CheckRequest, CheckResult, Target, Verdict, Withheld
from runner.provers.base import OptionFlag, option_flags
from runner.records.bundles import open_source
from runner.records.replay_file import ENVIRONMENT_DIFFERS as DRIFT
from runner.records.replay_file import SAME_VERDICT
from runner.runs.executors import executor_for
from runner.runs.progress import ProgressReporter
from runner.runs.replay import (
    EXIT_DRIFTED,
    ReplayRow,
    load_recorded,
    recorded_backend,
    replay,
)
from runner.runs.resumable import load_requests, run_requests
from runner.runs.serve import open_checker
from runner.storage.s3_settings import s3_settings_for

CHECK_SCHEMA = "prooflock.check/1"
RUN_SCHEMA = "prooflock.run/1"

CHECK_EPILOG = """examples:
  prooflock check --prover rocq proof.v
  prooflock check --prover rocq --mode statement --allow-axiom classic *.v
  prooflock check --prover hol-light --target main=goal.txt proof.ml
  prooflock check --prover asymptote --format svg --reference ref.asy --output-dir renders fig.asy
  echo 'Lemma x : True. exact I. Qed.' | prooflock check --prover rocq -
"""
RUN_EPILOG = """examples:
  prooflock run requests.jsonl                      # writes checkpoints/requests.jsonl
  prooflock run requests.jsonl --checkpoint out.jsonl --workers 2
  (killed? run the same command again: it resumes where the log ends)
"""
REPLAY_EPILOG = """examples:
  prooflock replay manifests/results/example/log.jsonl
  prooflock replay BUNDLE_DIR --json > replay.json
  prooflock replay s3://bucket/results/run-1 --workers 2
  prooflock replay BUNDLE_DIR --attest repro.json --sign me.key   # a signed reproduction report
exit: 0 reproduced bit-for-bit (same verdicts, results and environment keys); 4 reproduced on
a drifted environment (same verdicts and results, the environment differs: listed); 1 a verdict
or result differs, or the log is incomplete; 3 records could not be re-checked (infra: what was
replayed is still printed)
"""


def all_options() -> dict[str, OptionFlag]:
    """Every adapter option as a flag (options of the same name share one)."""
    flags: dict[str, OptionFlag] = {}
    for name in provers.names():
        for flag in option_flags(provers.get(name).options):
            flags.setdefault(flag.flag, flag)
    return flags


def add_commands(commands: argparse._SubParsersAction) -> None:
    check = commands.add_parser(
        "check",
        help="check artifact files now; one JSON line per artifact on stdout",
        description="Check artifact files and print one JSON line per artifact on stdout "
        "(verdict, diagnostics, assumptions, environment key, digests). Exit 0 when every "
        "artifact passed, 1 when one did not, 2 on bad input, 3 when the machine failed.",
        epilog=CHECK_EPILOG,
    )
    check.add_argument(
        "--prover", required=True, metavar="PROVER", help=f"one of: {', '.join(provers.names())}"
    )
    check.add_argument(
        "--mode", metavar="MODE", help="proof (default: no placeholders) or statement, per prover"
    )
    check.add_argument(
        "--line",
        metavar="LINE",
        help="a pinned version of the prover other than its default (e.g. rocq-8.20): see "
        "`prooflock images list`",
    )
    check.add_argument("--timeout", type=int, metavar="SECONDS", help="per check (default 60)")
    check.add_argument("--memory", type=int, dest="memory_mb", metavar="MIB", help="per check")
    check.add_argument(
        "--allow-axiom",
        action="append",
        default=[],
        dest="allowed_axioms",
        metavar="NAME",
        help="an assumption that does not count against a pass (repeatable), e.g. classic",
    )
    check.add_argument(
        "--target",
        metavar="NAME=FILE",
        help="the theorem NAME must exist with exactly the statement in FILE (after elaboration)",
    )
    check.add_argument(
        "--output-dir",
        type=Path,
        metavar="DIR",
        help="keep output files (renders) there, under their sha256",
    )
    for spec in all_options().values():
        check.add_argument(
            spec.flag,
            dest=f"opt_{spec.key}",
            choices=spec.choices,
            metavar=spec.metavar,
            help=f"{_owners(spec)}: {spec.help}",
        )
    check.add_argument("files", nargs="+", metavar="FILE", help="artifact files; - reads stdin")
    backend_flags(check)

    run = commands.add_parser(
        "run",
        help="check a requests file into a resumable, hash-chained checkpoint",
        description="Check every request of a JSON-lines file into a checkpoint log, resuming "
        "from what the log already holds. Progress on stderr. Exit 0 all passed, 1 some did "
        "not, 3 infra errors remain (re-run the same command to retry them).",
        epilog=RUN_EPILOG,
    )
    run.add_argument("requests", type=Path, metavar="REQUESTS.jsonl")
    run.add_argument(
        "--checkpoint",
        type=Path,
        metavar="LOG",
        help="the log to write (default: checkpoints/<requests name>.jsonl)",
    )
    run.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    run.add_argument(
        "--mixed-backends",
        action="store_true",
        help="resume on another backend or isolation than the log's (recorded per result)",
    )
    run.add_argument(
        "--second-opinion",
        metavar="LINE",
        default="auto",
        help="re-check each pass that carries an advisory fixed on LINE (e.g. rocq-9.2; several "
        "comma-separated) there: a proof the fixed line rejects becomes `disputed` (recorded in "
        "the log's header). Default `auto`: each prover's declared line, on backends that run "
        "it; `none`: never",
    )
    executor_flags(run)
    backend_flags(run)

    again = commands.add_parser(
        "replay",
        help="re-check a published log now and compare, record by record",
        description="Re-check every request of a log (or bundle, or s3:// bundle) on this "
        "machine and compare verdicts, results and environment keys with the record.",
        epilog=REPLAY_EPILOG,
    )
    again.add_argument("log", metavar="LOG|BUNDLE|s3://...")
    again.add_argument("--json", action="store_true", help="print the comparison as JSON")
    again.add_argument(
        "--on",
        action="append",
        default=[],
        metavar="PROVER=LINE",
        help="re-check PROVER's records on another pinned version (e.g. rocq=rocq-8.20) and "
        "show, per record, whether the verdict drifts (repeatable)",
    )
    attest_flags(again)
    executor_flags(again)
    backend_flags(again)


def executor_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("where the checks of a run execute")
    group.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="local (default): this machine; ray: a Ray cluster (pip install 'prooflock[ray]')",
    )
    group.add_argument(
        "--address", metavar="ray://HOST:PORT|auto", help="the Ray cluster (default: auto)"
    )


def _owners(spec: OptionFlag) -> str:
    owners = provers.registry().values()
    return "/".join(a.name for a in owners if spec.key in a.options.model_fields)


# -- check ---------------------------------------------------------------------------------------


def _target(value: str | None) -> Target | None:
    if value is None:
        return None
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise UserError(f"--target {value!r}: expected NAME=FILE")
    try:
        return Target(name=name, statement=read_text(path).strip())
    except ValidationError as exc:
        raise UserError(f"--target {value!r}: {explain(exc)}") from None


def check_requests(args: argparse.Namespace) -> list[CheckRequest]:
    try:
        adapter = provers.get(args.prover)
    except provers.UnknownProver as exc:
        raise UserError(str(exc)) from None
    own = set(adapter.options.model_fields)
    options: dict[str, Any] = {}
    for spec in all_options().values():
        value = getattr(args, f"opt_{spec.key}")
        if value is None:
            continue
        if spec.key not in own:
            raise UserError(f"{spec.flag} does not apply to --prover {adapter.name}")
        options[spec.key] = (
            {"name": Path(value).name, "content": read_text(value)} if spec.reads_file else value
        )
    target = _target(args.target)
    if args.files.count("-") > 1:
        raise UserError("- (stdin) can be given once")
    asked = {
        "prover": adapter.name,
        "mode": args.mode,
        "timeout": args.timeout,
        "memory_mb": args.memory_mb,
        "allowed_axioms": tuple(args.allowed_axioms),
        "options": options,
        "target": target,
        "line": args.line,
    }
    requests = []
    for path in args.files:
        name = "stdin" if path == "-" else path
        text = read_artifact(path)
        if isinstance(text, Withheld):  # not UTF-8 text: that file's record says so
            artifacts = [{"name": name, "content": "", "withheld": text}]
        else:
            artifacts = [{"name": a, "content": c} for a, c in adapter.split(name, text)]
        for artifact in artifacts:
            try:
                requests.append(CheckRequest.model_validate({**asked, **artifact}))
            except ValidationError as exc:
                raise UserError(f"{path}: {explain(exc)}") from None
    return requests


def cmd_check(args: argparse.Namespace) -> int:
    requests = check_requests(args)
    settings = load_settings(args)
    results: list[CheckResult] = []
    batch = len(requests) > 1  # progress and a tally only when there is a batch to follow
    with (
        open_checker(
            settings, settings.daemon, notify=notify_stderr, keep_outputs=args.output_dir
        ) as checker,
        ProgressReporter(len(requests), "checking", enabled=batch) as progress,
    ):
        prepared = [checker.prepare(request) for request in requests]  # bad input: before any check
        for result in checker.map(prepared):
            line = {
                "schema": CHECK_SCHEMA,
                **result.summary_line(),
                "backend": result.provenance.backend,
            }
            sys.stdout.buffer.write(orjson.dumps(line) + b"\n")
            sys.stdout.flush()
            results.append(result)
            progress.advance(f"{plain(result.artifact)}: {result.verdict.value}")
            if result.verdict in (Verdict.INFRA_ERROR, Verdict.REFUSED):
                what = "infra error" if result.verdict is Verdict.INFRA_ERROR else "refused"
                notify_stderr(f"{result.artifact}: {what}: {_first_message(result)}")
        canary = canary_failed(checker)
    if advisory_line := advisory_summary(results):
        notify_stderr(advisory_line)
    if batch:
        err = console(sys.stderr)
        err.print(tally_line(results))
        print_summaries(results, err)
    return max(exit_code(results), EXIT_FAILED if canary else EXIT_OK)


def tally_line(results: list[CheckResult]) -> str:
    counts = Counter(r.verdict.value for r in results)
    parts = [f"{counts[name]} {name}" for name in verdicts.ordered(counts)]
    return f"{len(results)} checked: " + ", ".join(parts)


def exit_code(results: list[CheckResult]) -> int:
    return verdicts.exit_code(r.verdict for r in results)


def print_summaries(results: list[CheckResult], out: Console) -> None:
    """Print each prover's own batch summary, where it has one (e.g. AlphaGeometry's categories)."""
    for name in sorted({result.prover for result in results}):
        table = provers.get(name).summary([r for r in results if r.prover == name])
        if table is not None:
            out.print(table)


def _first_message(result: CheckResult) -> str:
    return result.diagnostics[0].message if result.diagnostics else "(no message)"


# -- run -----------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    requests = load_requests(args.requests)
    settings = load_settings(args)
    checkpoint = args.checkpoint or settings.checkpoint_dir / f"{args.requests.stem}.jsonl"
    renders = checkpoint.with_name(checkpoint.stem + ".renders")
    executor = executor_for(args.executor, settings, address=args.address, notify=notify_stderr)
    try:
        with (
            open_checker(
                settings, settings.daemon, notify=notify_stderr, keep_outputs=renders
            ) as checker,
            ProgressReporter(len(requests), "checking") as progress,
        ):
            summary = run_requests(
                requests,
                checkpoint,
                checker,
                source=str(args.requests),
                on_result=lambda r: progress.advance(f"{plain(r.artifact)}: {r.verdict.value}"),
                on_resume=progress.skip,
                executor=executor,
                mixed_backends=args.mixed_backends,
                second_opinion=args.second_opinion,
            )
            canary = canary_failed(checker)
    finally:
        if executor is not None:
            executor.close()
    code = max(exit_code(summary.results), EXIT_FAILED if canary else EXIT_OK)
    if advisory_line := advisory_summary(summary.results):
        notify_stderr(advisory_line)
    if args.json:
        print_json(
            {
                "schema": RUN_SCHEMA,
                "advisories": records_per_advisory(summary.results),
                "checkpoint": str(checkpoint),
                "requests": summary.total,
                "resumed": summary.resumed,
                "checked": summary.checked,
                "repaired_bytes": summary.repaired_bytes,
                "verdicts": dict(summary.verdicts),
                "exit_code": code,
            }
        )
        return code
    out = console()
    if summary.repaired_bytes:
        out.print(f"repaired a torn last record ({summary.repaired_bytes} bytes) in {checkpoint}")
    table = Table(title=f"{plain(str(checkpoint))}: {summary.total} requests")
    table.add_column("verdict")
    table.add_column("count", justify="right")
    for name in verdicts.ordered(summary.verdicts):
        table.add_row(name, str(summary.verdicts[name]))
    out.print(table)
    print_summaries(summary.results, out)
    out.print(f"resumed with {summary.resumed} already recorded; checked {summary.checked} now")
    if summary.infra_errors:
        out.print(
            f"{summary.infra_errors} infra errors (the machine failed, not the artifacts): "
            "fix the cause and re-run the same command to retry them"
        )
    return code


# -- replay --------------------------------------------------------------------------------------


def cmd_replay(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    signing = check_attest_flags(args)
    with open_source(args.log, s3=s3_settings_for(args.log)) as source:
        _, runs = load_recorded(source.log)
        if args.backend is None and (recorded := recorded_backend(runs)) in ("local", "docker"):
            settings = settings.model_copy(update={"backend": recorded})
        settings = settings.model_copy(update={"cache": False})  # a replay re-checks for real
        executor = executor_for(args.executor, settings, address=args.address, notify=notify_stderr)
        try:
            with (
                open_checker(settings, settings.daemon, notify=notify_stderr) as checker,
                ProgressReporter(len(runs), "replaying") as progress,
            ):
                report = replay(
                    source.log,
                    checker,
                    on_row=lambda row: progress.advance(_row_label(row)),
                    bundle=source.bundle,
                    executor=executor,
                    on=_lines_to_replay_on(args.on),
                    stores=source.stores,
                    s3=source.s3,
                )
                canary = canary_failed(checker)
        finally:
            if executor is not None:
                executor.close()
        write_attestation(args, settings, signing, source, report)
    code = report.exit_code()
    if canary and code in (EXIT_OK, EXIT_DRIFTED):
        code = EXIT_FAILED
    if args.json:
        data = report.to_json()
        data["log"] = args.log
        data["exit_code"] = code
        print_json(data)
        return code
    out = console()
    table = Table(title=f"replay of {plain(args.log)}")
    for column in ("#", "artifact", "recorded", "replayed", "status"):
        table.add_column(column)
    for row in report.rows:
        calm = row.matches or row.status == [SAME_VERDICT]
        style = "green" if calm else ("yellow" if row.status == [DRIFT] else "red")
        replayed = f"{row.replayed} on {row.line}" if row.line else row.replayed
        table.add_row(
            str(row.index),
            plain(row.artifact),
            row.recorded,
            plain(replayed),
            f"[{style}]{row.label}[/]",
        )
    out.print(table)
    out.print(plain(report.verdict_line()))
    if report.stopped is not None:
        out.print(f"stopped after {len(report.rows)} of {len(runs)}: {plain(report.stopped)}")
    for row in report.rows:
        if row.message:
            out.print(f"  #{row.index}: {plain(row.message)}")
    changed = report.changed_inputs()
    if changed:
        out.print("environment inputs that changed:")
        for line in changed:
            out.print(f"  {plain(line)}")
    return code


def _lines_to_replay_on(specs: list[str]) -> dict[str, str]:
    """`--on rocq=rocq-8.20` → {"rocq": "rocq-8.20"}, each checked against the prover's lines."""
    on: dict[str, str] = {}
    for spec in specs:
        prover, sep, line = spec.partition("=")
        if not sep or not prover or not line:
            raise UserError(f"--on {spec!r}: expected PROVER=LINE, e.g. rocq=rocq-8.20")
        try:
            adapter = provers.get(prover)
        except provers.UnknownProver as exc:
            raise UserError(f"--on {spec!r}: {exc}") from None
        if line not in adapter.all_lines():
            known = ", ".join(adapter.all_lines())
            raise UserError(f"--on {spec!r}: {prover} has no line {line!r} (lines: {known})")
        on[adapter.name] = line
    return on


def _row_label(row: ReplayRow) -> str:
    return f"{plain(row.artifact)}: {row.label}"
