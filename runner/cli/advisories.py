"""`advisories refresh`: name the upstream critical bugs our advisory data lacks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runner.check import advisories, upstream_list
from runner.cli.common import EXIT_FAILED, EXIT_OK, print_json
from runner.core.errors import UserError

REFRESH_SCHEMA = "prooflock.advisories-refresh/1"
EPILOG = """examples:
  prooflock advisories refresh --from critical-bugs.md   # a copy of Rocq's dev/doc/critical-bugs.md
exit: 0 every upstream entry has an advisory; 1 some are missing (named on stdout); 2 bad input
"""


def add_commands(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "advisories",
        help="compare the advisory data with a copy of an upstream list of critical bugs",
        description="Read a copy of Rocq's list of critical bugs (dev/doc/critical-bugs.md) and "
        "name every entry that manifests/advisories/rocq.toml does not cover (an advisory covers "
        "an entry when its `upstream` names the entry's issue, or its fix when it has none).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="advisories_command", required=True, metavar="ACTION")
    refresh = actions.add_parser(
        "refresh",
        help="name the upstream entries our data lacks",
        description="Name every entry of FILE that no advisory covers; exit 1 when any is missing.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    refresh.add_argument(
        "--from",
        dest="source",
        type=Path,
        required=True,
        metavar="FILE",
        help="a copy of rocq-prover/rocq's dev/doc/critical-bugs.md",
    )
    refresh.add_argument(
        "--prover",
        default="rocq",
        choices=["rocq"],
        help="whose advisories (only rocq has such a list)",
    )
    refresh.add_argument("--json", action="store_true", help="print the comparison as JSON")


def cmd_advisories(args: argparse.Namespace) -> int:
    known = advisories.load(args.prover)
    if known is None:
        raise UserError(f"the kit holds no advisories for prover {args.prover!r}")
    try:
        text = args.source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{args.source}: cannot read it ({exc})") from None
    entries = upstream_list.parse(text)
    if not entries:
        raise UserError(f"{args.source}: no bug entries (a heading followed by `- component:`)")
    upstreams = [advisory.upstream for advisory in known.advisory]
    missing = [e for e in entries if not any(upstream_list.covers(u, e) for u in upstreams)]
    if args.json:
        print_json(
            {
                "schema": REFRESH_SCHEMA,
                "entries": len(entries),
                "covered": len(entries) - len(missing),
                "missing": [
                    {"title": e.title, "references": sorted(e.references)} for e in missing
                ],
            }
        )
    else:
        for entry in missing:
            named = ", ".join(sorted(entry.references)) or "no issue or fix named"
            sys.stdout.write(f"missing: {entry.title} ({named})\n")
        path = advisories.path_of(args.prover)
        sys.stdout.write(
            f"{len(entries) - len(missing)} of {len(entries)} upstream entries have an "
            f"advisory in {path.name}; {len(missing)} missing\n"
        )
    return EXIT_FAILED if missing else EXIT_OK
