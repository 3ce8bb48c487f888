"""Boot and keep the snapshot servers after `prooflock images build` or `images load`.

Some provers keep servers as snapshots (HOL Light's worker and replayer). Each image here boots them
once and keeps them. A machine's first check then starts in seconds, not minutes. `--no-snapshot`
skips this step; the first check makes the snapshots anyway.
"""

from __future__ import annotations

import argparse
import time

from runner import provers
from runner.backends.docker import DockerBackend
from runner.check.checker import check
from runner.core.errors import BackendUnavailable, InfraFailure, UserError
from runner.core.messages import notify_stderr
from runner.core.models import CheckRequest, Verdict
from runner.core.settings import Settings
from runner.images.resolver import LockedImages


def warm_built_images(args: argparse.Namespace, settings: Settings) -> None:
    if settings.snapshots == "off" or getattr(args, "no_snapshot", False):
        return
    settings = settings.model_copy(update={"backend": "docker", "cache": False, "daemon": "off"})
    named = set(getattr(args, "names", []))  # `load`: whatever is here
    try:
        docker = DockerBackend(settings, LockedImages(settings))
    except BackendUnavailable as exc:
        notify_stderr(f"no snapshots kept: {exc}")
        return
    try:
        present = [(image, req) for image, req in _warm_ups(named) if docker.has_image(image)]
    finally:
        docker.close()
    for image, request in present:
        clock = time.monotonic()
        notify_stderr(f"{image}: booting its servers once, to keep their snapshots")
        try:
            result = next(iter(check([request], settings)))
        except (BackendUnavailable, InfraFailure, UserError) as exc:
            notify_stderr(f"{image}: no snapshot kept: {exc}")
            continue
        took = time.monotonic() - clock
        # A kept snapshot is restored before the first request, even right after its boot: a
        # server that answered without `restored_from` booted plainly and nothing was kept.
        if result.verdict is Verdict.PASS and result.provenance.restored():
            notify_stderr(f"{image}: its servers' snapshots are kept (ready in {took:.1f} s)")
        elif result.verdict is Verdict.PASS:
            notify_stderr(f"{image}: no snapshot kept (its servers booted without one)")
        else:
            message = result.diagnostics[0].message if result.diagnostics else ""
            notify_stderr(f"{image}: the warm-up check got {result.verdict.value}: {message}")


def _warm_ups(names: set[str]) -> list[tuple[str, CheckRequest]]:
    """Each built image's warm-up request (all images when none are named)."""
    found = []
    for name in provers.names():
        adapter = provers.get(name)
        if adapter.warm_up is None:
            continue
        for image in adapter.all_lines():
            if names and image not in names:
                continue
            line = None if image == adapter.images[0] else image
            request = CheckRequest(
                prover=adapter.name, name="warm-up", content=adapter.warm_up, line=line
            )
            found.append((image, request))
    return found
