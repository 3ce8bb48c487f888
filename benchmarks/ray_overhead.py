"""What the Ray executor costs on one machine: throughput of a run, and Ray's cost per check.

Starts its own Ray clusters on loopback (as tests/test_ray.py does) and checks the Rocq test
corpus on the local backend, cache off: `python benchmarks/ray_overhead.py [--copies N]`.

- throughput: the same run (`run_requests`) with this machine's workers, on one Ray node with
  all the machine's CPUs, and on two Ray nodes splitting them. On one machine two nodes cannot be
  faster than one: they share the same cores. The rows show what Ray costs, not what it gains.
- per check: one request at a time, the driver's round trip to a node's actor minus the check's
  own wall time (`provenance.wall_ms`), against the same for a `Checker` in this process.

Prints markdown tables. A report, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.support.ray_cluster

import ray  # noqa: E402

from runner.check.checker import Checker  # noqa: E402
from runner.core.models import CheckRequest, CheckResult  # noqa: E402
from runner.core.settings import Settings  # noqa: E402
from runner.runs.executors.ray_cluster import ProverHost, RayExecutor  # noqa: E402
from runner.runs.resumable import run_requests  # noqa: E402
from tests.support.ray_cluster import LocalRayCluster  # noqa: E402

ARTIFACTS = ROOT / "tests" / "artifacts" / "rocq"
# diverge.v only measures its timeout; the rest is the corpus the Ray tests check.
CORPUS = sorted(p.name for p in ARTIFACTS.glob("*.v") if p.name != "diverge.v")


def requests(copies: int) -> list[CheckRequest]:
    return [
        CheckRequest(
            prover="rocq",
            mode="proof",
            name=f"{copy}/{name}",
            content=(ARTIFACTS / name).read_text() + f"\n(* copy {copy} *)\n",
        )
        for copy in range(copies)
        for name in CORPUS
    ]


def timed_run(
    work: list[CheckRequest], settings: Settings, root: Path, address: str | None
) -> float:
    checkpoint = Path(tempfile.mkdtemp(dir=root)) / "run.jsonl"
    started = time.perf_counter()
    with Checker(settings) as checker:
        if address is None:
            run_requests(work, checkpoint, checker, source="bench")
        else:
            env = {"env_vars": {"PROOFLOCK_CACHE_DIR": str(root / "node-cache")}}
            with RayExecutor(
                address, settings, runtime_env=env, notify=lambda _m: None
            ) as executor:
                run_requests(work, checkpoint, checker, source="bench", executor=executor)
    return time.perf_counter() - started


def cluster(node_cpus: list[int]) -> LocalRayCluster:
    made = LocalRayCluster(Path(tempfile.mkdtemp(prefix="pl-ray-", dir="/tmp")))
    made.start_head(cpus=node_cpus[0])
    for number, cpus in enumerate(node_cpus[1:], start=2):
        made.add_node(f"node{number}", cpus=cpus)
    made.wait_for_nodes(len(node_cpus))
    return made


def stopped(made: LocalRayCluster) -> None:
    made.stop()
    shutil.rmtree(made.root, ignore_errors=True)


def round_trips(
    address: str, work: list[CheckRequest], settings: Settings
) -> tuple[list[float], list[float], float]:
    """(Ray's ms per check, the checks' own ms, seconds to start an actor and probe its node)."""
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        fields = settings.model_dump(mode="json", exclude={"cache_dir", "checkpoint_dir"})
        started = time.perf_counter()
        actor = ray.remote(ProverHost).options(num_cpus=0, max_concurrency=4).remote(fields, 1)
        ray.get(actor.describe.remote({"k": work[0]}))
        startup = time.perf_counter() - started
        added, own = [], []
        for request in work:
            started = time.perf_counter()
            result: CheckResult = ray.get(actor.check.remote(request))
            whole = (time.perf_counter() - started) * 1000
            added.append(whole - result.provenance.wall_ms)
            own.append(result.provenance.wall_ms)
        ray.get(actor.close.remote())
        ray.kill(actor)
        return added, own, startup
    finally:
        ray.shutdown()


def in_process(work: list[CheckRequest], settings: Settings) -> tuple[list[float], list[float]]:
    added, own = [], []
    with Checker(settings) as checker:
        for request in work:
            started = time.perf_counter()
            result = checker.check_one(request)
            whole = (time.perf_counter() - started) * 1000
            added.append(whole - result.provenance.wall_ms)
            own.append(result.provenance.wall_ms)
    return added, own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=2, help="copies of the corpus per run")
    args = parser.parse_args()
    cpus = os.cpu_count() or 2
    root = Path(tempfile.mkdtemp(prefix="pl-ray-bench-"))
    work = requests(args.copies)
    settings = Settings(backend="local", cache=False, cache_dir=root / "cache", retries=0)
    rows: list[tuple[str, float]] = []
    try:
        local = settings.model_copy(update={"workers": cpus})
        rows.append((f"this process, {cpus} workers", timed_run(work, local, root, None)))
        one = cluster([cpus])
        try:
            rows.append(
                (f"Ray, 1 node x {cpus} CPUs", timed_run(work, settings, root, one.address))
            )
            ray_added, ray_own, startup = round_trips(one.address, work[: len(CORPUS)], settings)
        finally:
            stopped(one)
        two = cluster([max(1, cpus // 2)] * 2)
        try:
            label = f"Ray, 2 nodes x {max(1, cpus // 2)} CPU on the same {cpus} cores"
            rows.append((label, timed_run(work, settings, root, two.address)))
        finally:
            stopped(two)
        local_added, local_own = in_process(work[: len(CORPUS)], settings)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    load = os.getloadavg()[0]
    print(
        f"{len(work)} Rocq checks ({len(CORPUS)} files x {args.copies}), local backend, cache off;"
    )
    print(f"{cpus} cores, load average {load:.1f} when done\n")
    print("| run | wall s | checks/s | vs this process |")
    print("| --- | ---: | ---: | ---: |")
    base = rows[0][1]
    for label, seconds in rows:
        print(f"| {label} | {seconds:.1f} | {len(work) / seconds:.2f} | {base / seconds:.2f}x |")
    print("\n| one check at a time | median check ms | median added ms | p90 added ms |")
    print("| --- | ---: | ---: | ---: |")
    for label, added, own in (
        ("this process (Checker.check_one)", local_added, local_own),
        ("Ray actor round trip", ray_added, ray_own),
    ):
        p90 = statistics.quantiles(added, n=10)[-1]
        median_own, median_added = statistics.median(own), statistics.median(added)
        print(f"| {label} | {median_own:.0f} | {median_added:.1f} | {p90:.1f} |")
    print(f"\nstarting an actor on a node and probing its install: {startup:.1f} s (once per run)")


if __name__ == "__main__":
    main()
