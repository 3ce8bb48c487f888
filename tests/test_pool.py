"""The pool of warm servers: a run that mixes provers never closes one prover's servers to keep
another's (a HOL Light worker costs minutes to boot again, a Rocq worker a fraction of a second)."""

from __future__ import annotations

import sys
import threading

from runner.check.pool import ServerPool
from runner.core.models import Limits
from runner.provers.common.server import ServerSpec

LIMITS = Limits(timeout_s=60, memory_mb=2048)


class IdleServer:
    """What the pool asks of a server it keeps: its limits, its spec, whether it may be reused."""

    started = True

    def __init__(self, name: str):
        self.limits, self.spec, self.closed = LIMITS, ServerSpec(name, [], b"ready", 1), False

    def worn_out(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


def test_one_provers_servers_never_evict_anothers_and_each_keeps_its_most_recent():
    pool = ServerPool(backend_for=lambda image: None, notify=print, max_idle=2)  # type: ignore[arg-type]
    hol_worker, hol_replayer = IdleServer("HOL Light worker"), IdleServer("HOL Light replayer")
    pool.checkin("hol-light", hol_worker)
    pool.checkin("hol-light", hol_replayer)
    rocq = [IdleServer("Rocq worker") for _ in range(3)]
    for server in rocq:
        pool.checkin("rocq", server)
    assert not hol_worker.closed and not hol_replayer.closed
    assert [server.closed for server in rocq] == [True, False, False]  # the least recently used
    assert pool.checkout("hol-light", LIMITS, hol_worker.spec) is hol_worker
    assert pool.checkout("rocq", LIMITS, rocq[2].spec) is rocq[2]
    pool.close()
    assert hol_replayer.closed and rocq[1].closed


def test_fewer_idle_servers_than_the_pool_keeps_are_all_kept():
    """With two workers a pool keeps three idle servers per image: two must both stay warm (a
    negative slice once evicted all but the last, so every other check booted a worker)."""
    pool = ServerPool(backend_for=lambda image: None, notify=print, max_idle=3)  # type: ignore[arg-type]
    worker, replayer = IdleServer("HOL Light worker"), IdleServer("HOL Light replayer")
    pool.checkin("hol-light", worker)
    pool.checkin("hol-light", replayer)
    assert not worker.closed and not replayer.closed
    assert pool.checkout("hol-light", LIMITS, worker.spec) is worker
    assert pool.checkout("hol-light", LIMITS, replayer.spec) is replayer


def test_a_capped_server_is_waited_for_never_booted_twice():
    """Two checks at once that both need HOL Light's worker (`max_servers=1`) share the one: the
    second waits until the first gives it back, or it is closed or retired, and only then may
    another start."""
    pool = ServerPool(backend_for=lambda image: None, notify=print, max_idle=3)  # type: ignore[arg-type]
    spec = ServerSpec("HOL Light worker", [], b"ready", 1, max_servers=1)
    held = pool.checkout("hol-light", LIMITS, spec)
    got: list[object] = []
    second = threading.Thread(target=lambda: got.append(pool.checkout("hol-light", LIMITS, spec)))
    second.start()
    second.join(1.0)
    assert second.is_alive() and not got  # it waits: the one worker is busy
    held.retire()  # a check retired it (its worker died): no longer counted
    second.join(5.0)
    assert got and got[0] is not held
    other = ServerSpec("Rocq worker", [], b"ready", 1)  # uncapped: one per check at once
    assert pool.checkout("rocq", LIMITS, other) is not pool.checkout("rocq", LIMITS, other)


def test_a_thread_gets_back_the_server_it_last_used_when_it_is_idle():
    """What a worker loaded for a thread's checks (Rocq headers) stays with that thread's work."""
    pool = ServerPool(backend_for=lambda image: None, notify=print, max_idle=3)  # type: ignore[arg-type]
    mine, theirs = IdleServer("Rocq worker"), IdleServer("Rocq worker")
    pool.checkin("rocq", mine)
    other = threading.Thread(target=pool.checkin, args=("rocq", theirs))
    other.start()
    other.join()  # theirs is now the most recently used
    assert pool.checkout("rocq", LIMITS, mine.spec) is mine
    assert pool.checkout("rocq", LIMITS, mine.spec) is theirs  # and any idle one after that


class BootingServer(IdleServer):
    """A server the pool made: not started until its boot is done."""

    def __init__(self, backend: object, image: str, limits: Limits, spec: ServerSpec, notify):
        super().__init__(spec.name)
        self.spec, self.started, self.retired = spec, False, False


def test_a_check_waits_for_the_server_booting_ahead_for_its_key(monkeypatch):
    """A server started ahead of the checks (while the install is probed) is the one the first
    check gets: it waits for that boot rather than start a second, and starts its own only if
    the boot failed."""
    monkeypatch.setattr(sys.modules[ServerPool.__module__], "SandboxServer", BootingServer)
    pool = ServerPool(backend_for=lambda image: None, notify=print, max_idle=3)  # type: ignore[arg-type]
    spec = ServerSpec("Rocq worker", [], b"ready", 1)
    ahead = pool.checkout("rocq", LIMITS, spec, ahead=True)
    got: list[object] = []
    check = threading.Thread(target=lambda: got.append(pool.checkout("rocq", LIMITS, spec)))
    check.daemon = True
    check.start()
    check.join(1.0)
    assert check.is_alive() and not got  # it waits for the boot
    ahead.started = True  # booted, then checked in
    pool.checkin("rocq", ahead)
    check.join(5.0)
    assert got == [ahead]

    failed = pool.checkout("rocq", LIMITS, spec, ahead=True)
    check = threading.Thread(target=lambda: got.append(pool.checkout("rocq", LIMITS, spec)))
    check.daemon = True
    check.start()
    check.join(1.0)
    assert len(got) == 1  # waiting again
    failed.close()
    pool.discarded(failed)  # its boot failed: the check starts its own
    check.join(5.0)
    assert len(got) == 2 and got[1] is not failed
