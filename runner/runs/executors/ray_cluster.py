"""Runs that outgrow one machine: checks on a Ray cluster, results back to this process.

The driver, this process, holds the queue and stays the checkpoint's only writer.
Nodes get plain `CheckRequest`s and send back `CheckResult`s.
On each node, one actor per prover (`ProverHost`) holds the node's warm workers in a `Checker`.
So a HOL Light forkserver boots once per node.

A node joins a run only if its environment keys match the first node's.
It computes them for each of the run's request kinds.
The docker backend's key holds the image ID, the local backend's the install's versions.
So every record of a run has one environment.
Each actor gets twice as many requests as it checks at once, so a core never waits.

Faults: when an actor dies, the driver starts another on the same node.
The dead actor's in-flight requests wait for it.
If it starts, the node is up and its worker died.
Then each request that was in flight counts a worker death and goes back to the queue.
From then on it is checked alone, on another node if there is one.
A request on its second worker death surely killed the worker.
It is recorded as `crash` rather than retried forever.
If the replacement cannot start, the node is gone.
Then its requests go back to the queue as they were, and the other nodes take the rest.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from runner.check.checker import Checker
from runner.check.resolve import result_of
from runner.core.canonical import digest
from runner.core.errors import InfraFailure, UserError
from runner.core.messages import Notify, notify_stderr
from runner.core.models import CheckRequest, CheckResult, Diagnostic, Outcome, Provenance, Verdict
from runner.core.provenance import base_tools, host, kit_version, now
from runner.core.settings import Settings
from runner.provers.base import ResolvedRequest

K = TypeVar("K")

MISSING = "the ray executor needs Ray, which is not installed: pip install 'prooflock[ray]'"
WORKER_DIED_TWICE = "the worker died twice checking this artifact"
NAMESPACE = "prooflock"
IN_FLIGHT_PER_SLOT = 2  # one checking, one waiting: a slot never idles on a round trip
CONTROL_THREADS = 2  # describe / worker_death / close calls never queue behind checks
NODE_POLL_S = 10.0  # how often the driver looks for nodes that joined the cluster
CLOSE_S = 30.0
REPLACEMENT_S = 180.0  # a replacement actor not started by then means its node is gone
# Machine-local settings: a node uses its own (PROOFLOCK_CACHE_DIR there, or its home), its
# paths and the build inputs a `--build-missing` build there fetches.
NODE_LOCAL_SETTINGS = frozenset(
    {"cache_dir", "checkpoint_dir", "apt_security_mirror", "pip_index", "ca_bundle", "store"}
    | {"deb_store"}
)
# Test hook (tests/test_ray.py), set only through an actor's runtime_env.
# A worker asked to check the request of this name exits at once, like one an artifact killed.
TEST_EXIT_HOOK = "PROOFLOCK_TEST_RAY_EXIT_ON"

DESCRIBE, CHECK, DEATH = "describe", "check", "death"


def import_ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise InfraFailure(MISSING) from None


def request_kind(request: ResolvedRequest) -> str:
    """What, besides the install, a request's environment key depends on: its kind."""
    limits = request.limits
    return digest(
        {
            "prover": request.adapter.name,
            "image": request.image,
            "mode": request.mode,
            "limits": [limits.timeout_s, limits.memory_mb, limits.pids],
            "options": request.options.environment(),
        }
    )


def refusal(
    reference: dict[str, str], report: Mapping[str, Any], kit: str, adapters: Mapping[str, str]
) -> str | None:
    """Why a node must not check this run, or None if it may.

    `kit` and `adapters` (version by prover) are this process's; a node must run the same.
    The first node to report sets `reference`; later ones must match it kind by kind.
    """
    if report.get("problem"):
        return str(report["problem"])
    if report["kit"] != kit:
        return f"it runs prooflock {report['kit']}, this run {kit}"
    keys: dict[str, dict[str, Any]] = report["keys"]
    for seen in keys.values():
        if seen["adapter_version"] != adapters[seen["prover"]]:
            return (
                f"its {seen['prover']} adapter is version {seen['adapter_version']}, "
                f"this run's {adapters[seen['prover']]}"
            )
    for kind, seen in keys.items():
        expected = reference.get(kind)
        if expected is not None and seen["key"] != expected:
            return (
                f"its environment key for {seen['prover']} is {seen['key'][:12]}, the first "
                f"node's {expected[:12]} (another install: {str(seen['install'])[:200]})"
            )
    for kind, seen in keys.items():
        reference.setdefault(kind, seen["key"])
    return None


class ProverHost:
    """A Ray actor: one prover's warm workers on one node, `running` checks at a time."""

    def __init__(self, fields: dict[str, Any], running: int):
        ray = import_ray()
        self.node = ray.get_runtime_context().get_node_id()
        self.checker = Checker(Settings(**{**fields, "workers": running}), notify=notify_stderr)
        self._slots = threading.Semaphore(running)
        self._exit_on = os.environ.get(TEST_EXIT_HOOK)  # test hook, see TEST_EXIT_HOOK

    def describe(self, samples: dict[str, CheckRequest]) -> dict[str, Any]:
        """This node's kit version, and its environment key for each request kind."""
        keys: dict[str, dict[str, Any]] = {}
        try:
            for kind, sample in samples.items():
                environment = self.checker.environment(sample)
                keys[kind] = {
                    "prover": sample.prover,
                    "key": environment.key,
                    "adapter_version": environment.data["adapter_version"],
                    "install": environment.data["install"],
                }
        except Exception as exc:  # no install, no image, no daemon: the node cannot serve
            problem = f"cannot check there: {type(exc).__name__}: {exc}"
            return {"node": self.node, "kit": kit_version(), "keys": {}, "problem": problem}
        return {"node": self.node, "kit": kit_version(), "keys": keys, "problem": None}

    def check(self, request: CheckRequest) -> CheckResult:
        resolved = self.checker.resolve(request)
        with self._slots:
            if self._exit_on is not None and request.name == self._exit_on:
                os._exit(70)  # test hook, see TEST_EXIT_HOOK
            return self._on_node(self.checker.check_one(resolved))

    def worker_death(self, request: CheckRequest, deaths: int) -> CheckResult:
        """The `crash` result of a request whose worker died each of the `deaths` times."""
        resolved = self.checker.resolve(request)
        outcome = Outcome(
            verdict=Verdict.CRASH, diagnostics=[Diagnostic(message=WORKER_DIED_TWICE)]
        )
        environment = self.checker.environment(resolved)
        info = self.checker.backend_for(resolved.image).info
        stamp = now()
        provenance = Provenance(
            host=host(),
            backend=info.name,
            isolation=info.isolation,
            worker="none",
            tools={**base_tools(), **info.tools},
            started_at=stamp,
            finished_at=stamp,
            wall_ms=0,
            attempts=deaths,
        )
        result = result_of(resolved, outcome, environment.data, environment.key, provenance)
        return self._on_node(result)

    def _on_node(self, result: CheckResult) -> CheckResult:
        return result.with_extra(ray_node=self.node)

    def close(self) -> None:
        self.checker.close()


@dataclass(frozen=True)
class _Node:
    id: str
    address: str
    slots: int  # checks at once: its CPUs over the CPUs one check may use

    def __str__(self) -> str:
        return f"{self.address} ({self.id[:8]})"


@dataclass(eq=False)
class _Job(Generic[K]):
    key: K
    request: CheckRequest
    prover: str  # the adapter's name (a request may name an alias)
    deaths: int = 0  # worker deaths while this request was in flight
    died_on: set[str] = field(default_factory=set)  # the nodes of those deaths
    done: bool = False


@dataclass(eq=False)
class _Host:
    """The driver's view of one ProverHost actor."""

    node: _Node
    prover: str
    handle: Any
    running: int
    ready: bool = False  # described itself and was admitted
    alive: bool = True
    alone: bool = False  # checking only a request that was in flight on a worker death
    in_flight: dict[Any, _Job[Any]] = field(default_factory=dict)  # by object ref
    # In flight on the actor this one replaces; each counts a worker death if this one starts.
    held: list[_Job[Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    @property
    def capacity(self) -> int:
        return IN_FLIGHT_PER_SLOT * self.running


class RayExecutor:
    """Checks on a Ray cluster; `address` is `auto`, `host:port`, or `ray://host:port`.

    It reuses this process's Ray connection if there is one.
    Every actor gets `runtime_env`, such as `{"env_vars": {"PROOFLOCK_CACHE_DIR": ...}}`.
    Call `close()` when done.
    """

    def __init__(
        self,
        address: str,
        settings: Settings,
        *,
        runtime_env: Mapping[str, Any] | None = None,
        notify: Notify | None = None,
    ):
        self.ray = import_ray()
        self.address = address
        self.settings = settings
        self.runtime_env = dict(runtime_env or {})
        self.notify = notify or notify_stderr
        self._owns_connection = not self.ray.is_initialized()
        if self._owns_connection:
            try:
                self.ray.init(
                    address=address,
                    namespace=NAMESPACE,
                    log_to_driver=False,
                    logging_level=logging.WARNING,
                )
            except (ConnectionError, RuntimeError, TimeoutError, ValueError) as exc:
                raise InfraFailure(f"cannot reach the Ray cluster at {address}: {exc}") from None
        self._host_class = self.ray.remote(ProverHost)
        self.reference: dict[str, str] = {}  # environment key by request kind, from the first node
        self.kit = kit_version()

    def map_unordered(
        self, work: Iterable[tuple[K, ResolvedRequest]]
    ) -> Iterator[tuple[K, CheckResult]]:
        jobs: list[_Job[K]] = []
        samples: dict[str, dict[str, CheckRequest]] = {}
        adapters: dict[str, str] = {}
        for key, resolved in work:
            jobs.append(_Job(key, resolved.request, resolved.adapter.name))
            adapters[resolved.adapter.name] = resolved.adapter.version
            samples.setdefault(resolved.adapter.name, {}).setdefault(
                request_kind(resolved), resolved.request
            )
        if not jobs:
            return
        run = _Run(self, jobs, samples, adapters)
        try:
            yield from run.results()
        finally:
            run.close()

    def close(self) -> None:
        if self._owns_connection and self.ray.is_initialized():
            self.ray.shutdown()

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Run(Generic[K]):
    """One `map_unordered` call: its queue, its actors, and what is in flight on each."""

    def __init__(
        self,
        executor: RayExecutor,
        jobs: list[_Job[K]],
        samples: dict[str, dict[str, CheckRequest]],
        adapters: dict[str, str],
    ):
        self.executor = executor
        self.adapters = adapters
        self.ray = executor.ray
        self.samples = samples
        self.queues: dict[str, deque[_Job[K]]] = {prover: deque() for prover in samples}
        for job in jobs:
            self.queues[job.prover].append(job)
        self.remaining = len(jobs)
        self.hosts: list[_Host] = []
        self.every_host: list[_Host] = []
        self.refs: dict[Any, tuple[str, _Host, _Job[K] | None]] = {}
        self.seen: set[str] = set()
        self.problems: list[str] = []
        self.polled = 0.0
        self.fields = executor.settings.model_dump(mode="json", exclude=set(NODE_LOCAL_SETTINGS))

    # -- the loop ----------------------------------------------------------------------------

    def results(self) -> Iterator[tuple[K, CheckResult]]:
        errors = self.ray.exceptions
        self._discover()
        while self.remaining:
            self._fill()
            if not self.refs:
                self._discover()
                if not self.refs:
                    why = "; ".join(self.problems[-3:]) or "the cluster has no node with a CPU"
                    raise InfraFailure(
                        f"no Ray node can check the {self.remaining} requests left ({why}); "
                        "re-run the same command to resume once nodes are back"
                    )
            ready, _ = self.ray.wait(list(self.refs), num_returns=1, timeout=NODE_POLL_S)
            if time.monotonic() - self.polled > NODE_POLL_S:
                self._discover()
                self._give_up_on_late_replacements()
            for ref in ready:
                entry = self.refs.pop(ref, None)
                if entry is None:
                    continue  # dropped with its dead actor
                purpose, actor, job = entry
                try:
                    value = self.ray.get(ref)
                except errors.RayActorError as exc:
                    self._lost(actor, _first_line(exc))
                    continue
                except errors.RayTaskError as exc:
                    raise _stopping(exc, actor) from None
                except errors.RayError as exc:  # the result was lost in transit, or no runtime_env
                    self._unanswered(ref, purpose, actor, job, _first_line(exc))
                    continue
                if purpose == DESCRIBE:
                    self._admit(actor, value)
                    continue
                assert job is not None
                actor.in_flight.pop(ref, None)
                if purpose == CHECK:
                    actor.alone = False
                if not job.done:  # a request is answered once, whatever happened on the way
                    job.done = True
                    self.remaining -= 1
                    yield job.key, value

    def _fill(self) -> None:
        for actor in self.hosts:
            queue = self.queues[actor.prover]
            while (
                actor.ready and not actor.alone and queue and len(actor.in_flight) < actor.capacity
            ):
                job = self._take(queue, actor)
                if job is None:
                    break
                ref = actor.handle.check.remote(job.request)
                self.refs[ref] = (CHECK, actor, job)
                actor.in_flight[ref] = job
                actor.alone = job.deaths > 0

    def _take(self, queue: deque[_Job[K]], actor: _Host) -> _Job[K] | None:
        """The next request for `actor`.

        A request that was on a worker death goes only to an idle actor.
        It goes to another node than the deaths, if the run has one.
        A node that breaks its workers by itself must not turn a request into `crash`.
        """
        for position, job in enumerate(queue):
            if job.deaths == 0 or (not actor.in_flight and self._may_retry_on(job, actor.node)):
                del queue[position]
                return job
        return None

    def _may_retry_on(self, job: _Job[K], node: _Node) -> bool:
        if node.id not in job.died_on:
            return True
        return not any(
            other.node.id not in job.died_on for other in self.hosts if other.prover == job.prover
        )

    # -- nodes and actors ------------------------------------------------------------------

    def _discover(self) -> None:
        """Start actors on nodes not seen yet; the first time, on all of them."""
        self.polled = time.monotonic()
        for info in self.ray.nodes():
            node_id = info["NodeID"]
            if not info.get("Alive") or node_id in self.seen:
                continue
            self.seen.add(node_id)
            cpus = int(info.get("Resources", {}).get("CPU", 0))
            if cpus < 1:
                continue  # a head node kept free of work
            node = _Node(
                node_id,
                info.get("NodeManagerAddress", "?"),
                max(1, cpus // self.executor.settings.cpus),
            )
            for prover in self.samples:
                self._start(node, prover)

    def _start(self, node: _Node, prover: str) -> _Host:
        strategy = importlib.import_module("ray.util.scheduling_strategies")
        running = max(1, node.slots // len(self.samples))
        capacity = IN_FLIGHT_PER_SLOT * running
        handle = self.executor._host_class.options(
            num_cpus=0,  # placed by node affinity; concurrency is sized from the node's CPUs
            max_concurrency=capacity + CONTROL_THREADS,
            max_restarts=0,  # a dead actor is replaced by the driver, which re-queues its work
            scheduling_strategy=strategy.NodeAffinitySchedulingStrategy(node.id, soft=False),
            runtime_env=self.executor.runtime_env or None,
        ).remote(self.fields, running)
        actor = _Host(node, prover, handle, running)
        self.refs[handle.describe.remote(self.samples[prover])] = (DESCRIBE, actor, None)
        self.hosts.append(actor)
        self.every_host.append(actor)
        return actor

    def _admit(self, actor: _Host, report: Mapping[str, Any]) -> None:
        reason = refusal(self.executor.reference, report, self.executor.kit, self.adapters)
        if reason is not None:
            self._drop(actor)
            self._gone(actor, reason)
            return
        actor.ready = True
        again: list[_Job[K]] = []
        for job in actor.held:  # the node is up: its worker died with these in flight
            job.deaths += 1
            job.died_on.add(actor.node.id)
            if job.deaths < 2:
                again.append(job)
                continue
            ref = actor.handle.worker_death.remote(job.request, job.deaths)
            self.refs[ref] = (DEATH, actor, job)
            actor.in_flight[ref] = job
        self.queues[actor.prover].extendleft(reversed(again))  # they started first: first again
        actor.held = []

    def _lost(self, actor: _Host, why: str) -> None:
        """An actor died; its work waits for a replacement on the same node (see the module)."""
        if not actor.alive:
            return
        jobs = list(actor.in_flight.values())
        self._drop(actor)
        if not actor.ready:
            self._gone(actor, f"its {actor.prover} worker did not start: {why}")
            return
        self.executor.notify(
            f"the {actor.prover} worker on Ray node {actor.node} died with {len(jobs)} requests "
            "in flight; they are checked again once a new worker starts there, or elsewhere"
        )
        self._start(actor.node, actor.prover).held = jobs

    def _gone(self, actor: _Host, reason: str) -> None:
        """The node will not check this prover; what was held for it goes back to the queue."""
        self.queues[actor.prover].extendleft(reversed(actor.held))
        actor.held = []
        message = f"Ray node {actor.node} does not check {actor.prover}: {reason}"
        self.problems.append(message)
        self.executor.notify(message)

    def _give_up_on_late_replacements(self) -> None:
        for actor in [a for a in self.hosts if a.held and not a.ready]:
            if time.monotonic() - actor.started > REPLACEMENT_S:
                self._drop(actor)
                self._gone(actor, f"a new worker did not start there in {REPLACEMENT_S:.0f} s")

    def _unanswered(
        self, ref: Any, purpose: str, actor: _Host, job: _Job[K] | None, why: str
    ) -> None:
        """No answer and no actor death: the request goes back; a started actor stays."""
        if purpose == DESCRIBE or job is None:
            self._drop(actor)
            self._gone(actor, why)
            return
        actor.in_flight.pop(ref, None)
        actor.alone = False
        self.queues[actor.prover].appendleft(job)

    def _drop(self, actor: _Host) -> None:
        actor.alive = False
        if actor in self.hosts:
            self.hosts.remove(actor)
        for ref in [ref for ref, (_, owner, _) in self.refs.items() if owner is actor]:
            del self.refs[ref]
        actor.in_flight.clear()
        self._kill(actor)

    def _kill(self, actor: _Host) -> None:
        try:
            self.ray.kill(actor.handle)
        except Exception:  # already gone with its node
            return

    def close(self) -> None:
        """Let live actors close their warm workers, then end every actor of this run."""
        closing = [actor.handle.close.remote() for actor in self.hosts if actor.ready]
        if closing:
            self.ray.wait(closing, num_returns=len(closing), timeout=CLOSE_S)
        for actor in self.every_host:
            self._kill(actor)
        self.hosts.clear()


def _first_line(exc: BaseException) -> str:
    """Ray's own reason (`... because its node has died`), else its first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reasons = [line for line in lines if "because" in line]
    return (reasons or lines or [type(exc).__name__])[0]


def _stopping(exc: Any, actor: _Host) -> Exception:
    """A check raised on the node, such as InfraFailure for an image not built there."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, UserError | InfraFailure):
        return cause
    return InfraFailure(
        f"the {actor.prover} worker on Ray node {actor.node} failed: {cause or exc}"
    )
