"""The deadline of the check this thread is working on, for the kit's own work in this process.

A check's one budget covers everything done for the artifact (runner.check.pool).
Sandbox commands and server reads are cut at its deadline.
Reading the artifact in Python cannot be cut from outside, as in an adapter's lexer.
Such a reader can take seconds to minutes on a 10 MB file.
So the checker sets the deadline here around each check.
Long readers call `checkpoint()` every few thousand steps.
Past the deadline it raises OutOfTime, which the checker reports as a timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

# A function, not a number: a check's deadline moves when a server boots during it.
# A boot is not the check's time.
_deadline: ContextVar[Callable[[], float] | None] = ContextVar("prooflock_deadline", default=None)

STEPS = 4096  # a reader's steps between two looks at the clock (a few ms of work)
T = TypeVar("T")


class OutOfTime(Exception):
    """The check's deadline passed while the kit was reading its artifact."""


@contextmanager
def bounded_by(deadline: Callable[[], float]) -> Iterator[None]:
    """Bound this thread's work in the block by `deadline()`, in time.monotonic() terms."""
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


def checkpoint(what: str) -> None:
    """Raise OutOfTime when the current check's deadline has passed.

    `what` says how far the reading got, for the timeout's message.
    """
    deadline = _deadline.get()
    if deadline is not None and time.monotonic() > deadline():
        raise OutOfTime(what)


class Pacer:
    """A reader's step counter that calls `checkpoint` every STEPS steps.

    It passes what `progress()` says then.
    `progress` is a closure over the reader's position, so the message costs nothing between.
    """

    __slots__ = ("_left", "_progress")

    def __init__(self, progress: Callable[[], str]):
        self._left = STEPS
        self._progress = progress

    def step(self) -> None:
        self._left -= 1
        if not self._left:
            self._left = STEPS
            checkpoint(self._progress())


def paced(items: Sequence[T], progress: Callable[[int], str]) -> Iterator[tuple[int, T]]:
    """(index, item) over `items`, looking at the clock every STEPS items.

    `progress(index)` says how far it got.
    """
    pacer = Pacer(lambda: progress(index))
    for index, item in enumerate(items):
        pacer.step()
        yield index, item
