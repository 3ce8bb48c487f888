"""`prooflock run --executor ray`: a run on a real Ray cluster (two nodes on this machine) records
what a run on this machine records, and survives a node that dies and a request that kills its
worker, with every request exactly once in a valid log."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from runner.check.checker import Checker
from runner.core.models import CheckRequest, CheckResult, Verdict
from runner.core.settings import Settings
from runner.records.checkpoint import inspect_chain
from runner.runs.executors.ray_cluster import (
    TEST_EXIT_HOOK,
    WORKER_DIED_TWICE,
    RayExecutor,
    refusal,
)
from runner.runs.resumable import run_requests
from tests.helpers import ARTIFACTS, ROCQ_EXPECTED, request_for
from tests.support.ray_cluster import LocalRayCluster

ray = pytest.importorskip("ray")

# diverge.v runs until its timeout: only in the run where no worker dies, since a dead worker
# leaves the prover processes it started to finish on their own.
CORPUS = sorted(p.name for p in (ARTIFACTS / "rocq").glob("*.v") if p.name != "diverge.v")


def corpus(*extra: CheckRequest) -> list[CheckRequest]:
    return [request_for("rocq", name, mode="proof") for name in CORPUS] + list(extra)


@pytest.fixture
def run_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"cache": False, "retries": 2})


@pytest.fixture
def node_dirs(tmp_path: Path) -> dict[str, str]:
    """Environment for the nodes' actors: a private cache, and a temp dir whose sandboxes (and
    so the prover processes in them) this test can find."""
    (tmp_path / "node-tmp").mkdir()
    return {
        "PROOFLOCK_CACHE_DIR": str(tmp_path / "node-cache"),
        "TMPDIR": str(tmp_path / "node-tmp"),
    }


@pytest.fixture
def two_nodes(ray_cluster: LocalRayCluster) -> LocalRayCluster:  # noqa: F811
    if "node2" not in ray_cluster.nodes or not ray_cluster.nodes["node2"].alive():
        ray_cluster.ensure_node("node2")
        ray_cluster.wait_for_nodes(2)
    return ray_cluster


def cluster_run(
    cluster: LocalRayCluster,
    requests: list[CheckRequest],
    checkpoint: Path,
    settings: Settings,
    env_vars: dict[str, str],
    on_result: Any = None,
) -> tuple[list[CheckResult], list[str], int]:
    """Run on the cluster; (final results in request order, executor messages, checked now)."""
    messages: list[str] = []
    with (
        Checker(settings) as checker,
        RayExecutor(
            cluster.address, settings, runtime_env={"env_vars": env_vars}, notify=messages.append
        ) as executor,
    ):
        summary = run_requests(
            requests,
            checkpoint,
            checker,
            source="requests.jsonl",
            executor=executor,
            on_result=on_result,
        )
    return summary.results, messages, summary.checked


def recorded_indices(checkpoint: Path) -> list[int]:
    report = inspect_chain(checkpoint)
    assert report.ok and report.complete and not report.torn_tail, report.describe()
    return [r["body"]["index"] for r in report.records if r["kind"] == "result"]


def stray_checks(root: Path, grace_s: float = 60) -> list[int]:
    """Prover processes still running in sandboxes under `root` after `grace_s` (killed then)."""
    deadline = time.monotonic() + grace_s
    while True:
        left = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    cwd = os.readlink(f"/proc/{entry}/cwd")
                except OSError:
                    continue
                if cwd.startswith(str(root)):
                    left.append(int(entry))
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def test_a_node_is_refused_when_its_environment_differs_from_the_first_nodes() -> None:
    def report(key: str, coqc: str, adapter: str = "2", kit: str = "1") -> dict[str, Any]:
        seen = {"prover": "rocq", "key": key, "adapter_version": adapter, "install": {"coqc": coqc}}
        return {"node": key, "kit": kit, "problem": None, "keys": {"kind": seen}}

    reference: dict[str, str] = {}
    adapters = {"rocq": "2"}
    assert refusal(reference, report("e1", "8.18"), "1", adapters) is None
    assert reference == {"kind": "e1"}, "the first node sets the reference"
    assert refusal(reference, report("e1", "8.18"), "1", adapters) is None
    assert "8.20" in str(refusal(reference, report("e2", "8.20"), "1", adapters))
    assert "prooflock 2" in str(refusal(reference, report("e1", "8.18", kit="2"), "1", adapters))
    assert "adapter is version 3" in str(
        refusal(reference, report("e1", "8.18", adapter="3"), "1", adapters)
    )
    assert refusal(reference, {**report("e3", "8.18"), "problem": "no coqc"}, "1", adapters) == (
        "no coqc"
    )
    assert reference == {"kind": "e1"}, "a refused node never changes the reference"


@pytest.mark.slow
def test_a_run_across_two_nodes_records_what_a_local_run_records(
    two_nodes, run_settings, node_dirs, tmp_path
):
    requests = corpus(request_for("rocq", "diverge.v", mode="proof", timeout=5))
    with Checker(run_settings.model_copy(update={"workers": 2})) as checker:
        local = run_requests(requests, tmp_path / "local.jsonl", checker, source="requests.jsonl")
    clustered, messages, _ = cluster_run(
        two_nodes, requests, tmp_path / "ray.jsonl", run_settings, node_dirs
    )

    assert messages == [], "no worker died and no node was refused"
    assert sorted(recorded_indices(tmp_path / "ray.jsonl")) == list(range(len(requests)))
    for here, there in zip(local.results, clustered, strict=True):
        assert (there.artifact, there.verdict) == (here.artifact, here.verdict)
        assert there.result_digest == here.result_digest, there.artifact
        assert there.env_key == here.env_key, "the same install, so the same environment key"
        assert there.request_digest == here.request_digest
    assert {r.artifact: r.verdict for r in clustered}["diverge.v"] is Verdict.TIMEOUT
    nodes = Counter(r.provenance.extra["ray_node"] for r in clustered)
    assert len(nodes) == 2, f"both nodes checked: {nodes}"

    again, _, checked = cluster_run(
        two_nodes, requests, tmp_path / "ray.jsonl", run_settings, node_dirs
    )
    assert checked == 0 and len(again) == len(requests), "a re-run resumes from the checkpoint"


@pytest.mark.slow
def test_a_request_that_kills_its_worker_twice_is_recorded_as_crash(
    two_nodes, run_settings, node_dirs, tmp_path
):
    killer = CheckRequest(
        prover="rocq",
        mode="proof",
        name="killer.v",
        content=(ARTIFACTS / "rocq" / "pass_arith.v").read_text(),
    )
    requests = corpus(killer)
    env = {**node_dirs, TEST_EXIT_HOOK: "killer.v"}
    results, messages, _ = cluster_run(
        two_nodes, requests, tmp_path / "ray.jsonl", run_settings, env
    )

    by_name = {r.artifact: r for r in results}
    crashed = by_name.pop("killer.v")
    assert crashed.verdict is Verdict.CRASH
    assert [d.message for d in crashed.diagnostics] == [WORKER_DIED_TWICE]
    assert crashed.provenance.attempts == 2 and crashed.env_key == results[0].env_key
    for name, expected in ROCQ_EXPECTED.items():
        if name in by_name:
            assert by_name[name].verdict is expected, name
    assert Verdict.INFRA_ERROR not in {r.verdict for r in by_name.values()}
    assert sum("died with" in m for m in messages) == 2, messages
    assert sorted(recorded_indices(tmp_path / "ray.jsonl")) == list(range(len(requests)))
    assert stray_checks(tmp_path / "node-tmp") == []


@pytest.mark.slow
def test_killing_a_node_mid_run_loses_and_duplicates_no_record(
    two_nodes, run_settings, node_dirs, tmp_path
):
    requests = corpus()
    node2 = next(n["NodeID"] for n in ray_nodes(two_nodes) if "node2" in n["Resources"])
    killed_after: list[int] = []
    seen = Counter[str]()

    def kill_node2_once_it_has_answered(result: CheckResult) -> None:
        seen[result.provenance.extra["ray_node"]] += 1
        if seen[node2] and not killed_after:
            killed_after.append(sum(seen.values()))
            two_nodes.kill("node2")  # SIGKILL: its raylet, its agents, its actor

    results, messages, checked = cluster_run(
        two_nodes,
        requests,
        tmp_path / "ray.jsonl",
        run_settings,
        node_dirs,
        on_result=kill_node2_once_it_has_answered,
    )

    assert killed_after and killed_after[0] < len(requests), "node2 died mid-run"
    assert any("died with" in m for m in messages), messages  # its in-flight work went back
    assert any("does not check rocq" in m for m in messages), messages  # and no new actor there
    assert checked == len(requests)
    assert sorted(recorded_indices(tmp_path / "ray.jsonl")) == list(range(len(requests)))
    for result in results:
        assert result.verdict not in (Verdict.INFRA_ERROR, Verdict.CRASH), result.artifact
        if result.artifact in ROCQ_EXPECTED:
            assert result.verdict is ROCQ_EXPECTED[result.artifact], result.artifact
    assert stray_checks(tmp_path / "node-tmp") == []


def ray_nodes(cluster: LocalRayCluster) -> list[dict[str, Any]]:
    """The cluster's live nodes, asked from a short-lived driver connection."""
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    try:
        return [n for n in ray.nodes() if n["Alive"]]
    finally:
        ray.shutdown()
