"""The local backend's limits never change a verdict the host's bare tool would give.

A deep but legal proof passes, as bare `coqc` passes it with the host's stack (its hard limit):
the shell's 8 MB soft limit is not the sandbox's. A file that allocates past its memory limit is
`memory`, warm and cold alike, read from the sandbox cgroup's OOM-kill count, never `crash`.
"""

from __future__ import annotations

import dataclasses
import resource
from pathlib import Path

import pytest

from runner.backends.cgroups import INSIDE_COUNTER
from runner.backends.local import LocalBackend
from runner.core.models import CheckRequest, Limits, Verdict
from runner.core.settings import Settings
from tests.support.rocq_cheats import rocq_checker

# 60,000 tactic steps in one proof: coqc's Qed recurses deeper than 8 MB of stack.
DEEP = "Lemma w : True. Proof. do 60000 (pose proof I as x; clear x). exact I. Qed.\n"
# A list of 30 million elements, built by the VM and read back: well past 1 GB.
HOG = "Require Import List.\nDefinition l := Eval vm_compute in repeat tt 30000000.\n"
PATHS = {True: "worker:", False: "cold"}


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    with rocq_checker("local", tmp_path_factory.mktemp("kit"), timeout=120) as checker:
        yield checker


def host_stack() -> str:
    hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
    return "unlimited" if hard == resource.RLIM_INFINITY else f"{hard // 1024} KiB"


@pytest.mark.slow
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_deep_but_legal_proof_passes(checker, warm):
    request = CheckRequest(prover="rocq", name="deep.v", content=DEEP)
    result = checker.check_one(request, cold=not warm)
    assert result.provenance.extra["rocq_path"].startswith(PATHS[warm])
    assert result.verdict is Verdict.PASS, result.diagnostics
    assert result.provenance.tools["stack_limit"] == host_stack()


@pytest.mark.slow
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_file_past_its_memory_limit_is_memory_not_crash(checker, warm):
    if checker.backend_for("rocq").info.tools["memory_limit"] == "rlimit_as":
        pytest.skip("no writable memory cgroup here: under RLIMIT_AS coqc reports its own error")
    request = CheckRequest(prover="rocq", name="hog.v", content=HOG, memory_mb=1024)
    result = checker.check_one(request, cold=not warm)
    assert result.provenance.extra["rocq_path"].startswith(PATHS[warm])
    assert result.verdict is Verdict.MEMORY, result.diagnostics
    assert result.diagnostics[-1].message == "coqc exceeded the memory limit"


@pytest.mark.slow
def test_without_a_memory_cgroup_the_address_space_limit_leaves_the_stack_to_memory(tmp_path):
    """RLIMIT_AS bounds memory there; the stack may still grow to the host's hard limit."""
    backend = LocalBackend(Settings(cache_dir=tmp_path / "cache"), notify=lambda _: None)
    backend.confinement = dataclasses.replace(backend.confinement, cgroups=None)
    with backend.sandbox("rocq", Limits(timeout_s=120, memory_mb=4096)) as box:
        box.write_file("deep.v", DEEP.encode())
        done = box.run(["coqc", "-q", "deep.v"], timeout_s=120)
    assert done.exit_code == 0, done.text
    assert backend.confinement.memory_limit == "rlimit_as"


@pytest.fixture
def cgroup_backend(tmp_path) -> LocalBackend:
    """A local backend with bubblewrap and memory cgroups (skipped where there are none)."""
    backend = LocalBackend(Settings(cache_dir=tmp_path / "cache"), notify=lambda _: None)
    if backend.confinement.wrapper is None or backend.confinement.cgroups is None:
        pytest.skip("needs bubblewrap and a writable memory cgroup")
    return backend


def counter_inside(backend: LocalBackend) -> str:
    assert backend.confinement.cgroups is not None
    return INSIDE_COUNTER[backend.confinement.cgroups.version]


def test_a_sandbox_reads_its_own_oom_count_where_a_container_does_and_cannot_write_it(
    cgroup_backend,
):
    backend, inside = cgroup_backend, counter_inside(cgroup_backend)
    script = f"grep '^oom_kill ' {inside}; echo 1 > {inside} || echo refused"
    with backend.sandbox("test", Limits(timeout_s=30, memory_mb=256)) as box:
        channel = box.spawn(["sh", "-c", script])
        said = channel.read_until(b"refused\n", 30).decode()
        channel.close()
    assert said.splitlines()[0] == "oom_kill 0"
    assert Path(inside).name in said  # the shell names the file it could not write


def test_a_servers_child_killed_for_memory_is_counted_by_the_kit_from_outside(cgroup_backend):
    """The server lives on; the kit's count and the one the server reads inside agree."""
    backend, inside = cgroup_backend, counter_inside(cgroup_backend)
    hog = "python3 -c 'b = bytearray(1 << 30)'"
    script = f"echo started; read go; {hog}; echo exit $?; grep '^oom_kill ' {inside}; cat"
    with backend.sandbox("test", Limits(timeout_s=60, memory_mb=200)) as box:
        server = box.spawn(["sh", "-c", script])
        server.read_until(b"started\n", 30)
        before = server.oom_kills()
        server.send(b"go\n")
        said = server.read_until(b"oom_kill 1\n", 60).decode()
        after, alive = server.oom_kills(), server.alive()
        server.close()
    assert (before, after, alive) == (0, 1, True)
    assert "exit 137" in said  # SIGKILL, as the shell reports it
