"""The `prooflock` command: check prover artifacts reproducibly, keep and publish the records.

Exit codes are the same on every command:
- 0: success.
- 1: a check did not pass, or a replay or an audit differs.
- 2: bad input. One line on stderr, never a traceback.
- 3: the machine failed (no daemon, an image not built, storage unreachable). Fix it and re-run
  the same command to resume.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence

from runner.cli import advisories, checking, records
from runner.cli.common import (
    EXIT_FAILED,
    EXIT_INFRA,
    EXIT_OK,
    EXIT_USAGE,
    ArgumentParser,
    UsageError,
    load_settings,
)
from runner.core.errors import BackendUnavailable, InfraFailure, NotTrusted, UserError
from runner.core.provenance import kit_version
from runner.images.flags import add_image_commands
from runner.storage.s3_settings import s3_settings_for

DESCRIPTION = """Check theorem-prover artifacts (Rocq, HOL Light, Lean, Isabelle, AlphaGeometry,
Asymptote) in pinned, sandboxed environments, and keep every verdict in a hash-chained record
that anyone can replay, audit and publish."""
EPILOG = """start here:
  prooflock check --prover rocq proof.v          check files now
  prooflock run requests.jsonl                   a resumable run into a checkpoint log
  prooflock replay LOG|BUNDLE|s3://...           re-check a published result here
  prooflock publish LOG --out BUNDLE --sign KEY  a self-contained, content-addressed, signed bundle
  prooflock audit BUNDLE --trust KEY.pub         check a result and who signed it, without re-running
  prooflock images build rocq                    build a pinned prover image

exit codes: 0 ok; 1 not passed / differs; 2 bad input; 3 the machine failed (re-run to resume)
"""


def cmd_images(args: argparse.Namespace) -> int:
    from runner.images.commands import cmd_images as images  # noqa: PLC0415 - imports docker-py

    settings = load_settings(args)
    places = [getattr(args, "out", None), getattr(args, "to", None), *getattr(args, "archives", [])]
    s3 = s3_settings_for(settings.store, settings.deb_store, *places)
    code = images(args, settings, s3)
    if args.images_command in ("build", "load") and code == EXIT_OK:
        from runner.cli.warming import warm_built_images  # noqa: PLC0415 - the checker's imports

        warm_built_images(args, settings)
    return code


Command = Callable[..., int]
COMMANDS: dict[str, Command] = {
    "check": checking.cmd_check,
    "run": checking.cmd_run,
    "replay": checking.cmd_replay,
    "verify-log": records.cmd_verify_log,
    "publish": records.cmd_publish,
    "audit": records.cmd_audit,
    "keygen": records.cmd_keygen,
    "attach": records.cmd_attach,
    "report": records.cmd_report,
    "upload": records.cmd_upload,
    "download": records.cmd_download,
    "serve": records.cmd_serve,
    "images": cmd_images,
    "advisories": advisories.cmd_advisories,
}


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="prooflock", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"prooflock {kit_version()}")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=ArgumentParser
    )
    checking.add_commands(commands)
    records.add_commands(commands)
    add_image_commands(commands)
    advisories.add_commands(commands)
    return parser


def _infra_errors() -> tuple[type[BaseException], ...]:

    found: list[type[BaseException]] = [InfraFailure, BackendUnavailable]
    try:
        from runner.storage import StorageUnavailable  # noqa: PLC0415
    except ImportError:  # pragma: no cover - boto3 is a dependency
        pass
    else:
        found.append(StorageUnavailable)
    return tuple(found)


def _terminate(signum: int, frame: object) -> None:
    """End the command on SIGTERM as on Ctrl-C, so sandboxes, servers and cgroups are cleaned up."""
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"{exc.prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except UserError as exc:
        print(f"prooflock: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except NotTrusted as exc:
        print(f"prooflock: not verified: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except _infra_errors() as exc:
        print(f"prooflock: infra error: {exc}", file=sys.stderr)
        return EXIT_INFRA
    except KeyboardInterrupt:
        print("prooflock: interrupted; re-run the same command to resume", file=sys.stderr)
        return 130
