"""`python -m benchmarks [--quick] [NAME ...]`: every benchmark side by side, one table.

Each module in benchmarks/ that defines `rows(quick: bool) -> list[Row]` contributes rows; the
table is printed as markdown and written as JSON to benchmarks/results/bench-<time>.json, and to
latest.json when every benchmark ran. A module whose tools are missing here (no Docker daemon, no
newclid) says so in its rows' notes instead of failing the whole table.
"""

from __future__ import annotations

import argparse
import compileall
import importlib
import json
import os
import pkgutil
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.table import Row, markdown

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def modules() -> list[str]:
    return sorted(
        m.name for m in pkgutil.iter_modules([str(HERE)]) if m.name not in ("__main__", "table")
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="small corpora (CI)")
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {modules()})")
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(modules()))
    if unknown:
        parser.error(f"no benchmark named {', '.join(unknown)} (there are: {', '.join(modules())})")
    # The kit as an install has it: pip compiles a package's bytecode when it installs it, and a
    # checkout writes it on first import, unless PYTHONDONTWRITEBYTECODE is set (as on the
    # machines this kit is developed on), when every CLI call would compile every module again.
    compileall.compile_dir(HERE.parent / "runner", quiet=1)
    rows: list[Row] = []
    notes: list[str] = [
        "The kit's bytecode is compiled before anything is timed, as an installed package has it."
    ]
    for name in args.names or modules():
        module = importlib.import_module(f"benchmarks.{name}")
        if not hasattr(module, "rows") and not hasattr(module, "notes"):
            continue
        print(f"benchmark {name} ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        rows.extend(module.rows(args.quick) if hasattr(module, "rows") else [])
        notes.extend(module.notes(args.quick) if hasattr(module, "notes") else [])
        print(f"benchmark {name}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    table = markdown(rows) + "".join(f"\n- {note}" for note in notes)
    print(table)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    data = {
        "schema": "prooflock.bench/1",
        "when": stamp,
        "quick": args.quick,
        "machine": {
            "cpus": os.cpu_count(),
            "arch": platform.machine(),
            "python": platform.python_version(),
        },
        "rows": [row.as_json() for row in rows],
        "notes": notes,
        "markdown": table,
    }
    RESULTS.mkdir(exist_ok=True)
    # latest.json is the newest whole table; a run of some benchmarks keeps only its own file
    written = [RESULTS / f"bench-{stamp}.json"] + ([] if args.names else [RESULTS / "latest.json"])
    for path in written:
        path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"written: {', '.join(str(path) for path in written)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
