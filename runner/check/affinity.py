"""Checks at once, each thread preferring work like the work it did lately.

A warm worker pays once for what a kind of check shares.
A Rocq worker, for one, loads each `Require` header it meets, about half a second each.
It keeps the last few loaded.
With first come, first served, every worker meets every kind and loads it.

Here a thread takes, among the next `lookahead` units:
- if it serves no more keys than any other thread, the first unit of a key nobody serves;
- else the first unit of a key it served lately;
- else the first of a key no other thread serves; else the first.

Taking another thread's key costs a load, as much as 10-20 small Rocq checks.
It pays only when enough of that key's units wait for two threads to share.
So with fewer than `STEAL_AT` of others' units left, an idle thread waits.
It steals only when nothing was taken or finished for `STEAL_WAIT_S`.
That happens when an owner is on a long check.
With more units left, it takes the key with the most of them.
So a run does not end on a header loaded for its last few checks.

The pool hands a thread back the server it last used (ServerPool).
So the keys split among the workers.
A unit waits at most `lookahead` picks, or until its key's thread is free.
That thread takes its oldest unit first, so the input's longest-first order loosely holds.

Results come back as units finish, as from a thread pool.
An error in a unit, or in producing units, stops the other threads after their current unit.
It is raised here.
A caller that stops reading stops them too.
"""

from __future__ import annotations

import queue
import threading
from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from typing import TypeVar

U = TypeVar("U")
R = TypeVar("R")
# Wide enough that a thread sees its own keys' units in input clustered by key.
# Longest-first order clusters files by header length. A narrow window shows a thread
# only others' keys, and its worker loads a header another worker already holds.
LOOKAHEAD_PER_THREAD = 32
STEAL_AT = 16  # others' units left that pay for a load (a load costs about as many)
STEAL_WAIT_S = 0.5  # no progress for this long: take another's key anyway (about one load)
KEYS_KEPT = 4  # as many as a Rocq worker keeps loaded (PROOFLOCK_ROCQ_PREFIXES)

Key = Hashable | None


def run_sticky(
    units: Iterator[U],
    run: Callable[[U], list[R]],
    threads: int,
    affinity: Callable[[U], Key],
    lookahead: int | None = None,
) -> Iterator[R]:
    window = lookahead or LOOKAHEAD_PER_THREAD * threads
    changed = threading.Condition()  # a unit was taken or finished, or the run stops
    pending: list[tuple[int, Key, U]] = []  # (picks when taken in, key, unit), in input order
    lately: dict[int, list[Key]] = {}  # thread → the keys it served lately, the newest last
    picks, exhausted = 0, False
    stop = threading.Event()
    out: queue.Queue[tuple[str, object]] = queue.Queue()

    def take() -> U | None:
        nonlocal picks, exhausted
        stalled = False  # nothing was taken or finished while this thread waited
        with changed:
            while True:
                while not exhausted and len(pending) < window:
                    try:
                        unit = next(units)
                        pending.append((picks, affinity(unit), unit))
                    except StopIteration:
                        exhausted = True
                if stop.is_set() or not pending:
                    return None
                me = threading.get_ident()
                mine = lately.setdefault(me, [])
                theirs = [keys for thread, keys in lately.items() if thread != me]
                others = {key for keys in theirs for key in keys}
                oldest_waited, oldest_key, _ = pending[0]
                if picks + 1 - oldest_waited > window and oldest_key not in others:
                    index = 0  # it waited long enough, and no other thread owns its key
                else:
                    fewest = len(mine) <= min(map(len, theirs), default=0)
                    index = _pick([key for _, key, _ in pending], mine, others, claim=fewest)
                key = pending[index][1]
                if key is not None and key in others and key not in mine:
                    theirs_left = Counter(k for _, k, _ in pending if k in others and k not in mine)
                    if theirs_left.total() < STEAL_AT and not stalled:
                        stalled = not changed.wait(STEAL_WAIT_S)  # else: something moved
                        continue
                    # the key with the most units left: the load pays for the most checks
                    most = theirs_left.most_common(1)[0][0]
                    index = next(i for i, (_, k, _) in enumerate(pending) if k == most)
                picks += 1
                _, key, unit = pending.pop(index)
                if key is not None:
                    mine[:] = [*(k for k in mine if k != key), key][-KEYS_KEPT:]
                changed.notify_all()
                return unit

    def serve() -> None:
        try:
            while (unit := take()) is not None:
                out.put(("done", run(unit)))
                with changed:
                    changed.notify_all()
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            stop.set()
            out.put(("error", exc))
        finally:
            with changed:
                changed.notify_all()
            out.put(("exit", None))

    workers = [threading.Thread(target=serve, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    running, error = len(workers), None
    try:
        while running:
            kind, value = out.get()
            if kind == "exit":
                running -= 1
            elif kind == "error":
                error = error or value
            elif error is None:
                yield from value  # type: ignore[misc]
    finally:
        stop.set()  # also when the caller stops reading: no new unit starts
        with changed:
            changed.notify_all()
        for worker in workers:
            worker.join()
    if isinstance(error, BaseException):
        raise error


def _pick(keys: list[Key], mine: list[Key], others: set[Key], *, claim: bool) -> int:
    """The index of the unit a thread takes next.

    With `claim` (it serves no more keys than any other), the first of a key nobody serves.
    Else the first of a key it served lately.
    Else the first of a key no other thread serves; else the first.
    """
    new = next((i for i, k in enumerate(keys) if k is not None and k not in {*mine, *others}), None)
    if claim and new is not None:
        return new
    warm = next((i for i, key in enumerate(keys) if key is not None and key in mine), None)
    if warm is not None:
        return warm
    return next((i for i, key in enumerate(keys) if key not in others), 0)
