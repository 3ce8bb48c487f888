"""Where a Rocq check's CPU goes: the whole machine's user and kernel time, from /proc/stat, around
one pass of the small set through a Checker, and the Rocq worker processes' own share.

    python -m benchmarks.rocq_cpu [--files 100] [--workers 1] [--sandbox auto|off]

The pass starts after a warm-up pass, so every Require prefix is loaded: what is left is the
per-check cost (the compile and the audit, each a fork of the parent holding the prefix). A
worker's kernel time is mostly fork (page tables of a 200-240 MB parent), the children's
copy-on-write faults, and their exit; kworker time is the kernel freeing what they left.
Linux only. A report, not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.rocq import small_files
from runner import Checker
from runner.core.models import CheckRequest
from runner.core.settings import Settings

TICK = os.sysconf("SC_CLK_TCK")


def machine_ticks() -> tuple[int, int, int]:
    """(user, system, idle) clock ticks of the whole machine since boot."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return int(fields[0]) + int(fields[1]), int(fields[2]), int(fields[3])


def process_ticks() -> dict[int, tuple[str, int, int, int, int]]:
    """pid → (name, utime, stime, cutime, cstime) for every live process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")].split("/")[0]
        rest = stat[stat.rindex(")") + 2 :].split()
        found[int(entry.name)] = (name, *(int(value) for value in rest[11:15]))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--sandbox", default="auto", choices=("auto", "off"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as base:
        settings = Settings(
            backend="local",
            cache=False,
            retries=0,
            workers=args.workers,
            local_sandbox=args.sandbox,
            checkpoint_dir=Path(base) / "checkpoints",
        )
        requests = [
            CheckRequest(prover="rocq", name=name, content=text)
            for name, text in small_files(args.files).items()
        ]
        with Checker(settings) as checker:
            list(checker.map(requests))  # boots the worker and loads every prefix
            processes, machine = process_ticks(), machine_ticks()
            started = time.perf_counter()
            list(checker.map(requests))
            wall = time.perf_counter() - started
            user, system, idle = (b - a for a, b in zip(machine, machine_ticks(), strict=True))
            by_name: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
            for pid, (name, *ticks) in process_ticks().items():
                before = processes.get(pid)
                old = before[1:] if before is not None and before[0] == name else (0, 0, 0, 0)
                for index, (now, then) in enumerate(zip(ticks, old, strict=True)):
                    by_name[name][index] += now - then
    count = len(requests)
    print(f"{count} checks, {args.workers} worker(s): {wall:.2f} s wall")
    print(
        f"machine: user {user / TICK:.2f} s, kernel {system / TICK:.2f} s, idle {idle / TICK:.2f} s"
        f" ({(user + system) / TICK / count * 1000:.0f} ms of CPU per check)"
    )
    for name, ticks in sorted(by_name.items(), key=lambda item: -sum(item[1])):
        if sum(ticks) * 20 >= user + system:  # 5% of the total or more
            own_user, own_kernel, child_user, child_kernel = (t / TICK for t in ticks)
            print(
                f"  {name}: user {own_user:.2f} s, kernel {own_kernel:.2f} s; its reaped children: "
                f"user {child_user:.2f} s, kernel {child_kernel:.2f} s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
