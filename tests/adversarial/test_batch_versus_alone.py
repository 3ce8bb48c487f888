"""A file gets the same verdict and result digest whether it is checked in a batch or alone, on
both backends, forgeries and cheats included: a record never depends on its neighbours.

HOL Light batches (one worker call for up to `Settings.batch` files, the worker and replayer
held across them): each corpus file, known exploit and cheat is checked in one run of them all,
then alone (a worker call of its own) on the same session worker. Rocq has no batches, but a run
hands its files one after another to one warm worker: the same files run through it, then each
cold (fresh processes, no warm state), the way alone could not be more alone.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runner.check.checker import Checker
from runner.core.models import CheckRequest, CheckResult
from runner.core.settings import Settings
from tests.helpers import ARTIFACTS, SHARES_HOL_LIGHT_BOOTS, session_checker
from tests.support import rocq_cheats
from tests.support.exploits import exploit_cases, exploit_request
from tests.support.hol_light_cheats import CHEATS, cheat_request

pytestmark = [pytest.mark.slow]

BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]
TIMEOUT = 60
# The files that run into their timeout get a short one: workers are pooled, and batches made,
# by every limit but the timeout, so they share the others' workers and batches.
TIMES_OUT = {"diverge.ml", "diverge.v"}
SHORT = 5


def corpus(prover: str, suffix: str) -> list[CheckRequest]:
    return [
        CheckRequest(
            prover=prover,
            name=path.name,
            content=path.read_text(),
            timeout=SHORT if path.name in TIMES_OUT else TIMEOUT,
        )
        for path in sorted((ARTIFACTS / prover).glob(f"*{suffix}"))
    ]


# Kills the worker it runs on: the batch goes on on a fresh one after a control check. On docker
# only: a fresh local worker is a boot of minutes, twice (batch, alone).
KILLS_ITS_WORKER = CheckRequest(
    prover="hol-light",
    name="kills_its_worker.ml",
    content="Unix.kill (Unix.getppid ()) Sys.sigkill;;\nlet T = TRUTH;;\n",
    timeout=TIMEOUT,
)


def hol_light_files(backend: str) -> list[CheckRequest]:
    exploits = [exploit_request(path, "hol-light") for path in exploit_cases("hol-light")]
    cheats = [cheat_request(cheat, TIMEOUT) for cheat in CHEATS]
    files = [*corpus("hol-light", ".ml"), *exploits, *cheats]
    if backend == "docker":
        files.insert(len(files) // 2, KILLS_ITS_WORKER)
    return files


def rocq_files(outside: str) -> list[CheckRequest]:
    exploits = [exploit_request(path, "rocq") for path in exploit_cases("rocq")]
    cheats = [
        CheckRequest(
            prover="rocq",
            name=f"{name}.v",
            content=text.replace(rocq_cheats.OUT, outside),
            **{"timeout": TIMEOUT, **fields},
        )
        for name, (text, _, fields) in sorted(rocq_cheats.CHEATS.items())
    ]
    return [*corpus("rocq", ".v"), *exploits, *cheats]


def in_a_run(checker: Checker, requests: list[CheckRequest]) -> list[CheckResult]:
    return [result for _, result in sorted(checker.map_unordered(enumerate(requests)))]


def differences(
    requests: list[CheckRequest], batched: list[CheckResult], alone: list[CheckResult]
) -> dict[str, tuple[str, str]]:
    """name → (verdict in the batch, verdict alone) for each file whose records differ."""
    return {
        request.name: (
            f"{b.verdict.value} {b.result_digest[:12]} {[d.message[:80] for d in b.diagnostics]}",
            f"{a.verdict.value} {a.result_digest[:12]} {[d.message[:80] for d in a.diagnostics]}",
        )
        for request, b, a in zip(requests, batched, alone, strict=True)
        if (b.verdict, b.result_digest) != (a.verdict, a.result_digest)
    }


@SHARES_HOL_LIGHT_BOOTS  # the Rocq half needs no HOL Light worker: it runs beside that group
@pytest.mark.parametrize("backend", BACKENDS)
def test_hol_light_gives_each_file_in_a_batch_what_it_gets_alone(request, backend):
    checker = session_checker(request, backend, TIMEOUT)
    files = hol_light_files(backend)

    batched = in_a_run(checker, files)
    alone = [checker.check_one(file) for file in files]

    assert differences(files, batched, alone) == {}
    sizes = [result.provenance.extra["batch"]["size"] for result in batched]
    assert max(sizes) == checker.settings.batch  # batches were made, not single calls
    assert all(result.provenance.attempts == 1 for result in batched + alone)


@pytest.fixture(scope="module", params=BACKENDS)
def rocq(request, tmp_path_factory) -> Iterator[Checker]:
    base = tmp_path_factory.mktemp(f"rocq-{request.param}")
    settings = Settings(
        backend=request.param,
        cache=False,
        cache_dir=base / "cache",
        checkpoint_dir=base / "checkpoints",
        timeout=TIMEOUT,
        retries=0,
    )
    with Checker(settings) as checker:
        yield checker


def test_rocq_gives_each_file_in_a_run_on_its_warm_worker_what_it_gets_cold(rocq, tmp_path_factory):
    files = rocq_files(str(tmp_path_factory.mktemp("outside")))

    batched = in_a_run(rocq, files)
    alone = [rocq.check_one(file, cold=True) for file in files]

    assert differences(files, batched, alone) == {}
    warm = [
        [str(r.provenance.extra.get("rocq_path")).startswith("worker") for r in run]
        for run in (batched, alone)
    ]
    assert any(warm[0]) and not any(warm[1])  # the run went through the warm worker
