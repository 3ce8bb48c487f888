"""Checks at once with affinity: each thread keeps to the kind of work it did last (a Rocq worker
then loads each `Require` header once, not once per worker), yet every unit runs exactly once,
none waits for ever, and an error stops the run and reaches the caller."""

from __future__ import annotations

import random
import threading
import time

import pytest

from runner.check.affinity import run_sticky


def recorded_run(log: list[tuple[str, str]], seconds: float = 0.002):
    def run(unit: tuple[int, str]) -> list[tuple[int, str]]:
        log.append((threading.current_thread().name, unit[1]))
        time.sleep(seconds)
        return [unit]

    return run


def loads(log: list[tuple[str, str]]) -> int:
    """How many times a thread met a key for the first time: what its worker would load."""
    return len(set(log))


def test_threads_keep_to_their_keys_and_every_unit_runs_once():
    rng = random.Random(7)
    keys = [key for _ in range(20) for key in rng.sample("ABCD", 4)]  # each key in every 4
    units = list(enumerate(keys))
    log: list[tuple[str, str]] = []
    done = list(run_sticky(iter(units), recorded_run(log), 2, lambda unit: unit[1]))
    assert sorted(done) == units
    # First come, first served, each thread meets all 4 keys early: 8 loads. Here the keys split
    # between the threads at once; a thread meets another's key only when its own run out (at
    # the end).
    assert loads(log[:60]) == 4, log


def test_a_key_clustered_at_the_start_is_loaded_by_one_thread_only():
    # Longest first puts files with the longest header together: 27 of key C, then the rest.
    rng = random.Random(3)
    rest = [key for _ in range(24) for key in rng.sample("ABD", 3)]
    units = list(enumerate(["C"] * 27 + rest))
    log: list[tuple[str, str]] = []
    done = list(run_sticky(iter(units), recorded_run(log), 2, lambda unit: unit[1]))
    assert sorted(done) == units
    assert loads(log[:80]) == 4, log


def timed_run(log: list[tuple[str, str]], seconds: dict[str, float]):
    def run(unit: tuple[int, str]) -> list[tuple[int, str]]:
        log.append((threading.current_thread().name, unit[1]))
        time.sleep(seconds.get(unit[1], 0.01))
        return [unit]

    return run


def test_a_thread_waits_for_a_few_units_of_another_key_rather_than_load_it():
    units = [(i, key) for i, key in enumerate("ABBABABB")]
    log: list[tuple[str, str]] = []
    done = list(run_sticky(iter(units), timed_run(log, {}), 2, lambda unit: unit[1]))
    assert sorted(done) == units
    assert loads(log) == 2, log  # the thread done with its As left the last Bs to B's thread


def test_a_thread_takes_another_key_when_its_owner_is_long_busy():
    # B's thread is on a 3 s unit: the thread done with A waits STEAL_WAIT_S, then takes the Bs.
    units = [(0, "B*"), (1, "A"), (2, "B"), (3, "B")]
    log: list[tuple[str, str]] = []
    list(run_sticky(iter(units), timed_run(log, {"B*": 3.0}), 2, lambda u: u[1][0]))
    runs_of_b = [thread for thread, key in log if key == "B"]
    assert runs_of_b and log[0][0] not in runs_of_b, log


def test_two_threads_starting_on_one_key_split_the_keys_between_them():
    units = [(i, key) for i, key in enumerate("AAAABBBBAAAABBBB")]
    log: list[tuple[str, str]] = []
    list(run_sticky(iter(units), recorded_run(log, 0.01), 2, lambda unit: unit[1]))
    by_thread: dict[str, set[str]] = {}
    for thread, key in log[:8]:
        by_thread.setdefault(thread, set()).add(key)
    assert sorted(map(sorted, by_thread.values())) == [["A"], ["B"]], log


def test_a_unit_of_another_key_waits_no_longer_than_the_lookahead():
    units = [(0, "A"), (1, "B"), *((i, "A") for i in range(2, 60))]
    log: list[tuple[str, str]] = []
    order = [i for i, _ in run_sticky(iter(units), recorded_run(log, 0), 1, lambda u: u[1], 5)]
    assert order.index(1) <= 6, order


def test_an_error_in_a_unit_stops_the_run_and_is_raised_to_the_caller():
    started: list[int] = []

    def run(unit: int) -> list[int]:
        started.append(unit)
        if unit == 3:
            raise ValueError("unit 3 broke")
        time.sleep(0.01)
        return [unit]

    with pytest.raises(ValueError, match="unit 3 broke"):
        list(run_sticky(iter(range(1000)), run, 2, lambda unit: None))
    assert len(started) < 20


def test_an_error_making_the_units_is_raised_to_the_caller():
    def units():
        yield 1
        raise OSError("cannot read the next artifact")

    with pytest.raises(OSError, match="next artifact"):
        list(run_sticky(units(), lambda unit: [unit], 2, lambda unit: None))


def test_a_caller_that_stops_reading_starts_no_new_unit():
    started: list[int] = []

    def run(unit: int) -> list[int]:
        started.append(unit)
        time.sleep(0.01)
        return [unit]

    results = run_sticky(iter(range(1000)), run, 2, lambda unit: None)
    next(results)
    results.close()
    time.sleep(0.05)
    assert len(started) <= 4
