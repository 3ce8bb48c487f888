"""Progress for long work: a live bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.2f}/s" if speed else "-/s")


class ProgressReporter:
    """Call `advance(label)` once per finished item.

    It writes to stderr, so stdout stays machine-readable.
    """

    def __init__(
        self, total: int, description: str, stream: TextIO | None = None, *, enabled: bool = True
    ):
        self.total = total
        self.done = 0
        self.skipped = 0  # done before this invocation (a resumed run); not in the rate
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.enabled = enabled
        self._bar: Progress | None = None
        if enabled and self.stream.isatty():
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                RateColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[last]}"),
                console=Console(file=self.stream),
                transient=False,
            )
            self._task = self._bar.add_task(description, total=total, last="")
            self._bar.start()

    def skip(self, count: int) -> None:
        """Count `count` items done before, as in a resumed run; they stay out of the rate."""
        self.done += count
        self.skipped += count
        self.started = time.monotonic()
        if self._bar is not None:
            self._bar.reset(self._task, completed=self.done, total=self.total, last="resumed")
        elif count and self.enabled:
            print(f"[{self.done}/{self.total}] already recorded", file=self.stream, flush=True)

    def advance(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, advance=1, last=label)
            return
        elapsed = time.monotonic() - self.started
        rate = (self.done - self.skipped) / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate else 0.0
        print(
            f"[{self.done}/{self.total}] {label} ({rate:.2f}/s, ETA {eta:.0f}s)",
            file=self.stream,
            flush=True,
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> ProgressReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
