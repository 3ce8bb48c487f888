"""What every command shares: the parser class, settings from flags, output for people and JSON."""

from __future__ import annotations

import argparse
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any, NoReturn

import orjson
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from runner.core.errors import UserError, explain
from runner.core.exit_codes import EXIT_FAILED, EXIT_INFRA, EXIT_OK, EXIT_USAGE
from runner.core.models import Withheld
from runner.core.settings import Settings

__all__ = ["EXIT_FAILED", "EXIT_INFRA", "EXIT_OK", "EXIT_USAGE"]  # re-exported to commands
# Control, bidi and box-drawing characters: shown as escapes in tables, so no name fakes a cell.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\u2500-\u257f]")


class UsageError(UserError):
    """A command line argparse refused, printed with its (sub)command."""

    def __init__(self, message: str, prog: str):
        super().__init__(message)
        self.prog = prog


class ArgumentParser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # one line and exit 2, like every other user error
        raise UsageError(message, self.prog)


def plain(text: str) -> str:
    """Text from an artifact, safe in a terminal table.

    Control characters show as escapes and rich markup is escaped. A name like `[red]x`, or one with
    a newline, draws no fake cells.
    """
    shown = CONTROL.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), text)
    return escape(shown)


def console(stream: Any = None) -> Console:
    # Off a terminal, a wide console keeps table rows on one line for grep and logs.
    stream = stream or sys.stdout
    return Console(file=stream, width=None if stream.isatty() else 200, highlight=False)


def print_json(data: dict[str, Any]) -> None:
    sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


def note(message: str) -> None:
    """A line for people on stderr (stdout stays machine-readable)."""
    print(f"prooflock: {message}", file=sys.stderr, flush=True)


def backend_flags(parser: argparse.ArgumentParser, *, workers: bool = True) -> None:
    group = parser.add_argument_group("where and how checks run")
    group.add_argument(
        "--backend",
        choices=("auto", "docker", "local"),
        help="auto (default): docker where the prover's locked image is present, else local",
    )
    group.add_argument(
        "--isolation",
        choices=("strict", "warm"),
        help="docker: a fresh container per check (strict, default) or reused ones (warm)",
    )
    group.add_argument(
        "--build-missing",
        action="store_true",
        help="build a locked image that is missing here instead of falling back to local",
    )
    if workers:
        group.add_argument(
            "--workers",
            type=int,
            metavar="N",
            help="checks at once (default 1; HOL Light's worker, minutes to boot, is shared)",
        )
    group.add_argument(
        "--canary",
        type=float,
        metavar="PERCENT",
        help="re-check this share of warm checks in a fresh process (chosen by digest) and list "
        "every disagreement (exit 1)",
    )
    group.add_argument("--no-cache", action="store_true", help="do not reuse cached results")
    group.add_argument(
        "--daemon",
        choices=("auto", "off", "start"),
        help="auto (default): use `prooflock serve`'s warm workers when it answers; start: start "
        "it if it does not; off: check in this process",
    )


def load_settings(args: argparse.Namespace) -> Settings:
    try:
        settings = Settings()
    except ValidationError as exc:
        raise UserError(f"bad PROOFLOCK_* setting: {explain(exc)}") from None
    overrides: dict[str, Any] = {
        key: value
        for key in ("backend", "isolation", "workers", "canary", "daemon")
        if (value := getattr(args, key, None)) is not None
    }
    if getattr(args, "no_cache", False):
        overrides["cache"] = False
    if getattr(args, "build_missing", False):
        overrides["build_missing"] = True
    if overrides.get("workers", 1) < 1:
        raise UserError("--workers must be at least 1")
    if not 0 <= overrides.get("canary", 0) <= 100:
        raise UserError("--canary is a percentage, from 0 to 100")
    return settings.model_copy(update=overrides)


def read_text(path: str) -> str:
    """A text file the user named (`-` is stdin), or one clear error when it cannot be read."""
    data = read_bytes(path)
    try:
        return _newlines(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"{'stdin' if path == '-' else path}: not UTF-8 text") from None


def read_artifact(path: str) -> str | Withheld:
    """An artifact file's text, or its withheld form when it is not UTF-8 text.

    One such file is its own record. It is no reason to refuse the others.
    """
    data = read_bytes(path)
    try:
        return _newlines(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        name = "stdin" if path == "-" else path
        reason = f"artifact {name} is not UTF-8 text (byte {exc.start}: {exc.reason})"
        return Withheld.of(data, reason)


def _newlines(text: str) -> str:
    """Line ends as a text-mode read gives them: \\r\\n and \\r become \\n."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_bytes(path: str) -> bytes:
    """A file the user named (`-` is stdin), or one clear error when it cannot be read."""
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
            # a device (/dev/zero) may never end; a pipe is read (`check <(generate)`)
            raise UserError(f"{path}: a device or socket, not a file (`-` reads stdin)")
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror}") from None


def canary_failed(checker: Any) -> bool:
    """List the canary's disagreements loudly on stderr; True when there were any."""
    found = checker.canary_disagreements
    for d in found:
        note(
            f"CANARY DISAGREEMENT: {plain(d.artifact)}: warm {d.warm_verdict} "
            f"({d.warm_digest[:12]}), fresh {d.cold_verdict} ({d.cold_digest[:12]})"
        )
    if found:
        note(f"{len(found)} canary disagreements: a warm worker did not behave like a fresh one")
    return bool(found)
