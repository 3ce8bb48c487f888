"""`prooflock`: thin commands over the library. User mistakes exit 2 with one line, never a traceback.

Exit codes: 0 success; 1 a check did not pass or a replay differs; 2 bad input; 3 infra errors
(the machine, not the artifacts, failed: fix it and re-run to resume).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import orjson
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from runner import provers
from runner.checker import Checker
from runner.checkpoint import inspect_chain
from runner.errors import UserError, explain
from runner.images.commands import add_image_commands, cmd_images
from runner.models import CheckRequest, CheckResult, Verdict
from runner.progress import ProgressReporter
from runner.provers.base import OptionSpec
from runner.replay import load_recorded, recorded_backend, replay
from runner.run import load_requests, run_requests
from runner.settings import Settings

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line and exit 2, like every other user error
        raise UserError(f"{self.prog}: {message}")


def _adapter_options() -> dict[str, OptionSpec]:
    specs: dict[str, OptionSpec] = {}
    for name in provers.names():
        for spec in provers.get(name).CLI_OPTIONS:
            specs.setdefault(spec.flag, spec)
    return specs


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=("auto", "docker", "local"), help="where checks run")
    parser.add_argument("--isolation", choices=("strict", "warm"), help="docker: container per check, or reused")
    parser.add_argument("--workers", type=int, help="checks at once")
    parser.add_argument("--no-cache", action="store_true", help="do not reuse cached results")


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="prooflock", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)

    check = commands.add_parser("check", help="check files; one JSON line per artifact on stdout")
    check.add_argument("--prover", required=True, help=f"one of: {', '.join(provers.names())}")
    check.add_argument("--mode", help="the prover's mode (default: its first, e.g. proof)")
    check.add_argument("--timeout", type=int, help="seconds per check")
    check.add_argument("--memory", type=int, dest="memory_mb", help="MiB per check")
    check.add_argument("--allow-axiom", action="append", default=[], dest="allowed_axioms")
    for spec in _adapter_options().values():
        check.add_argument(spec.flag, dest=f"opt_{spec.key}", choices=spec.choices, help=spec.help)
    check.add_argument("files", nargs="+", metavar="FILE")
    _common(check)

    run = commands.add_parser("run", help="check a requests file into a resumable checkpoint")
    run.add_argument("requests", type=Path, metavar="REQUESTS.jsonl")
    run.add_argument("--checkpoint", type=Path, help="log path (default: checkpoints/<name>.jsonl)")
    _common(run)

    again = commands.add_parser("replay", help="re-check a log's requests now and compare")
    again.add_argument("log", type=Path, metavar="LOG")
    _common(again)

    verify = commands.add_parser("verify-log", help="check a log's hash chain")
    verify.add_argument("log", type=Path, metavar="PATH")

    add_image_commands(commands)
    return parser


def load_settings(args: argparse.Namespace) -> Settings:
    try:
        settings = Settings()
    except ValidationError as exc:
        raise UserError(f"bad PROOFLOCK_* setting: {explain(exc)}") from None
    overrides = {
        key: value
        for key in ("backend", "isolation", "workers")
        if (value := getattr(args, key, None)) is not None
    }
    if getattr(args, "no_cache", False):
        overrides["cache"] = False
    if overrides.get("workers", 1) < 1:
        raise UserError("--workers must be at least 1")
    return settings.model_copy(update=overrides)


def read_artifact(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not an artifact file") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror}") from None


def _check_requests(args: argparse.Namespace) -> list[CheckRequest]:
    try:
        adapter = provers.get(args.prover)
    except provers.UnknownProver as exc:
        raise UserError(str(exc)) from None
    mode = args.mode or adapter.MODES[0]
    if mode not in adapter.MODES:
        raise UserError(f"prover {adapter.NAME!r} has no mode {mode!r} (modes: {', '.join(adapter.MODES)})")
    own = {spec.key: spec for spec in adapter.CLI_OPTIONS}
    options: dict[str, object] = {}
    for spec in _adapter_options().values():
        value = getattr(args, f"opt_{spec.key}")
        if value is None:
            continue
        if spec.key not in own:
            raise UserError(f"{spec.flag} does not apply to --prover {adapter.NAME}")
        options[spec.key] = {"name": Path(value).name, "content": read_artifact(value)} if spec.reads_file else value
    requests = []
    for path in args.files:
        for name, content in adapter.split(path, read_artifact(path)):
            try:
                requests.append(
                    CheckRequest(
                        prover=adapter.NAME,
                        mode=mode,
                        name=name,
                        content=content,
                        timeout=args.timeout,
                        memory_mb=args.memory_mb,
                        allowed_axioms=tuple(args.allowed_axioms),
                        options=options,
                    )
                )
            except ValidationError as exc:
                raise UserError(f"{path}: {explain(exc)}") from None
    return requests


def cmd_check(args: argparse.Namespace) -> int:
    requests = _check_requests(args)
    worst = EXIT_OK
    results: list[CheckResult] = []
    batch = len(requests) > 1  # progress and a summary only when there is a batch to follow
    with (
        Checker(load_settings(args)) as checker,
        ProgressReporter(len(requests), "checking", enabled=batch) as progress,
    ):
        for result in checker.map(requests):
            sys.stdout.buffer.write(orjson.dumps(result.summary_line()) + b"\n")
            sys.stdout.flush()
            results.append(result)
            progress.advance(f"{result.artifact}: {result.verdict.value}")
            if result.verdict is Verdict.INFRA_ERROR:
                worst = EXIT_INFRA
                print(f"prooflock: {result.artifact}: infra error: {_first_message(result)}", file=sys.stderr)
            elif result.verdict is not Verdict.PASS and worst == EXIT_OK:
                worst = EXIT_FAILED
    if batch:
        print_summaries(results, Console(file=sys.stderr, width=None if sys.stderr.isatty() else 200))
    return worst


def print_summaries(results: list[CheckResult], console: Console) -> None:
    """Each prover's own batch summary (e.g. AlphaGeometry's categories), where it has one."""
    for name in sorted({result.prover for result in results}):
        table = provers.get(name).summary([r for r in results if r.prover == name])
        if table is not None:
            console.print(table)


def _first_message(result: CheckResult) -> str:
    return result.diagnostics[0].message if result.diagnostics else "(no message)"


def cmd_run(args: argparse.Namespace) -> int:
    requests = load_requests(args.requests)
    settings = load_settings(args)
    checkpoint = args.checkpoint or settings.checkpoint_dir / f"{args.requests.stem}.jsonl"
    with Checker(settings) as checker, ProgressReporter(len(requests), "checking") as progress:
        summary = run_requests(
            requests,
            checkpoint,
            checker,
            source=str(args.requests),
            on_result=lambda r: progress.advance(f"{r.artifact}: {r.verdict.value}"),
        )
    console = _console()
    if summary.repaired_bytes:
        console.print(f"repaired a torn last record ({summary.repaired_bytes} bytes) in {checkpoint}")
    table = Table(title=f"{checkpoint}: {summary.total} requests")
    table.add_column("verdict")
    table.add_column("count", justify="right")
    for verdict in Verdict:
        if summary.verdicts.get(verdict.value):
            table.add_row(verdict.value, str(summary.verdicts[verdict.value]))
    console.print(table)
    print_summaries(summary.results, console)
    console.print(f"resumed with {summary.resumed} already recorded; checked {summary.checked} now")
    if summary.infra_errors:
        console.print(
            f"{summary.infra_errors} infra errors (the machine failed, not the artifacts): "
            "fix the cause and re-run the same command to retry them"
        )
        return EXIT_INFRA
    return EXIT_OK


def cmd_replay(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    runs = load_recorded(args.log)
    if args.backend is None and (recorded := recorded_backend(runs)) in ("local", "docker"):
        settings = settings.model_copy(update={"backend": recorded})
    settings = settings.model_copy(update={"cache": False})  # a replay re-checks for real
    with Checker(settings) as checker, ProgressReporter(len(runs), "replaying") as progress:
        report = replay(
            args.log, checker, on_row=lambda row: progress.advance(f"{row.artifact}: {row.status}"), runs=runs
        )
    console = _console()
    table = Table(title=f"replay of {args.log}")
    for column in ("#", "artifact", "recorded", "replayed", "status"):
        table.add_column(column)
    for row in report.rows:
        style = "green" if row.matches else "red"
        table.add_row(str(row.index), row.artifact, row.recorded, row.replayed, f"[{style}]{row.status}[/]")
    console.print(table)
    console.print(f"{report.matched}/{len(report.rows)} records match")
    changed = report.changed_inputs()
    if changed:
        console.print("environment inputs that changed:")
        for line in changed:
            console.print(f"  {line}", markup=False)
    return EXIT_OK if report.ok else EXIT_FAILED


def _console() -> Console:
    # Off a terminal, a wide console keeps table rows on one line for grep and logs.
    return Console() if sys.stdout.isatty() else Console(width=200)


def cmd_verify_log(args: argparse.Namespace) -> int:
    report = inspect_chain(args.log)
    if not report.ok:
        raise UserError(report.describe())
    print(report.describe())
    return EXIT_OK


COMMANDS = {
    "check": cmd_check,
    "run": cmd_run,
    "replay": cmd_replay,
    "verify-log": cmd_verify_log,
    "images": cmd_images,
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except UserError as exc:
        print(f"prooflock: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("prooflock: interrupted; re-run the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
